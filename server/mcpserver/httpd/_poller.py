"""Readiness for the HTTP server's loop: which connections can be read or written, and which hung up.

Rules of this module:
- epoll with EPOLLONESHOT where there is epoll: a connection reports once per arming and falls silent when a
  worker takes it. Elsewhere poll(), with that silence emulated (unregistered once it reported).
- Any thread may arm a connection. With poll() the change is handed to the loop, which applies it before it
  polls; with epoll it takes effect at once.
- Every arming also watches for a hang-up (HUNG_UP). A descriptor is forgotten before it is closed, so an
  arming still queued never reaches the next connection given the same number.
- What runs for every request calls the kernel itself, with no call of ours between: with epoll, `poll` is
  epoll's own, and `arm_open` is epoll's modify (given the mask with ARMED), for a descriptor its caller knows to
  be open (it holds the connection's lock, and the connection is not closed).
"""

from __future__ import annotations

import select
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

__all__ = ["ARMED", "ERR", "HUNG_UP", "HUP", "IN", "ONESHOT", "OUT", "RDHUP", "Poller"]

# Event bits, the same for epoll and poll on Linux. PyPy's select module has no EPOLLRDHUP: Linux's value.
IN, OUT, ERR, HUP = 0x001, 0x004, 0x008, 0x010
RDHUP = getattr(select, "EPOLLRDHUP", 0x2000)
ONESHOT = getattr(select, "EPOLLONESHOT", 1 << 30)
HUNG_UP = ERR | HUP
ARMED = HUNG_UP | ONESHOT  # what every arming adds: a hang-up is watched, and the descriptor reports once


class Poller:
    """Readiness for the loop: epoll with EPOLLONESHOT, so a connection reports once per arming and
    falls silent when a worker takes it; else poll(), with that emulated. Any thread may arm a
    connection; with poll() the change is handed to the loop, which applies it before it polls."""

    def __init__(self, wake: Callable[[], None]):
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._poll = None if self._epoll is not None else select.poll()
        self._wake = wake
        self._lock = threading.Lock()
        self._changes: list[tuple[int, int]] = []  # poll(): (fd, mask) to apply on the loop; mask 0 forgets
        self._persistent: set[int] = set()
        self.loop_thread: Optional[int] = None
        self.poll: Callable[[float], list[tuple[int, int]]] = self._polled
        self.arm_open: Callable[[int, int], None] = self._arm_open
        if self._epoll is not None:
            self.poll, self.arm_open = self._epoll.poll, self._epoll.modify

    def watch(self, fd: int, mask: int) -> None:
        """Report `fd` for every event of `mask` until forgotten (the listening socket, the wake pipe)."""
        self._persistent.add(fd)
        if self._epoll is not None:
            self._epoll.register(fd, mask)
        else:
            assert self._poll is not None
            self._poll.register(fd, mask)

    def add(self, fd: int, mask: int) -> None:
        """A new connection (the loop accepts them)."""
        if self._epoll is not None:
            self._epoll.register(fd, mask | HUNG_UP | ONESHOT)
        else:
            self.arm(fd, mask)

    def arm(self, fd: int, mask: int) -> None:
        """Report the next event of `mask` on `fd`, and a hang-up, once."""
        if self._epoll is not None:
            try:
                self._epoll.modify(fd, mask | HUNG_UP | ONESHOT)
            except OSError:  # closed meanwhile (a hang-up the loop acted on)
                pass
        elif threading.get_ident() == self.loop_thread:
            assert self._poll is not None
            self._poll.register(fd, mask | HUNG_UP)
        else:
            with self._lock:
                self._changes.append((fd, mask | HUNG_UP))
            self._wake()

    def forget(self, fd: int) -> None:
        """Before `fd` is closed: on the loop (poll()), or on any thread (epoll)."""
        self._persistent.discard(fd)
        try:
            if self._epoll is not None:
                self._epoll.unregister(fd)
            else:
                assert self._poll is not None
                with self._lock:  # an arming still queued must not reach the next connection given this fd
                    self._changes = [change for change in self._changes if change[0] != fd]
                self._poll.unregister(fd)
        except (OSError, KeyError):
            pass

    @property
    def closes_anywhere(self) -> bool:
        """Whether any thread may forget and close a connection (else the loop must)."""
        return self._epoll is not None

    def _arm_open(self, fd: int, mask: int) -> None:
        """arm_open with poll(): what arm() does."""
        self.arm(fd, mask & ~ONESHOT)

    def _polled(self, timeout: float) -> list[tuple[int, int]]:
        """poll with poll(): the armings asked for off the loop applied first, then EPOLLONESHOT emulated."""
        assert self._poll is not None
        with self._lock:
            changes, self._changes = self._changes, []
        for fd, mask in changes:
            self._poll.register(fd, mask)
        events = self._poll.poll(timeout * 1000)
        for fd, _ in events:
            if fd not in self._persistent:  # EPOLLONESHOT's silence until the next arming
                self._poll.unregister(fd)
        return events
