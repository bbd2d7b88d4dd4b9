"""PyPy's young generation, bounded whatever cache the CPU reports (docs/platforms/pypy.md has the measurements).

PyPy sizes its nursery when it starts, from the cache size /proc/cpuinfo reports: half of it above 2 MiB,
else 1 MiB. A host whose CPU reports 480 MiB (many current cloud parts do) gives every PyPy process a
240 MiB nursery and no major collection before the heap reaches about twice that, so a server that holds
80 MiB on a laptop holds several hundred there, and a container sized by our figures is OOM-killed.

The nursery cannot change once PyPy runs, so the command line, which owns start-up, starts again (exec
keeps the PID and the pipes) with PYPY_GC_NURSERY at BOUND when PyPy picked more by itself. A
PYPY_GC_NURSERY already set is the operator's choice and is left alone. Where the server does not own
start-up (create_app under gunicorn, mcpserver.run from a script) it says so once, with the fix.
"""

from __future__ import annotations

import os
import sys

from . import _log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

NURSERY = "PYPY_GC_NURSERY"
# bench/pypy_nursery.py: 4 MB serves stdio and HTTP as fast as 16 MB and the default of a big-cache host
# (docs/platforms/pypy.md), and keeps the payload suite's 5 MB exchanges within their budget.
BOUND = 4 * 2**20
BOUND_TEXT = "4MB"

_warned = False


def nursery_bytes() -> int:
    """This process's nursery in bytes; 0 when it is not PyPy, or PyPy does not say."""
    if sys.implementation.name != "pypy":
        return 0
    import gc

    raw = getattr(gc.get_stats(), "_s", None)  # the figures as numbers; the public attributes are text
    return int(getattr(raw, "nursery_size", 0) or 0)


def oversized() -> bool:
    """PyPy picked a nursery over BOUND by itself (nobody set PYPY_GC_NURSERY)."""
    return NURSERY not in os.environ and nursery_bytes() > BOUND


def bounded_environment() -> Optional[dict[str, str]]:
    """The environment to start again with, when this process's nursery is oversized; else None."""
    if not oversized():
        return None
    return dict(os.environ, **{NURSERY: BOUND_TEXT})


def warn_if_oversized(where: str) -> None:
    """Once per process: say that this PyPy's nursery is oversized, and how to bound it."""
    global _warned
    if _warned or not oversized():
        return
    _warned = True
    _log.get("mcpserver").warning(
        "PyPy sized its nursery at %d MiB from the CPU cache /proc/cpuinfo reports, so each process can hold "
        "several times that before collecting; %s cannot start the interpreter again, so set %s=%s in its "
        "environment (python -m mcpserver does this itself)", nursery_bytes() // 2**20, where, NURSERY, BOUND_TEXT)
