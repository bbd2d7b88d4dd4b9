"""The Tasks extension (io.modelcontextprotocol/tasks, spec/TASKS.md): calls a client polls, and where they live.

    from mcpserver.tasks import SqliteTaskStore

    server.task_store = SqliteTaskStore("tasks.db")     # or --store tasks.db, or postgresql://...

The wing, by role (nothing outside it imports it until a task tool is called or a tasks/* method comes); the
stores themselves, and what a shared one carries besides tasks, are mcpserver.store's (re-exported here):
  _record      how a task's record may change (TASKS.md §4), its limits, the process that runs it
  _operations  Tasks: every operation on tasks, defined once over a store's primitives
  _runner      TaskManager: runs a task tool's call in a thread of its own, through Tasks
  _methods     tasks/get, tasks/update and tasks/cancel, and how a call becomes a task (the core's methods reach
               the wing through these, named here)
"""

from ..store import (
    MemoryTaskStore,
    PostgresTaskStore,
    SqliteTaskStore,
    StoreFull,
    StoreUnavailable,
    TaskLimitReached,
    TaskRecord,
    TaskStore,
    TaskStoreError,
    open_task_store,
)
from ._methods import cancel_task, get_task, listened_tasks, task_manager, task_mode, update_task
from ._operations import Tasks
from ._record import InvalidTransition, TaskNotFound

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
    "cancel_task",
    "get_task",
    "listened_tasks",
    "open_task_store",
    "task_manager",
    "task_mode",
    "update_task",
]
