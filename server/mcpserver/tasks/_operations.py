"""Every operation on tasks, defined once over a store's primitives (mcpserver.tasks.TaskStore): what a client's
requests do, what the runner does, the upkeep of shared stores, and learning of changes.

Rules of this module:
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
  object, in this process; changes other processes made are seen by polling `versions` (one query for
  many tasks) or by `wait_for_change`, which re-reads every `TaskStore.poll_seconds`.
"""

from __future__ import annotations

import os
import threading
import time
import weakref

from .. import _log
from .._forks import renew_at_fork
from ..store import StoreUnavailable, Swept, TaskRecord, TaskStore, TaskStoreError
from ._record import (
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_TTL_MS,
    InvalidTransition,
    TaskNotFound,
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
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping, Optional

    Rule = Callable[[TaskRecord, int], Optional[TaskRecord]]

__all__ = ["Tasks"]

log = _log.get("mcpserver.tasks")


class Tasks:
    """The tasks of one store, as the runner and the tests use them. One per process and store: its listeners,
    the results it could not save yet and its upkeep thread are this process's."""

    def __init__(self, store: TaskStore, monotonic: Callable[[], float] = time.monotonic):
        """`monotonic`: the clock leases are watched by (a test's own)."""
        self.store = store
        self.leases = LeaseWatch(store.lease_ms, monotonic)
        self._lock = threading.Lock()  # listeners and unsaved results
        self._listeners: tuple[Callable[[TaskRecord], None], ...] = ()  # replaced, never changed: read unlocked
        self._unsaved: dict[str, Rule] = {}
        self._changed = threading.Condition()
        renew_at_fork(self, "_lock", "_changed")
        self._generation = 0  # counts changes made through this object: wait_for_change's wake-up
        self._upkeep: Optional[_Upkeep] = None

    # --- what a client's requests do ------------------------------------------------------------------------

    def create(self, owner: str, *, ttl_ms: Optional[int] = DEFAULT_TTL_MS,
               poll_interval_ms: Optional[int] = DEFAULT_POLL_INTERVAL_MS,
               status_message: Optional[str] = None) -> TaskRecord:
        """A new `working` task run by this process. TaskLimitReached past max_tasks_per_owner; StoreFull
        when the store has no room left for another task's result."""
        now = self.store.now()
        record = new_task(owner, now, ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms, lease_ms=self.store.lease_ms,
                          status_message=status_message)
        self.store.admit(now)
        self.store.insert(record, self.store.max_tasks_per_owner, now)
        if self.store.shared:
            self._start_upkeep()
        self._announce(record)
        return record

    def get(self, task_id: str, owner: str) -> TaskRecord:
        """The task as it stands; TaskNotFound if unknown, expired or another owner's. An unfinished task
        whose runner is gone comes back `failed` (saved if the store can take it, shown either way)."""
        record = self.store.load(task_id)
        now = self.store.now()
        if record is None or record.owner != owner or record.expired(now):
            raise TaskNotFound()
        record = self._with_unsaved(record, now)
        if dead_runner(record, self.leases.lapsed) is None:
            return record
        try:
            return self._change(task_id, orphaned(self.leases.lapsed))
        except StoreUnavailable:
            return orphaned(self.leases.lapsed)(record, now) or record

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
        record = self.store.load(task_id)
        return record is None or record.cancel_requested or record.terminal

    # --- upkeep --------------------------------------------------------------------------------------------------

    def follow(self) -> None:
        """A listener here follows tasks: this process sweeps (every third of the lease) as a runner does, so that a
        task whose runner is gone is failed, and the listener told, without a tasks/get to find it."""
        if self.store.shared:
            self._start_upkeep()

    def heartbeat(self) -> int:
        """Renews this process's leases (and saves results kept in memory); the number of tasks renewed."""
        self._save_unsaved()
        return self.store.extend_leases(this_runner().token, self.store.now() + self.store.lease_ms)

    def sweep(self) -> Swept:
        """Deletes expired tasks and fails unfinished ones whose runner is gone."""
        now = self.store.now()
        expired = self.store.delete_expired(now)
        failed = 0
        unfinished = self.store.unfinished_elsewhere(this_runner().token)
        self.leases.forget_all_but({record.task_id for record in unfinished})
        for record in unfinished:
            if dead_runner(record, self.leases.lapsed) is not None:
                try:
                    failed += self._change(record.task_id, orphaned(self.leases.lapsed)).version != record.version
                except TaskNotFound:
                    pass
        return Swept(expired=expired, orphaned=failed)

    def close(self) -> None:
        """Stops the upkeep thread (saving what it can first) and closes the store."""
        upkeep, self._upkeep = self._upkeep, None
        if upkeep is not None:
            upkeep.stopping.set()
        if self._unsaved:
            self._save_unsaved()
        self.store.close()

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
        return self.store.load_versions(list(task_ids))

    def wait_for_change(self, task_id: str, version: int, timeout: float) -> Optional[TaskRecord]:
        """Waits until the task's version passes `version`, or `timeout` seconds. The record as it then
        stands (its version tells whether it changed), or None once the task is gone."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            record = self.store.load(task_id)
            remaining = deadline - time.monotonic()
            if record is None or record.version > version or remaining <= 0:
                return record
            if self.store.poll_seconds is not None:
                remaining = min(remaining, self.store.poll_seconds)
            with self._changed:
                if self._generation == seen:
                    self._changed.wait(remaining)

    # --- shared machinery ---------------------------------------------------------------------------------------

    def _change(self, task_id: str, rule: Rule, owner: Optional[str] = None) -> TaskRecord:
        now = self.store.now()

        def change(record: TaskRecord) -> Optional[TaskRecord]:
            if owner is not None and (record.owner != owner or record.expired(now)):
                raise TaskNotFound()
            return rule(record, now)

        record, changed = self.store.update(task_id, change)
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
                    self._upkeep = _Upkeep(self, self.store.lease_ms / 3000)
                    self._upkeep.start()


class LeaseWatch:
    """Whether the leases of runners this process cannot see have lapsed: a lease has lapsed once it has not moved
    for a whole lease by this process's monotonic clock. A runner renews every third of its lease, whatever its
    wall clock says (a step back writes a smaller value, which is a move too), and a step of this host's wall
    clock moves nothing here. So a task is judged by what its runner does, and a process that first sees a lease
    (just started, say) takes a lease's time to call it lapsed."""

    def __init__(self, lease_ms: int, monotonic: Callable[[], float]):
        self.seconds = lease_ms / 1000
        self._monotonic = monotonic
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._seen: dict[str, tuple[int, float]] = {}  # task id -> (its lease as last read, since when, monotonic)

    def lapsed(self, record: TaskRecord) -> bool:
        now = self._monotonic()
        with self._lock:
            seen = self._seen.get(record.task_id)
            if seen is None or seen[0] != record.lease_until:
                self._seen[record.task_id] = (record.lease_until, now)
                return False
            return now - seen[1] >= self.seconds

    def forget_all_but(self, task_ids: set[str]) -> None:
        """Drops what is known of tasks no longer unfinished elsewhere (the sweep's list): a bounded table."""
        with self._lock:
            self._seen = {task_id: seen for task_id, seen in self._seen.items() if task_id in task_ids}


class _Upkeep(threading.Thread):
    """Renews this process's leases and sweeps, every third of the lease, while its store lives."""

    def __init__(self, tasks: Tasks, interval: float):
        super().__init__(name="mcpserver-task-upkeep", daemon=True)
        self.tasks = weakref.ref(tasks)  # the thread must not keep dropped tasks alive
        self.interval = interval
        self.pid = os.getpid()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            tasks = self.tasks()
            if tasks is None:
                return
            try:
                tasks.heartbeat()
                tasks.sweep()
            except TaskStoreError as problem:
                log.warning("task store upkeep: %s", problem.message)
            except Exception:  # the thread must outlive one bad round
                log.exception("task store upkeep failed")
            del tasks
