"""JSON in and out, bounded so that hostile input cannot crash the process.

CPython's json decoder recurses once per nesting level in C. In a thread with a small stack
(musl's default is 128 KiB) a few thousand levels overflow the stack and kill the process with
SIGSEGV long before RecursionError could be raised. So nesting depth is measured first, without
recursion, and anything deeper than MAX_JSON_DEPTH is refused before the decoder sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any real MCP message (the envelope uses four levels); far below what any thread
# stack needs to survive. Raise it only together with the thread stack size.
MAX_JSON_DEPTH = 64

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JSONTooDeep(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def nesting_depth(text: str) -> int:
    """The deepest array/object nesting in `text`, brackets inside strings not counted."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def loads(text: str) -> Any:
    """Decode JSON, refusing NaN/Infinity and nesting deeper than MAX_JSON_DEPTH.

    Raises ValueError (JSONTooDeep for nesting) with a message fit to show a client.
    """
    # Fast path: with fewer opening brackets than the limit, the depth cannot exceed it.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        depth = nesting_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise JSONTooDeep(f"JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:  # only reachable if MAX_JSON_DEPTH was raised too far
        raise JSONTooDeep("JSON nested too deeply") from None


def dumps(value: Any) -> str:
    """Compact single-line JSON, UTF-8 characters kept as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
