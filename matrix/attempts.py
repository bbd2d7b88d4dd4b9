"""Run one suite and turn what happened into a SuiteResult (the rules are in outcomes.py).

In a container: a fresh container of the test image per suite, under an init (so signals and zombies
behave as on a host), `--network none`, as the image's non-root user, pytest mounted read-only from a
volume, the harness's own timeout; the JUnit XML is copied out with `docker cp` (no bind mounts, so a
remote engine works the same). On the host: the cell's venv python, the same pytest folder on
PYTHONPATH. The images suite: the testinfra checks, run from the host by the harness's own interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from . import LAB_ROOT
from .budgets import CONTAINER_MEMORY
from .engine import LABEL, RUN_LABEL, ContainerSpec, ContainerState, Engine
from .model import Cell, Outcome, Suite, SuiteResult, Usage
from .outcomes import Attempt, judge
from .processes import Completed, Processes
from .wheels import MANIFEST

PYTEST_MOUNT = "/opt/pytest"
# -v: when a suite dies without JUnit XML (killed, out of memory), the log tail names the test it was in.
PYTEST_ARGS = ("-p", "no:cacheprovider", "-rfE", "-v")
MEMORY_LIMIT = f"{CONTAINER_MEMORY // 2**30}g"  # budgets.CONTAINER_MEMORY, as docker's --memory says it
COMPLETE = ".mcplab-complete"
USAGE_FILE = "/tmp/mcplab-usage"
# A suite's container runs its command under this, which then writes what the container's cgroup says it
# used: cgroup v2's memory.peak and cpu.stat, else v1's memory.max_usage_in_bytes and cpuacct.usage (page
# cache is charged too, either way). The container is fresh for each suite, so its peak is the suite's. Its
# exit code is the command's: a command killed by signal N still ends the container with 128+N.
MEASURE = r"""
"$@"; code=$?
{
  for f in /sys/fs/cgroup/memory.peak /sys/fs/cgroup/memory/memory.max_usage_in_bytes; do
    if [ -r "$f" ]; then echo "memory $(cat "$f") ${f#/sys/fs/cgroup/}"; break; fi
  done
  if [ -r /sys/fs/cgroup/cpu.stat ]; then
    echo "cpu_us $(sed -n 's/^usage_usec //p' /sys/fs/cgroup/cpu.stat) cpu.stat"
  else
    for f in /sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage; do
      if [ -r "$f" ]; then echo "cpu_ns $(cat "$f") ${f#/sys/fs/cgroup/}"; break; fi
    done
  fi
} > /tmp/mcplab-usage 2>/dev/null
exit "$code"
"""
PYTEST_IN_IMAGE = ("/bin/sh", "-c", 'exec "$MCP_PYTHON" -m pytest "$@"', "pytest")  # as the test image's entrypoint
HOST_TOOLS = ("testinfra", "pytest")  # what the images suite needs in the harness's own interpreter


@dataclass(frozen=True, kw_only=True)
class Kept:
    """A failed suite's container left for debugging (--keep)."""

    container: str
    cell: str
    suite: Suite
    outcome: Outcome
    image: str
    volume: str

    def advice(self) -> str:
        shell = (
            f"docker run --rm -it --network none --mount type=volume,source={self.volume},target={PYTEST_MOUNT},"
            f"readonly --entrypoint /bin/sh {self.image}"
        )
        return (
            f"kept {self.container} ({self.cell} {self.suite.value} {self.outcome.value}): `docker start -ai "
            f"{self.container}` runs the suite again in it; `{shell}` opens a shell in the same image; "
            f"`docker rm -f {self.container}` when done."
        )


def container_name(run_id: str, cell: str, suite: Suite) -> str:
    return f"mcplab-{run_id}-{cell}-{suite.value}"


def volume_name(folder: str, wheels: list[str]) -> str:
    """The pytest volume of one folder (py3.11, pypy3.11: its name) and its exact wheels."""
    key = hashlib.sha256("\n".join(sorted(wheels)).encode()).hexdigest()[:12]
    return f"mcplab-pytest-{folder}-{key}"


