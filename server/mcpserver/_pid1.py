"""When the server is PID 1 (a container's entrypoint), an init stays PID 1 and the server runs as its child.

PID 1 is where orphans go. A command tool killed at its timeout orphans its grandchildren, and a
PID 1 that never waits for them collects zombies until the container's PID limit runs out; PID 1
also gets no default signal handling. So, like tini or `docker run --init`, the process forks:
the parent reaps every child it is given and forwards signals to the server, and exits with the
server's status; the child is the server, in its own process group (the terminal's foreground one
when there is a terminal), so a Ctrl-C reaches it once.
Set MCPSERVER_NO_INIT=1 to serve as PID 1 directly (when something else reaps).

A stop at any moment of start-up. The kernel throws away a signal sent to PID 1 that has no handler
for it, so `docker stop` in the first moments of a container was lost, and the container killed at the
end of its grace (137). hold() blocks the forwarded signals at the command line's first line: from
there a signal waits, across the re-executions of start-up too (exec keeps both the mask and what is
pending), until the init's handlers take it. The init knows whether its child serves yet: the
transport, once its own handlers are set, says so on a pipe (through the start-up handler it
replaces, mcpserver.__main__.Starting). A stop before that ends the child's start (its start-up
handler exits 0 at once) and the init exits 0, whatever the child's status; a child still starting
KILL_AFTER seconds later (its main thread stuck in a call that does not return to Python, which alone
runs signal handlers) is killed. Before the command line's first line, a signal is the interpreter's:
lost, as PID 1, as for any program that has not yet set a handler.
"""

from __future__ import annotations

import os
import select
import signal

from . import _environment

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["hold", "init_if_pid1", "release"]

FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")
STOPS = (signal.SIGTERM, signal.SIGINT)
KILL_AFTER = 5.0  # seconds a child stopped while starting may take to end its start (docker stop waits 10)
SERVING = b"s"  # what the child writes on the pipe once its transport's handlers are set


def _forwarded() -> set[int]:
    return {getattr(signal, name) for name in FORWARDED}


def hold() -> None:
    """Block the forwarded signals: from here on none sent to PID 1 is thrown away; each waits for the init."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _forwarded())


def release() -> None:
    """Undo hold(): for a command that is not a server (mcpserver list, call, ...), signals as they were."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _forwarded())


def init_if_pid1(starting: Any) -> None:
    """Return at once, or as the server child of a new init when this process is PID 1.

    `starting` is the start-up handler (mcpserver.__main__): it becomes the server's SIGTERM and SIGINT
    handler until its transport sets its own, and carries the pipe on which the child tells the init it
    serves. The signals stay blocked across the fork (hold()), so none is lost before either side has its
    handlers."""
    if os.getpid() != 1:
        return
    forwarded = _forwarded()
    if os.environ.get(_environment.NO_INIT):
        starting.install()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
        starting.held = False
        return
    told, tell = os.pipe()
    server = os.fork()
    if server == 0:
        os.close(told)
        starting.report_fd = tell
        starting.install()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
        starting.held = False
        _become_foreground()
        return
    os.close(tell)
    _reap_until_exit(server, forwarded, told)


def _become_foreground() -> None:
    os.setpgid(0, 0)
    try:
        if os.isatty(0):
            previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take the tty
            os.tcsetpgrp(0, os.getpgrp())
            signal.signal(signal.SIGTTOU, previous)
    except OSError:
        pass


def _serves(told: int) -> bool:
    """Whether the child has said it serves (the pipe is non-blocking: safe in a signal handler)."""
    try:
        return os.read(told, 1) == SERVING
    except BlockingIOError:
        return False


def _reap_until_exit(server: int, forwarded: set[int], told: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the server alone holds the protocol's pipes: their EOF is the server's
    os.dup2(null, 1)
    os.close(null)
    os.set_blocking(told, False)
    state = {"serving": False, "stopped while starting": False}

    def forward(signum: int, frame: object) -> None:
        if not state["serving"]:
            state["serving"] = _serves(told)
        if signum in STOPS and not state["serving"] and not state["stopped while starting"]:
            state["stopped while starting"] = True
            signal.setitimer(signal.ITIMER_REAL, KILL_AFTER)
        try:
            os.kill(server, signum)
        except ProcessLookupError:
            pass

    def overdue(signum: int, frame: object) -> None:
        # Still starting after KILL_AFTER: killed. One that has begun to serve meanwhile is asked again, now of
        # its transport, which stops it gracefully.
        serving = state["serving"] or _serves(told)
        try:
            os.kill(server, signal.SIGTERM if serving else signal.SIGKILL)
        except ProcessLookupError:
            return
        os.write(2, b"mcpserver: the server had not ended its start %g s after the stop signal: %s\n"
                 % (KILL_AFTER, b"asked again" if serving else b"killed"))

    # Python runs a handler only between two steps of the main thread. A signal that lands after the last step
    # before a blocking wait, or on another thread, would wait with its handler until the wait ends: for a
    # blocking waitpid, until the server exits, which then never comes (a stop lost under load). So the init
    # sleeps on the wakeup pipe, which the interpreter's C-level handler writes at once, and reaps without blocking.
    wake, woken = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a child's end writes the pipe too
    for signum in forwarded:
        signal.signal(signum, forward)
    signal.signal(signal.SIGALRM, overdue)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
    while True:
        _reap(server, state)
        select.select([wake], [], [])
        try:
            os.read(wake, 4096)
        except BlockingIOError:
            pass


def _reap(server: int, state: dict[str, bool]) -> None:
    """Collect every child that has ended; when the server is one of them, exit with its status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # cannot happen while the server lives; leave rather than spin
            os._exit(1)
        if pid == 0:
            return
        if pid == server:
            if state["stopped while starting"]:
                os._exit(0)  # a stop asked before anything was served: nothing is owed, whatever the status
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
