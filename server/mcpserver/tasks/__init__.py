"""The Tasks extension (io.modelcontextprotocol/tasks, spec/TASKS.md): calls a client polls, and where they live.

    from mcpserver.tasks import SqliteTaskStore

    server.task_store = SqliteTaskStore("tasks.db")     # or --task-store tasks.db, or postgresql://...

The wing, by role (nothing outside it imports it until a task tool is called, a store is opened, or a legacy
HTTP session first needs what the store keeps for it):
  _record    a task's record, its pure changes (TASKS.md §4) and the errors
  _events    SessionStore: what legacy HTTP sessions keep beyond a connection (their streams' events, for
             Last-Event-ID, and their subscriptions), in memory by default; _sql_sessions in an SQL store's
             database, so another process replays
  _sender    the thread that writes what must not wait for a database (the bus's changes, sessions' events)
  _bus       the notification bus of a shared store: changes to every process's listeners (SQLite, PostgreSQL)
  _store     TaskStore, the interface a backend implements (seven primitives), and MemoryTaskStore, the default
  _sql       what the SQL stores share; _sqlite (one host), _postgres (many hosts, an optional extra)
  _open      a store from what --task-store names
  _shared    the server's store, opened once, and what comes with it (the bus joined to its listeners)
  _operations  Tasks: every operation on tasks, defined once over a store's primitives
  _runner    TaskManager: runs a task tool's call in a thread of its own, through Tasks
  _methods   tasks/get, tasks/update and tasks/cancel, and how a call becomes a task
"""

from ._open import open_task_store
from ._operations import Tasks
from ._postgres import PostgresTaskStore
from ._record import (
    InvalidTransition,
    StoreFull,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
    TaskRecord,
    TaskStoreError,
)
from ._sqlite import SqliteTaskStore
from ._store import MemoryTaskStore, TaskStore

__all__ = [
    "InvalidTransition",
    "MemoryTaskStore",
    "PostgresTaskStore",
    "SqliteTaskStore",
    "StoreFull",
    "StoreUnavailable",
    "TaskLimitReached",
    "TaskNotFound",
    "TaskRecord",
    "TaskStore",
    "TaskStoreError",
    "Tasks",
    "open_task_store",
]
