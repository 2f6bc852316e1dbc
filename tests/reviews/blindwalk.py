"""The blind-URL walk's parts: every URL pattern filled with the world's ids,
what an answer says (its text, less what the page only echoes), and the
request wrappers that note which query keys a page reads."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

from replayhub.verdicts import REASON_TEXT

REPLAY_ID = 48611
RUN_ID = 48621
SLUG = "blindfold"
REASON_CODE = "replay_fails_reference_tests"
REASON = "The replay's code fails the original's own tests."
# The cap that stopped the blind replay's agent: no other row names it.
LIMIT_FIRED = "wall_time_48611"

# What the viewer may not read, lower case: the machine's verdict, the other
# reviewer's, the band that names the first, the reason, and gold.
SECRETS = (
    "divergent",
    "equivalent",
    # ReviewBand 1 names the equivalent verdict.
    "verifier passed",
    REASON_CODE,
    REASON.lower(),
    str(REASON_TEXT[REASON_CODE]).lower(),
    "gold",
    # The agent's summary: a time limit that fired names the reason.
    LIMIT_FIRED,
)

# Patterns left out of the walk, by route, each with its reason. The login
# and logout pages, the favicon's redirect, the health check and the admin's
# pages (the reviewer is no staff) are asked for like the rest. A pattern not
# listed here that cannot be filled (a new argument name, a regex this walk
# cannot write out) fails the test, naming the pattern.
EXCLUDED: dict[str, str] = {
    "recorder/replayhub-record.py": "a file served as it is on disk, the same "
    "bytes to everyone and read from no row; its prose may use any word",
}

# A page the walk must really render (200) for the reviewer, so a walk of
# refusals and redirects cannot pass.
MUST_RENDER = {
    "reviews:queue",
    "reviews:running",
    "reviews:replay_detail",
    "reviews:replay_progress",
    "reviews:run_detail",
    "reviews:project_detail",
    "reviews:search",
    "reviews:done",
    "reviews:bulk",
    "reviews:inbox",
    "reviews:comment_new",
    "reviews:replay_diff_file",
    "api_replay_detail",
    "api_run_detail",
}

VERDICTS = ("identical", "equivalent", "divergent", "inconclusive")
REASONS = (REASON_CODE, "flaky_tests")


# --- the world ------------------------------------------------------------------


# --- the URLconf, walked --------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    route: str
    name: str
    parts: tuple[URLPattern | URLResolver, ...]


def patterns(
    resolver: URLResolver | None = None,
    route: str = "",
    namespace: str = "",
    parts: tuple = (),
) -> Iterator[Pattern]:
    """Every URL pattern of the URLconf, included ones too, with its route."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from patterns(
                entry, route + str(entry.pattern), inner, (*parts, entry)
            )
        else:
            name = f"{namespace}{entry.name}" if entry.name else ""
            yield Pattern(route + str(entry.pattern), name, (*parts, entry))


class Unfillable(Exception):
    pass


_ROUTE_ARG = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
_REGEX_ARG = re.compile(r"\(\?P<(?P<name>\w+)>(?:[^()\\]|\\.)*\)")


def _fill_part(entry, values: dict[str, object]) -> str:
    pattern = entry.pattern
    text = str(pattern)

    def value(name: str) -> str:
        if name not in values:
            raise Unfillable(f"no value for the argument {name!r}")
        return str(values[name])

    if isinstance(pattern, RoutePattern):
        return _ROUTE_ARG.sub(lambda m: value(m["name"]), text)
    if isinstance(pattern, RegexPattern):
        filled = _REGEX_ARG.sub(lambda m: value(m["name"]), text)
        filled = filled.removeprefix("^").removesuffix("$").removesuffix("\\Z")
        if re.search(r"[()\[\]*+?|\\]", filled):
            raise Unfillable(f"a regex this walk cannot write out: {text!r}")
        return filled
    raise Unfillable(f"an unknown kind of pattern: {type(pattern).__name__}")


def fill(pattern: Pattern, values: dict[str, object]) -> str:
    """The path of ``pattern`` with its arguments taken from ``values``; it
    must resolve back to the very same view."""
    path = "/" + "".join(_fill_part(entry, values) for entry in pattern.parts)
    try:
        match = resolve(path)
    except Exception as exc:
        raise Unfillable(f"{path} does not resolve: {exc}") from None
    if match.func is not pattern.parts[-1].callback:
        raise Unfillable(f"{path} resolves to another view ({match.view_name})")
    return path


# --- what a response may not say ------------------------------------------------

# Legends: text that names every verdict or reason to everyone, whatever the
# replays are. Only these are taken out before the secrets are looked for.
SELECT = re.compile(r"<select\b.*?</select>", re.S | re.I)
LEGENDS = (
    # A select's options list every verdict, reason or project; the chosen one
    # is the viewer's own query. (One that leaves a verdict out is kept: see
    # ``_omissions``.)
    SELECT,
    # The key help numbers the verdicts a reviewer may choose.
    re.compile(
        r"Choose the corrected verdict: <kbd>1</kbd> identical, "
        r"<kbd>2</kbd> equivalent, <kbd>3</kbd> divergent, <kbd>4</kbd> inconclusive"
    ),
    # The same under blind review, where the reviewer names their own verdict.
    re.compile(
        r"Choose your verdict: <kbd>1</kbd> identical, "
        r"<kbd>2</kbd> equivalent, <kbd>3</kbd> divergent, <kbd>4</kbd> inconclusive"
    ),
    # A band of the queue's counts that holds nothing names only its label.
    re.compile(r'<li class="band-\d+"><b>0</b> [^<]*</li>'),
)


RANDOM_TOKEN = re.compile(r"(?=[A-Za-z+/=-]*\d)[A-Za-z0-9+/=-]{24,}")


