"""A task as a store keeps it (spec/TASKS.md §3-§9): its record, the process running it, its row in an SQL store,
and the errors a store raises. The rules of how a record may change are the Tasks wing's (mcpserver.tasks).

Rules of this module:
- A TaskRecord is frozen; the objects it holds (result, error, requests, answers) are shared, not copied: treat
  them as read-only.
- A record belongs to its owner, an opaque principal key ("" when the server has no auth).
- In an SQL store a record is one row: indexed columns (COLUMNS) and the rest as one JSON body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import _json
from ..errors import InternalError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional, Sequence

__all__ = ["CANCELLED", "COLUMNS", "COMPLETED", "DEFAULT_LEASE_MS", "DEFAULT_MAX_TASKS_PER_OWNER", "FAILED",
           "INPUT_REQUIRED", "MAX_RESULT_BYTES", "STATUSES", "TERMINAL", "WORKING", "Runner", "StoreFull",
           "StoreUnavailable", "TaskLimitReached", "TaskRecord", "TaskStoreError", "from_row", "iso_time", "to_row"]

WORKING = "working"  # a task's status: its tool runs
INPUT_REQUIRED = "input_required"  # a task's status: its tool waits for the client's answer (tasks/update)
COMPLETED = "completed"  # a task's status: it ended with a result (an isError one too)
FAILED = "failed"  # a task's status: it ended with an error, or its process died
CANCELLED = "cancelled"  # a task's status: tasks/cancel ended it
STATUSES = (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)  # every status, in the order a task can reach them
TERMINAL = frozenset((COMPLETED, FAILED, CANCELLED))  # the statuses a task never leaves

DEFAULT_LEASE_MS = 30_000  # a runner renews its lease every third of this; far above any clock skew between hosts
DEFAULT_MAX_TASKS_PER_OWNER = 1000  # stored, unexpired tasks (finished ones count until their TTL ends)
MAX_RESULT_BYTES = 8 * 1024 * 1024  # a result as UTF-8 JSON; a 5 MB payload fits even with JSON's escaping

class TaskStoreError(InternalError):
    """The store could not do what was asked (-32603); the message says why."""


class TaskLimitReached(TaskStoreError):
    """An owner already has as many stored tasks as a store allows."""

    http_status = 429


class StoreUnavailable(TaskStoreError):
    """The storage refused: read-only, locked past the busy timeout, damaged, or unreachable."""


class StoreFull(StoreUnavailable):
    """No room: the disk, the store's own size bound, or the memory budget is used up."""


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
