"""JSON in and out, bounded so that hostile input cannot crash the process.

CPython's json decoder recurses once per nesting level in C. In a thread with a small stack
(musl's default is 128 KiB) a few thousand levels overflow the stack and kill the process with
SIGSEGV long before RecursionError could be raised. So nesting depth is measured first, without
recursion, and anything deeper than MAX_JSON_DEPTH is refused before the decoder sees it.
"""

from __future__ import annotations

import json
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any

# Deeper than any real MCP message (the envelope uses four levels); far below what any thread
# stack needs to survive. Raise it only together with the thread stack size.
MAX_JSON_DEPTH = 64
# What the threads that run requests get: glibc's default. musl's 128 KiB is too small for tools, and
# for the decoder past a few hundred levels (docs/musl.md).
THREAD_STACK_BYTES = 8 * 1024 * 1024

# A string, or an unclosed one running to the end of the text (an optional lone backslash last). Every
# '"' it starts at matches at once, so no position is scanned twice: linear on any input. Without the
# unclosed alternative, each '"' of an unclosed string rescanned to the end (quadratic: 1 MB took 50 min).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)'  # compiled on first use (re caches it): most servers never need it
_NOT_BRACKET = r"[^\[\]{}]+"


class JSONTooDeep(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INFINITY, -_INFINITY):  # 1e999: valid JSON, but no answer carrying it could be encoded
        raise ValueError(f"number {text[:40]} is out of range")
    return value


_INFINITY = float("inf")
# Converting a decimal string to int is quadratic in its length. Pythons from 3.11 (and the 3.9/3.10
# security releases) refuse more than 4,300 digits; older ones would spend minutes on one long number.
MAX_INT_DIGITS = 4300


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer with more than {MAX_INT_DIGITS} digits")
    return int(text)


PARSE_INT = None if hasattr(sys, "get_int_max_str_digits") else _bounded_int  # for every decoder of untrusted JSON

# Built once: json.loads and json.dumps with any keyword argument build a new decoder or encoder on every
# call, which costs more than decoding or encoding a small message. Both are safe to share between threads.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float, parse_int=PARSE_INT)
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def nesting_depth(text: str) -> int:
    """The deepest array/object nesting in `text`, brackets inside strings not counted."""
    brackets = re.sub(_NOT_BRACKET, "", re.sub(_STRING, "", text, flags=re.DOTALL))
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
    if text.startswith("\ufeff"):  # what json.loads says, which _DECODER.decode would not
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _DECODER.decode(text)
    except RecursionError:  # only reachable if MAX_JSON_DEPTH was raised too far
        raise JSONTooDeep("JSON nested too deeply") from None


def dumps(value: Any) -> str:
    """Compact single-line JSON, UTF-8 characters kept as they are."""
    return _ENCODER.encode(value)


def dumps_bytes(value: Any) -> bytes:
    """dumps() as UTF-8 bytes. A lone surrogate (from a \\ud800 escape) cannot be UTF-8, so then the
    whole text is escaped to ASCII: the value arrives as it was sent. Raises TypeError/ValueError as dumps."""
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")
