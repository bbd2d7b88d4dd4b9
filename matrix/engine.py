"""The Docker engine, through the docker CLI: whatever DOCKER_HOST or the current docker context names.

This module is the lab's one seam to Docker: every docker argument list is written here. Its clients are
started by processes.Processes, the tracker of every process the lab starts, so an interrupt reaches them as
it reaches the rest. tests/lab/fake_engine.py stands in for the docker side in fast tests of the harness;
the engine tests drive this class against the real thing.

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
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EngineError
from .processes import Completed, Processes

LABEL = "org.mcpserver.lab"
RUN_LABEL = "org.mcpserver.lab.run"
TAG_LABEL = "org.mcpserver.lab.tag"
TREE_LABEL = "org.mcpserver.lab.tree"  # which checkout built it: superseded images are pruned per checkout
CLI_TIMEOUT = 120.0  # seconds for quick engine queries; builds and suites have their own limits
BUILD_STEP = re.compile(r"^ ---> ([0-9a-f]{12,64})$", re.M)  # the legacy builder's image of each step


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
    binds: tuple[tuple[str, str], ...] = ()  # (a path on the engine's machine, target), read-only: a local engine's
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
        for path, target in self.binds:
            args += ["--mount", f"type=bind,source={path},target={target},readonly"]
        return [*args, self.image, *self.args]


@dataclass(frozen=True, kw_only=True)
class ContainerState:
    exit_code: int
    oom_killed: bool


def label_args(labels: Mapping[str, str]) -> list[str]:
    return [a for k, v in sorted(labels.items()) for a in ("--label", f"{k}={v}")]


class Engine:
    """The docker CLI as methods; its clients are tracked processes like every other (processes.Processes)."""

    def __init__(self, docker: str = "docker", processes: Processes | None = None) -> None:
        self.docker = docker
        self.processes = processes or Processes()
        self._platforms: dict[str, str] = {}  # image -> platform_of(image)
        self._platforms_lock = threading.Lock()  # and the list below
        self.abandoned: list[str] = []  # step images of builds that made no image (remove_abandoned)

    def _docker(self, args: Sequence[str], *, timeout: float | None = CLI_TIMEOUT, **kwargs: object) -> Completed:
        try:
            return self.processes.command([self.docker, *args], timeout=timeout, **kwargs)  # type: ignore[arg-type]
        except FileNotFoundError:
            return Completed(returncode=127, output=f"the docker CLI ({self.docker}) is not installed")

    def _docker_bytes(self, args: Sequence[str], *, timeout: float = CLI_TIMEOUT) -> bytes | None:
        """stdout of `docker ARGS` as bytes (e.g. the tar `docker cp SRC -` writes); None on failure."""
        proc = self.processes.start([self.docker, *args], stderr=subprocess.DEVNULL)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self.processes.finish(proc)
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

    def is_local(self) -> bool:
        """Whether the engine runs on this machine (a Unix socket), so that a path here is a path there."""
        endpoint = self.endpoint()
        return "://" not in endpoint or endpoint.startswith("unix://")

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
        """RepoTags, Labels, Created, the user it runs as and its size of an image ({} when absent)."""
        fmt = ('{"tags":{{json .RepoTags}},"labels":{{json .Config.Labels}},"created":{{json .Created}},'
               '"user":{{json .Config.User}},"size":{{json .Size}}}')
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
        platform: str = "",
    ) -> Completed:
        """Build and tag `tag` (for `platform`, docker's name of an architecture, when not the engine's own), once:
        a build of the same tag by another process on this host is waited for
        (one lock per tag), and then found. `--tag` would have moved the tag and left the image it named
        dangling: two runs building one stage side by side left an 834 MB builder stage behind. A tag taken
        meanwhile through another engine client keeps its image, and the one built here is removed; a failed
        build's last step image goes too, with any untagged parents nothing else uses."""
        with _one_at_a_time(tag):
            if self.image_id(tag) is not None:
                return Completed(returncode=0, output=f"mcplab: {tag} was built meanwhile by another run\n")
            return self._build(context, target=target, tag=tag, build_args=build_args, labels=labels, log=log,
                               timeout=timeout, platform=platform)  # fmt: skip

    def _build(self, context: bytes, *, target: str | None, tag: str, build_args: Sequence[str],
               labels: Mapping[str, str], log: Path, timeout: float, platform: str) -> Completed:  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="mcplab-build-") as folder:
            iidfile = Path(folder) / "iid"
            # --force-rm: a failed step's container goes too (the legacy builder keeps it otherwise).
            argv = ["build", "--force-rm", "--iidfile", str(iidfile), *(["--target", target] if target else [])]
            argv += ["--platform", platform] if platform else []
            argv += [*label_args(labels), *(a for arg in build_args for a in ("--build-arg", arg))]
            done = self._docker([*argv, "-"], input=context, timeout=timeout, log=log)
            built = iidfile.read_text().strip() if done.ok and iidfile.is_file() else ""
        if not built:
            made = created_steps(done.output)
            with self._platforms_lock:
                self.abandoned.extend(made)  # an interrupt may kill the rmi below: remove_abandoned tries again
            if made and not self.image_facts(made[-1]).get("tags"):
                self._docker(["rmi", made[-1]])  # refused, harmlessly, while a child or a container uses it
            return done if not done.ok else Completed(returncode=1, output=done.output + "no image ID was written\n")
        if self.image_id(tag) is None:
            self.tag(built, tag)
        elif self.image_id(tag) != built:
            self._docker(["rmi", built])
        return done

    def remove_abandoned(self, *, patience: float = 20.0) -> list[str]:
        """Remove the step images of this engine client's builds that made no image (failed, or cut short by an
        interrupt: the legacy builder keeps every finished step as an untagged image) and that are still untagged;
        `docker rmi` takes their untagged parents along. Tried again for `patience` seconds while the daemon, its
        client gone, is still removing the step's container. Returns the images that went."""
        with self._platforms_lock:
            pending, self.abandoned = list(dict.fromkeys(self.abandoned)), []
        gone: list[str] = []
        deadline = time.monotonic() + patience
        while pending:
            for image in list(pending):
                facts = self.image_facts(image)
                if not facts or facts.get("tags") or self._docker(["rmi", image]).ok:
                    pending.remove(image)
                    gone += [image] if facts and not facts.get("tags") else []
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(1)
        return gone

    def import_rootfs(self, root: Path, tag: str, *, labels: Mapping[str, str], log: Path, timeout: float,
                      platform: str = "", env: Mapping[str, str] | None = None) -> Completed:  # fmt: skip
        """A tree (a folder, or a tarball of one) as an image under `tag`, by `docker import`; every process tracked.
        For another architecture (`platform`, docker's name) the tree is built into an image FROM scratch instead:
        Debian's 20.10 engine ignores `docker import --platform` and would call it its own, where a build sets what
        it is told; `env` is set in its image (ENV), for every stage built FROM it."""
        if platform:
            return self._build_rootfs(root, tag, labels=labels, log=log, timeout=timeout, platform=platform,
                                      env=env or {})  # fmt: skip
        changes = [a for k, v in sorted(labels.items()) for a in ("--change", f"LABEL {k}={v}")]
        argv = [self.docker, "import", *changes, "--change", 'CMD ["/bin/sh"]']
        if root.is_file():
            return self.processes.command([*argv, str(root), tag], timeout=timeout, log=log)
        tar = self.processes.start(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stderr=subprocess.DEVNULL)
        try:
            done = self.processes.command([*argv, "-", tag], timeout=timeout, log=log, stdin_from=tar)
        finally:
            self.processes.finish(tar)
        return done if tar.returncode == 0 else Completed(returncode=tar.returncode or 1, output="tar failed")

    def _build_rootfs(self, root: Path, tag: str, *, labels: Mapping[str, str], log: Path, timeout: float,
                      platform: str, env: Mapping[str, str]) -> Completed:  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="mcplab-rootfs-", dir=root.parent) as folder:
            # ADD unpacks a tar with its own owners (a build context's files would all become root's).
            if root.is_file():
                os.link(root, f"{folder}/rootfs.tar")  # the same file system: a link, not a copy
            else:
                made = self.processes.command(["tar", "--numeric-owner", "-C", str(root), "-cf",
                                               f"{folder}/rootfs.tar", "."], timeout=timeout, log=log)  # fmt: skip
                if not made.ok:
                    return made
            settings = "".join(f"ENV {k}={v}\n" for k, v in sorted(env.items()))
            Path(folder, "Dockerfile").write_text(f'FROM scratch\nADD rootfs.tar /\n{settings}CMD ["/bin/sh"]\n')
            argv = ["build", "--platform", platform, "--tag", tag, *label_args(labels), folder]
            return self._docker(argv, timeout=timeout, log=log)

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
    def platform_of(self, image: str) -> str:
        """`--platform` for a container of `image` when it is built for another architecture than the engine's
        ('linux/arm64'), else '': the engine then runs it through its own platform support, without warning
        on every run that it does not match, and a native image runs exactly as before."""
        with self._platforms_lock:
            if image not in self._platforms:
                fmt = "{{.Os}}/{{.Architecture}}"
                own = self._docker(["version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"]).output.strip()
                done = self._docker(["image", "inspect", "--format", fmt, image])
                found = done.output.strip() if done.ok else own
                self._platforms[image] = "" if found == own else found
            return self._platforms[image]

    def _container_argv(self, spec: ContainerSpec) -> list[str]:
        platform = self.platform_of(spec.image)
        return ["--platform", platform, *spec.argv()] if platform else spec.argv()

    def run(self, spec: ContainerSpec, *, timeout: float | None, log: Path | None = None,
            input: bytes | None = None) -> Completed:  # fmt: skip
        """`docker run` to completion. On timeout the client is killed; the container is stopped here
        too, since killing the client does not stop it."""
        done = self._docker(["run", *self._container_argv(spec)], timeout=timeout, log=log, input=input)
        if done.timed_out and spec.name:
            self.kill(spec.name)
        return done

    def start(self, spec: ContainerSpec) -> Completed:
        """`docker run -d`: the container's ID in the output."""
        return self._docker(["run", "-d", *self._container_argv(spec)])

    def create(self, spec: ContainerSpec) -> Completed:
        return self._docker(["create", *self._container_argv(spec)])

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

    def pid_of(self, container: str) -> int:
        """The host's PID of the container's first process (0 when stopped or unknown)."""
        done = self._docker(["inspect", "--format", "{{.State.Pid}}", container])
        return int(done.output.strip() or 0) if done.ok else 0

    def state(self, container: str) -> ContainerState | None:
        done = self._docker(["inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", container])
        if not done.ok:
            return None
        code, oom = done.output.split()
        return ContainerState(exit_code=int(code), oom_killed=oom == "true")


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


def created_steps(output: str) -> list[str]:
    """The images a legacy build's steps created, in order, from its output: not the base a FROM names, nor a
    step's image taken from the cache (another build's, which may be in use)."""
    made, skip = [], False
    for line in output.splitlines():
        text = line.strip()
        if (text.startswith("Step ") and " : FROM " in text) or text == "---> Using cache":
            skip = True  # the next image line is the base's, or a cached step's
            continue
        found = BUILD_STEP.match(line)
        if found:
            made += [] if skip else [found.group(1)]
            skip = False
    return made


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


