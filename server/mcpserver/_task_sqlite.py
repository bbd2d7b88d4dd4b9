"""SqliteTaskStore: tasks in one SQLite file (the standard library's sqlite3, WAL), shared by every process on a host.

Rules of this module:
- Every process that opens the file (gunicorn workers, the server after a restart) sees the same tasks.
  WAL lets readers go on while one process writes; writers wait for each other up to BUSY_TIMEOUT. Every
  read-modify-write starts with BEGIN IMMEDIATE, so it never has to upgrade a read lock (no deadlock).
- The file says what it is: application_id APPLICATION_ID and user_version SCHEMA_VERSION. Opening
  anything else (not SQLite, damaged, another application's database, another schema version) is a
  ConfigError naming the file and the reason; so is a store that cannot be written (a write is tried at
  every open: read-only file, directory or mount) or one on a file system without WAL.
- synchronous=NORMAL by default: a committed change survives the process being killed (it is in the WAL);
  only a power cut can lose the last ones. synchronous="FULL" syncs every commit to the disk instead.
- Room: create refuses (StoreFull) when the disk has less than reserve_bytes free, or the file is within
  reserve_bytes of max_bytes (SQLite's max_page_count): tasks already running keep room for their results.
  A write that finds the disk full all the same raises StoreFull; finish then keeps the result (_task_store).
- Errors while serving name no file (clients see them as -32603); errors at open name it (the operator does).
- sqlite3 is imported when a store opens: a Python built without it runs every other part of the package.
"""

from __future__ import annotations

import os

from ._task import COLUMNS, MAX_RESULT_BYTES, StoreFull, StoreUnavailable, TaskRecord, from_row, to_row
from ._task_store import ConnectionPool, TaskStore, too_many_tasks
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Optional, TypeVar

    from ._task_store import Change

    T = TypeVar("T")

__all__ = ["APPLICATION_ID", "DEFAULT_RESERVE_BYTES", "SCHEMA_VERSION", "SqliteTaskStore"]

SCHEMA_VERSION = 1
APPLICATION_ID = 0x4D435054  # "MCPT" in the file's header: this file is an mcpserver task store
BUSY_TIMEOUT = 10.0  # seconds a writer waits for another process's write to end
DEFAULT_RESERVE_BYTES = 4 * MAX_RESULT_BYTES
WAL_LIMIT_BYTES = 64 * 1024 * 1024  # the WAL is cut back to this after a checkpoint (a large result grows it)
_CHUNK = 500  # ids in one IN (...) list: far below SQLite's limit of 999 parameters on old versions