@dataclass(frozen=True)
class Answer:
    """What a response said: its status, headers and whole body."""

    status: int
    headers: str
    body: str
    path: str

    @classmethod
    def of(cls, response: Any) -> Answer:
        """A test client's response, its streamed body read whole."""
        raw = (
            b"".join(response.streaming_content)
            if response.streaming
            else response.content
        )
        return cls(
            status=response.status_code,
            headers="\n".join(f"{k}: {v}" for k, v in response.items()),
            body=raw.decode(errors="replace"),
            path=response.wsgi_request.path,
        )


def said(answer: Answer, echoed: tuple[str, ...] = ()) -> str:
    """The answer's headers and body as one lower-case text, legends and
    the viewer's own query (its path, ``echoed`` values) out."""
    text = html.unescape(f"{answer.headers}\n{answer.body}")
    text = SELECT.sub(_omissions, text)
    # Random tokens (the CSRF token, the CSP nonce, a session id) may hold any
    # word by chance ("…kagoldti…"): a run of 24 or more token characters with
    # a digit in it is no word a page says.
    text = RANDOM_TOKEN.sub(" ", text)
    for legend in LEGENDS:
        text = legend.sub(" ", text)
    text = text.lower().replace(answer.path.lower(), " ")
    for value in echoed:
        if value.isdigit():
            # An id asked for is the replay's own reference, kept.
            continue
        text = re.sub(rf"(?<![a-z_]){re.escape(value.lower())}(?![a-z_])", " ", text)
    return text


def _omissions(select: re.Match) -> str:
    """A select of verdicts that leaves one out tells which the replay has
    (an overturn's choices omit the current verdict): its text is kept, with
    the missing verdicts named, for the secrets to be found in."""
    values = set(re.findall(r'<option value="([^"]*)"', select[0]))
    shown = values & set(VERDICTS)
    if shown and shown != set(VERDICTS):
        missing = " ".join(sorted(set(VERDICTS) - shown))
        return f"{select[0]} [a verdict left out: {missing}]"
    return select[0]


def secrets_in(text: str) -> list[str]:
    """Each secret ``text`` says, with the words around it."""
    found = []
    for secret in SECRETS:
        if (at := text.find(secret)) >= 0:
            around = " ".join(text[max(0, at - 60) : at + len(secret) + 40].split())
            found.append(f"{secret!r} in …{around}…")
    return found


def mentions(text: str, replay_id: int) -> bool:
    """Whether ``text`` (from ``said``) refers to the replay: its link, its
    number, or its id in an API answer."""
    link, number, key = f"/replays/{replay_id}/", f"#{replay_id}", f'"id": {replay_id}'
    return bool(re.search(rf"{link}|{number}(?!\d)|{key}(?!\d)", text))


def filter_queries() -> dict[str, list[dict[str, str]]]:
    """Per filter, the queries that each pick one of its values."""
    scopes: list[dict[str, str]] = [{}, {"project": SLUG}, {"q": str(REPLAY_ID)}]
    return {
        f"{name}{'+' + '+'.join(scope) if scope else ''}": [
            {**scope, name: value} for value in values
        ]
        for name, values in (("verdict", VERDICTS), ("reason", REASONS))
        for scope in scopes
    }


# Other query strings the views read, each asked once.
EXTRA_QUERIES = (
    {"full": "1"},
    {"format": "csv"},
    {"transcript": "all"},
    {"noise": "hide"},
    {"assigned": "me"},
    {"q": str(REPLAY_ID)},
    {"decision": "overturn"},
    # The place a comment box is asked for.
    {"target": "dod", "path": "app.py", "side": "new", "line_start": "1"},
)


# --- what a view reads of its query string ----------------------------------------

WHOLE = "the whole query string"


class Reads:
    """The keys of ``request.GET`` looked up while it listens, or ``WHOLE``
    once the query string was read as a whole (its keys listed, its length,
    its text, a copy)."""

    listening: set[str] | None = None

    @classmethod
    def note(cls, key: object) -> None:
        if cls.listening is not None:
            cls.listening.add(key if isinstance(key, str) else WHOLE)


class NotedQueryDict(QueryDict):
    """``request.GET`` that notes each key looked up, and any reading of it
    as a whole."""

    def __getitem__(self, key):
        Reads.note(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        Reads.note(key)
        return super().get(key, default)

    def getlist(self, key, default=None):
        Reads.note(key)
        return super().getlist(key, default)

    def __contains__(self, key):
        Reads.note(key)
        return super().__contains__(key)


def _whole(base: type, name: str):
    inner = getattr(base, name)

    def read(self, *args, **kwargs):
        Reads.note(None)
        return inner(self, *args, **kwargs)

    return read


for _name in (
    "__iter__",
    "__len__",
    "__eq__",
    "__repr__",
    "__copy__",
    "__deepcopy__",
    "__reduce__",
    "__getstate__",
    "keys",
    "values",
    "items",
    "lists",
    "dict",
    "copy",
    "urlencode",
):
    setattr(NotedQueryDict, _name, _whole(QueryDict, _name))
NotedQueryDict.__hash__ = None


class NotedEnviron(dict):
    """The WSGI environ (``request.META``) that notes a reading of the query
    string, or of the whole environ."""

    def __getitem__(self, key):
        if key == "QUERY_STRING":
            Reads.note(None)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key == "QUERY_STRING":
            Reads.note(None)
        return super().get(key, default)

    def __contains__(self, key):
        if key == "QUERY_STRING":
            Reads.note(None)
        return super().__contains__(key)

    def items_unnoted(self):
        return dict.items(self)


for _name in ("__iter__", "keys", "values", "items", "copy"):
    setattr(NotedEnviron, _name, _whole(dict, _name))
