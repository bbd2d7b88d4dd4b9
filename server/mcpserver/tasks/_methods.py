"""The Tasks extension's methods (TASKS.md): how a task tool's call becomes a task, tasks/get, tasks/update and
tasks/cancel, and which tasks a subscriptions/listen stream may follow. Called from mcpserver._methods, which
imports this module only when a task tool or one of these methods is first used.

Every method here needs the extension declared in the request's client capabilities (-32021 without it), and
answers only the caller's own tasks: another owner's is not found, exactly as an unknown one (TASKS.md §9).
"""

from __future__ import annotations

from .._context import Context
from .._server import Server
from .._wire import TASKS_EXTENSION
from ..errors import InvalidParams, MissingClientCapability
from ._runner import TaskManager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["cancel_task", "declares_tasks", "get_task", "listened_tasks", "task_manager", "task_mode", "update_task"]


def task_mode(mode: str, context: Context) -> bool:
    """Whether a task tool's call runs as a task: whenever the request declared the extension; a
    "required" one refuses a request that did not (-32021, TASKS.md §2); a legacy session has none."""
    if context.peer is None and declares_tasks(context.client_capabilities):
        return True
    if mode == "required":
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension "
                                      "(this tool runs only as a task)", data=_NEEDS_TASKS)
    return False


_NEEDS_TASKS: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def declares_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether a request's client capabilities declare the extension (the 2025-11-25 `tasks` slot does not)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def task_manager(server: Server) -> TaskManager:
    """The server's task manager, made (and its store opened) on first use: a server without task tools
    never loads the store. ConfigError if the store cannot serve."""
    return server.component("tasks", lambda: TaskManager(server))  # type: ignore[no-any-return]


def listened_tasks(server: Server, task_ids: Any, context: Context) -> list[str]:
    """The task ids a listen stream may follow: the caller's own (others are left out of the
    acknowledgement, so existence does not leak, TASKS.md §11); -32021 without the extension."""
    if task_ids is None:
        return []
    if not declares_tasks(context.client_capabilities):
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension",
                                      data=_NEEDS_TASKS)
    if not (isinstance(task_ids, list) and all(isinstance(t, str) for t in task_ids)):
        raise InvalidParams("Invalid params: notifications.taskIds must be an array of task ids")
    return task_manager(server).owned(task_ids, context)


def _task_id(params: dict[str, Any], context: Context) -> str:
    if not declares_tasks(context.client_capabilities):
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension",
                                      data=_NEEDS_TASKS)
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        raise InvalidParams('Invalid params: "taskId" must be a string')
    return task_id


def get_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    """tasks/get: the task's status, and its result once it has one (another principal's task is not found)."""
    return task_manager(server).get(_task_id(params, context), context)


def update_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    """tasks/update: the client's answers (inputResponses) to what the task's tool asked."""
    task_id = _task_id(params, context)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams('Invalid params: "inputResponses" must be an object of answers')
    return task_manager(server).update(task_id, responses, context)


def cancel_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    """tasks/cancel: stop the task's tool (a command tool's process group is killed); the task reads cancelled."""
    return task_manager(server).cancel(_task_id(params, context), context)
