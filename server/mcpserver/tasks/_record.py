"""A task of the Tasks extension (spec/TASKS.md §3-§9): how its record may change (the record as a store keeps it,
TaskRecord, is the store's: mcpserver.store).

Rules of this module:
- A TaskRecord is frozen. Every change is a pure function here from one record to the next, and all
  of them end in `_advance`, the one place that enforces TASKS.md §4: `working` <-> `input_required`,
  either of them -> `completed` | `failed` | `cancelled`, and a terminal status never changes again
  (InvalidTransition otherwise). It also moves `version` on every change and `lastUpdatedAt` (strictly
  increasing, so two changes in one millisecond still differ) on every change a client can see.
- A task belongs to its owner, an opaque principal key ("" when the server has no auth): a store
  answers another owner's id exactly as an unknown one (TaskNotFound), so existence never leaks (§9).
- A task records the process that runs it (Runner) and a lease that process renews. A task whose
  runner is gone is turned `failed` with a message saying so, never left `working` (`dead_runner`):
  on this host a pid that no longer names the same process proves it; from another host (or
  another pid namespace) only a lapsed lease can, and lapsed is the caller's to judge (`lapsed`):
  a lease that has not moved for a whole lease by the judging process's own monotonic clock
  (mcpserver.tasks._operations.LeaseWatch). Comparing the lease with the wall clock would fail a task
  whose runner renews it as soon as either host's clock is stepped by more than a lease.
- Everything a task holds is bounded by a named limit: results (MAX_RESULT_BYTES: a larger one turns
  the task `failed` with a clear error instead of being stored), input requests and answers
  (MAX_INPUT_BYTES, MAX_INPUT_KEYS), the tasks of one owner (stores count them against
  DEFAULT_MAX_TASKS_PER_OWNER).
- The objects a record holds (result, error, requests, answers) are shared, not copied: treat them as
  read-only.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import replace

from .. import _json
from ..errors import InvalidParams
from ..store import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    MAX_RESULT_BYTES,
    STATUSES,
    TERMINAL,
    WORKING,
    Runner,
    TaskRecord,
    TaskStoreError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional

__all__ = ["DEFAULT_POLL_INTERVAL_MS", "DEFAULT_TTL_MS", "MAX_INPUT_BYTES", "MAX_INPUT_KEYS", "InputTooLarge",
           "InvalidTransition", "TaskNotFound", "dead_runner", "finished", "new_task", "orphaned", "this_runner",
           "with_answers", "with_cancel_request", "with_input", "with_status", "without_answers"]

# TASKS.md §4: the statuses each status may move to (itself included: a new message, more requests).
NEXT = {WORKING: frozenset((WORKING, INPUT_REQUIRED, *TERMINAL)),
        INPUT_REQUIRED: frozenset((INPUT_REQUIRED, WORKING, *TERMINAL)),
        COMPLETED: frozenset(), FAILED: frozenset(), CANCELLED: frozenset()}

DEFAULT_TTL_MS = 3_600_000  # TASKS.md §8 REC: an hour from creation
DEFAULT_POLL_INTERVAL_MS = 1000
MAX_INPUT_BYTES = 1024 * 1024  # the requests of one need_input, the responses of one answer
MAX_INPUT_KEYS = 256  # input keys one task may issue over its life (keys are never reused, §6)
INTERNAL_ERROR = -32603


class TaskNotFound(InvalidParams):
    """Unknown, expired, or another owner's: the same answer for all three (TASKS.md §5, §9)."""

    def __init__(self) -> None:
        super().__init__("Failed to retrieve task: Task not found")


class InputTooLarge(InvalidParams):
    """Input requests or responses over MAX_INPUT_BYTES."""


class InvalidTransition(TaskStoreError):
    """A change TASKS.md §4 forbids: a terminal task never changes."""


# --- the process that runs tasks ------------------------------------------------------------------------------

_IDENTITY: list[Runner] = []  # this process's Runner, made again after a fork (the pid changes)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read().strip()
    except OSError:  # not Linux, or a /proc we may not read: fall back on the lease
        return ""


def _process_start(pid: int) -> tuple[str, int]:
    """(state, start time in ticks since boot) of a process from /proc; ("", 0) where unknown. Read from its main
    thread's entry, which holds the same two fields: under qemu-user (an image of another CPU, emulated) a process's
    read of its own /proc/PID/stat is answered by qemu, not by the kernel that other processes read, and qemu
    answers only for that path."""
    return _stat_fields(_read(f"/proc/{pid}/task/{pid}/stat"))


