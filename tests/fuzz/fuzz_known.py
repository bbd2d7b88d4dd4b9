"""Bugs the fuzzer finds that are known and still open, by the signature they show (kind: where).

Each entry names its issue. A finding that matches one is reported as known and does not fail the
short run in `make test`; anything else does. Remove an entry once its fix is on main: the regression
files in corpus/ that carry its name are strict xfails, so a fix turns them into failures until the
name is removed there too.
"""

from __future__ import annotations

import re
from typing import Optional

KNOWN: dict[str, tuple[str, str]] = {
    # label: (what, signature pattern); the first that matches wins
    "issue 11 #1": ("the JSON depth pre-check is quadratic on an unclosed string",
                    r"_json\.py:nesting_depth|superlinear: (unclosed_string_\w+|many_strings|deep_then_garbage) "),
    "issue 11 #2": ("uniqueItems is O(n^2)", r"_schema\.py:(json_equal|<genexpr>|_array)|superlinear: unique_\w+ "),
    "issue 11 #3": ("request smuggling through Content-Length", r"^smuggling: |ValueError in http\.py:_run_app"),
    "issue 11 #6": ("a BaseException from a tool kills the stdio server and drops the HTTP connection",
                    r"(KeyboardInterrupt|CancelledError|GeneratorExit) in |closed without a response \(tools/call "
                    r"raises\)|^traceback: \? in (threading\.py|http\.py)"),
    "issue 11 #7": ("tool children and tools inherit the protocol's stdin",
                    r"^hang: server hung \(after tools/call (reads_stdin|spawns_child)\)"),
    "issue 11 #9": ("tool stdout without newlines is quadratic", r"stdio\.py:write|superlinear: stdout_progress "),
    "issue 11 low: name as a list over HTTP": ("HTTP tools/call with name as a list or object: 500",
                                               r"TypeError in protocol\.py:_headers_match"),
    "issue 11 low: multipleOf 10**400": ("multipleOf with 10**400: OverflowError, -32603",
                                         r"OverflowError in _schema\.py:_number"),
    "issue 11 low: 1e999 from a command tool": ('a command tool with "output": "json" printing 1e999: -32603',
                                                r"cannot be encoded: Out of range float"),
}


def known(signature: str) -> Optional[str]:
    """The label of the known bug `signature` shows, or None for a new finding."""
    for label, (_, pattern) in KNOWN.items():
        if re.search(pattern, signature):
            return label
    return None
