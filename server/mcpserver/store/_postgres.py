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
- Times are each process's clock, as in the other stores (TTLs, lastUpdatedAt). A runner on another host is
  judged by its lease alone, and by whether the lease moves, not by its value against a clock
  (tasks._operations.LeaseWatch): a step of either host's wall clock fails no task that runs.
- psycopg's errors become StoreUnavailable (StoreFull for a full disk); the connection is then dropped,
  and the next call opens a new one, so a restarted database server is used again without a restart here.
  An idle connection the restart ended is seen before it is used (its socket is readable): the first request
  after the restart does not fail on it.
- Error messages at open name the database without its password.
"""

from __future__ import annotations

import importlib
import select

from ..errors import ConfigError
from ._bus import PostgresBus
from ._sql import INDEXES, SqlTaskStore
from ._task import StoreFull, StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar

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
    *INDEXES,
)


def redacted(dsn: str) -> str:
    """The connection string without its password, fit for a log line or an error message."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn if "password" not in dsn else "the PostgreSQL database (connection string withheld)"
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresTaskStore(SqlTaskStore):
    """Tasks in the PostgreSQL database `dsn` names (a postgresql:// URL or libpq key=value string)."""

    poll_seconds = 0.25
    mark = "%s"
    lock_row = " FOR UPDATE"
    serial = "BIGSERIAL PRIMARY KEY"
    blob = "BYTEA"

    def __init__(self, dsn: str, **options: Any):
        try:
            self._psycopg: Any = importlib.import_module("psycopg")
        except ImportError as error:  # not installed, or installed without a libpq to load
            raise ConfigError(f"task store {redacted(dsn)} needs psycopg: pip install 'mcpserver[postgres]' "
                              f"({error})") from None
        super().__init__(self._connect, (self._psycopg.Error,), **options)
        self.dsn = dsn
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

    def bus(self) -> PostgresBus:
        return PostgresBus(self)

    # --- what SqlTaskStore asks of a backend ----------------------------------------------------------------------

    def _atomically(self, connection: Any, body: Callable[[], T]) -> T:
        with connection.transaction():
            return body()

    def _lock_owner(self, connection: Any, owner: str) -> None:
        connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (owner,))

    def _stale(self, connection: Any) -> bool:
        # An idle connection has nothing to read; one its server ended has the server's last words (FATAL:
        # terminating connection) or its end waiting. One system call, no round trip.
        if connection.closed or connection.broken:
            return True
        try:
            return bool(select.select([connection.fileno()], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        if isinstance(error, self._psycopg.errors.DiskFull):
            return StoreFull(f"The task store is full: it could not save this ({_first_line(error)})")
        return StoreUnavailable(f"The task store cannot be used: {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