def pytest_volume(engine: Engine, name: str, folder: Path, image: str) -> str:
    """A named volume holding the pytest folder, filled once per engine with `docker cp` (which reaches
    a remote engine too) and mounted read-only by every suite container of that Python. Filled only when
    a suite runs: a run whose every suite is remembered needs none.

    The volume counts as filled only once COMPLETE is in it, copied last: an interrupted fill is redone.
    """
    with _VOLUME_LOCKS_GUARD:
        lock = _VOLUME_LOCKS.setdefault(name, threading.Lock())
    with lock:  # cells of one Python fill their shared volume once
        _fill_volume(engine, name, folder, image)
    return name


_VOLUME_LOCKS: dict[str, threading.Lock] = {}
_VOLUME_LOCKS_GUARD = threading.Lock()


def _fill_volume(engine: Engine, name: str, folder: Path, image: str) -> None:
    holder = f"mcplab-fill-{name}-{os.getpid()}"
    engine.create_volume(name, {LABEL: "1"})
    try:
        # Mounted read-write: `docker cp` into a read-only mount fails ("mounted volume is marked read-only").
        spec = ContainerSpec(image=image, name=holder, labels={LABEL: "1"}, volumes=((name, PYTEST_MOUNT),),
                             fills_volumes=True)  # fmt: skip
        made = engine.create(spec)
        if not made.ok:
            raise RuntimeError(f"cannot create a container to fill {name}: {made.last_line()}")
        if engine.read_file(holder, f"{PYTEST_MOUNT}/{COMPLETE}") is not None:
            return
        # The manifest goes again under the name COMPLETE, last, as the mark of a full copy.
        steps = ((f"{folder}/.", f"{PYTEST_MOUNT}/"), (str(folder / MANIFEST), f"{PYTEST_MOUNT}/{COMPLETE}"))
        for source, target in steps:
            copied = engine.copy_in(source, holder, target)
            if not copied.ok:
                raise RuntimeError(f"cannot fill {name}: {copied.last_line()}")
    finally:
        engine.remove_containers(holder)


def run_in_container(
    engine: Engine,
    *,
    run_id: str,
    cell: str,
    suite: Suite,
    image: str,
    volume: str,
    timeout: float,
    logdir: Path,
    keep: bool = False,
    env: Mapping[str, str] | None = None,
    binds: tuple[tuple[str, str], ...] = (),
    paths: tuple[str, ...] = (),
) -> tuple[SuiteResult, Kept | None]:
    """Run tests/<suite> in a fresh container, or only `paths` of it. Returns the result and, when kept for
    debugging, the container."""
    command = (*PYTEST_IN_IMAGE, *(paths or (f"tests/{suite.value}",)), *PYTEST_ARGS,
               f"--junitxml={junit_in_container(suite)}")  # fmt: skip
    spec = suite_spec(run_id=run_id, cell=cell, suite=suite, image=image, volume=volume, env=env, command=command)
    spec = replace(spec, binds=binds)
    attempt = container_attempt(engine, spec, suite, timeout=timeout, log=logdir / f"{cell}-{suite.value}.log")
    judged = replace(judge(suite, attempt), scope=paths)
    return settle(engine, spec, judged, keep=keep, cell=cell, suite=suite, volume=volume)


def cpuinfo_reporting(cache_kb: int, real: Path = Path("/proc/cpuinfo")) -> str:
    """This machine's /proc/cpuinfo with every processor's `cache size` saying `cache_kb` KB: what a CPU with
    that cache reports, and what PyPy sizes its nursery from (docs/platforms/pypy.md)."""
    said, told = [], False
    for line in real.read_text().splitlines():
        if line.startswith("cache size"):
            line, told = f"cache size\t: {cache_kb} KB", True
        said.append(line)
    if not told:  # a CPU (or an architecture) that reports none: say it once, as x86 does per processor
        said.insert(1, f"cache size\t: {cache_kb} KB")
    return "\n".join(said) + "\n"