SCHEMA = (
    "CREATE TABLE mcpserver_tasks (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL,"
    " version INTEGER NOT NULL, expires_at INTEGER, runner_host TEXT NOT NULL, runner_pid INTEGER NOT NULL,"
    " runner_started INTEGER NOT NULL, runner_token TEXT NOT NULL, lease_until INTEGER NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX mcpserver_tasks_owner ON mcpserver_tasks (owner, expires_at)",
    "CREATE INDEX mcpserver_tasks_expiry ON mcpserver_tasks (expires_at) WHERE expires_at IS NOT NULL",
    "CREATE INDEX mcpserver_tasks_running ON mcpserver_tasks (runner_token)"
    " WHERE status IN ('working', 'input_required')",
    "CREATE TABLE mcpserver_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM mcpserver_tasks"
_INSERT = f"INSERT INTO mcpserver_tasks ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_UPDATE = f"UPDATE mcpserver_tasks SET {', '.join(f'{c} = ?' for c in COLUMNS[1:])} WHERE task_id = ?"
_UNFINISHED = "status IN ('working', 'input_required')"
_COUNT = "SELECT count(*) FROM mcpserver_tasks WHERE owner = ? AND (expires_at IS NULL OR expires_at > ?)"


class SqliteTaskStore(TaskStore):
    """Tasks in the SQLite file at `path`, created if missing. ConfigError if it cannot serve."""

    shared = True
    poll_seconds = 0.1

    def __init__(self, path: str, *, max_bytes: Optional[int] = None, reserve_bytes: int = DEFAULT_RESERVE_BYTES,
                 synchronous: str = "NORMAL", **options: Any):
        super().__init__(**options)
        try:
            import sqlite3
        except ImportError:
            raise ConfigError(f"task store {path}: this Python has no sqlite3 module (it was built without SQLite); "
                              "use the memory store or PostgreSQL") from None
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous is NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._sqlite3 = sqlite3
        self.path = os.path.abspath(path)
        self.max_bytes = max_bytes
        self.reserve_bytes = reserve_bytes
        self.synchronous = synchronous.upper()
        self._page_size = 4096
        self._pool = ConnectionPool(self._connect, _close, (sqlite3.Error,))
        self._open()

    def _connect(self) -> Any:
        connection = self._sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None,
                                           check_same_thread=False)  # a pool hands it to one thread at a time
        try:
            # Each read to its end (see _row): journal_mode=WAL refuses to switch inside a transaction.
            connection.execute(f"PRAGMA synchronous = {self.synchronous}").fetchall()
            connection.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}").fetchall()
            if self.max_bytes is not None:
                connection.execute(f"PRAGMA max_page_count = {max(1, self.max_bytes // self._page_size)}").fetchall()
        except BaseException:
            connection.close()
            raise
        return connection

    def _open(self) -> None:
        if os.path.isdir(self.path):
            raise ConfigError(f"task store {self.path} is a directory; give the path of a file")
        try:
            connection = self._connect()
        except self._sqlite3.Error as error:
            raise _refused(self.path, error) from None
        try:
            self._prepare(connection)
        except self._sqlite3.Error as error:
            raise _refused(self.path, error) from None
        finally:  # not kept: a process that forks after opening (gunicorn --preload) leaves its children none
            connection.close()

    def _prepare(self, connection: Any) -> None:
        mode = _value(connection, "PRAGMA journal_mode = WAL")
        if str(mode).lower() != "wal":
            raise ConfigError(f"task store {self.path} cannot use write-ahead logging (its journal stays {mode}): "
                              "is it read-only, or on a network file system?")
        _transaction(connection, lambda: self._check_schema(connection))
        problems = [row[0] for row in connection.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise ConfigError(f"task store {self.path} is damaged ({'; '.join(problems[:3])}); "
                              "move it aside to start with an empty store")
        self._page_size = _value(connection, "PRAGMA page_size")

    def _check_schema(self, connection: Any) -> None:
        application = _value(connection, "PRAGMA application_id")
        version = _value(connection, "PRAGMA user_version")
        tables = _value(connection, "SELECT count(*) FROM sqlite_master")
        if application == 0 and tables == 0:
            for statement in SCHEMA:
                connection.execute(statement)
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif application != APPLICATION_ID:
            raise ConfigError(f"task store {self.path} is an SQLite database of another application "
                              f"(application_id {application:#x}); give the store a file of its own")
        elif version != SCHEMA_VERSION:
            raise ConfigError(f"task store {self.path} has schema version {version}; this mcpserver reads version "
                              f"{SCHEMA_VERSION} (a newer or older mcpserver wrote it)")
        # A write at every open: a store that cannot be written is refused now, not at its first task.
        connection.execute("INSERT OR REPLACE INTO mcpserver_meta (key, value) VALUES ('opened', ?)",
                           (str(self.now()),))

    def close(self) -> None:
        super().close()
        self._pool.close()

    def _run(self, work: Callable[[Any], T]) -> T:
        """`work` on a pooled connection; sqlite3's errors become StoreUnavailable (StoreFull for a full disk)."""
        sqlite3 = self._sqlite3
        try:
            connection = self._pool.acquire()
        except sqlite3.Error as error:
            raise _unavailable(error) from None
        try:
            result = work(connection)
        except sqlite3.Error as error:
            self._pool.release(connection, error)
            raise _unavailable(error) from None
        except BaseException:
            self._pool.release(connection)
            raise
        self._pool.release(connection)
        return result

    # --- the primitives TaskStore builds on ---------------------------------------------------------------------

    def _admit(self, now: int) -> None:
        try:
            disk = os.statvfs(os.path.dirname(self.path))
        except OSError:
            return
        free = disk.f_bavail * disk.f_frsize
        if free < self.reserve_bytes:
            raise StoreFull(f"The task store is full: its disk has {free >> 20} MiB free, less than the "
                            f"{self.reserve_bytes >> 20} MiB kept so that running tasks can save their results")
        if self.max_bytes is not None:
            used = self._run(lambda c: (_value(c, "PRAGMA page_count") - _value(c, "PRAGMA freelist_count"))
                             * self._page_size)
            if used + self.reserve_bytes > self.max_bytes:
                raise StoreFull(f"The task store is full: it holds {used} bytes of its {self.max_bytes} (max_bytes), "
                                f"and keeps {self.reserve_bytes} for running tasks' results")

    def _insert(self, record: TaskRecord, limit: int, now: int) -> None:
        def check(connection: Any) -> None:
            if _value(connection, _COUNT, (record.owner, now)) >= limit:
                raise too_many_tasks(limit)

        def insert(connection: Any) -> None:
            # First outside the write lock: an owner at its limit is refused without holding up other
            # processes' writes (its count cannot fall but by expiry, which the count leaves out already).
            check(connection)

            def checked_insert() -> None:
                check(connection)  # again under the lock: two creates cannot both take the last place
                connection.execute(_INSERT, to_row(record))

            _transaction(connection, checked_insert)

        self._run(insert)

    def _load(self, task_id: str) -> Optional[TaskRecord]:
        row = self._run(lambda c: _row(c, f"{_SELECT} WHERE task_id = ?", (task_id,)))
        return None if row is None else from_row(row)

    def _update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        def update(connection: Any) -> tuple[Optional[TaskRecord], bool]:
            row = _row(connection, f"{_SELECT} WHERE task_id = ?", (task_id,))
            if row is None:
                return None, False
            record = from_row(row)
            new = change(record)
            if new is None:
                return record, False
            connection.execute(_UPDATE, (*to_row(new)[1:], task_id))
            return new, True

        return self._run(lambda connection: _transaction(connection, lambda: update(connection)))

    def _delete_expired(self, now: int) -> int:
        return int(self._run(lambda c: c.execute("DELETE FROM mcpserver_tasks WHERE expires_at IS NOT NULL"
                                                 " AND expires_at <= ?", (now,)).rowcount))

    def _unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        rows = self._run(lambda c: c.execute(f"{_SELECT} WHERE {_UNFINISHED} AND runner_token != ?",
                                             (token,)).fetchall())
        return [from_row(row) for row in rows]

    def _extend_leases(self, token: str, until: int) -> int:
        return int(self._run(lambda c: c.execute(f"UPDATE mcpserver_tasks SET lease_until = ? WHERE runner_token = ?"
                                                 f" AND {_UNFINISHED}", (until, token)).rowcount))

    def _load_versions(self, task_ids: list[str]) -> dict[str, int]:
        def load(connection: Any) -> dict[str, int]:
            found: dict[str, int] = {}
            for start in range(0, len(task_ids), _CHUNK):
                chunk = task_ids[start:start + _CHUNK]
                found.update(connection.execute("SELECT task_id, version FROM mcpserver_tasks WHERE task_id IN"
                                                f" ({', '.join('?' * len(chunk))})", chunk).fetchall())
            return found

        return self._run(load) if task_ids else {}


def _row(connection: Any, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
    """The first row, or None. Read to the end: a statement PyPy's sqlite3 leaves unfinished holds a read
    transaction open, which would pin this connection to an old snapshot of the file."""
    rows = connection.execute(sql, parameters).fetchall()
    return rows[0] if rows else None


def _value(connection: Any, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
    return _row(connection, sql, parameters)[0]


def _transaction(connection: Any, body: Callable[[], T]) -> T:
    """`body` inside BEGIN IMMEDIATE ... COMMIT; rolled back if anything in it raises."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = body()
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:  # SQLite ends some failed transactions itself (a full disk, for one)
            try:
                connection.execute("ROLLBACK")
            except Exception:  # the error being raised says more than this one
                pass
        raise
    return result


def _close(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # a connection that broke may refuse to close; it is dropped all the same
        pass


def _unavailable(error: Exception) -> StoreUnavailable:
    text = str(error)
    if "full" in text:
        return StoreFull(f"The task store is full: it could not save this ({text})")
    return StoreUnavailable(f"The task store cannot be used: {text}")


def _refused(path: str, error: Exception) -> ConfigError:
    text = str(error)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return ConfigError(f"task store {path} is not an SQLite database or is damaged ({text}); "
                           "move it aside to start with an empty store")
    if "readonly" in text or "read-only" in text or "unable to open" in text or "permission" in text:
        return ConfigError(f"task store {path} cannot be written ({text}): check the permissions of the file and "
                           "of its directory (SQLite writes -wal and -shm files beside it) and that the mount is "
                           "writable")
    if "full" in text:
        return ConfigError(f"task store {path}: the disk is full ({text})")
    return ConfigError(f"task store {path} cannot be opened: {text}")
