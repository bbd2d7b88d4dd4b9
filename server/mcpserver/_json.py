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
if TYPE_CHECKING:
    from typing import Any

# Deeper than any real MCP message (the envelope uses four levels); far below what any thread
# stack needs to survive. Raise it only together with the thread stack size.
MAX_JSON_DEPTH = 64
# What the threads that run requests get: glibc's default. musl's 128 KiB is too small for tools, and
# for the decoder past a few hundred levels (docs/platforms/musl.md).
THREAD_STACK_BYTES = 8 * 1024 * 1024
# What the pure-Python encoder (PyPy before 8.0) is given to nest through: each level's chunks pass through
# every generator above it, so its cost grows with the square of the depth (PyPy 7.3.19: 0.09 s at 500 levels,
# 14 s to reach its RecursionError at 5,000). CPython's C encoder stops near its recursion limit of 1,000.
MAX_ENCODED_DEPTH = 512

# With escaped backslashes and quotes taken out first, a string is a quote, anything but a quote, and
# its closing quote (or the end of an unclosed one): one repeat of one character class, which the regex
# engine runs without a backtracking stack. (A pattern that matched escapes inside the string kept a
# stack entry per escape: 150 MB for a 5 MB string of escapes, the PyPy cell's out-of-memory kill.)
# Every '"' starts at most one match, so no position is scanned twice: linear on any input.
_STRING = r'"[^"]*"?'  # compiled on first use (re caches it): most servers never need it
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


def _pypy_codecs() -> tuple[Any, Any]:
    """PyPy's fast JSON paths, where the portable ones are slow (measured on a 5 MB text of escapes,
    docs/platforms/pypy.md): its native decoder (_pypyjson.loads) serves only a hook-free json.loads, and with
    _DECODER's hooks every string goes through the pure-Python scanner: 15x slower, 80 MB more. PyPy
    before 8.0 has no native encoder either, and escapes strings for UTF-8 output with a Python callback
    per escaped character: 0.5 s and 120 MB. Returns (loads, iterencode), each None where not needed."""
    if sys.implementation.name != "pypy" or not hasattr(sys, "get_int_max_str_digits"):
        return None, None  # without the digit limit the decoder's parse_int hook must run
    try:
        from _pypyjson import raw_encode_basestring_ascii  # type: ignore[import-not-found]
    except ImportError:
        return None, None
    try:
        from _pypyjson import make_encoder  # noqa: F401  PyPy 8.0+: a native encoder
        return json.loads, None
    except ImportError:
        pass
    try:
        from json.encoder import _make_iterencode, encode_basestring  # type: ignore[attr-defined]
    except ImportError:  # PyPy 3.9's encoder is built another way (and escapes with a builder)
        return json.loads, None

    def encode_string(text: str) -> str:  # for an ASCII string both modes write the same escapes
        return '"' + raw_encode_basestring_ascii(text) + '"' if text.isascii() else encode_basestring(text)

    def float_text(number: float) -> str:
        if number != number or number in (_INFINITY, -_INFINITY):
            raise ValueError(f"Out of range float values are not JSON compliant: {number!r}")
        return float.__repr__(number)

    return json.loads, _make_iterencode(None, _ENCODER.default, encode_string, None, float_text, ":", ",",
                                        False, False, True)


_NATIVE_LOADS, _PYPY_ITERENCODE = _pypy_codecs()
# What _DECODER.decode runs, called directly: decode() adds two regex matches and two calls per message.
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]


def _c_iterencode() -> Any:
    """CPython's C encoder for _ENCODER's settings, built once (None where there is none): JSONEncoder.encode
    builds one, and a markers dict, per call, a third of the cost of encoding a small answer (40k
    instructions against 27k, cachegrind). Without markers a cycle raises RecursionError, not ValueError:
    both are what encoding an answer already handles."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None or _PYPY_ITERENCODE is not None:
        return None
    return make(None, _ENCODER.default, encoder.encode_basestring, None, ":", ",", False, False, False)


_C_ITERENCODE = _c_iterencode()


def nesting_depth(text: str) -> int:
    """The deepest array/object nesting in `text`, brackets inside strings not counted."""
    # An escaped quote never ends a string. Escaped backslashes go first, so that a quote after one still
    # ends its string. Outside strings a backslash is invalid JSON, where the decoder stops: the depth up
    # to it is counted exactly, and the decoder never reaches what follows.
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    brackets = re.sub(_NOT_BRACKET, "", re.sub(_STRING, "", unescaped))
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
        if _NATIVE_LOADS is not None:
            return _finite(_NATIVE_LOADS(text))
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:  # leading whitespace, or no value at all: decode() says which
            return _DECODER.decode(text)
        if end != len(text) and text[end:].strip(" \t\n\r"):
            return _DECODER.decode(text)  # raises its "Extra data" error
        return value
    except RecursionError:  # only reachable if MAX_JSON_DEPTH was raised too far
        raise JSONTooDeep("JSON nested too deeply") from None


def _finite(value: Any) -> Any:
    """`value`, once no float in it is NaN or infinite: the checks _DECODER's hooks make while decoding."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, float) and (item != item or item in (_INFINITY, -_INFINITY)):
            raise ValueError("NaN is not valid JSON" if item != item else
                             "a number out of range (Infinity, or beyond a double's range) is not valid JSON")
    return value


def dumps(value: Any) -> str:
    """Compact single-line JSON, UTF-8 characters kept as they are."""
    if _C_ITERENCODE is not None:
        return "".join(_C_ITERENCODE(value, 0))
    if _PYPY_ITERENCODE is not None:
        _shallow_enough(value)
        return "".join(_PYPY_ITERENCODE(value, 0))
    return _ENCODER.encode(value)


def _shallow_enough(value: Any) -> None:
    """RecursionError, as CPython's encoder raises it, for a value nested past MAX_ENCODED_DEPTH: found by a
    walk that costs one visit per container, before the pure-Python encoder spends the square of it."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else ()
        if children and depth > MAX_ENCODED_DEPTH:
            raise RecursionError(f"maximum recursion depth exceeded: JSON nested past {MAX_ENCODED_DEPTH} levels")
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))


def dumps_bytes(value: Any) -> bytes:
    """dumps() as UTF-8 bytes. A lone surrogate (from a \\ud800 escape) cannot be UTF-8, so then the
    whole text is escaped to ASCII: the value arrives as it was sent. Raises TypeError/ValueError as dumps."""
    text = "".join(_C_ITERENCODE(value, 0)) if _C_ITERENCODE is not None else dumps(value)  # one call less
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")
