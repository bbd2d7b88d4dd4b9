"""Locks a fork re-makes in the child: renew_at_fork(owner, "_lock", ...).

A fork copies the process with only the thread that forked: a lock another thread held at that moment stays held in
the child, by a thread the child does not have, and the child's first use of it waits for ever. gunicorn forks its
master after --preload built the app (a task store's sender and bus threads may be inside their locks), and a tool
may fork while other requests run. So each long-lived object of the package names its locks here, and in a forked
child they start free (tests/task_store/fork_probe.py forks while each lock the package holds is held).

Re-made, not acquired before the fork and released after: taking every lock in turn before a fork would wait for
threads that take two of them in another order. What a lock guarded may have been half-changed by a thread that the
child does not have; the package's critical sections are short updates of dicts and counters, which the GIL (or, on a
free-threaded build, the container's own lock) keeps whole. A semaphore starts with all its permits: the threads that
held some are not in the child. Owners are held weakly; one forgotten by the program is forgotten here.
"""

from __future__ import annotations

import os
import threading
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["renew_at_fork"]

_OWNERS: list[tuple[weakref.ref[Any], tuple[str, ...]]] = []
_PRUNE_AT = [64]  # the list is pruned of forgotten owners when it reaches this, which then doubles


def renew_at_fork(owner: Any, *names: str) -> None:
    """In a child forked from this process, `owner`'s attributes `names` (locks, conditions, events, bounded
    semaphores) start free, whichever thread held them at the fork."""
    _OWNERS.append((weakref.ref(owner), names))
    if len(_OWNERS) >= _PRUNE_AT[0]:
        _OWNERS[:] = [(ref, kept) for ref, kept in _OWNERS if ref() is not None]
        _PRUNE_AT[0] = max(64, 2 * len(_OWNERS))


def _renew_all() -> None:
    for ref, names in _OWNERS:
        owner = ref()
        if owner is not None:
            for name in names:
                _renew(owner, name)


def _renew(owner: Any, name: str) -> None:
    lock: Any = getattr(owner, name, None)
    if isinstance(lock, threading.BoundedSemaphore):
        lock._cond._at_fork_reinit()  # type: ignore[attr-defined]
        lock._value = lock._initial_value  # type: ignore[attr-defined]
    elif hasattr(lock, "_at_fork_reinit"):  # locks, RLocks, conditions, events (CPython 3.9+, PyPy 3.9+)
        lock._at_fork_reinit()
    elif isinstance(lock, (type(threading.Lock()), type(threading.RLock()))):  # an interpreter without it
        setattr(owner, name, threading.RLock() if isinstance(lock, type(threading.RLock())) else threading.Lock())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_all)
