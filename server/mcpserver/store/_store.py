"""The task store: the interface a backend implements (TaskStore), and the default backend (memory).

Rules of this module:
- A backend supplies seven primitives over whole records: insert (with the owner's count checked in the
  same atomic step), load, update (an atomic read-modify-write that runs one of _record's pure changes),
  delete expired, list the unfinished tasks of other processes, renew this process's leases, and read
  many versions at once. Everything else is Tasks' (_operations), defined once over them.
- A store holds its limits (max_tasks_per_owner, lease_ms) and its clock, which Tasks reads.
- `shared` says other processes share the rows (their leases are renewed and swept by a thread);
  `poll_seconds` how often a waiter re-reads a task others may change (None: only this process does).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .. import _log
from .._forks import renew_at_fork
from ._events import MemorySessionStore
from ._task import (
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_TASKS_PER_OWNER,
    StoreFull,
    TaskLimitReached,
    TaskRecord,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._bus import Bus
    from ._events import SessionStore

    Change = Callable[[TaskRecord], Optional[TaskRecord]]
    Rule = Callable[[TaskRecord, int], Optional[TaskRecord]]

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_TASKS", "MemoryTaskStore", "Swept", "TaskStore"]

log = _log.get("mcpserver.tasks")

DEFAULT_MAX_TASKS = 100_000  # MemoryTaskStore: tasks of all owners together
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # MemoryTaskStore: results held; past it create refuses, finish still saves
SWEEP_INTERVAL_MS = 10_000  # MemoryTaskStore sweeps during create at most this often


@dataclass(frozen=True)
class Swept:
    """What one sweep did."""

    expired: int  # tasks deleted, with their results, because their TTL had ended
    orphaned: int  # unfinished tasks turned failed because the process running them was gone


def too_many_tasks(limit: int) -> TaskLimitReached:
    return TaskLimitReached(f"Too many tasks: this client already has {limit} stored, the most one client may have "
                            "(finished tasks count until their TTL ends); try again when some have expired",
                            data={"limit": limit})


class TaskStore:
    """Where tasks live: the interface a backend implements. Seven primitives over whole records, each atomic;
    every operation on tasks (mcpserver.tasks.Tasks) is defined once over them, so TASKS.md §4's transitions,
    owner checks and limits hold whatever keeps the rows. A backend implements insert, load, update,
    delete_expired, unfinished_elsewhere, extend_leases and load_versions, and may refuse a new task (admit) or
    hold connections to close (close)."""

    # How often Tasks.wait_for_change re-reads a task that others may change; None: only this process does.
    poll_seconds: Optional[float] = None
    # Other processes share these tasks: this process renews its leases and sweeps in a thread.
    shared = False

    def __init__(self, *, max_tasks_per_owner: int = DEFAULT_MAX_TASKS_PER_OWNER, lease_ms: int = DEFAULT_LEASE_MS,
                 clock: Optional[Callable[[], float]] = None):
        self.max_tasks_per_owner = max_tasks_per_owner
        self.lease_ms = lease_ms
        self._clock = clock or time.time

    def now(self) -> int:
        """The store's clock, in epoch milliseconds."""
        return int(self._clock() * 1000)

    def admit(self, now: int) -> None:
        """StoreFull if there is no room for another task; by default there always is."""

    def insert(self, record: TaskRecord, limit: int, now: int) -> None:
        """Stores a new record, atomically with counting the owner's unexpired tasks (too_many_tasks if at limit)."""
        raise NotImplementedError

    def load(self, task_id: str) -> Optional[TaskRecord]:
        """The record, or None if there is no such task (expired ones included: Tasks checks)."""
        raise NotImplementedError

    def update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        """Atomically: the record, `change` applied (None: keep it), the result stored. (record, changed);
        (None, False) if there is no such task. An exception from `change` leaves the record as it was."""
        raise NotImplementedError

    def delete_expired(self, now: int) -> int:
        """Deletes every task whose TTL has ended, with its result; how many."""
        raise NotImplementedError

    def unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        """Unfinished tasks whose runner is not the process with this token."""
        raise NotImplementedError

    def extend_leases(self, token: str, until: int) -> int:
        """Moves the lease of every unfinished task the process with this token runs to `until`; how many."""
        raise NotImplementedError

    def load_versions(self, task_ids: list[str]) -> dict[str, int]:
        """The version of each of these tasks that exists (one query)."""
        raise NotImplementedError

    def session_store(self) -> SessionStore:
        """Where legacy HTTP sessions keep their streams' events and subscriptions: this process's memory unless
        the backend shares a database with other processes."""
        return MemorySessionStore()

    def bus(self) -> Optional[Bus]:
        """What carries notifications to the other processes sharing this store; None (by default): there are none."""
        return None

    def count_by_status(self, now: int) -> Optional[dict[str, int]]:
        """How many unexpired tasks are in each status, for /metrics (not one of the primitives: nothing of
        Tasks needs it); None when the backend does not say, as by default."""
        return None

    def close(self) -> None:
        """Closes the backend's connections; by default there are none."""

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class MemoryTaskStore(TaskStore):
    """The default: tasks in this process's memory, gone with it. Thread-safe; bounded by
    max_tasks_per_owner, max_tasks (all owners) and max_bytes of results."""

    def __init__(self, *, max_tasks: int = DEFAULT_MAX_TASKS, max_bytes: int = DEFAULT_MAX_BYTES, **options: Any):
        super().__init__(**options)
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self._rows_lock = threading.Lock()
        renew_at_fork(self, "_rows_lock")
        self._tasks: dict[str, TaskRecord] = {}
        self._owned: dict[str, set[str]] = {}
        self._first_expiry: dict[str, int] = {}  # no task of the owner expires before this (absent: none expires)
        self._bytes = 0
        self._next_sweep = 0

    def admit(self, now: int) -> None:
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_INTERVAL_MS
            self.delete_expired(now)  # a memory store's runners are all this process: none can be orphaned
        if len(self._tasks) >= self.max_tasks:
            raise StoreFull(f"The task store is full: it holds {len(self._tasks)} tasks, its limit (max_tasks)")
        if self._bytes >= self.max_bytes:
            raise StoreFull(f"The task store is full: its results take {self._bytes} bytes of memory, "
                            f"its limit is {self.max_bytes} (max_bytes)")

    def insert(self, record: TaskRecord, limit: int, now: int) -> None:
        with self._rows_lock:
            owned = self._owned.setdefault(record.owner, set())
            if len(owned) >= limit and self._first_expiry.get(record.owner, now + 1) <= now:
                # Expired ones do not count: drop them before refusing (only when one has expired, so a
                # client hammering at its limit costs a lookup per refusal, not a scan of its tasks).
                for task_id in [task_id for task_id in owned if self._tasks[task_id].expired(now)]:
                    self._drop(task_id)
                expiries = [self._tasks[task_id].expires_at for task_id in owned]
                first = min((expires for expires in expiries if expires is not None), default=None)
                if first is None:
                    self._first_expiry.pop(record.owner, None)
                else:
                    self._first_expiry[record.owner] = first
            if len(owned) >= limit:
                raise too_many_tasks(limit)
            owned.add(record.task_id)
            self._tasks[record.task_id] = record
            if record.expires_at is not None:
                first = self._first_expiry.get(record.owner)
                self._first_expiry[record.owner] = record.expires_at if first is None else min(first, record.expires_at)

    def _drop(self, task_id: str) -> None:
        record = self._tasks.pop(task_id)
        self._bytes -= record.result_bytes
        owned = self._owned[record.owner]
        owned.discard(task_id)
        if not owned:
            del self._owned[record.owner]
            self._first_expiry.pop(record.owner, None)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        return self._tasks.get(task_id)

    def update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        with self._rows_lock:
            record = self._tasks.get(task_id)
            if record is None:
                return None, False
            new = change(record)
            if new is None:
                return record, False
            self._tasks[task_id] = new
            self._bytes += new.result_bytes - record.result_bytes
            return new, True

    def delete_expired(self, now: int) -> int:
        with self._rows_lock:
            expired = [task_id for task_id, record in self._tasks.items() if record.expired(now)]
            for task_id in expired:
                self._drop(task_id)
            return len(expired)

    def unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        with self._rows_lock:
            return [record for record in self._tasks.values() if not record.terminal and record.runner.token != token]

    def extend_leases(self, token: str, until: int) -> int:
        from dataclasses import replace

        with self._rows_lock:
            mine = [record for record in self._tasks.values() if not record.terminal and record.runner.token == token]
            for record in mine:
                self._tasks[record.task_id] = replace(record, lease_until=until)
            return len(mine)

    def bus(self) -> Optional[Bus]:
        """What carries notifications to the other processes sharing this store; None (by default): there are none."""
        return None

    def count_by_status(self, now: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self._rows_lock:
            for record in self._tasks.values():
                if not record.expired(now):
                    counts[record.status] = counts.get(record.status, 0) + 1
        return counts

    def load_versions(self, task_ids: list[str]) -> dict[str, int]:
        found = [(task_id, self._tasks.get(task_id)) for task_id in task_ids]
        return {task_id: record.version for task_id, record in found if record is not None}
