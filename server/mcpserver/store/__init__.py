"""The shared store: what the processes serving one server share (--store), and what each keeps for itself when
there is nothing to share. Tasks live here, and so do legacy sessions' events and the changes that make
notifications.

    from mcpserver.store import SqliteTaskStore

    server.task_store = SqliteTaskStore("tasks.db")     # or --store tasks.db, or postgresql://...

The folder, by role (nothing outside it imports it until a task tool is called, a store is opened, or a legacy
HTTP session first needs what the store keeps for it):
  _task      a task as a store keeps it: TaskRecord, Runner, its row; the store's errors
  _events    SessionStore: what legacy HTTP sessions keep beyond a connection (their streams' events, for
             Last-Event-ID, and their subscriptions), in memory by default; _sql_sessions in an SQL store's
             database, so another process replays
  _sender    the thread that writes what must not wait for a database (the bus's changes, sessions' events)
  _database  an SQL store's database, which its tasks, sessions' events and bus share: connections, statements,
             transactions, the driver's errors translated
  _bus       the notification bus of a shared store: changes to every process's listeners (SQLite, PostgreSQL)
  _store     TaskStore, the interface a backend implements (seven primitives), and MemoryTaskStore, the default
  _sql       what the SQL stores share; _sqlite (one host), _postgres (many hosts, an optional extra)
  _open      a store from what --store names
  _shared    the server's store, opened once, and what comes with it (the bus joined to its listeners)
The rules of a task's record, the operations on tasks and their runner are the Tasks wing's (mcpserver.tasks).
"""

from ._events import MAX_SESSION_EVENT_BYTES, MAX_SESSION_EVENTS, MemorySessionStore, Replay, SessionStore
from ._open import open_task_store
from ._postgres import PostgresTaskStore
from ._shared import Shared, shared
from ._sqlite import SqliteTaskStore
from ._store import MemoryTaskStore, Swept, TaskStore
from ._task import (
    CANCELLED,
    COMPLETED,
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_TASKS_PER_OWNER,
    FAILED,
    INPUT_REQUIRED,
    MAX_RESULT_BYTES,
    STATUSES,
    TERMINAL,
    WORKING,
    Runner,
    StoreFull,
    StoreUnavailable,
    TaskLimitReached,
    TaskRecord,
    TaskStoreError,
)

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "DEFAULT_LEASE_MS",
    "DEFAULT_MAX_TASKS_PER_OWNER",
    "FAILED",
    "INPUT_REQUIRED",
    "MAX_RESULT_BYTES",
    "MAX_SESSION_EVENTS",
    "MAX_SESSION_EVENT_BYTES",
    "STATUSES",
    "TERMINAL",
    "WORKING",
    "MemorySessionStore",
    "MemoryTaskStore",
    "PostgresTaskStore",
    "Replay",
    "Runner",
    "SessionStore",
    "Shared",
    "SqliteTaskStore",
    "StoreFull",
    "StoreUnavailable",
    "Swept",
    "TaskLimitReached",
    "TaskRecord",
    "TaskStore",
    "TaskStoreError",
    "open_task_store",
    "shared",
]
