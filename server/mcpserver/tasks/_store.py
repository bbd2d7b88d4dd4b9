"""The task store: one small interface the protocol layer calls, and the default backend (memory).

Rules of this module:
- Every operation is defined once, in TaskStore, over five primitives a backend supplies: insert (with
  the owner's count checked in the same atomic step), load, update (an atomic read-modify-write that
  runs one of _task's pure changes), delete expired, and list/renew the leases of unfinished tasks. So
  TASKS.md §4's transitions, owner checks and limits live in one place whatever holds the rows.
- Clients' calls take the owner and answer TaskNotFound for another owner's or an expired task. The
  runner's calls (set_status, need_input, take_answers, finish, cancel_requested) take only the id:
  the runner is the server itself.
- create is strongly consistent: when it returns, a get by any process of the store succeeds (TASKS.md
  §3). answer applies the responses before it returns, so the next get already shows them gone (§6).
- A task whose runner died is reported `failed` by the first get or sweep that notices, never left
  `working`. Expired tasks are deleted by sweep (memory: on the way, during create; shared stores: a
  thread renewing this process's leases every third of the lease and sweeping).
- Reads never fail for lack of room. A result the store cannot save (full disk, store unreachable)
  is not dropped: finish keeps it in memory, this process's gets show it, and each heartbeat tries
  to save it again.
- Listeners learn of changes two ways: `on_change` calls back after every change made through this
  store object, in this process; changes other processes made are seen by polling `versions` (one
  query for many tasks) or by `wait_for_change`, which re-reads every `poll_seconds`.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass

from .. import _log
from ._record import (
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_TASKS_PER_OWNER,
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_TTL_MS,
    InvalidTransition,
    StoreFull,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
    TaskRecord,
    TaskStoreError,
    dead_runner,
    finished,
    new_task,
    orphaned,
    this_runner,
    with_answers,
    with_cancel_request,
    with_input,
    with_status,
    without_answers,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Iterable, Mapping, Optional

    Change = Callable[[TaskRecord], Optional[TaskRecord]]
    Rule = Callable[[TaskRecord, int], Optional[TaskRecord]]

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_TASKS", "ConnectionPool", "MemoryTaskStore", "Swept", "TaskStore"]

log = _log.get("mcpserver.tasks")

DEFAULT_MAX_TASKS = 100_000  # MemoryTaskStore: tasks of all owners together
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # MemoryTaskStore: results held; past it create refuses, finish still saves
SWEEP_INTERVAL_MS = 10_000  # MemoryTaskStore sweeps during create at most this often
MAX_IDLE_CONNECTIONS = 8  # a pool keeps this many for reuse and closes any more as they come back


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
    """Where tasks live: the interface, each operation defined once over a backend's primitives."""

    # How often wait_for_change re-reads a task that others may change; None: only this object changes them.
    poll_seconds: Optional[float] = None
    # Other processes share these tasks: this process renews its leases and sweeps in a thread.
    shared = False

    def __init__(self, *, max_tasks_per_owner: int = DEFAULT_MAX_TASKS_PER_OWNER, lease_ms: int = DEFAULT_LEASE_MS,
                 clock: Optional[Callable[[], float]] = None):
        self.max_tasks_per_owner = max_tasks_per_owner
        self.lease_ms = lease_ms
        self._clock = clock or time.time
        self._lock = threading.Lock()  # listeners and unsaved results
        self._listeners: tuple[Callable[[TaskRecord], None], ...] = ()  # replaced, never changed: read unlocked
        self._unsaved: dict[str, Rule] = {}
        self._changed = threading.Condition()
        self._generation = 0  # counts changes made through this object: wait_for_change's wake-up
        self._upkeep: Optional[_Upkeep] = None

    def now(self) -> int:
        """The store's clock, in epoch milliseconds."""
        return int(self._clock() * 1000)

    # --- what a client's requests do ------------------------------------------------------------------------

    def create(self, owner: str, *, ttl_ms: Optional[int] = DEFAULT_TTL_MS,
               poll_interval_ms: Optional[int] = DEFAULT_POLL_INTERVAL_MS,
               status_message: Optional[str] = None) -> TaskRecord:
        """A new `working` task run by this process. TaskLimitReached past max_tasks_per_owner; StoreFull
        when the store has no room left for another task's result."""
        now = self.now()
        record = new_task(owner, now, ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms, lease_ms=self.lease_ms,
                          status_message=status_message)
        self._admit(now)
        self._insert(record, self.max_tasks_per_owner, now)
        if self.shared:
            self._start_upkeep()
        self._announce(record)
        return record

    def get(self, task_id: str, owner: str) -> TaskRecord:
        """The task as it stands; TaskNotFound if unknown, expired or another owner's. An unfinished task
        whose runner is gone comes back `failed` (saved if the store can take it, shown either way)."""
        record = self._load(task_id)
        now = self.now()
        if record is None or record.owner != owner or record.expired(now):
            raise TaskNotFound()
        record = self._with_unsaved(record, now)
        if dead_runner(record, now) is None:
            return record
        try:
            return self._change(task_id, orphaned)
        except StoreUnavailable:
            return orphaned(record, now) or record

    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> TaskRecord:
        """tasks/update: responses to outstanding keys are stored for the runner; other keys are ignored."""
        return self._change(task_id, lambda record, now: with_answers(record, responses, now), owner)

    def request_cancel(self, task_id: str, owner: str) -> TaskRecord:
        """tasks/cancel: sets the flag the runner polls; a finished task stays as it is."""
        return self._change(task_id, with_cancel_request, owner)

    # --- what the runner does -----------------------------------------------------------------------------------

    def set_status(self, task_id: str, status: str, message: Optional[str] = None) -> TaskRecord:
        """`working` (a new message; outstanding input withdrawn) or `cancelled` (the work has stopped)."""
        return self._change(task_id, lambda record, now: with_status(record, status, message, now))

    def need_input(self, task_id: str, requests: Mapping[str, Any], message: Optional[str] = None) -> TaskRecord:
        """input_required with these requests added to the outstanding ones; each key new for this task."""
        return self._change(task_id, lambda record, now: with_input(record, requests, message, now))

    def take_answers(self, task_id: str) -> dict[str, Any]:
        """The responses delivered since the last call, removed from the store."""
        taken: dict[str, Any] = {}

        def take(record: TaskRecord, now: int) -> Optional[TaskRecord]:
            taken.clear()  # a backend may run a change again after a conflict: only the last run counts
            taken.update(record.answers)
            return without_answers(record, now)

        self._change(task_id, take)
        return taken

    def finish(self, task_id: str, *, result: Optional[dict[str, Any]] = None, error: Optional[dict[str, Any]] = None,
               message: Optional[str] = None) -> Optional[TaskRecord]:
        """`completed` with a result or `failed` with an error. A result over MAX_RESULT_BYTES or not JSON
        becomes `failed` saying so. None: the store could not save it now; it is kept and saved later."""
        def finish(record: TaskRecord, now: int) -> Optional[TaskRecord]:
            return finished(record, now, result, error, message)

        try:
            return self._change(task_id, finish)
        except StoreUnavailable as problem:
            with self._lock:
                self._unsaved[task_id] = finish
            log.warning("task %s finished but the store could not save it (%s): kept in memory, saved when it can be",
                        task_id, problem.message)
            self._start_upkeep()
            return None

    def cancel_requested(self, task_id: str) -> bool:
        """Should the runner stop? True once cancel was asked, and when the task is gone or already finished
        (expired, or failed by another process that took the runner for dead)."""
        record = self._load(task_id)
        return record is None or record.cancel_requested or record.terminal

    # --- upkeep --------------------------------------------------------------------------------------------------

    def heartbeat(self) -> int:
        """Renews this process's leases (and saves results kept in memory); the number of tasks renewed."""
        self._save_unsaved()
        return self._extend_leases(this_runner().token, self.now() + self.lease_ms)

    def sweep(self) -> Swept:
        """Deletes expired tasks and fails unfinished ones whose runner is gone."""
        now = self.now()
        expired = self._delete_expired(now)
        failed = 0
        for record in self._unfinished_elsewhere(this_runner().token):
            if dead_runner(record, now) is not None:
                try:
                    failed += self._change(record.task_id, orphaned).version != record.version
                except TaskNotFound:
                    pass
        return Swept(expired=expired, orphaned=failed)

    def close(self) -> None:
        """Stops the upkeep thread (saving what it can first) and closes the backend's connections."""
        upkeep, self._upkeep = self._upkeep, None
        if upkeep is not None:
            upkeep.stopping.set()
        if self._unsaved:
            self._save_unsaved()

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- learning of changes ----------------------------------------------------------------------------------

    def on_change(self, callback: Callable[[TaskRecord], None]) -> Callable[[], None]:
        """Calls back with the new record after each change made through this object; returns the unsubscribe."""
        with self._lock:
            self._listeners = (*self._listeners, callback)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(other for other in self._listeners if other is not callback)

        return unsubscribe

    def versions(self, task_ids: Iterable[str]) -> dict[str, int]:
        """The current version of each task that exists: what a poller compares (one query)."""
        return self._load_versions(list(task_ids))

    def wait_for_change(self, task_id: str, version: int, timeout: float) -> Optional[TaskRecord]:
        """Waits until the task's version passes `version`, or `timeout` seconds. The record as it then
        stands (its version tells whether it changed), or None once the task is gone."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            record = self._load(task_id)
            remaining = deadline - time.monotonic()
            if record is None or record.version > version or remaining <= 0:
                return record
            if self.poll_seconds is not None:
                remaining = min(remaining, self.poll_seconds)
            with self._changed:
                if self._generation == seen:
                    self._changed.wait(remaining)

    # --- shared machinery ---------------------------------------------------------------------------------------

    def _change(self, task_id: str, rule: Rule, owner: Optional[str] = None) -> TaskRecord:
        now = self.now()

        def change(record: TaskRecord) -> Optional[TaskRecord]:
            if owner is not None and (record.owner != owner or record.expired(now)):
                raise TaskNotFound()
            return rule(record, now)

        record, changed = self._update(task_id, change)
        if record is None:
            raise TaskNotFound()
        if changed:
            self._announce(record)
        return record

    def _announce(self, record: TaskRecord) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:  # a listener must not undo a change that is already stored
                log.exception("a task listener failed on task %s", record.task_id)

    def _with_unsaved(self, record: TaskRecord, now: int) -> TaskRecord:
        """The record as this process knows it: with a result it could not save yet."""
        rule = self._unsaved.get(record.task_id)
        if rule is None or record.terminal:
            return record
        try:
            return rule(record, now) or record
        except (InvalidTransition, ValueError):
            return record

    def _save_unsaved(self) -> None:
        with self._lock:
            waiting = list(self._unsaved.items())
        for task_id, rule in waiting:
            try:
                self._change(task_id, rule)
            except StoreUnavailable:
                continue  # still no room: the next heartbeat tries again
            except TaskNotFound:
                log.warning("task %s expired before its result could be saved", task_id)
            except InvalidTransition:  # another process failed it (its lease lapsed), or a failed-looking commit took
                log.warning("task %s finished meanwhile: the result kept in memory is not saved", task_id)
            except ValueError as problem:
                log.warning("task %s: its result kept in memory cannot be saved: %s", task_id, problem)
            with self._lock:
                if self._unsaved.get(task_id) is rule:
                    del self._unsaved[task_id]

    def _start_upkeep(self) -> None:
        upkeep = self._upkeep
        if upkeep is None or upkeep.pid != os.getpid():  # none yet, or the one of the process this one forked from
            with self._lock:
                if self._upkeep is upkeep:
                    self._upkeep = _Upkeep(self, self.lease_ms / 3000)
                    self._upkeep.start()

    # --- what a backend supplies --------------------------------------------------------------------------------

    def _admit(self, now: int) -> None:
        """StoreFull if there is no room for another task; by default there always is."""

    def _insert(self, record: TaskRecord, limit: int, now: int) -> None:
        """Stores a new record, atomically with counting the owner's unexpired tasks (too_many_tasks if at limit)."""
        raise NotImplementedError

    def _load(self, task_id: str) -> Optional[TaskRecord]:
        raise NotImplementedError

    def _update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        """Atomically: the record, `change` applied (None: keep it), the result stored. (record, changed);
        (None, False) if there is no such task. An exception from `change` leaves the record as it was."""
        raise NotImplementedError

    def _delete_expired(self, now: int) -> int:
        raise NotImplementedError

    def _unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        """Unfinished tasks whose runner is not the process with this token."""
        raise NotImplementedError

    def _extend_leases(self, token: str, until: int) -> int:
        raise NotImplementedError

    def _load_versions(self, task_ids: list[str]) -> dict[str, int]:
        raise NotImplementedError


