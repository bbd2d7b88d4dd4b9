"""The bus: the changes that make notifications (a list changed, a resource updated, a task's status), carried to every
process sharing the server's store, so that a listener on any process hears a change made on any.

Rules of this module:
- A change reaches the listeners of the process that made it at once, without the bus; what a process reads back
  from the bus with its own origin (token and pid) it skips, so no listener hears a change twice.
- SQLite (SqliteBus): each change a row of a small table, mcpserver_changes. A process with listeners reads
  `PRAGMA data_version` every POLL_SECONDS (it moves only when another connection commits, so an idle store costs
  one pragma) and then the rows after the last it read: a change reaches the other processes within POLL_SECONDS
  and a read. Rows older than KEEP_SECONDS go.
- PostgreSQL (PostgresBus): NOTIFY on CHANNEL with the change as the payload; a process with listeners LISTENs on a
  connection of its own, opened again after an error (changes made while it is down are not heard).
- The memory store has no bus: one process holds every listener.
- A task's change carries only its id: the process that delivers it reads the task from the store, so a result of
  megabytes never rides the bus (PostgreSQL's payloads stop at 8000 bytes).
- Publishing never waits for the database: changes queue for a sender thread (_sender). Threads start in the process
  that needs them, so a store opened before a fork (gunicorn --preload) serves every worker.
"""

from __future__ import annotations

import json
import os
import threading
import uuid

from .. import _log
from .._forks import renew_at_fork
from ._sender import RETRY_SECONDS, Sender

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._database import SqlDatabase

__all__ = ["CHANNEL", "KEEP_SECONDS", "POLL_SECONDS", "Bus", "PostgresBus", "SqliteBus"]

log = _log.get("mcpserver.tasks")

POLL_SECONDS = 0.05  # SQLite: the latency bound, less the read
KEEP_SECONDS = 60  # SQLite: a change row's life; a listener's process reads far more often than that
READY_SECONDS = 2.0  # the first listener waits at most this for the receiver to hear (a database down: not longer)
CHANNEL = "mcpserver_changes"
CHECK_SECONDS = 30.0  # PostgreSQL: between looks at whether the listening connection is still alive
MAX_PAYLOAD_BYTES = 7999  # PostgreSQL's NOTIFY payload bound, less its terminator


