"""/healthz and /readyz (`--health`, `create_app(health=True)`): whether the process serves, and whether it can.

Rules of this module:
- /healthz is 200 while the process serves (a liveness probe: failing it means restart me). /readyz is 200 when
  it can serve: the task store answers (when the server has tasks) and the authorization server's keys were
  fetched (when OAuth is configured), else 503 saying why.
- Both are answered to anyone, with no token, and say nothing but that: GET or HEAD only, no body read.
- Neither ever blocks. Readiness is checked off the caller's thread, by a background check every
  CHECK_SECONDS; an answer reads the last result. A check that has not finished within STALE_SECONDS (a store
  that hangs) makes /readyz 503 on its own.
- The answers are `immediate`: fixed, cheap, non-blocking callables the built-in HTTP server's loop calls itself,
  without a worker, so a saturated pool does not make a load balancer drop the replica. Under any other WSGI
  server the app answers them like any request, before authentication.
- Left out of the access log (and of the metrics' refusals) unless `log_health` asks for them.
"""

from __future__ import annotations

import os
import threading
import time

from .. import _log
from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from .._server import Server
    from ..auth import ResourceServer

    Answer = tuple[str, list[tuple[str, str]], bytes]

__all__ = ["CHECK_SECONDS", "HEALTH_PATHS", "STALE_SECONDS", "Health"]

access_log = _log.get("mcpserver.http.access")  # the app's access log: the same line, when log_health asks

HEALTH_PATHS = ("/healthz", "/readyz")
CHECK_SECONDS = 2.0  # between readiness checks: how soon /readyz notices a store that stopped answering
STALE_SECONDS = 10.0  # a check still running after this long (a store that hangs) is not ready
_HEADERS = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")]


def _answer(status: str, text: str, method: Any) -> Answer:
    body = (text + "\n").encode()
    return status, [*_HEADERS, ("Content-Length", str(len(body)))], body if method != "HEAD" else b""


def _not_allowed() -> Answer:
    status, headers, body = _answer("405 Method Not Allowed", "A probe is read with GET", "GET")
    return status, [*headers, ("Allow", "GET, HEAD")], body


class Health:
    """One app's health: the answers the loop may give, and the readiness check behind /readyz."""

    def __init__(self, server: Server, oauth: Optional[ResourceServer], log_health: bool = False):
        self.server = server
        self.oauth = oauth
        self.log_health = log_health
        # (ready, why not, when the check under way began or 0): replaced whole, so a reader needs no lock
        self._state: tuple[bool, str, float] = (False, "the first readiness check has not finished", time.monotonic())
        self._checker_pid = 0  # the process whose check runs: a forked worker starts its own
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._start_checking()

    def immediate(self) -> dict[str, Callable[[str, str], Answer]]:
        """Path -> a callable (method, peer) -> (status line, headers, body): fixed answers that never block."""
        return {"/healthz": self.healthz, "/readyz": self.readyz}

    def healthz(self, method: str, peer: str = "-") -> Answer:
        if method not in ("GET", "HEAD"):
            return _not_allowed()
        return self._logged(_answer("200 OK", "ok", method), method, "/healthz", peer)

    def readyz(self, method: str, peer: str = "-") -> Answer:
        if method not in ("GET", "HEAD"):
            return _not_allowed()
        self._start_checking()
        ready, why, since = self._state
        if since and time.monotonic() - since > STALE_SECONDS:
            ready, why = False, f"the readiness check has not finished for {time.monotonic() - since:.0f} s: {why}"
        answer = _answer("200 OK", "ready", method) if ready else _answer("503 Service Unavailable",
                                                                          f"not ready: {why}", method)
        return self._logged(answer, method, "/readyz", peer)

    def _logged(self, answer: Answer, method: str, path: str, peer: str) -> Answer:
        if self.log_health:
            access_log.info('%s "%s %s" %s - 0.0ms', peer, method, path, answer[0][:3])
        return answer

    def _start_checking(self) -> None:
        if self._checker_pid == os.getpid():
            return
        with self._lock:
            if self._checker_pid != os.getpid():
                self._checker_pid = os.getpid()
                threading.Thread(target=self._check_forever, name="mcpserver-readiness", daemon=True).start()

    def _check_forever(self) -> None:
        while True:
            ready, why, _ = self._state
            self._state = (ready, why, time.monotonic())
            why = self.unready() or ""
            self._state = (not why, why, 0.0)
            time.sleep(CHECK_SECONDS)

    def unready(self) -> Optional[str]:
        """Why the server cannot serve now, or None: may wait (on the store, on the authorization server)."""
        server = self.server
        if server.task_store is not None or any(tool.task != "never" for tool in server.tools.values()):
            try:
                from ..tasks import task_manager

                task_manager(server).tasks.store.load("mcpserver-readiness-probe")
            except Exception as exc:
                return f"the task store does not answer: {exc}"
        if self.oauth is not None:
            return self.oauth.unready()
        return None