class _Upkeep(threading.Thread):
    """Renews this process's leases and sweeps, every third of the lease, while its store lives."""

    def __init__(self, store: TaskStore, interval: float):
        super().__init__(name="mcpserver-task-upkeep", daemon=True)
        self.store = weakref.ref(store)  # the thread must not keep a dropped store alive
        self.interval = interval
        self.pid = os.getpid()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            store = self.store()
            if store is None:
                return
            try:
                store.heartbeat()
                store.sweep()
            except TaskStoreError as problem:
                log.warning("task store upkeep: %s", problem.message)
            except Exception:  # the thread must outlive one bad round
                log.exception("task store upkeep failed")
            del store


class ConnectionPool:
    """A backend's connections: each used by one thread at a time, a few kept for reuse.

    After a fork the child never uses or closes the parent's connections (SQLite and libpq both forbid
    it; closing a PostgreSQL one would end the parent's session): it keeps them referenced and opens its own.
    """

    def __init__(self, connect: Callable[[], Any], close: Callable[[Any], None],
                 broken: tuple[type[BaseException], ...]):
        self._connect = connect
        self._close = close
        self.broken = broken  # exceptions after which a connection is closed rather than reused
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._pid = os.getpid()
        self._inherited: list[Any] = []

    def acquire(self) -> Any:
        with self._lock:
            if self._pid != os.getpid():
                self._inherited.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def release(self, connection: Any, problem: Optional[BaseException] = None) -> None:
        with self._lock:
            reusable = problem is None or not isinstance(problem, self.broken)
            if self._pid == os.getpid() and reusable and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(connection)
                return
        if self._pid == os.getpid():
            self._close(connection)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        if self._pid == os.getpid():
            for connection in idle:
                self._close(connection)


