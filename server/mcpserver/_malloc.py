"""glibc's malloc, asked to hand large buffers back to the system as soon as they are freed.

glibc maps a block of M_MMAP_THRESHOLD bytes or more (128 KiB at first) on its own and unmaps it when it
is freed, but each such block freed raises the threshold to its size, up to 32 MiB. After the first 5 MB
message every later one comes from the heap, where the small objects allocated among them keep the freed
space from going back. Measured with 10 minutes of `make soak` (docs/reports/performance.md): an HTTP server's
RSS climbed to 266 MiB and stayed there at rest, a stdio server's to 55 MiB; with the threshold pinned at
256 KiB, 112 MiB (still growing, more slowly, with its worker pool) and a flat 20 MiB.

Pinned at 64 KiB, not 256: a body on its way grows its connection's buffer step by step (the soak's 500 KB
uploads come 16 KB at a time), and between 64 and 256 KiB each step was cut from the heap, among the small
objects that then kept the freed steps from going back: 30 minutes of soak left the HTTP server's heap at
15 MiB and its RSS at rest 36% above the post-warm-up pause (docs/reports/performance.md); at 64 KiB it passes. The
cost is an mmap, a munmap and fresh page faults per buffer of 64 KiB or more that the heap has no free room
for (glibc looks there first): a 100 KiB echo over HTTP made 10 of them and took 1.66x as long, a 200 KiB one
1.29x; 32 and 500 KiB were unchanged (bench/malloc_threshold.py). MALLOC_MMAP_THRESHOLD_=262144 in the
environment buys that back, at the memory's expense.

Only where it helps: CPython with the GIL on glibc. PyPy keeps bytes in its own collector, free-threaded
CPython in mimalloc, and musl never raises its threshold. A MALLOC_MMAP_THRESHOLD_ in the environment is
the operator's choice and is left alone. Both transports ask the first time a message of LARGE_BYTES or
more comes or goes, so ctypes (a few ms of start-up) is imported only by a process that needs it.

Arenas: glibc gives each new thread that allocates an arena of its own, up to 8 per core, and memory freed
in an arena stays with it. Under the GIL threads hardly ever malloc at once, so arenas buy no speed, and
an HTTP server whose worker pool grows to dozens of threads kept 15 arenas holding 28 MiB (bench/soak.py,
/proc/PID/smaps). bound_arenas() caps them at ARENA_MAX (MALLOC_ARENA_MAX=2, set from inside); the HTTP
worker pool asks when it starts its second worker, before that thread's first malloc. A MALLOC_ARENA_MAX
in the environment is the operator's choice and is left alone.

Trimming: freed chunks in the middle of a heap stay resident, since glibc gives back on its own only the
top of a heap. Under steady load they are not reused page for page, so the resident set creeps up: the soak's
HTTP server went from 60 to 111 MiB in 20 minutes, its Python objects flat, and 34 MiB of it went at once
when malloc_trim was called through a debugger (docs/reports/performance.md). So the HTTP loop calls trim() every
TRIM_SECONDS, busy or at rest: it gives the arenas' free pages back (malloc_trim), in a process that has
loaded ctypes for one of the above already. A call took 0.7-1 ms in the soak, 0.01 ms with nothing to give.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

LARGE_BYTES = 64 * 1024  # the pinned threshold: a buffer this large the heap has no room for is mapped apart
M_MMAP_THRESHOLD = -3  # from glibc's <malloc.h>
M_ARENA_MAX = -8
ARENA_MAX = 2  # malloc arenas, whatever the number of threads
TRIM_SECONDS = 10.0  # how often a server gives its free pages back; what grows back in that time is a few MiB

_pinned: Optional[bool] = None  # not asked yet; then whether it was pinned
_bounded: Optional[bool] = None  # likewise for the arenas
_malloc_trim: Any = None  # glibc's, looked up once


def return_large_buffers() -> bool:
    """Pin glibc's mmap threshold, once per process. True when it is pinned (by this call or an earlier one)."""
    global _pinned
    if _pinned is None:
        _pinned = _pin()
    return _pinned


def bound_arenas() -> bool:
    """Cap glibc's malloc arenas at ARENA_MAX, once per process: threads created after this share them. True
    when they are bounded (by this call or an earlier one)."""
    global _bounded
    if _bounded is None:
        _bounded = _mallopt("MALLOC_ARENA_MAX", M_ARENA_MAX, ARENA_MAX)
    return _bounded


def trim() -> bool:
    """Give the free pages inside every arena back to the system (glibc's malloc_trim), if this process has
    pinned the threshold or bounded the arenas (so ctypes is loaded already). True when it trimmed."""
    global _malloc_trim
    if not (_bounded or _pinned):
        return False
    if _malloc_trim is None:
        import ctypes

        _malloc_trim = ctypes.CDLL(None).malloc_trim
    _malloc_trim(0)
    return True


def _pin() -> bool:
    return _mallopt("MALLOC_MMAP_THRESHOLD_", M_MMAP_THRESHOLD, LARGE_BYTES)


def _mallopt(variable: str, option: int, value: int) -> bool:
    """mallopt(option, value) where it helps (CPython with the GIL on glibc) and `variable`, the environment's
    spelling of it, is not set."""
    if sys.implementation.name != "cpython" or "t" in getattr(sys, "abiflags", ""):
        return False
    if variable in os.environ:
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(option, value) == 1)
    except (ValueError, OSError, ImportError, AttributeError):  # not glibc, or no ctypes (a minimal build)
        return False
