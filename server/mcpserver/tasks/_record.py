"""A task of the Tasks extension (spec/TASKS.md §3-§9): the record a store keeps, and how it may change.

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
  another pid namespace) only an expired lease can.
- Everything a task holds is bounded by a named limit: results (MAX_RESULT_BYTES: a larger one turns
  the task `failed` with a clear error instead of being stored), input requests and answers
  (MAX_INPUT_BYTES, MAX_INPUT_KEYS), the tasks of one owner (stores count them against
  DEFAULT_MAX_TASKS_PER_OWNER).
- The objects a record holds (result, error, requests, answers) are shared, not copied: treat them as
  read-only.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field, replace

from .. import _json
from ..errors import InternalError, InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional, Sequence

__all__ = [
    "CANCELLED",
    "COLUMNS",
    "COMPLETED",
    "DEFAULT_LEASE_MS",
    "DEFAULT_MAX_TASKS_PER_OWNER",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_TTL_MS",
    "FAILED",
    "INPUT_REQUIRED",
    "MAX_INPUT_BYTES",
    "MAX_INPUT_KEYS",
    "MAX_RESULT_BYTES",
    "STATUSES",
    "TERMINAL",
    "WORKING",
    "InputTooLarge",
    "InvalidTransition",
    "Runner",
    "StoreFull",
    "StoreUnavailable",
    "TaskLimitReached",
    "TaskNotFound",
    "TaskRecord",
    "TaskStoreError",
    "iso_time",
    "this_runner",
]

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
STATUSES = (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)
TERMINAL = frozenset((COMPLETED, FAILED, CANCELLED))
# TASKS.md §4: the statuses each status may move to (itself included: a new message, more requests).
NEXT = {WORKING: frozenset((WORKING, INPUT_REQUIRED, *TERMINAL)),
        INPUT_REQUIRED: frozenset((INPUT_REQUIRED, WORKING, *TERMINAL)),
        COMPLETED: frozenset(), FAILED: frozenset(), CANCELLED: frozenset()}

DEFAULT_TTL_MS = 3_600_000  # TASKS.md §8 REC: an hour from creation
DEFAULT_POLL_INTERVAL_MS = 1000
DEFAULT_LEASE_MS = 30_000  # a runner renews its lease every third of this; far above any clock skew between hosts
DEFAULT_MAX_TASKS_PER_OWNER = 1000  # stored, unexpired tasks (finished ones count until their TTL ends)
MAX_RESULT_BYTES = 8 * 1024 * 1024  # a result as UTF-8 JSON; a 5 MB payload fits even with JSON's escaping
MAX_INPUT_BYTES = 1024 * 1024  # the requests of one need_input, the responses of one answer
MAX_INPUT_KEYS = 256  # input keys one task may issue over its life (keys are never reused, §6)
INTERNAL_ERROR = -32603


class TaskNotFound(InvalidParams):
    """Unknown, expired, or another owner's: the same answer for all three (TASKS.md §5, §9)."""

    def __init__(self) -> None:
        super().__init__("Failed to retrieve task: Task not found")


class InputTooLarge(InvalidParams):
    """Input requests or responses over MAX_INPUT_BYTES."""


class TaskStoreError(InternalError):
    """The store could not do what was asked (-32603); the message says why."""


class TaskLimitReached(TaskStoreError):
    """An owner already has as many stored tasks as a store allows."""

    http_status = 429


class StoreUnavailable(TaskStoreError):
    """The storage refused: read-only, locked past the busy timeout, damaged, or unreachable."""


class StoreFull(StoreUnavailable):
    """No room: the disk, the store's own size bound, or the memory budget is used up."""


class InvalidTransition(TaskStoreError):
    """A change TASKS.md §4 forbids: a terminal task never changes."""


@dataclass(frozen=True)
class Runner:
    """The process running a task: enough to tell, on the same host, whether it is still alive."""

    host: str  # node name, boot id and pid namespace: where `pid` means the same process table
    pid: int
    started: int  # its start time in clock ticks since boot (pids are reused); 0 where unknown
    token: str  # random for each process: "is it me" without comparing the rest


