"""Tasks (the io.modelcontextprotocol/tasks extension, spec/TASKS.md): a tools/call the client polls.

Rules of this module:
- A tool says how it runs (`task=`): "never" (the default), "optional" (a task whenever the request
  declared the extension, else a plain call) or "required" (-32021 naming the extension to a request
  that did not declare it). A legacy session never gets a task (TASKS.md §1).
- The tool's code is the same as in a plain call. It runs on a task thread from the start. Until the
  call is announced as a task it is still the request's: input it asks is asked the MRTR way
  (input_required, the tool runs again with the answers, TASKS.md §10), and a cancel of the request
  stops it. The call becomes a task, and the request is answered with CreateTaskResult, when the
  tool calls `ctx.start_task()` or reports progress, when ANNOUNCE_AFTER has passed, or when it ends
  first (then the task is already finished). Only a record `tasks/get` can read is announced.
- From then on input is asked through the task (input_required with its requests, answered by
  tasks/update), progress becomes the task's statusMessage, and only tasks/cancel stops it (a
  command tool's process group is killed as on a cancelled call). The tool's result is the task's
  result; a JSON-RPC error it raises makes the task failed; a tool error is a completed isError.
- Every task belongs to its caller (TaskManager.owner): another principal's id is "not found".
- At most MAX_RUNNING_TASKS run at once in a process; more wait their turn, `working`. A task still
  running when the server stops is marked failed saying so; one whose process died is marked failed
  by the store (mcpserver.tasks: TaskStore, through Tasks).
"""

from __future__ import annotations

import contextvars
import threading
import time

from .. import _json, _log
from .._context import Cancelled, Context, Flight, InputRequired
from .._forks import renew_at_fork
from ..errors import InternalError, ProtocolError
from ..store import shared
from ._operations import Tasks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from .._server import Server
    from ..store import TaskRecord

__all__ = ["ANNOUNCE_AFTER", "MAX_RUNNING_TASKS", "TaskManager"]

log = _log.get("mcpserver.tasks")

ANNOUNCE_AFTER = 0.1  # seconds a task tool runs as the request before it is announced as a task
MAX_RUNNING_TASKS = 64  # task threads at once in a process; more wait their turn
STATUS_WRITE_EVERY = 0.5  # seconds between progress messages written to the store: a busy loop cannot flood it
CANCEL_POLL = 0.25  # seconds between looks at the store for tasks/cancel (another process may have asked)


