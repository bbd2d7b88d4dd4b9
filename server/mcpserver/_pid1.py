"""When the server is PID 1 (a container's entrypoint), an init stays PID 1 and the server runs as its child.

PID 1 is where orphans go. A command tool killed at its timeout orphans its grandchildren, and a
PID 1 that never waits for them collects zombies until the container's PID limit runs out; PID 1
also gets no default signal handling. So, like tini or `docker run --init`, the process forks:
the parent reaps every child it is given and forwards signals to the server, and exits with the
server's status; the child is the server, in its own process group (the terminal's foreground one
when there is a terminal), so a Ctrl-C reaches it once.
Set MCPSERVER_NO_INIT=1 to serve as PID 1 directly (when something else reaps).
"""

from __future__ import annotations

import os

from . import _environment

__all__ = ["init_if_pid1"]

FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")


def init_if_pid1() -> None:
    """Return at once, or as the server child of a new init when this process is PID 1.

    The signals are blocked across the fork, so none is lost before the init forwards them (PID 1 ignores a
    signal it has no handler for), and until the server's transport sets its own handlers a SIGTERM stops the
    child starting up as SystemExit(0): without that, one sent while it loaded its target killed it (143)."""
    if os.getpid() != 1 or os.environ.get(_environment.NO_INIT):
        return
    import signal

    forwarded = {getattr(signal, name) for name in FORWARDED}
    signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)
    server = os.fork()
    if server == 0:
        signal.signal(signal.SIGTERM, _stop_starting)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
        _become_foreground()
        return
    _reap_until_exit(server, forwarded)


def _stop_starting(signum: int, frame: object) -> None:
    raise SystemExit(0)  # nothing was served yet: nothing to answer first


def _become_foreground() -> None:
    import signal

    os.setpgid(0, 0)
    try:
        if os.isatty(0):
            previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take the tty
            os.tcsetpgrp(0, os.getpgrp())
            signal.signal(signal.SIGTTOU, previous)
    except OSError:
        pass


def _reap_until_exit(server: int, forwarded: set[int]) -> None:
    import signal

    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the server alone holds the protocol's pipes: their EOF is the server's
    os.dup2(null, 1)
    os.close(null)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(server, signum)
        except ProcessLookupError:
            pass

    for signum in forwarded:
        signal.signal(signum, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # cannot happen while the server lives; leave rather than spin
            os._exit(1)
        if pid == server:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
