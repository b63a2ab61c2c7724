"""The ``SCHEME:MODEL?key=value&...`` form shared by the HTTP providers' model specs.

Rules:
- Everything after ``SCHEME:`` up to the first ``?`` is the model name (it may hold colons).
- The query is ``key=value`` pairs; each key is one of the scheme's and appears at most once.
- Values are checked here (URLs, seconds, whole numbers), so the constructor accepts them.
- ``context_window`` (tokens, >= 1) is a key of every scheme, the built-in ``echo`` too.
- The HTTP providers share ``HTTP_SPEC_KEYS`` (their endpoint, bounds and retries), read by
  ``http_spec_kwargs``; a provider adds keys of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

from ._errors import ModelSpecError

#: The query keys of every HTTP provider, in the order error messages list them.
HTTP_SPEC_KEYS = (
    "base_url",
    "timeout",
    "deadline",
    "max_line",
    "max_retries",
    "max_answer",
    "context_window",
)
_SECONDS = ("timeout", "deadline")
# The smallest value of each count.
_COUNTS = {"max_line": 1, "max_retries": 0, "max_answer": 1, "context_window": 1}


def spec_params(scheme: str, rest: str, keys: Sequence[str]) -> tuple[str, dict[str, str]]:
    """Split ``rest`` (what follows ``SCHEME:``) into the model name and its parameters.

    Raises:
        ModelSpecError: no model name, or an unknown, repeated or malformed parameter.
    """
    model, sep, query = rest.partition("?")
    spec = f"{scheme}:{rest}"
    if not model:
        raise ModelSpecError(f"model spec {spec!r} names no model; write {scheme}:MODEL")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True) if sep else []
    except ValueError:
        pairs = []
    if sep and not pairs:
        pairs = [("", "")]
    params: dict[str, str] = {}
    for key, value in pairs:
        if key not in keys or key in params:
            what = f"a repeated {key!r}" if key in params else f"{key!r}"
            known = f"{', '.join(keys[:-1])} and {keys[-1]}" if len(keys) > 1 else keys[0]
            raise ModelSpecError(
                f"invalid model spec {spec!r}: {scheme} takes {known} (got {what})"
            )
        params[key] = value
    return model, params


def spec_url(spec: str, key: str, raw: str) -> str:
    """``raw`` if it is an http:// or https:// URL."""
    if not raw.startswith(("http://", "https://")):
        raise ModelSpecError(
            f"invalid model spec {spec!r}: {key} must be an http:// or https:// URL, got {raw!r}"
        )
    return raw


def spec_number(
    spec: str,
    key: str,
    raw: str,
    kind: type[float] | type[int],
    *,
    minimum: int = 0,
    zero: bool = False,
) -> float | int:
    """``raw`` as seconds > 0 (``float``; >= 0 with ``zero``) or a whole number >= ``minimum``
    (``int``)."""
    try:
        value = kind(raw)
    except ValueError:
        value = math.nan
    # An int is never converted to float: math.isfinite(10**400) raises OverflowError.
    seconds = kind is float and math.isfinite(value) and (value > 0 or (zero and value == 0))
    if not (value >= minimum and (kind is int or seconds)):
        bound = ">= 0" if zero else "> 0"
        unit = f"a number of seconds {bound}" if kind is float else f"a whole number >= {minimum}"
        raise ModelSpecError(f"invalid model spec {spec!r}: {key} must be {unit}, got {raw!r}")
    return value


def http_spec_kwargs(spec: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The constructor arguments of ``params`` (keys of ``HTTP_SPEC_KEYS``), checked."""
    kwargs: dict[str, Any] = {}
    for key, raw in params.items():
        if key == "base_url":
            kwargs[key] = spec_url(spec, key, raw)
        elif key in _SECONDS:
            kwargs[key] = spec_number(spec, key, raw, float)
        else:
            kwargs[key] = spec_number(spec, key, raw, int, minimum=_COUNTS[key])
    return kwargs
