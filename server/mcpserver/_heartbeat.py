"""Progress heartbeats (`@server.tool(heartbeat=20)`, `Server(heartbeat=20)`, a manifest's "heartbeat"): a call
whose client sent a progressToken hears notifications/progress every N seconds while its tool is silent, so a
client that resets its timeout on progress (the SDKs time out after about 60 s) waits for a long call.

Rules of this module:
- A call beats only when its client sent a progressToken and its transport streams the call's notifications:
  no token, no beat. A server whose calls never beat never imports this module, nor mcpserver._deadlines.
- One thread for every call's beats (mcpserver._deadlines): a heartbeat is one entry in its heap, due N seconds
  after the call last sent progress, the tool's own or a beat, so a tool that reports progress is not beaten.
- A beat restates the last progress sent (its total and message) one step higher (math.nextafter), since the
  spec wants each value above the last; before the tool's first, it says 0. A value of the tool's that a beat
  has reached goes out one step above the beat, with the tool's total and message: nothing goes backwards,
  and nothing the tool says is dropped.
- Beats are decided and written under the flight's lock (Flight.beat), as the tool's own progress is
  (Flight.send): none once the call is answered or cancelled. The call's end, and its cancel, drop the next
  beat at once (stop).
"""

from __future__ import annotations

import math
import threading
import time

from . import _deadlines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._context import Flight

__all__ = ["Heartbeat"]

_INF = float("inf")
_EARLY = 0.001  # seconds a turn may come before its beat is due and still beat: the clock's and the heap's slack


class Heartbeat:
    """The beats of one call, from `with Heartbeat(flight, token, seconds):` around the call to its end."""

    __slots__ = ("_cancel_next", "_every", "_flight", "_lock", "_params", "_sent_at", "_stopped", "_value")

    def __init__(self, flight: Flight, token: Any, every: float):
        self._flight = flight
        self._every = every
        self._params: dict[str, Any] = {"progressToken": token}  # the last progress sent, restated by a beat
        self._value: Optional[float] = None  # the last progress value sent, the tool's or a beat's
        self._sent_at = time.monotonic()
        self._lock = threading.Lock()  # the next turn's entry, against stop()
        self._stopped = False
        self._cancel_next: Optional[Callable[[], None]] = None

    def __enter__(self) -> Heartbeat:
        self._flight.heartbeat = self
        self._flight.on_cancel(self.stop)
        self._next_turn(self._every)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """No more beats: the call has ended, or been cancelled."""
        with self._lock:
            self._stopped = True
            cancel, self._cancel_next = self._cancel_next, None
        if cancel is not None:
            cancel()

    def _next_turn(self, seconds: float) -> None:
        with self._lock:
            if not self._stopped:
                self._cancel_next = _deadlines.after(seconds, self._turn)

    def _turn(self) -> None:
        """On the deadline thread."""
        wait = self._flight.beat()
        if wait is not None:
            self._next_turn(wait)

    # -- under the flight's lock ----------------------------------------------------------------------------

    def passing(self, message: dict[str, Any]) -> dict[str, Any]:
        """The tool's own progress on its way out: above the last beat, and what the next beats restate."""
        params = message["params"]
        if self._value is not None and params["progress"] <= self._value:
            params = {**params, "progress": math.nextafter(self._value, _INF)}
            message = {**message, "params": params}
        self._value, self._params, self._sent_at = params["progress"], params, time.monotonic()
        return message

    def due(self) -> tuple[Optional[dict[str, Any]], float]:
        """(the beat to send now, or None if the call sent progress less than N seconds ago; the seconds until
        the next turn)."""
        silent = time.monotonic() - self._sent_at
        if silent + _EARLY < self._every:
            return None, self._every - silent
        value = 0 if self._value is None else math.nextafter(self._value, _INF)
        self._params = {**self._params, "progress": value}
        self._value, self._sent_at = value, time.monotonic()
        return {"jsonrpc": "2.0", "method": "notifications/progress", "params": self._params}, self._every
