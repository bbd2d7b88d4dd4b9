"""PostgresTaskStore: tasks in a PostgreSQL database, shared by every process on every host that reaches it.

The optional extra `mcpserver[postgres]` installs psycopg (3); this is the only module of the package that
imports a third-party package, and only when a store opens, so the rest stays standard library only.

Rules of this module:
- Two tables, `mcpserver_tasks` and `mcpserver_meta` (the schema version), in the connection's default
  schema, created on first open. Processes opening the database at once serialize on an advisory lock;
  a schema version other than SCHEMA_VERSION, or a database that refuses writes (a read-only replica), is
  a ConfigError at open.
- A read-modify-write locks its row (SELECT ... FOR UPDATE); create takes a per-owner advisory lock, so
  two processes creating for one owner at once cannot pass the limit together. Reads are single
  statements (autocommit): no transaction to hold.
- Times are each process's clock, as in the other stores: hosts must agree to well within the lease
  (DEFAULT_LEASE_MS, 30 s). A runner on another host is judged by its lease alone.
- psycopg's errors become StoreUnavailable (StoreFull for a full disk); the connection is then dropped,
  and the next call opens a new one, so a restarted database server is used again without a restart here.
- Error messages at open name the database without its password.
"""

from __future__ import annotations

import importlib

from ._task import COLUMNS, StoreFull, StoreUnavailable, TaskRecord, from_row, to_row
from ._task_store import ConnectionPool, TaskStore, too_many_tasks
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Optional, TypeVar

    from ._task_store import Change

    T = TypeVar("T")

__all__ = ["SCHEMA_VERSION", "PostgresTaskStore"]

SCHEMA_VERSION = 1
CONNECT_TIMEOUT = 10  # seconds
_SETUP_LOCK = 0x4D435054  # the advisory lock key that serializes creating the tables ("MCPT")

