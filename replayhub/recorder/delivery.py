"""Getting a run to the server: push its refs, post its record with the
project's ingest token, and keep it in the spool when either cannot be done
now. A redirect is an answer that the run was not delivered (``redirects``):
the token goes to the server it was given for only. The spool is written
through :func:`spool` only, which masks every key the process knows first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from replayhub.recorder.checkout import push
from replayhub.recorder.exits import say
from replayhub.recorder.redirects import OPENER, redirected_to
from replayhub.recorder.scrub import KeyScrub, local_keys

POST_TIMEOUT = 120.0


# The server's answer read for the run's page, at most this much of it.
ANSWER_BYTES = 64 * 1024
# A page's path as the server names it: printed to a terminal, so nothing
# but a URL path's own characters (no escape sequence a server could send).
PAGE_PATH = re.compile(r"/[A-Za-z0-9/_.~%-]{0,500}")


def post(
    server: str,
    project: str,
    token: str,
    record: dict[str, Any],
    answer: dict[str, Any] | None = None,
) -> str | None:
    """Post ``record``; None when the server stored it (or had it already),
    and then ``answer`` (when given) holds the server's JSON answer."""
    url = f"{server.rstrip('/')}/api/v1/projects/{urllib.parse.quote(project)}/runs"
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    headers = {"Authorization": f"Bearer {token}"}
    headers["Content-Type"] = "application/x-ndjson"
    # The server is checked to be an http(s) URL.
    request = urllib.request.Request(url, body.encode(), headers, method="POST")  # noqa: S310
    try:
        with OPENER.open(request, timeout=POST_TIMEOUT) as response:
            if answer is not None:
                answer.update(_answer(response.read(ANSWER_BYTES)))
            return None
    except urllib.error.HTTPError as error:
        where = redirected_to(error)
        if where is not None:
            error.close()
            return (
                f"the server answered {error.code}, a redirect to {where}, which "
                "is not followed with the ingest token, so the run was not "
                "delivered (give --server as the address ReplayHub answers on)"
            )
        text = error.read(4096).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
            answer = json.loads(text)
            text = answer.get("error", text)
            text += "".join(f"; {bad['error']}" for bad in answer.get("invalid", []))
        return f"the server refused the record ({error.code}): {text[:1000]}"
    except (OSError, ValueError) as error:
        return f"the server at {server} did not answer ({error})"


def _answer(text: bytes) -> dict[str, Any]:
    with contextlib.suppress(ValueError):
        found = json.loads(text)
        if isinstance(found, dict):
            return found
    return {}


def run_page(server: str, answer: dict[str, Any]) -> str | None:
    """The run's page the server's answer names (its summary's ``run.url``),
    on ``server``; None when it names none."""
    run = answer.get("run")
    path = run.get("url") if isinstance(run, dict) else None
    if not isinstance(path, str) or not PAGE_PATH.fullmatch(path):
        return None
    return urllib.parse.urljoin(server, path)


def spool(directory: Path, delivery: dict[str, Any], keys: KeyScrub) -> Path:
    """Write ``delivery``, every string of it masked of ``keys``, to
    ``directory/<external id>.json``, readable by the user only: it holds the
    prompt and the tape (never the token)."""
    delivery = keys.value(delivery)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{delivery['record']['external_id']}.json"
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(delivery, out, ensure_ascii=False)
    os.replace(partial, path)
    return path


def deliver(delivery: dict[str, Any]) -> str | None:
    """Push the refs (unless pushed already), then post; None when both are
    done, else why not. ``delivery["pushed"]`` follows the push."""
    if not delivery["pushed"] and delivery["refs"]:
        why = push(Path(delivery["repository"]), delivery["remote"], delivery["refs"])
        if why:
            return why
    delivery["pushed"] = True
    token = os.environ.get(delivery["token_env"])
    if not token:
        return f"${delivery['token_env']} is not set (the project's ingest token)"
    answer: dict[str, Any] = {}
    why = post(
        delivery["server"], delivery["project"], token, delivery["record"], answer
    )
    if why is None:
        delivery["page"] = run_page(delivery["server"], answer)
    return why


def send_spooled(path: Path, args: argparse.Namespace) -> bool:
    """Send one spooled run; True when delivered (its file is then removed)."""
    try:
        delivery = json.loads(path.read_text(encoding="utf-8"))
        run_id = delivery["record"]["external_id"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        say(f"{path} is not a spooled run ({error})")
        return False
    # What the command line names wins over what the spool file remembers.
    for name in ("server", "project", "token_env", "remote"):
        delivery[name] = getattr(args, name) or delivery[name]
    delivery["record"]["project"] = delivery["project"]
    # A run spooled by an older recorder may hold keys this one knows.
    keys = local_keys(os.environ, delivery["token_env"])
    delivery["record"] = keys.value(delivery["record"])
    why = deliver(delivery)
    if why:
        spool(path.parent, {**delivery, "reason": keys.text(why)}, keys)
        say(f"{path.name}: not sent: {keys.text(why)}")
        return False
    path.unlink()
    say(f"sent run {run_id} to {delivery['server']}")
    if delivery.get("page"):
        say(f"its page: {delivery['page']}")
    return True
