"""The Docker engine, through the docker CLI: whatever DOCKER_HOST or the current docker context names.

This module is the lab's one seam to the outside: every docker argument list is written here, and every
process the lab starts (docker clients, debootstrap, host pytest runs, pip) is started by `Engine.command`
and tracked, so an interrupt reaches all of them (`kill_all`). tests/lab/fake_engine.py stands in for the
docker side in fast tests of the harness; the engine tests drive this class against the real thing.

Everything the lab creates carries LABEL; containers and images also RUN_LABEL=<run id>, and images
TAG_LABEL=<the tag the lab gave them>. An image built FROM a lab image inherits its labels, so clean-up
checks identity (the image still wears the tag its TAG_LABEL names), never the inherited label alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import EngineError
from .model import Usage

LABEL = "org.mcpserver.lab"
RUN_LABEL = "org.mcpserver.lab.run"
TAG_LABEL = "org.mcpserver.lab.tag"
TREE_LABEL = "org.mcpserver.lab.tree"  # which checkout built it: superseded images are pruned per checkout
CLI_TIMEOUT = 120.0  # seconds for quick engine queries; builds and suites have their own limits
BUILD_STEP = re.compile(r"^ ---> ([0-9a-f]{12,64})$", re.M)  # the legacy builder's image of each step


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


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    """One `docker run`/`docker create`: the image, its arguments and how it is confined."""

    image: str
    args: tuple[str, ...] = ()
    name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    network: str = "none"
    user: str = ""
    entrypoint: str | None = None
    volumes: tuple[tuple[str, str], ...] = ()  # (volume, target), mounted read-only unless `fills_volumes`
    fills_volumes: bool = False  # a holder that `docker cp` fills the volumes through: mounted read-write
    memory: str = ""  # also the swap limit: no swapping past it
    pids_limit: int = 0
    init: bool = False  # an init as PID 1 (docker-init): signals and zombies behave as on a host
    env: Mapping[str, str] = field(default_factory=dict)
    remove: bool = False
    interactive: bool = False
    publish: tuple[str, ...] = ()  # docker's -p ADDRESS:HOST_PORT:CONTAINER_PORT (needs a network)

    def argv(self) -> list[str]:
        args = ["--network", self.network]
        args += [a for port in self.publish for a in ("--publish", port)]
        args += [a for k, v in sorted(self.labels.items()) for a in ("--label", f"{k}={v}")]
        args += ["--name", self.name] if self.name else []
        args += ["--user", self.user] if self.user else []
        args += ["--entrypoint", self.entrypoint] if self.entrypoint is not None else []
        args += ["--memory", self.memory, "--memory-swap", self.memory] if self.memory else []
        args += ["--pids-limit", str(self.pids_limit)] if self.pids_limit else []
        args += ["--init"] if self.init else []
        args += ["--rm"] if self.remove else []
        args += ["-i"] if self.interactive else []
        args += [a for k, v in sorted(self.env.items()) for a in ("-e", f"{k}={v}")]
        for volume, target in self.volumes:
            mode = "" if self.fills_volumes else ",readonly"
            args += ["--mount", f"type=volume,source={volume},target={target}{mode}"]
        return [*args, self.image, *self.args]


@dataclass(frozen=True, kw_only=True)
class ContainerState:
    exit_code: int
    oom_killed: bool


def label_args(labels: Mapping[str, str]) -> list[str]:
    return [a for k, v in sorted(labels.items()) for a in ("--label", f"{k}={v}")]


class Engine:
    """The docker CLI as methods, and the tracker of every process the lab starts."""

    def __init__(self, docker: str = "docker") -> None:
        self.docker = docker
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()

    # -- processes -------------------------------------------------------------------------------
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
        proc = self._start(argv, stdin=stdin, env=env, cwd=cwd)
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
            self._finish(proc)
        return Completed(returncode=proc.returncode, output=out.decode("utf-8", "replace"), timed_out=expired.is_set(),
                         usage=usage)  # fmt: skip

    def _start(
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

    def _finish(self, proc: subprocess.Popen[bytes]) -> None:
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
        pipe, stdout and stdin are closed. End it with `detach`."""
        return self._start(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)

    def kill_all(self) -> int:
        """Kill every process still running; safe in a signal handler (no lock: a snapshot of the set is
        taken in one step under the GIL). Returns how many were killed."""
        killed = 0
        for proc in list(self._procs):
            if proc.poll() is None:
                _kill_group(proc)
                killed += 1
        return killed

    def _docker(self, args: Sequence[str], *, timeout: float | None = CLI_TIMEOUT, **kwargs: object) -> Completed:
        try:
            return self.command([self.docker, *args], timeout=timeout, **kwargs)  # type: ignore[arg-type]
        except FileNotFoundError:
            return Completed(returncode=127, output=f"the docker CLI ({self.docker}) is not installed")

    def _docker_bytes(self, args: Sequence[str], *, timeout: float = CLI_TIMEOUT) -> bytes | None:
        """stdout of `docker ARGS` as bytes (e.g. the tar `docker cp SRC -` writes); None on failure."""
        proc = self._start([self.docker, *args], stderr=subprocess.DEVNULL)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self._finish(proc)
        return out if proc.returncode == 0 else None

    # -- the engine itself -------------------------------------------------------------------------
    def version(self) -> str:
        """The engine's version; EngineError (exit 3) with what to do when none answers."""
        if shutil.which(self.docker) is None:
            raise EngineError(f"the docker CLI ({self.docker}) is not installed. {_START_ONE}")
        done = self._docker(["version", "--format", "{{.Server.Version}}"], timeout=30)
        if not done.ok:
            raise EngineError(f"no Docker engine answers at {self.endpoint()} ({done.last_line()}). {_START_ONE}")
        return done.output.strip()

    def published_address(self) -> str:
        """The address a port published by this engine is reached at from here: loopback for a local
        socket, else the engine's host (tcp://HOST:PORT, ssh://USER@HOST)."""
        endpoint = self.endpoint()
        if "://" not in endpoint or endpoint.startswith(("unix://", "npipe://")):
            return "127.0.0.1"
        host = endpoint.split("://", 1)[1].rsplit("@", 1)[-1]
        host = host.split("/", 1)[0]
        return host.rsplit(":", 1)[0].strip("[]") if host.count(":") == 1 or host.startswith("[") else host

    def endpoint(self) -> str:
        """Where the CLI sends commands: DOCKER_HOST, else the current docker context's endpoint."""
        if os.environ.get("DOCKER_HOST"):
            return os.environ["DOCKER_HOST"]
        done = self._docker(["context", "inspect", "--format", "{{.Endpoints.docker.Host}}"], timeout=30)
        return done.output.strip() if done.ok else "the default socket"

    def asked_for(self) -> bool:
        """Whether the user named an engine (DOCKER_HOST, or a docker context other than the default)."""
        if os.environ.get("DOCKER_HOST") or os.environ.get("DOCKER_CONTEXT", "default") != "default":
            return True
        done = self._docker(["context", "show"], timeout=30) if shutil.which(self.docker) else None
        return bool(done and done.ok and done.output.strip() not in ("", "default"))

    def registry_mirrors(self) -> tuple[str, ...]:
        done = self._docker(["info", "--format", "{{json .RegistryConfig.Mirrors}}"])
        try:
            mirrors = json.loads(done.output) if done.ok else None
        except json.JSONDecodeError:
            return ()
        return tuple(mirrors or ())

    def manifest(self, ref: str) -> Completed:
        """Ask a registry about `ref` without downloading layers (plain HTTP allowed, as the engine allows
        it for registries on loopback addresses)."""
        return self._docker(["manifest", "inspect", "--insecure", ref], timeout=30)

    # -- images ------------------------------------------------------------------------------------
    def image_id(self, ref: str) -> str | None:
        done = self._docker(["image", "inspect", "--format", "{{.Id}}", ref])
        return done.output.strip() if done.ok else None

    def image_facts(self, ref: str) -> dict[str, object]:
        """RepoTags, Labels and Created of an image ({} when absent)."""
        fmt = '{"tags":{{json .RepoTags}},"labels":{{json .Config.Labels}},"created":{{json .Created}}}'
        done = self._docker(["image", "inspect", "--format", fmt, ref])
        return dict(json.loads(done.output)) if done.ok else {}

    def images(self, *labels: str) -> tuple[str, ...]:
        """IDs of the images carrying every label (KEY or KEY=VALUE), tagged or not."""
        args = ["images", "-a", "-q", "--no-trunc"] + [a for label in labels for a in ("--filter", f"label={label}")]
        done = self._docker(args)
        return tuple(dict.fromkeys(done.output.split())) if done.ok else ()

    def references(self, repository: str) -> tuple[str, ...]:
        """The repository:tag names present under one repository."""
        done = self._docker(["images", "--format", "{{.Repository}}:{{.Tag}}", repository])
        return tuple(done.output.split()) if done.ok else ()

    def build(
        self,
        context: bytes,
        *,
        target: str | None,
        tag: str,
        build_args: Sequence[str],
        labels: Mapping[str, str],
        log: Path,
        timeout: float,
    ) -> Completed:
        """Build and tag `tag`, once: a build of the same tag by another process on this host is waited for
        (one lock per tag), and then found. `--tag` would have moved the tag and left the image it named
        dangling: two runs building one stage side by side left an 834 MB builder stage behind. A tag taken
        meanwhile through another engine client keeps its image, and the one built here is removed; a failed
        build's last step image goes too, with any untagged parents nothing else uses."""
        with _one_at_a_time(tag):
            if self.image_id(tag) is not None:
                return Completed(returncode=0, output=f"mcplab: {tag} was built meanwhile by another run\n")
            return self._build(context, target=target, tag=tag, build_args=build_args, labels=labels, log=log,
                               timeout=timeout)  # fmt: skip

    def _build(self, context: bytes, *, target: str | None, tag: str, build_args: Sequence[str],
               labels: Mapping[str, str], log: Path, timeout: float) -> Completed:  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="mcplab-build-") as folder:
            iidfile = Path(folder) / "iid"
            # --force-rm: a failed step's container goes too (the legacy builder keeps it otherwise).
            argv = ["build", "--force-rm", "--iidfile", str(iidfile), *(["--target", target] if target else [])]
            argv += [*label_args(labels), *(a for arg in build_args for a in ("--build-arg", arg))]
            done = self._docker([*argv, "-"], input=context, timeout=timeout, log=log)
            built = iidfile.read_text().strip() if done.ok and iidfile.is_file() else ""
        if not built:
            steps = BUILD_STEP.findall(done.output)
            if steps and not self.image_facts(steps[-1]).get("tags"):  # never a base, or anything tagged
                self._docker(["rmi", steps[-1]])  # refused, harmlessly, while a child or a container uses it
            return done if not done.ok else Completed(returncode=1, output=done.output + "no image ID was written\n")
        if self.image_id(tag) is None:
            self.tag(built, tag)
        elif self.image_id(tag) != built:
            self._docker(["rmi", built])
        return done

    def import_rootfs(self, root: Path, tag: str, *, labels: Mapping[str, str], log: Path, timeout: float) -> Completed:
        """tar the tree into `docker import` under `tag`; both processes are tracked."""
        tar = self._start(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stderr=subprocess.DEVNULL)
        changes = [a for k, v in sorted(labels.items()) for a in ("--change", f"LABEL {k}={v}")]
        try:
            done = self.command([self.docker, "import", *changes, "--change", 'CMD ["/bin/sh"]', "-", tag],
                                timeout=timeout, log=log, stdin_from=tar)  # fmt: skip
        finally:
            self._finish(tar)
        return done if tar.returncode == 0 else Completed(returncode=tar.returncode or 1, output="tar failed")

    def pull(self, ref: str, *, log: Path | None = None, timeout: float = 600.0) -> Completed:
        return self._docker(["pull", ref], timeout=timeout, log=log)

    def push(self, ref: str, *, log: Path | None = None, timeout: float = 600.0) -> Completed:
        return self._docker(["push", ref], timeout=timeout, log=log)

    def tag(self, source: str, target: str) -> Completed:
        return self._docker(["tag", source, target])

    def save(self, ref: str, archive: Path, *, timeout: float = 600.0) -> Completed:
        return self._docker(["save", "--output", str(archive), ref], timeout=timeout)

    def load(self, archive: Path, *, timeout: float = 600.0) -> Completed:
        return self._docker(["load", "--input", str(archive)], timeout=timeout)

    def remove_images(self, *refs: str) -> Completed:
        """Untag or remove; an image a container still uses, or another tag still names, stays."""
        return self._docker(["rmi", *refs]) if refs else Completed(returncode=0, output="")

    def prune_dangling(self, *labels: str) -> Completed:
        return self._docker(["image", "prune", "-f", *[a for label in labels for a in ("--filter", f"label={label}")]])

    # -- containers --------------------------------------------------------------------------------
    def run(self, spec: ContainerSpec, *, timeout: float | None, log: Path | None = None,
            input: bytes | None = None) -> Completed:  # fmt: skip
        """`docker run` to completion. On timeout the client is killed; the container is stopped here
        too, since killing the client does not stop it."""
        done = self._docker(["run", *spec.argv()], timeout=timeout, log=log, input=input)
        if done.timed_out and spec.name:
            self.kill(spec.name)
        return done

    def attach(self, spec: ContainerSpec) -> subprocess.Popen[bytes]:
        """`docker run -i` with its stdin and stdout as pipes (tracked); the caller ends it with `detach`."""
        return self._start([self.docker, "run", *replace(spec, interactive=True).argv()], stdin=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)  # fmt: skip

    def detach(self, proc: subprocess.Popen[bytes]) -> None:
        self._finish(proc)

    def start(self, spec: ContainerSpec) -> Completed:
        """`docker run -d`: the container's ID in the output."""
        return self._docker(["run", "-d", *spec.argv()])

    def create(self, spec: ContainerSpec) -> Completed:
        return self._docker(["create", *spec.argv()])

    def exec(self, container: str, argv: Sequence[str], *, input: bytes | None = None,
             timeout: float = CLI_TIMEOUT) -> Completed:  # fmt: skip
        return self._docker(["exec", *(["-i"] if input is not None else []), container, *argv],
                            input=input, timeout=timeout)  # fmt: skip

    def stop(self, container: str, *, grace: int = 10) -> Completed:
        return self._docker(["stop", "-t", str(grace), container], timeout=grace + CLI_TIMEOUT)

    def kill(self, container: str) -> Completed:
        return self._docker(["kill", container], timeout=60)

    def logs(self, container: str) -> str:
        return self._docker(["logs", container]).output

    def state(self, container: str) -> ContainerState | None:
        done = self._docker(["inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", container])
        if not done.ok:
            return None
        code, oom = done.output.split()
        return ContainerState(exit_code=int(code), oom_killed=oom == "true")

    def image_config(self, ref: str, field_path: str) -> str:
        """One field of an image's config, e.g. `.Config.User` or `.Size` ('' when absent)."""
        done = self._docker(["image", "inspect", "--format", "{{" + field_path + "}}", ref])
        return done.output.strip() if done.ok else ""

    def copy_out(self, container: str, path: str) -> bytes | None:
        """A file or folder from a container, as the tar `docker cp` writes; None when it is not there."""
        return self._docker_bytes(["cp", f"{container}:{path}", "-"])

    def read_file(self, container: str, path: str) -> bytes | None:
        """One file's content from a container (running or not); None when it is not there."""
        data = self.copy_out(container, path)
        if not data:
            return None
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for member in tar:
                    handle = tar.extractfile(member)
                    if handle is not None:
                        return handle.read()
        except tarfile.TarError:
            return None
        return None

    def copy_in(self, source: Path | str, container: str, path: str, *, timeout: float = 300.0) -> Completed:
        return self._docker(["cp", str(source), f"{container}:{path}"], timeout=timeout)

    def containers(self, *labels: str) -> tuple[str, ...]:
        """IDs of containers (any state) carrying every label."""
        args = ["ps", "-a", "-q", "--no-trunc"] + [a for label in labels for a in ("--filter", f"label={label}")]
        done = self._docker(args)
        return tuple(done.output.split()) if done.ok else ()

    def container_names(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        done = self._docker(["inspect", "--format", "{{.Id}} {{.Name}}", *ids])
        pairs = (line.split() for line in done.output.splitlines() if len(line.split()) == 2)
        return {cid: name.lstrip("/") for cid, name in pairs}

    def remove_containers(self, *ids: str) -> int:
        if ids:
            self._docker(["rm", "-f", "-v", *ids])
        return len(ids)

    def remove_by_label(self, *labels: str) -> int:
        return self.remove_containers(*self.containers(*labels))

    # -- volumes -----------------------------------------------------------------------------------
    def create_volume(self, name: str, labels: Mapping[str, str]) -> Completed:
        return self._docker(["volume", "create", *label_args(labels), name])

    def volumes(self, *labels: str) -> tuple[str, ...]:
        done = self._docker(["volume", "ls", "-q", *[a for label in labels for a in ("--filter", f"label={label}")]])
        return tuple(done.output.split()) if done.ok else ()

    def remove_volumes(self, *names: str) -> Completed:
        return self._docker(["volume", "rm", "-f", *names]) if names else Completed(returncode=0, output="")


_START_ONE = (
    "Run `make lab-engine` (it starts one on a Debian/Ubuntu host where you are root), or start a Docker "
    "engine and point DOCKER_HOST (or `docker context use`) at it; `--distro host` runs without one."
)


@contextlib.contextmanager
def _one_at_a_time(name: str) -> Iterator[None]:
    """Held by one process of this host at a time (an flock in the temporary folder, which every checkout on
    the host shares)."""
    path = Path(tempfile.gettempdir()) / "mcplab-locks" / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".lock")
    try:
        path.parent.mkdir(mode=0o1777, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115 - held across the yield
    except OSError:  # another user's folder: build without the lock, as before it existed
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


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
