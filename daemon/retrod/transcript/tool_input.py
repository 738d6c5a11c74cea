"""What accounting.md §2.6 needs of a tool_use block's `input`: a fingerprint of it for "the same name
and input", the path it names, and a short form to show as an example. Pure functions."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import msgspec

from .parser import storable_id, storable_text

_encode_sorted = msgspec.json.Encoder(order="sorted").encode
DETAIL_CHARS = 100
# Keys whose value says best what a call without a path did, in this order.
_DETAIL_KEYS = ("command", "pattern", "query", "url", "prompt", "description", "skill")


def fingerprint(name: str, value: Any) -> str:
    """32 hex digits of the name and the canonical JSON of the input (keys sorted, no
    whitespace, numbers compared by value: 1, 1.0 and 1e0 are one input; true is not 1)."""
    try:
        normal, finite = _integral_floats_as_ints(value)
    except RecursionError:  # nested deeper than Python recurses: compared as written
        normal, finite = value, True
    try:
        if not finite:
            raise ValueError  # msgspec writes NaN and infinities as null: they must not equal null
        text = _encode_sorted(normal)
    except (ValueError, TypeError, OverflowError, UnicodeEncodeError, RecursionError):
        # Lone surrogates (JavaScript writes them), integers beyond 64 bits, infinities: the
        # standard library writes every value, always the same way for the same value.
        try:
            text = json.dumps(normal, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
                "utf-8", "surrogatepass")
        except RecursionError:  # deeper than any encoder goes: every such input of a tool is one
            text = b"\x00too deep"
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass") + b"\x00" + text, digest_size=16)
    return digest.hexdigest()


def _integral_floats_as_ints(value: Any) -> tuple[Any, bool]:
    """The value with every integral float as an int; and whether every float is finite."""
    if type(value) is float:
        if not math.isfinite(value):
            return value, False
        return (int(value), True) if value.is_integer() else (value, True)
    if isinstance(value, dict):
        out, finite = {}, True
        for key, item in value.items():
            out[key], ok = _integral_floats_as_ints(item)
            finite = finite and ok
        return out, finite
    if isinstance(value, list):
        items = [_integral_floats_as_ints(item) for item in value]
        return [item for item, _ in items], all(ok for _, ok in items)
    return value, True


def input_path(value: Any) -> str | None:
    """The path a call names: input.file_path, else input.notebook_path, when a non-empty string."""
    if not isinstance(value, dict):
        return None
    for key in ("file_path", "notebook_path"):
        path = value.get(key)
        if type(path) is str and path:
            return storable_id(path)  # (NUL and lone surrogates as U+FFFD, like all stored text; indexable)
    return None


def input_detail(value: Any) -> str | None:
    """A short one-line form of an input without a path, for the report's examples."""
    if isinstance(value, dict):
        for key in _DETAIL_KEYS:
            if type(value.get(key)) is str and value[key].strip():
                return _short(value[key])
    if value is None:
        return None
    try:
        return _short(json.dumps(value, sort_keys=True, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return None


EXAMPLE_CHARS = 60


def example_text(name: str, value: Any) -> str:
    """accounting.md §2.10's example text of a call without a path: its tool name, one space and the
    first 60 code points of its canonical input (`json.dumps(input, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)` once every integral number is an integer)."""
    try:
        normal, _ = _integral_floats_as_ints(value)
        text = json.dumps(normal, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (RecursionError, TypeError, ValueError):  # deeper than Python recurses: no input to show
        text = ""
    return storable_text(f"{name} {text[:EXAMPLE_CHARS]}") or ""


def _short(text: str) -> str | None:
    line = " ".join(text.split())
    return storable_text(line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…")