def _stat_fields(stat: str) -> tuple[str, int]:
    # The command name (field 2) may hold spaces and parentheses: the fields that follow start after the last ")".
    fields = stat.rpartition(")")[2].split()
    # What qemu-user answers for a process's own /proc/PID/stat (an emulator that answered for the task's entry too):
    # state "0" and a start time of qemu's reckoning, which no other process reads: unknown then, the lease decides.
    if len(fields) < 20 or not fields[19].isdigit() or not fields[0].isalpha():
        return "", 0
    return fields[0], int(fields[19])


def this_runner() -> Runner:
    """This process, as a task records its runner."""
    pid = os.getpid()
    if _IDENTITY and _IDENTITY[0].pid == pid:
        return _IDENTITY[0]
    try:
        pid_namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_namespace = ""
    host = "/".join((os.uname().nodename, _read("/proc/sys/kernel/random/boot_id"), pid_namespace))
    runner = Runner(host=host, pid=pid, started=_process_start(pid)[1], token=secrets.token_hex(8))
    _IDENTITY[:] = [runner]
    return runner


def _process_gone(runner: Runner) -> Optional[bool]:
    """True: that process has ended; False: it still runs; None: cannot tell from here."""
    if runner.host != this_runner().host:
        return None
    try:
        os.kill(runner.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user
        pass
    except OSError:
        return None
    state, started = _process_start(runner.pid)
    if state in ("Z", "X"):  # killed, not yet reaped by its parent: it runs nothing any more
        return True
    if started and runner.started:
        return started != runner.started  # the pid was reused by another process
    return None


def dead_runner(record: TaskRecord, lapsed: Callable[[TaskRecord], bool]) -> Optional[str]:
    """Why the process running an unfinished task can no longer finish it, or None if it may. `lapsed` says
    whether the task's lease has lapsed (asked only of a runner this host cannot see)."""
    runner = record.runner
    if record.terminal or runner.token == this_runner().token:
        return None
    gone = _process_gone(runner)
    if gone:
        return f"The server process that ran this task (pid {runner.pid}) ended before the task finished"
    if gone is None and lapsed(record):
        return "The server process that ran this task stopped renewing its lease (it ended or lost the store)"
    return None


# --- changes: each returns the next record, or None for "nothing to change" -------------------------------

def new_task(owner: str, now: int, *, ttl_ms: Optional[int], poll_interval_ms: Optional[int], lease_ms: int,
             status_message: Optional[str] = None) -> TaskRecord:
    for name, value in (("ttl_ms", ttl_ms), ("poll_interval_ms", poll_interval_ms)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"{name} must be a positive integer or None, not {value!r}")  # TASKS.md §8
    return TaskRecord(task_id=secrets.token_urlsafe(24), owner=owner, status=WORKING, created_at=now,
                      last_updated_at=now, ttl_ms=ttl_ms, poll_interval_ms=poll_interval_ms, runner=this_runner(),
                      lease_until=now + lease_ms, status_message=status_message)


def _advance(record: TaskRecord, now: int, visible: bool = True, **changes: Any) -> TaskRecord:
    """The one way a record changes: TASKS.md §4's transitions checked, version and lastUpdatedAt moved."""
    status = changes.get("status", record.status)
    if status not in NEXT[record.status]:
        raise InvalidTransition(f"Task {record.task_id} is {record.status}; it cannot become {status}"
                                + (" (a finished task never changes)" if record.terminal else ""))
    if visible:
        changes["last_updated_at"] = max(now, record.last_updated_at + 1)
    return replace(record, version=record.version + 1, **changes)


def with_status(record: TaskRecord, status: str, message: Optional[str], now: int) -> TaskRecord:
    """The runner's own status: `working` (a new message, or input no longer wanted) or `cancelled`."""
    if status == INPUT_REQUIRED:
        raise ValueError("input_required comes with its requests: call need_input")
    if status in (COMPLETED, FAILED):
        raise ValueError(f"{status} comes with a result or an error: call finish")
    if status not in STATUSES:
        raise ValueError(f"{status!r} is not a task status")
    # Requests still outstanding are withdrawn: answers to them arriving later are ignored (§6, superseded).
    answers = {} if status == CANCELLED else record.answers
    return _advance(record, now, status=status, status_message=message, input_requests={}, answers=answers)


def _encoded_size(value: Any, what: str) -> int:
    try:
        return len(_json.dumps_bytes(value))
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(f"{what} is not JSON: {error}") from None


def with_input(record: TaskRecord, requests: Mapping[str, Any], message: Optional[str], now: int) -> TaskRecord:
    """More requests for the client (elicitation/create, sampling/createMessage, roots/list): input_required."""
    if not requests or not all(isinstance(key, str) and isinstance(request, dict) and "method" in request
                               for key, request in requests.items()):
        raise ValueError("input requests map a key to a request object with a method")
    reused = sorted(set(requests) & set(record.issued))
    if reused:
        raise ValueError(f"input keys are unique for a task's life (TASKS.md §6); already issued: {reused}")
    if len(record.issued) + len(requests) > MAX_INPUT_KEYS:
        raise ValueError(f"a task issues at most {MAX_INPUT_KEYS} input keys (MAX_INPUT_KEYS)")
    size = _encoded_size(dict(requests), "input requests")
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(f"Input requests of {size} bytes are over the limit of {MAX_INPUT_BYTES} (MAX_INPUT_BYTES)")
    return _advance(record, now, status=INPUT_REQUIRED, status_message=message,
                    input_requests={**record.input_requests, **requests}, issued=(*record.issued, *requests))


def with_answers(record: TaskRecord, responses: Mapping[str, Any], now: int) -> Optional[TaskRecord]:
    """The client's responses: outstanding keys leave inputRequests at once, others are ignored (§6)."""
    accepted = {key: value for key, value in responses.items() if key in record.input_requests}
    if record.terminal or not accepted:
        return None
    size = _encoded_size(accepted, "input responses")
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(f"Input responses of {size} bytes are over the limit of {MAX_INPUT_BYTES}")
    outstanding = {key: value for key, value in record.input_requests.items() if key not in accepted}
    status = record.status if outstanding else WORKING  # every request answered: the work goes on
    return _advance(record, now, status=status, input_requests=outstanding, answers={**record.answers, **accepted})


def without_answers(record: TaskRecord, now: int) -> Optional[TaskRecord]:
    """The runner has taken the answers (a change no client sees)."""
    return _advance(record, now, visible=False, answers={}) if record.answers else None


def with_cancel_request(record: TaskRecord, now: int) -> Optional[TaskRecord]:
    """tasks/cancel: a flag for the runner; idempotent, and a finished task stays as it is (§7)."""
    if record.terminal or record.cancel_requested:
        return None
    return _advance(record, now, visible=False, cancel_requested=True)


def finished(record: TaskRecord, now: int, result: Optional[dict[str, Any]] = None,
             error: Optional[dict[str, Any]] = None, message: Optional[str] = None) -> TaskRecord:
    """`completed` with a result (a tool error included: isError), or `failed` with a JSON-RPC error (§4)."""
    if (result is None) == (error is None):
        raise ValueError("finish takes a result or an error, not both and not neither")
    if result is not None:
        if not isinstance(result, dict):
            raise ValueError(f"a task's result is a result object, not {type(result).__name__}")
        size, error = _stored_size(result)
        if error is None:
            return _advance(record, now, status=COMPLETED, result=result, result_bytes=size, status_message=message,
                            input_requests={}, answers={})
    assert error is not None
    if not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str):
        raise ValueError("a task's error is a JSON-RPC error object: {code: int, message: str, data?}")
    _encoded_size(error, "the error")
    return _advance(record, now, status=FAILED, error=error, input_requests={}, answers={},
                    status_message=message if message is not None else error["message"])


