"""The Docker engine, through the docker CLI: whatever DOCKER_HOST or the current context names.

Everything the lab creates carries LABEL (and containers also RUN_LABEL=<run id>), so cleanup can find
exactly what this run started and `make clean-lab` exactly what the lab ever made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import EngineError

LABEL = "org.mcpserver.lab"
RUN_LABEL = "org.mcpserver.lab.run"
TIMED_OUT = -9  # returncode reported when the harness killed a command at its deadline
CLI_TIMEOUT = 120.0  # seconds for quick engine queries; builds and suites have their own limits


@dataclass(frozen=True, kw_only=True)
class Completed:
    returncode: int
    output: str


class Engine:
    """A thin wrapper over the docker CLI that remembers the processes it started, so an interrupt can
    stop them."""

    def __init__(self, docker: str = "docker") -> None:
        self.docker = docker
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()

    # -- queries ---------------------------------------------------------------------------------
    def available(self) -> str:
        """'' when an engine answers, else why not."""
        if shutil.which(self.docker) is None:
            return "the docker CLI is not installed"
        done = self.run(["version", "--format", "{{.Server.Version}}"], timeout=30)
        if done.returncode != 0:
            return "no Docker engine answers (" + (done.output.strip().splitlines() or ["?"])[-1] + ")"
        return ""

    def require(self) -> None:
        why = self.available()
        if why:
            raise EngineError(
                f"{why}. Run `make matrix` (it starts one on a Debian/Ubuntu host where you are root) or "
                "start a Docker engine and point DOCKER_HOST at it."
            )

    def server_version(self) -> str:
        done = self.run(["version", "--format", "{{.Server.Version}}"], timeout=30)
        return done.output.strip() if done.returncode == 0 else ""

    def image_id(self, ref: str) -> str:
        """The image's ID, or '' when it is not present."""
        done = self.run(["image", "inspect", "--format", "{{.Id}}", ref], timeout=CLI_TIMEOUT)
        return done.output.strip() if done.returncode == 0 else ""

    def image_size(self, ref: str) -> int:
        done = self.run(["image", "inspect", "--format", "{{.Size}}", ref], timeout=CLI_TIMEOUT)
        return int(done.output.strip()) if done.returncode == 0 else -1

    def registry_mirrors(self) -> tuple[str, ...]:
        done = self.run(["info", "--format", "{{json .RegistryConfig.Mirrors}}"], timeout=CLI_TIMEOUT)
        try:
            mirrors = json.loads(done.output) if done.returncode == 0 else None
        except json.JSONDecodeError:
            return ()
        return tuple(mirrors or ())

    def containers(self, *labels: str, all_states: bool = True) -> tuple[str, ...]:
        args = ["ps", "-q", "--no-trunc"] + (["-a"] if all_states else [])
        for label in labels:
            args += ["--filter", f"label={label}"]
        done = self.run(args, timeout=CLI_TIMEOUT)
        return tuple(done.output.split()) if done.returncode == 0 else ()

    # -- actions ---------------------------------------------------------------------------------
    def remove_containers(self, *labels: str) -> int:
        ids = self.containers(*labels)
        if ids:
            self.run(["rm", "-f", "-v", *ids], timeout=CLI_TIMEOUT)
        return len(ids)

    def run(
        self,
        args: Sequence[str],
        *,
        timeout: float | None = None,
        input: bytes | None = None,
        log: str | None = None,
    ) -> Completed:
        """Run `docker ARGS`; output (stdout+stderr) is returned and, with `log`, also written there.

        On timeout the client is killed and returncode is TIMED_OUT; callers that started a container kill it
        by name themselves, since killing the client does not stop the container.
        """
        return run_command([self.docker, *args], timeout=timeout, input=input, log=log, tracker=self)

    def run_bytes(self, args: Sequence[str], *, timeout: float | None = None) -> bytes:
        """stdout of `docker ARGS` as bytes (e.g. the tar that `docker cp SRC -` writes); b'' on failure."""
        try:
            done = subprocess.run([self.docker, *args], capture_output=True, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return b""
        return done.stdout if done.returncode == 0 else b""

    def track(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def untrack(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self) -> None:
        """Stop every client process still running (used on interrupt, before removing containers)."""
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def run_command(
    argv: Sequence[str],
    *,
    timeout: float | None = None,
    input: bytes | None = None,
    log: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    tracker: Engine | None = None,
) -> Completed:
    """Run a command to completion with a hard timeout, killing its whole process group on expiry.

    The child gets a session of its own: a timeout then kills its children too, and a Ctrl-C at the
    terminal reaches only the harness, which stops and cleans up everything itself.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    if tracker is not None:
        tracker.track(proc)
    try:
        try:
            out, _ = proc.communicate(input=input, timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            code = TIMED_OUT
    finally:
        if tracker is not None:
            tracker.untrack(proc)
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    if log:
        with open(log, "ab") as sink:
            sink.write(out)
    return Completed(returncode=code, output=out.decode("utf-8", "replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