@dataclass(frozen=True)
class TaskRecord:
    """One task as a store keeps it. Times are epoch milliseconds."""

    task_id: str
    owner: str
    status: str
    created_at: int
    last_updated_at: int
    ttl_ms: Optional[int]  # None: kept until deleted
    poll_interval_ms: Optional[int]
    runner: Runner
    lease_until: int  # the runner renews it; past it, another host may declare the runner dead
    status_message: Optional[str] = None
    result: Optional[dict[str, Any]] = None  # completed
    error: Optional[dict[str, Any]] = None  # failed: {code, message, data?}
    input_requests: Mapping[str, Any] = field(default_factory=dict)  # outstanding key -> request
    answers: Mapping[str, Any] = field(default_factory=dict)  # answered, not yet taken by the runner
    issued: tuple[str, ...] = ()  # every input key this task has issued: a key is never issued twice
    cancel_requested: bool = False
    result_bytes: int = 0  # the result's size as UTF-8 JSON, measured once: what a memory budget counts
    version: int = 1  # moves on every change, visible or not: what a poller compares

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> Optional[int]:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms

    def expired(self, now: int) -> bool:
        expires = self.expires_at
        return expires is not None and now >= expires

    def detailed(self) -> dict[str, Any]:
        """The task as `tasks/get` and `notifications/tasks` show it (DetailedTask, TASKS.md §4), without
        the envelope (`resultType`, `_meta`) the protocol adds."""
        shown: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message is not None:
            shown["statusMessage"] = self.status_message
        shown.update(createdAt=iso_time(self.created_at), lastUpdatedAt=iso_time(self.last_updated_at),
                     ttlMs=self.ttl_ms)
        if self.poll_interval_ms is not None:
            shown["pollIntervalMs"] = self.poll_interval_ms
        if self.status == INPUT_REQUIRED:
            shown["inputRequests"] = dict(self.input_requests)
        elif self.status == COMPLETED:
            shown["result"] = self.result
        elif self.status == FAILED:
            shown["error"] = self.error
        return shown


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, e.g. 2026-07-28T09:30:00.250Z. By datetime's arithmetic, not the C
    library's gmtime: a 32-bit time_t (Debian's i386) ends at 2038-01-19, and gmtime raised OverflowError past it."""
    import datetime  # only a task's listing needs it: not every server's start-up

    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


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


def dead_runner(record: TaskRecord, now: int) -> Optional[str]:
    """Why the process running an unfinished task can no longer finish it, or None if it may."""
    runner = record.runner
    if record.terminal or runner.token == this_runner().token:
        return None
    gone = _process_gone(runner)
    if gone:
        return f"The server process that ran this task (pid {runner.pid}) ended before the task finished"
    if gone is None and now > record.lease_until:
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


def orphaned(record: TaskRecord, now: int) -> Optional[TaskRecord]:
    """`failed` because its runner is gone; None if it finished or its runner showed life meanwhile."""
    reason = dead_runner(record, now)
    if reason is None:
        return None
    return _advance(record, now, status=FAILED, status_message=reason, input_requests={}, answers={},
                    error={"code": INTERNAL_ERROR, "message": reason})


# --- a record as the SQL stores keep it: indexed columns, and the rest as one JSON body ---------------------

COLUMNS = ("task_id", "owner", "status", "version", "expires_at", "runner_host", "runner_pid", "runner_started",
           "runner_token", "lease_until", "body")


def to_row(record: TaskRecord) -> tuple[Any, ...]:
    """The record's values in COLUMNS order."""
    body = {"createdAt": record.created_at, "lastUpdatedAt": record.last_updated_at, "ttlMs": record.ttl_ms,
            "pollIntervalMs": record.poll_interval_ms, "statusMessage": record.status_message,
            "result": record.result, "error": record.error, "inputRequests": record.input_requests,
            "answers": record.answers, "issued": record.issued, "cancelRequested": record.cancel_requested,
            "resultBytes": record.result_bytes}
    runner = record.runner
    # dumps_bytes escapes a lone surrogate (from a client's \ud800) that UTF-8 columns could not hold.
    return (record.task_id, record.owner, record.status, record.version, record.expires_at, runner.host,
            runner.pid, runner.started, runner.token, record.lease_until, _json.dumps_bytes(body).decode("utf-8"))


def from_row(row: Sequence[Any]) -> TaskRecord:
    task_id, owner, status, version, _expires, host, pid, started, token, lease_until, text = row
    # The store wrote it: json's own decoder, without _json's depth limit for hostile input, which a deep
    # but valid tool result could exceed (the client's input reached the store through that limit already).
    body = json.loads(text)
    return TaskRecord(task_id=task_id, owner=owner, status=status, version=version, lease_until=lease_until,
                      runner=Runner(host=host, pid=pid, started=started, token=token),
                      created_at=body["createdAt"], last_updated_at=body["lastUpdatedAt"], ttl_ms=body["ttlMs"],
                      poll_interval_ms=body["pollIntervalMs"], status_message=body["statusMessage"],
                      result=body["result"], error=body["error"], input_requests=body["inputRequests"],
                      answers=body["answers"], issued=tuple(body["issued"]), cancel_requested=body["cancelRequested"],
                      result_bytes=body["resultBytes"])