class Bus:
    """Carries changes between the processes of one store. `deliver` is called (on the receiving thread) with each
    change another process published; a backend implements `_send` and `_receive`."""

    def __init__(self) -> None:
        self.deliver: Callable[[dict[str, Any]], None] = lambda change: None
        self._token = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._receiving_pid = 0  # the process whose receiver thread runs (0: none yet)
        self._ready = threading.Event()  # the receiver hears from now on
        self._closed = threading.Event()  # the threads end (a PostgreSQL receiver: at its next look, CHECK_SECONDS)
        self._sender = Sender("mcpserver-bus-send", "the notification bus", self._send, self._closed)

    @property
    def origin(self) -> str:
        """Who publishes: a fork shares its parent's token but not its pid."""
        return f"{self._token}:{os.getpid()}"

    def publish(self, change: dict[str, Any]) -> None:
        """Queues `change` (JSON-able) for the other processes; never waits."""
        self._sender.put({**change, "origin": self.origin})

    def flush(self, timeout: float = 10.0) -> bool:
        """Waits until the changes published before are written (or refused); whether that was within `timeout`."""
        return self._sender.flush(timeout)

    def listen(self) -> None:
        """This process has a listener: from now on it hears the others' changes. The first call waits (at most
        READY_SECONDS) until the receiver hears, so a change made just after the first listener opened is not lost."""
        if self._start_receiving():
            self._ready.wait(READY_SECONDS)

    def close(self) -> None:
        """Ends this bus's threads: what is still queued is not sent."""
        self._closed.set()

    def _start_receiving(self) -> bool:
        """Starts the receiver thread in this process unless it runs; whether it was started now."""
        pid = os.getpid()
        if self._receiving_pid == pid:
            return False
        with self._lock:
            if self._receiving_pid == pid:
                return False
            self._receiving_pid = pid
            threading.Thread(target=self._receive_forever, name="mcpserver-bus-receive", daemon=True).start()
            return True

    def _receive_forever(self) -> None:
        while not self._closed.is_set():
            try:
                self._receive()
            except Exception as error:
                if self._closed.is_set():
                    return
                log.warning("the notification bus stopped hearing other processes, listening again in %.0f s: %s",
                            RETRY_SECONDS, error)
            self._closed.wait(RETRY_SECONDS)

    def _heard(self, body: str) -> None:
        change = json.loads(body)
        if change.get("origin") == self.origin:  # this process's own: its listeners heard it already
            return
        try:
            self.deliver(change)
        except Exception:
            log.exception("a change from another process could not be delivered")

    def _send(self, batch: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _receive(self) -> None:
        """Hears changes (calling `_heard` with each) until an error."""
        raise NotImplementedError


class SqliteBus(Bus):
    """The bus of an SQLite store: a table of recent changes, polled."""

    def __init__(self, store: SqlDatabase):
        super().__init__()
        self.store = store
        store._run(lambda connection: connection.execute(
            "CREATE TABLE IF NOT EXISTS mcpserver_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
            " at INTEGER NOT NULL, body TEXT NOT NULL)").fetchall())
        self._sent = 0
        self._last: Optional[int] = None  # the last change read

    def _send(self, batch: list[dict[str, Any]]) -> None:
        now = self.store.now()
        rows = [(now, json.dumps(change, separators=(",", ":"))) for change in batch]
        self._sent += 1
        prune = self._sent % 100 == 1

        def write(connection: Any) -> None:
            def body() -> None:
                connection.executemany("INSERT INTO mcpserver_changes (at, body) VALUES (?, ?)", rows)
                if prune:
                    connection.execute("DELETE FROM mcpserver_changes WHERE at < ?", (now - KEEP_SECONDS * 1000,))
            self.store._atomically(connection, body)
        self.store._run(write)

    def _receive(self) -> None:
        connection = self.store._connect()  # its own: data_version counts the commits of every other connection
        try:
            if self._last is None:  # from now on; after an error, from where it stopped
                self._last = connection.execute("SELECT coalesce(max(seq), 0) FROM mcpserver_changes").fetchall()[0][0]
            self._ready.set()
            version = None
            while not self._closed.is_set():
                seen = connection.execute("PRAGMA data_version").fetchall()[0][0]
                if seen != version:
                    version = seen
                    rows = connection.execute("SELECT seq, body FROM mcpserver_changes WHERE seq > ? ORDER BY seq",
                                              (self._last,)).fetchall()
                    for seq, body in rows:
                        self._last = seq
                        self._heard(body)
                self._closed.wait(POLL_SECONDS)
        finally:
            connection.close()


class PostgresBus(Bus):
    """The bus of a PostgreSQL store: NOTIFY and LISTEN."""

    def __init__(self, store: SqlDatabase):
        super().__init__()
        self.store = store

    def _send(self, batch: list[dict[str, Any]]) -> None:
        payloads = []
        for change in batch:
            payload = json.dumps(change, separators=(",", ":"))
            if len(payload.encode()) > MAX_PAYLOAD_BYTES:
                log.warning("a change of %d bytes is too large for PostgreSQL's NOTIFY: not published", len(payload))
                continue
            payloads.append(payload)

        def notify(connection: Any) -> None:
            for payload in payloads:
                connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        if payloads:
            self.store._run(notify)

    def _receive(self) -> None:
        connection = self.store._connect()
        try:
            connection.execute(f"LISTEN {CHANNEL}")
            self._ready.set()
            while not self._closed.is_set():
                try:
                    notices = connection.notifies(timeout=CHECK_SECONDS)
                except TypeError:  # psycopg 3.1 waits without a bound: only an error the server sends ends it
                    notices = connection.notifies()
                for notice in notices:
                    self._heard(notice.payload)
                connection.execute("SELECT 1")  # a connection that died quietly (the network) raises here
        finally:
            connection.close()