class MemoryTaskStore(TaskStore):
    """The default: tasks in this process's memory, gone with it. Thread-safe; bounded by
    max_tasks_per_owner, max_tasks (all owners) and max_bytes of results."""

    def __init__(self, *, max_tasks: int = DEFAULT_MAX_TASKS, max_bytes: int = DEFAULT_MAX_BYTES, **options: Any):
        super().__init__(**options)
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self._rows_lock = threading.Lock()
        self._tasks: dict[str, TaskRecord] = {}
        self._owned: dict[str, set[str]] = {}
        self._first_expiry: dict[str, int] = {}  # no task of the owner expires before this (absent: none expires)
        self._bytes = 0
        self._next_sweep = 0

    def _admit(self, now: int) -> None:
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_INTERVAL_MS
            self.sweep()
        if len(self._tasks) >= self.max_tasks:
            raise StoreFull(f"The task store is full: it holds {len(self._tasks)} tasks, its limit (max_tasks)")
        if self._bytes >= self.max_bytes:
            raise StoreFull(f"The task store is full: its results take {self._bytes} bytes of memory, "
                            f"its limit is {self.max_bytes} (max_bytes)")

    def _insert(self, record: TaskRecord, limit: int, now: int) -> None:
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

    def _load(self, task_id: str) -> Optional[TaskRecord]:
        return self._tasks.get(task_id)

    def _update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
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

    def _delete_expired(self, now: int) -> int:
        with self._rows_lock:
            expired = [task_id for task_id, record in self._tasks.items() if record.expired(now)]
            for task_id in expired:
                self._drop(task_id)
            return len(expired)

    def _unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        with self._rows_lock:
            return [record for record in self._tasks.values() if not record.terminal and record.runner.token != token]

    def _extend_leases(self, token: str, until: int) -> int:
        from dataclasses import replace

        with self._rows_lock:
            mine = [record for record in self._tasks.values() if not record.terminal and record.runner.token == token]
            for record in mine:
                self._tasks[record.task_id] = replace(record, lease_until=until)
            return len(mine)

    def _load_versions(self, task_ids: list[str]) -> dict[str, int]:
        found = [(task_id, self._tasks.get(task_id)) for task_id in task_ids]
        return {task_id: record.version for task_id, record in found if record is not None}
