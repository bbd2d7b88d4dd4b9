"""What the SQL task stores share: one table and the same statements, over an SQL database (_database).

Rules of this module:
- The schema is one table of indexed columns (_task.COLUMNS) and a JSON body. Statements are written
  once, with `?` placeholders (the database puts its driver's in).
- A read-modify-write locks its row (`lock_row`), and a create its owner (`_lock_owner`), for the rest of its
  transaction: two creates cannot both take an owner's last place.
"""

from __future__ import annotations

from ._database import SqlDatabase
from ._sql_sessions import SqlSessionStore
from ._store import TaskStore, too_many_tasks
from ._task import COLUMNS, TaskRecord, from_row, to_row

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, TypeVar

    from ._store import Change

    T = TypeVar("T")

__all__ = ["SqlTaskStore"]

_CHUNK = 500  # ids in one IN (...) list: far below SQLite's limit of 999 parameters on old versions
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM mcpserver_tasks"
_UNFINISHED = "status IN ('working', 'input_required')"
_COUNT = "SELECT count(*) FROM mcpserver_tasks WHERE owner = ? AND (expires_at IS NULL OR expires_at > ?)"
_INSERT = f"INSERT INTO mcpserver_tasks ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_UPDATE = f"UPDATE mcpserver_tasks SET {', '.join(f'{c} = ?' for c in COLUMNS[1:])} WHERE task_id = ?"
_DELETE_EXPIRED = "DELETE FROM mcpserver_tasks WHERE expires_at IS NOT NULL AND expires_at <= ?"
_UNFINISHED_ELSEWHERE = f"{_SELECT} WHERE {_UNFINISHED} AND runner_token != ?"
_COUNT_BY_STATUS = ("SELECT status, count(*) FROM mcpserver_tasks WHERE expires_at IS NULL OR expires_at > ? "
                    "GROUP BY status")
_EXTEND_LEASES = f"UPDATE mcpserver_tasks SET lease_until = ? WHERE runner_token = ? AND {_UNFINISHED}"
INDEXES = (
    "CREATE INDEX mcpserver_tasks_owner ON mcpserver_tasks (owner, expires_at)",
    "CREATE INDEX mcpserver_tasks_expiry ON mcpserver_tasks (expires_at) WHERE expires_at IS NOT NULL",
    f"CREATE INDEX mcpserver_tasks_running ON mcpserver_tasks (runner_token) WHERE {_UNFINISHED}",
)


class SqlTaskStore(TaskStore, SqlDatabase):
    """The TaskStore primitives in SQL, over a database whose backend fills in SqlDatabase's hooks."""

    shared = True

    def __init__(self, connect: Callable[[], Any], errors: tuple[type[BaseException], ...], **options: Any):
        TaskStore.__init__(self, **options)
        SqlDatabase.__init__(self, connect, errors)
        self._sessions: Optional[SqlSessionStore] = None

    # --- shared --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._sessions is not None:
            self._sessions.close()
        TaskStore.close(self)
        SqlDatabase.close(self)

    def session_store(self) -> SqlSessionStore:
        """In this database, so that every process sharing it replays a session's streams (one per store)."""
        if self._sessions is None:
            self._sessions = SqlSessionStore(self)
        return self._sessions

    # --- the primitives TaskStore builds on ---------------------------------------------------------------------

    def insert(self, record: TaskRecord, limit: int, now: int) -> None:
        def check(connection: Any) -> None:
            if self._first(connection, _COUNT, (record.owner, now))[0] >= limit:
                raise too_many_tasks(limit)

        def insert(connection: Any) -> None:
            # First without a lock: an owner at its limit is refused without holding up anyone's writes (its
            # count cannot fall but by expiry, which the count leaves out already, so the refusal is right).
            check(connection)

            def checked_insert() -> None:
                self._lock_owner(connection, record.owner)
                check(connection)  # again under the lock: two creates cannot both take the last place
                self._count(connection, _INSERT, to_row(record))

            self._atomically(connection, checked_insert)

        self._run(insert)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        row = self._run(lambda c: self._first(c, f"{_SELECT} WHERE task_id = ?", (task_id,)))
        return None if row is None else from_row(row)

    def update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        def update(connection: Any) -> tuple[Optional[TaskRecord], bool]:
            row = self._first(connection, f"{_SELECT} WHERE task_id = ?{self.lock_row}", (task_id,))
            if row is None:
                return None, False
            record = from_row(row)
            new = change(record)
            if new is None:
                return record, False
            self._count(connection, _UPDATE, (*to_row(new)[1:], task_id))
            return new, True

        return self._run(lambda connection: self._atomically(connection, lambda: update(connection)))

    def delete_expired(self, now: int) -> int:
        return self._run(lambda c: self._count(c, _DELETE_EXPIRED, (now,)))

    def unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        return [from_row(row) for row in self._run(lambda c: self._rows(c, _UNFINISHED_ELSEWHERE, (token,)))]

    def extend_leases(self, token: str, until: int) -> int:
        return self._run(lambda c: self._count(c, _EXTEND_LEASES, (until, token)))

    def count_by_status(self, now: int) -> dict[str, int]:
        return {str(status): int(count) for status, count in self._run(lambda c: self._rows(c, _COUNT_BY_STATUS,
                                                                                             (now,)))}

    def load_versions(self, task_ids: list[str]) -> dict[str, int]:
        def load(connection: Any) -> dict[str, int]:
            found: dict[str, int] = {}
            for start in range(0, len(task_ids), _CHUNK):
                chunk = tuple(task_ids[start:start + _CHUNK])
                sql = f"SELECT task_id, version FROM mcpserver_tasks WHERE task_id IN ({', '.join('?' * len(chunk))})"
                found.update((task_id, int(version)) for task_id, version in self._rows(connection, sql, chunk))
            return found

        return self._run(load) if task_ids else {}

