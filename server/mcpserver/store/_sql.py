"""What the SQL task stores share: one table, the same statements, a connection pool, errors translated.

Rules of this module:
- The schema is one table of indexed columns (_task.COLUMNS) and a JSON body. Statements are written
  once, with `?` placeholders; a backend whose driver wants `%s` sets `mark`.
- A backend supplies how to open a connection, how to run a body atomically (`_atomically`: SQLite's
  BEGIN IMMEDIATE, PostgreSQL's transaction), what locks a row or an owner for the rest of it, and how
  its driver's errors become StoreUnavailable (StoreFull for a full disk). Every call goes through
  `_run`, so no driver error reaches the caller untranslated, and a connection that raised one is
  closed instead of reused.
- Every result is read to its end (`_rows`): a statement left unfinished (PyPy's sqlite3 keeps it open)
  would hold a read transaction and pin the connection to an old snapshot.
"""

from __future__ import annotations

from ._sql_sessions import SqlSessionStore
from ._store import ConnectionPool, TaskStore, too_many_tasks
from ._task import COLUMNS, StoreUnavailable, TaskRecord, from_row, to_row

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


class SqlTaskStore(TaskStore):
    """The TaskStore primitives in SQL, for a backend that fills in the hooks below."""

    shared = True
    mark = "?"  # the driver's placeholder
    lock_row = ""  # what makes a read-modify-write's SELECT lock its row (SQLite's write lock covers it)
    serial = "INTEGER PRIMARY KEY"  # the type of a key the database numbers itself, in increasing order
    blob = "BLOB"  # the type of bytes

    def __init__(self, connect: Callable[[], Any], errors: tuple[type[BaseException], ...], **options: Any):
        super().__init__(**options)
        self.errors = errors  # the driver's own errors: translated, and the connection not reused
        self._pool = ConnectionPool(connect, _close, errors)
        self._sessions: Optional[SqlSessionStore] = None

    # --- what a backend supplies ---------------------------------------------------------------------------------

    def _atomically(self, connection: Any, body: Callable[[], T]) -> T:
        raise NotImplementedError

    def _lock_owner(self, connection: Any, owner: str) -> None:
        """Inside _atomically, before an owner's tasks are counted: no other create of that owner may pass."""

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        raise NotImplementedError

    # --- shared --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._sessions is not None:
            self._sessions.close()
        super().close()
        self._pool.close()

    def session_store(self) -> SqlSessionStore:
        """In this database, so that every process sharing it replays a session's streams (one per store)."""
        if self._sessions is None:
            self._sessions = SqlSessionStore(self)
        return self._sessions

    def run_atomically(self, work: Callable[[Any], T], lock: Optional[str] = None) -> T:
        """`work` on a pooled connection, inside one transaction; with `lock`, no other process's transaction with
        the same `lock` runs at once."""
        def body(connection: Any) -> T:
            def locked() -> T:
                if lock is not None:
                    self._lock_owner(connection, lock)
                return work(connection)
            return self._atomically(connection, locked)

        return self._run(body)

    def _run(self, work: Callable[[Any], T]) -> T:
        """`work` on a pooled connection; the driver's errors become StoreUnavailable."""
        try:
            connection = self._pool.acquire()
        except self.errors as error:
            raise self._unavailable(error) from None
        try:
            result = work(connection)
        except self.errors as error:
            self._pool.release(connection, error)
            raise self._unavailable(error) from None
        except BaseException:
            self._pool.release(connection)
            raise
        self._pool.release(connection)
        return result

    def _rows(self, connection: Any, sql: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        return list(connection.execute(sql.replace("?", self.mark), parameters).fetchall())

    def _first(self, connection: Any, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
        rows = self._rows(connection, sql, parameters)
        return rows[0] if rows else None

    def _count(self, connection: Any, sql: str, parameters: tuple[Any, ...]) -> int:
        return int(connection.execute(sql.replace("?", self.mark), parameters).rowcount)

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


def _close(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # a connection that broke may refuse to close; it is dropped all the same
        pass