SCHEMA = (
    "CREATE TABLE mcpserver_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE mcpserver_tasks (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL,"
    " version BIGINT NOT NULL, expires_at BIGINT, runner_host TEXT NOT NULL, runner_pid BIGINT NOT NULL,"
    " runner_started BIGINT NOT NULL, runner_token TEXT NOT NULL, lease_until BIGINT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX mcpserver_tasks_owner ON mcpserver_tasks (owner, expires_at)",
    "CREATE INDEX mcpserver_tasks_expiry ON mcpserver_tasks (expires_at) WHERE expires_at IS NOT NULL",
    "CREATE INDEX mcpserver_tasks_running ON mcpserver_tasks (runner_token)"
    " WHERE status IN ('working', 'input_required')",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM mcpserver_tasks"
_INSERT = f"INSERT INTO mcpserver_tasks ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
_UPDATE = f"UPDATE mcpserver_tasks SET {', '.join(f'{c} = %s' for c in COLUMNS[1:])} WHERE task_id = %s"
_UNFINISHED = "status IN ('working', 'input_required')"
_COUNT = "SELECT count(*) FROM mcpserver_tasks WHERE owner = %s AND (expires_at IS NULL OR expires_at > %s)"


def redacted(dsn: str) -> str:
    """The connection string without its password, fit for a log line or an error message."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn if "password" not in dsn else "the PostgreSQL database (connection string withheld)"
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresTaskStore(TaskStore):
    """Tasks in the PostgreSQL database `dsn` names (a postgresql:// URL or libpq key=value string)."""

    shared = True
    poll_seconds = 0.25

    def __init__(self, dsn: str, **options: Any):
        super().__init__(**options)
        self.dsn = dsn
        try:
            self._psycopg: Any = importlib.import_module("psycopg")
        except ImportError as error:  # not installed, or installed without a libpq to load
            raise ConfigError(f"task store {redacted(dsn)} needs psycopg: pip install 'mcpserver[postgres]' "
                              f"({error})") from None
        self._pool = ConnectionPool(self._connect, _close, (self._psycopg.Error,))
        self._open()

    def _connect(self) -> Any:
        return self._psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)

    def _open(self) -> None:
        try:
            connection = self._connect()
        except self._psycopg.Error as error:
            raise ConfigError(f"task store {redacted(self.dsn)} cannot be reached: {_first_line(error)}") from None
        try:
            with connection.transaction():
                self._check_schema(connection)
        except self._psycopg.Error as error:
            raise ConfigError(f"task store {redacted(self.dsn)} cannot be used: {_first_line(error)}") from None
        finally:  # not kept: a process that forks after opening (gunicorn --preload) leaves its children none
            connection.close()

    def _check_schema(self, connection: Any) -> None:
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        if connection.execute("SELECT to_regclass('mcpserver_meta')").fetchone()[0] is None:
            for statement in SCHEMA:
                connection.execute(statement)
            connection.execute("INSERT INTO mcpserver_meta (key, value) VALUES ('schema', %s)", (str(SCHEMA_VERSION),))
        row = connection.execute("SELECT value FROM mcpserver_meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != str(SCHEMA_VERSION):
            raise ConfigError(f"task store {redacted(self.dsn)} has schema version {row and row[0]}; this mcpserver "
                              f"reads version {SCHEMA_VERSION}")
        # A write at every open: a database that refuses writes (a read-only replica) is refused now.
        connection.execute("INSERT INTO mcpserver_meta (key, value) VALUES ('opened', %s)"
                           " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(self.now()),))

    def close(self) -> None:
        super().close()
        self._pool.close()

    def _run(self, work: Callable[[Any], T]) -> T:
        """`work` on a pooled connection; psycopg's errors become StoreUnavailable (StoreFull for a full disk)."""
        psycopg = self._psycopg
        try:
            connection = self._pool.acquire()
        except psycopg.Error as error:
            raise self._unavailable(error) from None
        try:
            result = work(connection)
        except psycopg.Error as error:
            self._pool.release(connection, error)
            raise self._unavailable(error) from None
        except BaseException:
            self._pool.release(connection)
            raise
        self._pool.release(connection)
        return result

    def _unavailable(self, error: Exception) -> StoreUnavailable:
        if isinstance(error, self._psycopg.errors.DiskFull):
            return StoreFull(f"The task store is full: it could not save this ({_first_line(error)})")
        return StoreUnavailable(f"The task store cannot be used: {_first_line(error)}")

    # --- the primitives TaskStore builds on ---------------------------------------------------------------------

    def _insert(self, record: TaskRecord, limit: int, now: int) -> None:
        def count(connection: Any) -> int:
            return int(connection.execute(_COUNT, (record.owner, now)).fetchone()[0])

        def insert(connection: Any) -> None:
            # Without a lock first: an owner at its limit is refused in one round trip (its count cannot
            # fall but by expiry, which the count already leaves out, so the refusal is right as of then).
            if count(connection) >= limit:
                raise too_many_tasks(limit)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (record.owner,))
                if count(connection) >= limit:  # again under the lock: two creates cannot both take the last place
                    raise too_many_tasks(limit)
                connection.execute(_INSERT, to_row(record))

        self._run(insert)

    def _load(self, task_id: str) -> Optional[TaskRecord]:
        row = self._run(lambda c: c.execute(f"{_SELECT} WHERE task_id = %s", (task_id,)).fetchone())
        return None if row is None else from_row(row)

    def _update(self, task_id: str, change: Change) -> tuple[Optional[TaskRecord], bool]:
        def update(connection: Any) -> tuple[Optional[TaskRecord], bool]:
            with connection.transaction():
                row = connection.execute(f"{_SELECT} WHERE task_id = %s FOR UPDATE", (task_id,)).fetchone()
                if row is None:
                    return None, False
                record = from_row(row)
                new = change(record)
                if new is None:
                    return record, False
                connection.execute(_UPDATE, (*to_row(new)[1:], task_id))
                return new, True

        return self._run(update)

    def _delete_expired(self, now: int) -> int:
        return int(self._run(lambda c: c.execute("DELETE FROM mcpserver_tasks WHERE expires_at IS NOT NULL"
                                                 " AND expires_at <= %s", (now,)).rowcount))

    def _unfinished_elsewhere(self, token: str) -> list[TaskRecord]:
        rows = self._run(lambda c: c.execute(f"{_SELECT} WHERE {_UNFINISHED} AND runner_token != %s",
                                             (token,)).fetchall())
        return [from_row(row) for row in rows]

    def _extend_leases(self, token: str, until: int) -> int:
        return int(self._run(lambda c: c.execute(f"UPDATE mcpserver_tasks SET lease_until = %s WHERE runner_token = %s"
                                                 f" AND {_UNFINISHED}", (until, token)).rowcount))

    def _load_versions(self, task_ids: list[str]) -> dict[str, int]:
        if not task_ids:
            return {}
        rows = self._run(lambda c: c.execute("SELECT task_id, version FROM mcpserver_tasks WHERE task_id = ANY(%s)",
                                             (task_ids,)).fetchall())
        return {task_id: int(version) for task_id, version in rows}


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _close(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # a broken connection may refuse to close; it is dropped all the same
        pass
