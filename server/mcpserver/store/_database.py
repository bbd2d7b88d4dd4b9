"""An SQL store's database, which everything kept in it shares (a store's tasks, legacy sessions' events, the bus):
a pool of connections, statements with `?` placeholders, transactions, and the driver's errors translated.

Rules of this module:
- A backend (SQLite, PostgreSQL) supplies how to open a connection (`_connect`), how to run a body atomically
  (`_atomically`: SQLite's BEGIN IMMEDIATE, PostgreSQL's transaction), what locks an owner for the rest of it
  (`_lock_owner`), and how its driver's errors become StoreUnavailable (`_unavailable`: StoreFull for a full
  disk). A driver that wants `%s` sets `mark`.
- Every call goes through `_run`, so no driver error reaches the caller untranslated, and a connection that
  raised one is closed instead of reused.
- Every result is read to its end (`_rows`): a statement left unfinished (PyPy's sqlite3 keeps it open)
  would hold a read transaction and pin the connection to an old snapshot.
- Connections come from a pool: each used by one thread at a time, a few kept for reuse. After a fork the
  child never uses or closes the parent's connections (SQLite and libpq both forbid it; closing a PostgreSQL
  one would end the parent's session): it keeps them referenced and opens its own.
"""

from __future__ import annotations

import os
import threading

from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, TypeVar

    from ._task import StoreUnavailable

    T = TypeVar("T")

__all__ = ["MAX_IDLE_CONNECTIONS", "ConnectionPool", "SqlDatabase"]

MAX_IDLE_CONNECTIONS = 8  # a pool keeps this many for reuse and closes any more as they come back


class ConnectionPool:
    """A backend's connections: each used by one thread at a time, a few kept for reuse (and never the parent's
    after a fork)."""

    def __init__(self, connect: Callable[[], Any], close: Callable[[Any], None],
                 broken: tuple[type[BaseException], ...], stale: Callable[[Any], bool] = lambda connection: False):
        self._connect = connect
        self._close = close
        self.broken = broken  # exceptions after which a connection is closed rather than reused
        self._stale = stale  # an idle connection its server has ended (a restart): closed, not handed out
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._idle: list[Any] = []
        self._pid = os.getpid()
        self._inherited: list[Any] = []

    def acquire(self) -> Any:
        while True:
            with self._lock:
                if self._pid != os.getpid():
                    self._inherited.extend(self._idle)
                    self._idle, self._pid = [], os.getpid()
                if not self._idle:
                    break
                connection = self._idle.pop()
            if not self._stale(connection):
                return connection
            self._close(connection)
        return self._connect()

    def release(self, connection: Any, problem: Optional[BaseException] = None) -> None:
        with self._lock:
            reusable = problem is None or not isinstance(problem, self.broken)
            if self._pid == os.getpid() and reusable and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append(connection)
                return
        if self._pid == os.getpid():
            self._close(connection)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        if self._pid == os.getpid():
            for connection in idle:
                self._close(connection)


class SqlDatabase:
    """The database of an SQL store, for a backend that fills in the hooks below."""

    mark = "?"  # the driver's placeholder
    lock_row = ""  # what makes a read-modify-write's SELECT lock its row (SQLite's write lock covers it)
    serial = "INTEGER PRIMARY KEY"  # the type of a key the database numbers itself, in increasing order
    blob = "BLOB"  # the type of bytes

    def __init__(self, connect: Callable[[], Any], errors: tuple[type[BaseException], ...]):
        self.errors = errors  # the driver's own errors: translated, and the connection not reused
        self._pool = ConnectionPool(connect, _close, errors, self._stale)

    def now(self) -> int:
        """The store's clock, in epoch milliseconds."""
        raise NotImplementedError

    def close(self) -> None:
        self._pool.close()

    # --- what a backend supplies ---------------------------------------------------------------------------------

    def _connect(self) -> Any:
        """A new connection (the pool's, and those a bus keeps for itself)."""
        raise NotImplementedError

    def _atomically(self, connection: Any, body: Callable[[], T]) -> T:
        raise NotImplementedError

    def _lock_owner(self, connection: Any, owner: str) -> None:
        """Inside _atomically, before an owner's tasks are counted: no other create of that owner may pass."""

    def _stale(self, connection: Any) -> bool:
        """Whether an idle connection was ended by its server meanwhile (a database server's restart ends them
        all): it is then closed, and another taken, instead of failing the request it was taken for."""
        return False

    def _unavailable(self, error: BaseException) -> StoreUnavailable:
        raise NotImplementedError

    # --- what everything kept in the database uses -------------------------------------------------------------

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


def _close(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # a connection that broke may refuse to close; it is dropped all the same
        pass
