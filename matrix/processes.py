"""Every host process the lab starts, tracked: docker clients (through engine.Engine), mmdebstrap, pip, PyPA
build and twine, host pytest runs, a served check. One `kill_all` reaches them all, and it is lock-free so a
signal handler can call it; each process gets a session of its own, so a timeout kills its children too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .model import Usage


@dataclass(frozen=True, kw_only=True)
class Completed:
    returncode: int
    output: str
    timed_out: bool = False  # the harness killed it at its deadline
    usage: Usage = field(default_factory=Usage)  # what the process and the children it waited for used

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal(self) -> int:
        """The signal that ended a host process (subprocess reports it as a negative returncode), or 0."""
        return -self.returncode if self.returncode < 0 and not self.timed_out else 0

    def last_line(self) -> str:
        return (self.output.strip().splitlines() or ["no output"])[-1]


class Processes:
    """The tracker of every process the lab starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()

    def command(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        input: bytes | None = None,
        log: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stdin_from: subprocess.Popen[bytes] | None = None,
    ) -> Completed:
        """Run a command to completion with a hard timeout, killing its whole process group on expiry.

        The child gets a session of its own: a timeout then kills its children too, and a Ctrl-C at the
        terminal reaches only the harness, which stops everything itself. Output (stdout and stderr)
        is returned and, with `log`, appended there. `stdin_from` pipes another tracked process's output in.
        """
        stdin = stdin_from.stdout if stdin_from else subprocess.PIPE if input is not None else subprocess.DEVNULL
        proc = self.start(argv, stdin=stdin, env=env, cwd=cwd)
        if stdin_from is not None and stdin_from.stdout is not None:
            stdin_from.stdout.close()  # the pipe is the child's now: a dead reader stops the writer
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _kill_group(proc)

        deadline = threading.Timer(timeout, expire) if timeout is not None else None
        try:
            if deadline is not None:
                deadline.start()
            if input is not None:
                threading.Thread(target=_feed, args=(proc, input), daemon=True).start()
            out = _drain(proc, log)
            usage = _wait_measured(proc)
        finally:
            if deadline is not None:
                deadline.cancel()
            self.finish(proc)
        return Completed(returncode=proc.returncode, output=out.decode("utf-8", "replace"), timed_out=expired.is_set(),
                         usage=usage)  # fmt: skip

    def start(
        self,
        argv: Sequence[str],
        *,
        stdin: int | object = subprocess.DEVNULL,
        stdout: int = subprocess.PIPE,
        stderr: int = subprocess.STDOUT,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            list(argv),
            stdin=stdin,  # type: ignore[arg-type]
            stdout=stdout,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        with self._lock:
            self._procs.add(proc)
        return proc

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop tracking it, killing it first if it still runs, and close its pipes."""
        with self._lock:
            self._procs.discard(proc)
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
              ) -> subprocess.Popen[bytes]:  # fmt: skip
        """A long-running host process (a server for a check), tracked like every other; its stderr is a
        pipe, stdout and stdin are closed. End it with `finish`."""
        return self.start(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)

    def kill_all(self) -> int:
        """Kill every process still running; safe in a signal handler (no lock: a snapshot of the set is
        taken in one step under the GIL). Returns how many were killed."""
        killed = 0
        for proc in list(self._procs):
            if proc.poll() is None:
                _kill_group(proc)
                killed += 1
        return killed


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(data)
        proc.stdin.close()


def _drain(proc: subprocess.Popen[bytes], log: Path | None) -> bytes:
    """Read a process's output to the end, appending it to `log` as it comes (a running build's log can
    be followed)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks = []
    with open(log, "ab") if log is not None else contextlib.nullcontext() as sink:
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            chunks.append(chunk)
            if sink is not None:
                sink.write(chunk)
                sink.flush()
    return b"".join(chunks)


HOST_USAGE = "getrusage of the host process tree (peak: its largest process's RSS; CPU: all it waited for)"


def _wait_measured(proc: subprocess.Popen[bytes]) -> Usage:
    """Wait for the process, and return what it and the descendants it waited for used (wait4): no cgroup
    is made for host processes, so the peak is the largest single process's, not the tree's sum."""
    try:
        _, status, used = os.wait4(proc.pid, 0)
    except ChildProcessError:  # reaped already (an interrupt's kill_all polled it): nothing measured
        proc.wait()
        return Usage()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Usage(peak_memory=used.ru_maxrss * 1024, cpu_time=used.ru_utime + used.ru_stime, measured_by=HOST_USAGE)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