def _stored_size(result: dict[str, Any]) -> tuple[int, Optional[dict[str, Any]]]:
    """The result's size, and the error that replaces it if the store cannot keep it (too large, not JSON)."""
    try:
        size = len(_json.dumps_bytes(result))
    except (TypeError, ValueError, RecursionError) as error:
        return 0, {"code": INTERNAL_ERROR, "message": f"The task's result could not be stored: not JSON ({error})"}
    if size > MAX_RESULT_BYTES:
        return size, {"code": INTERNAL_ERROR, "data": {"bytes": size, "limit": MAX_RESULT_BYTES},
                      "message": f"The task's result is {size} bytes, over the task store's limit of "
                                 f"{MAX_RESULT_BYTES} bytes (MAX_RESULT_BYTES)"}
    return size, None


def orphaned(lapsed: Callable[[TaskRecord], bool]) -> Callable[[TaskRecord, int], Optional[TaskRecord]]:
    """The change to `failed` because its runner is gone (`dead_runner`, with `lapsed`); None from it if the task
    finished or its runner showed life meanwhile."""
    def change(record: TaskRecord, now: int) -> Optional[TaskRecord]:
        reason = dead_runner(record, lapsed)
        if reason is None:
            return None
        return _advance(record, now, status=FAILED, status_message=reason, input_requests={}, answers={},
                        error={"code": INTERNAL_ERROR, "message": reason})

    return change


