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

from ..errors import ConfigError
from ._bus import SqliteBus
from ._sql import INDEXES, SqlTaskStore
from ._task import MAX_RESULT_BYTES, StoreFull, StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, TypeVar

    T = TypeVar("T")

__all__ = ["APPLICATION_ID", "DEFAULT_RESERVE_BYTES", "SCHEMA_VERSION", "SqliteTaskStore"]

SCHEMA_VERSION = 1
APPLICATION_ID = 0x4D435054  # "MCPT" in the file's header: this file is an mcpserver task store
BUSY_TIMEOUT = 10.0  # seconds a writer waits for another process's write to end
DEFAULT_RESERVE_BYTES = 4 * MAX_RESULT_BYTES
WAL_LIMIT_BYTES = 64 * 1024 * 1024  # the WAL is cut back to this after a checkpoint (a large result grows it)

SCHEMA = (
    "CREATE TABLE mcpserver_tasks (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL,"
    " version INTEGER NOT NULL, expires_at INTEGER, runner_host TEXT NOT NULL, runner_pid INTEGER NOT NULL,"
    " runner_started INTEGER NOT NULL, runner_token TEXT NOT NULL, lease_until INTEGER NOT NULL, body TEXT NOT NULL)",
    *INDEXES,
    "CREATE TABLE mcpserver_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


class SqliteTaskStore(SqlTaskStore):
    """Tasks in the SQLite file at `path`, created if missing. ConfigError if it cannot serve."""

    poll_seconds = 0.1

    def __init__(self, path: str, *, max_bytes: Optional[int] = None, reserve_bytes: int = DEFAULT_RESERVE_BYTES,
                 synchronous: str = "NORMAL", **options: Any):
        try:
            import sqlite3
        except ImportError:
            raise ConfigError(f"task store {path}: this Python has no sqlite3 module (it was built without SQLite); "
                              "use the memory store or PostgreSQL") from None
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous is NORMAL, FULL or EXTRA, not {synchronous!r}")
        super().__init__(self._connect, (sqlite3.Error,), **options)
        self._sqlite3 = sqlite3
        self.path = os.path.abspath(path)
        self.max_bytes = max_bytes
        self.reserve_bytes = reserve_bytes
        self.synchronous = synchronous.upper()
        self._page_size = 4096
        self._open()

    def _connect(self) -> Any:
        connection = self._sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None,
                                           check_same_thread=False)  # a pool hands it to one thread at a time
        try:
            # Each read to its end (see SqlTaskStore._rows): journal_mode=WAL refuses to switch inside a transaction.
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
        mode = self._first(connection, "PRAGMA journal_mode = WAL")[0]
        if str(mode).lower() != "wal":
            raise ConfigError(f"task store {self.path} cannot use write-ahead logging (its journal stays {mode}): "
                              "is it read-only, or on a network file system?")
        _transaction(connection, lambda: self._check_schema(connection))
        problems = [row[0] for row in connection.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise ConfigError(f"task store {self.path} is damaged ({'; '.join(problems[:3])}); "
                              "move it aside to start with an empty store")
        self._page_size = self._first(connection, "PRAGMA page_size")[0]

    def _check_schema(self, connection: Any) -> None:
        application = self._first(connection, "PRAGMA application_id")[0]
        version = self._first(connection, "PRAGMA user_version")[0]
        tables = self._first(connection, "SELECT count(*) FROM sqlite_master")[0]
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

    def bus(self) -> SqliteBus:
        return SqliteBus(self)

    # --- what SqlTaskStore asks of a backend ----------------------------------------------------------------------

    def admit(self, now: int) -> None:
        try:
            disk = os.statvfs(os.path.dirname(self.path))
        except OSError:
            return
        free = disk.f_bavail * disk.f_frsize
        if free < self.reserve_bytes:
            raise StoreFull(f"The task store is full: its disk has {free >> 20} MiB free, less than the "
                            f"{self.reserve_bytes >> 20} MiB kept so that running tasks can save their results")
        if self.max_bytes is not None:
            used = self._run(lambda c: self._page_size * (self._first(c, "PRAGMA page_count")[0]
                                                           - self._first(c, "PRAGMA freelist_count")[0]))
            if used + self.reserve_bytes > self.max_bytes:
                raise StoreFull(f"The task store is full: it holds {used} bytes of its {self.max_bytes} (max_bytes), "
                                f"and keeps {self.reserve_bytes} for running tasks' results")

    def _atomically(self, connection: Any, body: Callable[[], T]) -> T:
        return _transaction(connection, body)

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        text = str(error)
        if "full" in text:
            return StoreFull(f"The task store is full: it could not save this ({text})")
        return StoreUnavailable(f"The task store cannot be used: {text}")


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