def junit_in_container(suite: Suite) -> str:
    return f"/tmp/junit-{suite.value}.xml"


def suite_spec(*, run_id: str, cell: str, suite: Suite, image: str, volume: str, command: tuple[str, ...],
               env: Mapping[str, str] | None = None, interactive: bool = False) -> ContainerSpec:  # fmt: skip
    """A suite's container: under an init, offline, as the image's user, memory and processes capped,
    pytest's folder mounted read-only, the command measured (MEASURE)."""
    return ContainerSpec(
        image=image, args=("-c", MEASURE, "mcplab-measure", *command), name=container_name(run_id, cell, suite),
        labels={LABEL: "1", RUN_LABEL: run_id}, user="mcp", memory=MEMORY_LIMIT, pids_limit=4096, init=True,
        volumes=((volume, PYTEST_MOUNT),), env=dict(env or {}), entrypoint="/bin/sh", interactive=interactive,
    )  # fmt: skip


def parse_usage(text: str) -> Usage:
    """What MEASURE wrote: `memory BYTES FILE`, `cpu_us N FILE` or `cpu_ns N FILE`; Usage() when nothing."""
    peak, cpu, sources = 0, 0.0, []
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        value, _, source = rest.partition(" ")
        if not value.isdigit():
            continue
        if kind == "memory":
            peak = int(value)
        elif kind in ("cpu_us", "cpu_ns"):
            cpu = int(value) / (1e6 if kind == "cpu_us" else 1e9)
        else:
            continue
        sources.append(source)
    if not sources:
        return Usage()
    return Usage(peak_memory=peak, cpu_time=cpu, measured_by=f"the suite's container's cgroup ({', '.join(sources)})",
                 limit=CONTAINER_MEMORY)


def container_attempt(engine: Engine, spec: ContainerSpec, suite: Suite, *, timeout: float, log: Path,
                      input: bytes | None = None) -> Attempt:  # fmt: skip
    """Run the suite's container to its end and collect what it left: output, JUnit XML, state."""
    started = time.monotonic()
    done = engine.run(spec, timeout=timeout, log=log, input=input)
    duration = time.monotonic() - started
    junit = b""
    state = None
    usage = Usage()
    if not done.timed_out:
        junit = engine.read_file(spec.name, junit_in_container(suite)) or b""
        state = engine.state(spec.name)
        usage = parse_usage((engine.read_file(spec.name, USAGE_FILE) or b"").decode("utf-8", "replace"))
    return _container_attempt(done, junit.decode("utf-8", "replace"), duration, timeout, state, usage)


def _container_attempt(
    done: Completed, junit: str, duration: float, timeout: float, state: ContainerState | None, usage: Usage
) -> Attempt:
    # The init (docker-init) exits 128+N when the suite's process died by signal N; the client itself
    # killed by a signal (an interrupt) reports it as a negative code.
    code = done.returncode
    killed_by = done.signal or (code - 128 if 128 < code <= 128 + 64 and not junit else 0)
    return Attempt(
        returncode=code, output=done.output, junit=junit, duration=duration, timeout=timeout,
        timed_out=done.timed_out, killed_by=killed_by, out_of_memory=bool(state and state.oom_killed),
        memory_limit=MEMORY_LIMIT, usage=usage,
    )  # fmt: skip


def settle(engine: Engine, spec: ContainerSpec, result: SuiteResult, *, keep: bool, cell: str, suite: Suite,
           volume: str) -> tuple[SuiteResult, Kept | None]:  # fmt: skip
    """Remove the suite's container, or keep it for debugging (--keep) when the suite did not pass."""
    if keep and result.outcome is not Outcome.PASSED:
        return result, Kept(container=spec.name, cell=cell, suite=suite, outcome=result.outcome, image=spec.image,
                            volume=volume)  # fmt: skip
    engine.remove_containers(spec.name)
    return result, None