class TaskManager:
    """The tasks of one Server: its store, the task threads, and the watch for cancels."""

    def __init__(self, server: Server):
        self.tasks = Tasks(shared(server).store)
        # A change made through this process's store reaches the listeners of that task. (Changes other
        # processes of a shared store make are seen by polling tasks/get.)
        self.tasks.on_change(lambda record: server.subscriptions.task_changed(record.task_id, record.detailed()))
        self._slots = threading.BoundedSemaphore(MAX_RUNNING_TASKS)
        self._lock = threading.Lock()
        renew_at_fork(self, "_slots", "_lock")
        self._running: dict[str, Flight] = {}  # announced and still running here: what a cancel must reach
        self._watcher: Optional[threading.Thread] = None

    @staticmethod
    def owner(context: Context) -> str:
        """Who a task belongs to: the OAuth principal, else "" (no auth: the unguessable id is the capability)."""
        principal = context.principal
        return "" if principal is None else _json.dumps([principal.subject, principal.client_id])

    # -- a task tool's call ------------------------------------------------------------------------------

    def call(self, context: Context, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a task tool for `context`'s request; the CreateTaskResult, once announced. Raises what the
        request must end in: InputRequired (MRTR before the task), Cancelled, or a ProtocolError."""
        task = _TaskRun(self, context)
        request_flight = context.flight
        context.flight = task.flight
        context.task = task
        request_flight.on_cancel(task.request_cancelled)
        # The task's thread starts in the request's context: the request's span (mcpserver._tracing) is the
        # parent of the tool's own spans there too.
        threading.Thread(target=contextvars.copy_context().run, args=(task.execute, run), name="mcpserver-task",
                         daemon=True).start()
        return task.wait_for_announcement()

    def announce(self, task: _TaskRun) -> TaskRecord:
        record = self.tasks.create(self.owner(task.context))
        with self._lock:
            self._running[record.task_id] = task.flight
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch_cancels, name="mcpserver-task-cancels",
                                                 daemon=True)
                self._watcher.start()
        return record

    def finished(self, task_id: str) -> None:
        with self._lock:
            self._running.pop(task_id, None)

    def _watch_cancels(self) -> None:
        """tasks/cancel may reach another process of the store: look for the flag every CANCEL_POLL."""
        while True:
            time.sleep(CANCEL_POLL)
            with self._lock:
                running = list(self._running.items())
            for task_id, flight in running:
                try:
                    if self.tasks.cancel_requested(task_id):
                        flight.cancel()
                except ProtocolError as problem:  # the store is unreachable for now: try again later
                    log.warning("cannot read task %s from the store: %s", task_id, problem.message)

    def slot(self) -> threading.BoundedSemaphore:
        return self._slots

    # -- the client's task methods -----------------------------------------------------------------------

    def get(self, task_id: str, context: Context) -> dict[str, Any]:
        return self.tasks.get(task_id, self.owner(context)).detailed()

    def owned(self, task_ids: list[str], context: Context) -> list[str]:
        """Those of `task_ids` the caller may see."""
        owner, seen = self.owner(context), []
        for task_id in dict.fromkeys(task_ids):
            try:
                self.tasks.get(task_id, owner)
            except ProtocolError:  # not found, or another principal's: left out
                continue
            seen.append(task_id)
        if seen:  # a listener follows them: their runner's end must reach it even if this process runs no task
            self.tasks.follow()
        return seen

    def update(self, task_id: str, responses: dict[str, Any], context: Context) -> dict[str, Any]:
        self.tasks.answer(task_id, self.owner(context), responses)
        return {}

    def cancel(self, task_id: str, context: Context) -> dict[str, Any]:
        self.tasks.request_cancel(task_id, self.owner(context))
        with self._lock:
            flight = self._running.get(task_id)
        if flight is not None:  # running here: stop it now rather than at the next look
            flight.cancel()
        return {}

    def shutdown(self) -> None:
        """The server is stopping: tasks still running here can no longer finish; say so."""
        with self._lock:
            running, self._running = list(self._running), {}
        for task_id in running:
            try:
                self.tasks.finish(task_id, error={"code": -32603, "message": "The server stopped before the task "
                                                                           "finished"})
            except ProtocolError:
                pass


class _TaskRun:
    """One task tool's call, from the tool's side (Context.task) and the request's."""

    def __init__(self, manager: TaskManager, context: Context):
        self.manager = manager
        self.context = context
        self.flight = Flight(principal=context.principal)  # the task's own: a cancel of the request reaches it
        # only before the announcement
        self.record: Optional[TaskRecord] = None  # set once announced
        self._lock = threading.Condition()
        self._outcome: Optional[tuple[str, Any]] = None  # before the announcement: how the run ended
        self._mrtr = False  # the tool asked the MRTR way: never announced, the request answers input_required
        self._last_status = 0.0

    # -- the request's side ------------------------------------------------------------------------------

    def wait_for_announcement(self) -> dict[str, Any]:
        with self._lock:
            self._lock.wait_for(lambda: self.record is not None or self._outcome is not None, ANNOUNCE_AFTER)
            if self.record is None and self._outcome is None and not self._mrtr:
                self._announce_locked()
            self._lock.wait_for(lambda: self.record is not None or self._outcome is not None)  # MRTR: ending
            outcome = self._outcome
        if self.record is None and outcome is not None:  # ended before the announcement, the MRTR way
            raise outcome[1]
        assert self.record is not None
        return {"resultType": "task", **_created(self.record)}

    def request_cancelled(self) -> None:
        with self._lock:
            if self.record is None:
                self.flight.cancel()

    # -- the tool's side ---------------------------------------------------------------------------------

    def start(self) -> None:
        """ctx.start_task(): announce now."""
        with self._lock:
            if self.record is None and self._outcome is None and not self._mrtr:
                self._announce_locked()

    def _announce_locked(self) -> None:
        try:
            self.record = self.manager.announce(self)
        except ProtocolError as refused:  # the store refused (limit, full, unreachable): the request fails
            self._outcome = ("raise", refused)
            self.flight.cancel()
        self._lock.notify_all()

    def progress(self, done: float, total: Optional[float], message: Optional[str]) -> None:
        """Progress announces the task, then becomes its statusMessage (at most every STATUS_WRITE_EVERY)."""
        self.start()
        if self.record is None or time.monotonic() - self._last_status < STATUS_WRITE_EVERY:
            return
        self._last_status = time.monotonic()
        shown = f"{done:g}" + (f"/{total:g}" if total is not None else "") + (f": {message}" if message else "")
        try:
            self.manager.tasks.set_status(self.record.task_id, "working", shown)
        except ProtocolError:  # a status message is not worth failing the work for
            pass

    def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Input asked during the task: input_required until tasks/update has answered every key."""
        assert self.record is not None
        task_id = self.record.task_id
        tasks = self.manager.tasks
        record = tasks.need_input(task_id, requests)
        answers: dict[str, Any] = {}
        while not self.flight.cancelled:
            answers.update(tasks.take_answers(task_id))
            if all(key in answers for key in requests):
                return answers
            record = tasks.wait_for_change(task_id, record.version, CANCEL_POLL) or record
        raise Cancelled(f"task {task_id} was cancelled while it waited for input")

    def keep_as_request(self) -> bool:
        """The tool asks for input: True (and the call will not be announced) while it is still the
        request's, so the input is asked the MRTR way; False once it is a task."""
        with self._lock:
            if self.record is None:
                self._mrtr = True
            return self.record is None

    # -- the task thread ---------------------------------------------------------------------------------

    def execute(self, run: Callable[[], dict[str, Any]]) -> None:
        with self.manager.slot():
            outcome = self._run(run)
        with self._lock:
            if self.record is None:
                if outcome[0] == "raise" and isinstance(outcome[1], (InputRequired, Cancelled)):
                    if self._outcome is None:  # else the store refused the task, which the request says
                        self._outcome = outcome  # the request answers for it: MRTR, or nothing at all
                    self._lock.notify_all()
                    return
                self._announce_locked()  # finished before the announcement: still a task, already done
                if self.record is None:
                    return
        self._store_outcome(outcome)

    def _run(self, run: Callable[[], dict[str, Any]]) -> tuple[str, Any]:
        try:
            return "result", run()
        except (InputRequired, Cancelled, ProtocolError) as ended:
            return "raise", ended
        except Exception as exc:  # Tool.call turns the tool's own failures into results: this is ours
            log.exception("task tool failed")
            return "raise", InternalError(f"Internal error: {type(exc).__name__}")

    def _store_outcome(self, outcome: tuple[str, Any]) -> None:
        assert self.record is not None
        task_id = self.record.task_id
        tasks = self.manager.tasks
        try:
            kind, value = outcome
            if kind == "result":
                tasks.finish(task_id, result={"resultType": "complete", **value})
            elif isinstance(value, Cancelled):
                tasks.set_status(task_id, "cancelled", "Cancelled by tasks/cancel")
            elif isinstance(value, InputRequired):  # MRTR after the announcement cannot be answered
                tasks.finish(task_id, error=InternalError("The tool asked for input the MRTR way inside a "
                                                          "task").to_error())
            else:
                tasks.finish(task_id, error=value.to_error())
        except ProtocolError as problem:
            log.warning("task %s could not be recorded as ended: %s", task_id, problem.message)
        finally:
            self.manager.finished(task_id)


def _created(record: TaskRecord) -> dict[str, Any]:
    """CreateTaskResult's task fields: flat, never a result, an error or input (TASKS.md §3)."""
    shown = record.detailed()
    for key in ("result", "error", "inputRequests"):
        shown.pop(key, None)
    return shown
