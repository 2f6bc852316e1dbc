"""Registering a model provider: the rules ``provider_add`` and the
providers page share. A provider is a name, a wire (its kind), a base URL
without credentials and the *name* of the workers' variable holding its key;
each problem is one sentence naming the field."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from urllib.parse import urlsplit

from django.conf import settings

from replayhub.lib.pasted import PASTED, looks_like_key
from replayhub.models import Provider, ProviderKind

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The most price lines one provider takes.
MAX_PRICES = 200
# The bad price lines said one by one; more are counted.
PRICE_PROBLEMS_SAID = 10
# The highest price taken, in USD per million tokens: far above any model's
# list price, so a number past it is a slip of the keyboard.
MAX_PRICE = Decimal(10_000)


class ProviderInvalid(ValueError):
    """One sentence: what is wrong and with which field."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def parse_price(entry: str) -> tuple[str, dict[str, str]]:
    """``MODEL=IN,OUT[,CACHED]`` in USD per million tokens."""
    model, sep, numbers = entry.rpartition("=")
    parts = numbers.split(",")
    shown = entry[:80]
    if not sep or not model.strip() or len(parts) not in (2, 3):
        raise ProviderInvalid(
            "prices", f"{shown!r}: write MODEL=IN,OUT or MODEL=IN,OUT,CACHED."
        )
    try:
        amounts = [Decimal(part.strip()) for part in parts]
    except InvalidOperation:
        raise ProviderInvalid(
            "prices", f"{shown!r}: the prices must be numbers."
        ) from None
    if any(not a.is_finite() for a in amounts):
        raise ProviderInvalid(
            "prices", f"{shown!r}: a price is not a number (nan or infinity)."
        )
    if any(a < 0 for a in amounts):
        raise ProviderInvalid("prices", f"{shown!r}: prices must be zero or more.")
    if any(a > MAX_PRICE for a in amounts):
        raise ProviderInvalid(
            "prices",
            f"{shown!r}: a price is at most {MAX_PRICE:,} USD per million tokens.",
        )
    # A whole price given with an exponent is written out (1e2 is 100).
    text = [
        str(a.quantize(1)) if int(a.as_tuple().exponent) > 0 else str(a)
        for a in amounts
    ]
    price = {"input": text[0], "output": text[1]}
    if len(amounts) == 3:
        price["cached"] = text[2]
    return model.strip(), price


def deployment_secrets() -> set[str]:
    """The variables a provider's key may never be read from: the
    deployment's own secrets (the demo's stand-in model key is a model key)."""
    return set(settings.REPLAYHUB_SECRET_ENVS) - {"REPLAYHUB_DEMO_MODEL_KEY"}


class ProviderProblems(ProviderInvalid):
    """Every field's problem at once; it stands for the first, so a command
    that reports one line reports that one, and a form puts each beside its
    field (``problems``: field, sentence)."""

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(*problems[0])
        self.problems = problems


def _name_problem(name: str, existing: Provider | None) -> str:
    if existing is not None:
        return ""
    if not NAME.fullmatch(name):
        return f"{name[:80]!r} is not a provider name (letters, digits, - _)."
    if Provider.objects.filter(name=name).exists():
        return f"a provider named {name!r} already exists."
    return ""


def _url_problem(base_url: str) -> str:
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return f"{base_url[:200]!r} is not an http(s) URL."
    if url.username or url.password:
        return "must not carry credentials; name the variable holding the key."
    return ""


def _key_problem(key_env: str) -> str:
    if looks_like_key(key_env):
        return PASTED
    if not VARIABLE.fullmatch(key_env):
        # Not repeated: what was typed may be a secret of a shape not known.
        return (
            "That is not an environment variable name: a name is ASCII letters, "
            "digits and _, not starting with a digit."
        )
    if key_env in deployment_secrets():
        return (
            f"{key_env} is this deployment's own secret: it is never sent to a "
            "model API."
        )
    return ""


def _prices(prices: list[str]) -> tuple[dict, list[str]]:
    """The prices by model, or every bad entry's problem (the first
    ``PRICE_PROBLEMS_SAID``, then how many more)."""
    if len(prices) > MAX_PRICES:
        return {}, [f"at most {MAX_PRICES} prices."]
    by_model, problems = {}, []
    for entry in prices:
        try:
            model, price = parse_price(entry)
        except ProviderInvalid as exc:
            problems.append(str(exc))
        else:
            by_model[model] = price
    if len(problems) > PRICE_PROBLEMS_SAID:
        more = len(problems) - PRICE_PROBLEMS_SAID
        problems[PRICE_PROBLEMS_SAID:] = [f"and {more} more bad lines."]
    return ({} if problems else by_model), problems


def provider_fields(
    *,
    name: str,
    kind: str,
    base_url: str,
    key_env: str,
    prices: list[str],
    existing: Provider | None = None,
) -> dict:
    """The provider's fields, checked; raises ProviderProblems naming each
    field's problem. ``existing`` is the provider being edited (its name is
    kept)."""
    kind_problem = (
        ""
        if kind in ProviderKind.values
        else f"the kind is one of {', '.join(ProviderKind.values)}."
    )
    by_model, prices_problems = _prices(prices)
    # The name as the providers list shows it ($NAME, or ${NAME}) is the name.
    if re.fullmatch(r"\$\{[^}]*\}|\$[^{]*", key_env):
        key_env = key_env[1:].removeprefix("{").removesuffix("}")
    problems = [
        (field, problem)
        for field, problem in [
            ("name", _name_problem(name, existing)),
            ("kind", kind_problem),
            ("base_url", _url_problem(base_url)),
            ("key_env", _key_problem(key_env)),
            *(("prices", problem) for problem in prices_problems),
        ]
        if problem
    ]
    if problems:
        raise ProviderProblems(problems)
    return {
        "name": existing.name if existing else name,
        "kind": kind,
        "base_url": base_url.rstrip("/"),
        "key_env": key_env,
        "prices": by_model,
    }


def price_lines(provider: Provider) -> str:
    """The provider's prices as the form writes them, one a line."""
    lines = []
    for model, price in sorted((provider.prices or {}).items()):
        if not isinstance(price, dict):
            continue
        numbers = [str(price.get("input", "")), str(price.get("output", ""))]
        if "cached" in price:
            numbers.append(str(price["cached"]))
        lines.append(f"{model}={','.join(numbers)}")
    return "\n".join(lines)


def keys_unset(
    providers: Iterable[tuple[str, str]], environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The ``(provider, key variable)`` pairs whose variable ``environ`` does
    not set, or sets empty (a call would go out with no key), sorted by
    provider. Only names are returned: a value never leaves ``environ``."""
    return sorted(
        (name, key_env) for name, key_env in providers if not environ.get(key_env)
    )