def run_on_host(
    processes: Processes,
    *,
    venv_python: Path,
    pytest_folder: Path,
    root: Path,
    cell: str,
    suite: Suite,
    timeout: float,
    logdir: Path,
    workdir: Path,
    extra_env: Mapping[str, str] | None = None,
) -> SuiteResult:
    env = host_env(pytest_folder, extra_env)
    junit = workdir / f"{cell}-{suite.value}.xml"
    argv = [str(venv_python), "-m", "pytest", f"tests/{suite.value}", *PYTEST_ARGS, f"--junitxml={junit}"]
    return _run_pytest(processes, suite, argv, junit=junit, env=env, cwd=root, timeout=timeout,
                       log=logdir / f"{cell}-{suite.value}.log")  # fmt: skip


def host_env(pytest_folder: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without its PYTHON* settings, with pytest's folder on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(pytest_folder), PYTHONDONTWRITEBYTECODE="1", **(extra or {}))
    return env


def _run_pytest(
    processes: Processes,
    suite: Suite,
    argv: list[str],
    *,
    junit: Path,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    log: Path,
) -> SuiteResult:
    """Run one pytest process on the host under the harness's timeout, and judge it by its JUnit XML."""
    return judge(suite, host_attempt(processes, argv, junit=junit, env=env, cwd=cwd, timeout=timeout, log=log))


def host_attempt(processes: Processes, argv: list[str], *, junit: Path, env: dict[str, str], cwd: Path, timeout: float,
                 log: Path, input: bytes | None = None) -> Attempt:  # fmt: skip
    """Run one pytest process (or a driver that ends in one) on the host and collect what it left."""
    junit.unlink(missing_ok=True)
    started = time.monotonic()
    done = processes.command(argv, timeout=timeout, log=log, env=env, cwd=cwd, input=input)
    duration = time.monotonic() - started
    text = junit.read_text(encoding="utf-8", errors="replace") if junit.exists() else ""
    return Attempt(returncode=done.returncode, output=done.output, junit=text, duration=duration, timeout=timeout,
                   timed_out=done.timed_out, killed_by=done.signal, usage=done.usage)  # fmt: skip


def missing_host_tools() -> list[str]:
    return [name for name in HOST_TOOLS if importlib.util.find_spec(name) is None]


def run_image_checks(
    processes: Processes,
    *,
    run_id: str,
    cell: Cell,
    runtime_image: str,
    python_image: str,
    timeout: float,
    logdir: Path,
    workdir: Path,
    name: str = "",
) -> SuiteResult:
    """The testinfra checks in tests/images, run from the host against the cell's runtime image; `name` is
    what this attempt's files are called (suites.outcome_of names each attempt)."""
    missing = missing_host_tools()
    if missing:
        message = (
            f"{', '.join(missing)} not installed for {sys.executable}, which runs the image checks: run "
            "`make matrix`, or `python3 scripts/run_matrix.py` without a venv active (it provisions .venv-lab)"
        )
        return SuiteResult(suite=Suite.IMAGES, outcome=Outcome.ERROR, message=message)
    env = dict(os.environ)
    env["LAB_RUN_ID"] = run_id
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LAB_ROOT), env.get("PYTHONPATH")]))
    checks = LAB_ROOT / "tests" / "images"
    name = name or cell.name
    junit = workdir / f"{name}-images.xml"
    argv = [
        sys.executable, "-m", "pytest", str(checks), *PYTEST_ARGS, "--confcutdir", str(checks), f"--junitxml={junit}",
        f"--image={runtime_image}", f"--python-image={python_image}", f"--cell-python={cell.python}",
        f"--python-from={cell.python_from.value}", f"--family={cell.family.value}",
        f"--interpreter={cell.interpreter}", f"--implementation={cell.implementation.value}",
        f"--flavour={cell.flavour.value}",
    ]  # fmt: skip
    return _run_pytest(processes, Suite.IMAGES, argv, junit=junit, env=env, cwd=LAB_ROOT, timeout=timeout,
                       log=logdir / f"{name}-images.log")  # fmt: skip
