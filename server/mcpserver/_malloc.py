"""glibc's malloc, asked to hand large buffers back to the system as soon as they are freed.

glibc maps a block of M_MMAP_THRESHOLD bytes or more (128 KiB at first) on its own and unmaps it when it
is freed, but each such block freed raises the threshold to its size, up to 32 MiB. After the first 5 MB
message every later one comes from the heap, where the small objects allocated among them keep the freed
space from going back. Measured with 10 minutes of `make soak` (docs/performance.md): an HTTP server's
RSS climbed to 266 MiB and stayed there at rest, a stdio server's to 55 MiB; with the threshold pinned at
256 KiB, 112 MiB (still growing, more slowly, with its worker pool) and a flat 20 MiB. The cost is one
mmap and munmap per large buffer, small beside the copying of a quarter of a megabyte.

Only where it helps: CPython with the GIL on glibc. PyPy keeps bytes in its own collector, free-threaded
CPython in mimalloc, and musl never raises its threshold. A MALLOC_MMAP_THRESHOLD_ in the environment is
the operator's choice and is left alone. Both transports ask the first time a message of LARGE_BYTES or
more comes or goes, so ctypes (a few ms of start-up) is imported only by a process that needs it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

LARGE_BYTES = 256 * 1024  # the pinned threshold: every buffer this large is mapped, and unmapped when freed
M_MMAP_THRESHOLD = -3  # from glibc's <malloc.h>

_pinned: Optional[bool] = None  # not asked yet; then whether it was pinned


def return_large_buffers() -> bool:
    """Pin glibc's mmap threshold, once per process. True when it is pinned (by this call or an earlier one)."""
    global _pinned
    if _pinned is None:
        _pinned = _pin()
    return _pinned


def _pin() -> bool:
    if sys.implementation.name != "cpython" or "t" in getattr(sys, "abiflags", ""):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, LARGE_BYTES) == 1)
    except (ValueError, OSError, ImportError, AttributeError):  # not glibc, or no ctypes (a minimal build)
        return False
