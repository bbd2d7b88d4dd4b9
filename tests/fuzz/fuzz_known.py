"""Bugs the fuzzer finds that are known and still open on main, by the signature they show (kind: where).

A finding that matches an entry is reported as known and does not fail the short run in `make test`;
anything else does. The corpus/ entries of a listed bug are strict xfails, so the fix turns them into
failures until its entry here is deleted: delete it with the fix.

Issue 11's own list is fixed on main (the regression probes and shapes in fuzz.py and fuzz_gen.py keep
it so); what is listed here the fuzzer found on top of it, each with its smallest reproduction in
corpus/ and in the report of the run that found it.
"""

from __future__ import annotations

import json
import re
from typing import Optional

KNOWN: dict[str, tuple[str, str]] = {
    # label: (what, signature pattern); the first that matches wins
    "fuzz A: stdio reader dies on an unhashable id or method": (
        'an "id" or "method" that is an array or object kills the stdio reader thread: the server stops '
        "reading (id) or exits (method), and the requests after it are never answered",
        r"stdio\.py:_(take_slot|receive|read)\b|server died \((\?|TypeError)|server died \(after a message "
        r"whose method is an (array|object)\)"),
    "fuzz B: HTTP 500 for a method that is an array or object": (
        'a POST whose "method" is an array or object gets 500 and a traceback, not -32600',
        r"TypeError in http\.py:_respond|^status: HTTP 500 text/plain"),
    "fuzz C: resource templates backtrack": (
        "a URI template's regex backtracks: file:///{+path}.{ext} is quadratic, repo://{+a}/{+b}/{+c} cubic "
        "in the length of the URI, holding the GIL",
        r"_resources\.py:match|superlinear: template_\w+ "),
    "fuzz D: tool results JSON cannot carry": (
        "a tool returning ToolResult(structured=nan) or a structure nested past the recursion limit gets "
        "-32603 and a traceback, not an isError result",
        r"(RecursionError|ValueError) in _json\.py:dumps < _tools\.py:_result"),
    "fuzz E: command tools and lone surrogates": (
        "a string argument holding a lone surrogate (\\ud800) makes a command tool raise UnicodeEncodeError "
        "(argv or stdin) with a traceback in the log, not a clear isError",
        r"UnicodeEncodeError in _command\.py"),
    "fuzz F: demo add and integers past a double": (
        "server/examples/demo.py add(a=10**400) raises OverflowError (isError with a traceback)",
        r"OverflowError in .*\(tool add\)"),
}


def kills_a_server(data: bytes, transport: str) -> Optional[str]:
    """The label of an open bug this message would take a `transport` server down with (fuzz A on stdio,
    B over HTTP), else None. Only `make soak` asks: its load must not stop at the first such message."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict) and (isinstance(message.get("id"), (list, dict))
                                      or isinstance(message.get("method"), (list, dict))):
        return next((label for label in KNOWN if label.startswith("fuzz A" if transport == "stdio" else "fuzz B")),
                    None)
    return None


def known(signature: str) -> Optional[str]:
    """The label of the known bug `signature` shows, or None for a new finding."""
    for label, (_, pattern) in KNOWN.items():
        if re.search(pattern, signature):
            return label
    return None
