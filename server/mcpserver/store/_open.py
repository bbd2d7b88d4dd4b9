"""Which task store a setting names: what `--store` (or `--task-store`) and `create_app(task_store=...)` are given.

- None or "memory": MemoryTaskStore, the default (this process only).
- "postgresql://..." or "postgres://...": PostgresTaskStore (the `mcpserver[postgres]` extra).
- Anything else is the path of an SQLite file, created if missing ("sqlite:" before it is allowed).
- A TaskStore object is used as it is.
A store that cannot serve is refused here, with a ConfigError that names it and says why.
"""

from __future__ import annotations

from ..errors import ConfigError
from ._store import MemoryTaskStore, TaskStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Union

__all__ = ["open_task_store"]


def open_task_store(spec: Optional[Union[str, TaskStore]] = None, **options: Any) -> TaskStore:
    """The store `spec` names; `options` go to its constructor (max_tasks_per_owner, lease_ms, ...)."""
    if isinstance(spec, TaskStore):
        return spec
    if spec is None or spec == "memory":
        return MemoryTaskStore(**options)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"task store {spec!r}: give 'memory', the path of an SQLite file, or a postgresql:// URL")
    if spec.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresTaskStore

        return PostgresTaskStore(spec, **options)
    from ._sqlite import SqliteTaskStore

    return SqliteTaskStore(spec[len("sqlite:"):] if spec.startswith("sqlite:") else spec, **options)
