"""Bugs the fuzzer finds that are known and still open on main, by the signature they show (kind: where).

A finding that matches an entry is reported as known and does not fail the short run in `make test`;
anything else does. The corpus/ entries of a listed bug are strict xfails, so the fix turns them into
failures until its entry here is deleted: delete it with the fix.

Issue 11's own list is fixed on main (the regression probes and shapes in fuzz.py and fuzz_gen.py keep
it so), and so are the six bugs the fuzzer found on top of it (their smallest reproductions are in
corpus/, replayed by every `make test`).
"""

from __future__ import annotations

import json
import re
from typing import Optional

KNOWN: dict[str, tuple[str, str]] = {
    # label: (what, signature pattern); the first that matches wins. Empty: nothing the fuzzer has found is
    # open. Six were, A to F (corpus/fuzz-*.json), fixed on main in bbcc54a, 03755b2, ddd96f9, d833de3 and
    # 1027ba2; an entry looked like
    # "fuzz C: resource templates backtrack": ("a URI template's regex backtracks ...",
    #                                          r"_resources\.py:match|superlinear: template_\w+ "),
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
