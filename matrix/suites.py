"""What a suite is, in each place it runs: one small runner per suite and place, in two tables (IN_CONTAINER,
ON_HOST). A runner's fields marked DECLARED are everything that decides its result, and the memo key is
derived from exactly those fields (memo.py reports an identical earlier pass instead of running it again);
the other fields only say how to reach what the declared ones name (a tag whose image ID is declared, the
folder a declared volume is filled from, the name its files get). Every runner declares the harness too: the
code that makes and judges an attempt, so changing it reruns what it judged, with nothing to bump by hand.

  unit, http, payload, hostile   pytest of tests/<suite> in the test image, or by the host cell's venv python
  install                        the built wheel installed by pip in the install image (or a host venv), then
                                 tests/install and tests/unit against it (install.py)
  images                         the testinfra checks from the host against the runtime image (attempts.py)
  conformance                    the official suite from the host against the cell's server (conformance.py)

A suite's attempts (the first, then --retries more while it does not pass) and its budget are `outcome_of`'s.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from . import LAB_ROOT, conformance, install
from .attempts import (
    PYTEST_MOUNT,
    Kept,
    cpuinfo_reporting,
    host_env,
    pytest_volume,
    run_image_checks,
    run_in_container,
    run_on_host,
)
from .budgets import DRIVER_ENV, Budget, budget_for, kind, slowdown
from .build import Images, digest, suite_files
from .conformance import ConformanceTool
from .engine import Engine
from .install import Distribution
from .memo import SuiteMemo, files_digest, memo_key
from .model import Cell, Outcome, Suite, SuiteResult
from .outcomes import RETRIED, after_attempts, within_budget
from .processes import Processes

MATRIX = Path(__file__).resolve().parent
# The code that makes and judges an attempt: a change to any of it reruns every suite it judged.
HARNESS = tuple(MATRIX / name for name in ("suites.py", "attempts.py", "outcomes.py", "junit.py", "install.py",
                                           "install_driver.sh", "conformance.py", "arches.py"))  # fmt: skip
STRESSED = (Suite.UNIT, Suite.HTTP)  # where the concurrency tests are (tests/unit, tests/http)
IN_A_CELL = install.IN_A_CELL


DECLARED = {"input": True}  # the metadata of a field that decides a runner's result, and so goes into its key


@functools.cache
def harness_digest(files: tuple[Path, ...] = HARNESS) -> str:
    return files_digest(list(files))


@dataclass(frozen=True, kw_only=True)
class Surroundings:
    """What an attempt needs besides its inputs: the tools that run it, where it writes, how long it may take,
    and what becomes of a container kept for debugging."""

    engine: Engine
    processes: Processes
    conformance: ConformanceTool
    run_id: str
    logdir: Path
    workdir: Path
    timeout: float
    keep: bool
    kept: Callable[[Kept], None]


@dataclass(frozen=True, kw_only=True)
class Runner:
    suite: Suite = field(metadata=DECLARED)
    harness: str = field(metadata=DECLARED)
    budget: Budget  # applied to every attempt and to a remembered pass, never part of the key: budgets change

    def inputs(self) -> dict[str, str]:
        """Every declared field, by name, as text."""
        return {f.name: str(getattr(self, f.name)) for f in fields(self) if f.metadata.get("input")}

    @property
    def key(self) -> str:
        return memo_key(type(self).__name__, *(f"{name}={value}" for name, value in sorted(self.inputs().items())))

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        """Run it once; `name` is what this attempt's containers, logs and files are called."""
        raise NotImplementedError

    def by_hand(self, where: Surroundings) -> str:
        """The command that opens a shell where it ran, as it ran there: the same image, mounts and settings."""
        raise NotImplementedError


RERUN = "python scripts/run_matrix.py"


def reproduce(runner: Runner, where: Surroundings, cell: str) -> str:
    """One line: the rerun of only this suite in only this cell, then after a `#` the shell by hand."""
    return f"{RERUN} --cell {cell} --suite {runner.suite.value}  # by hand: {runner.by_hand(where)}"


def docker_shell(where: Surroundings, image: str, *mounts: str, env: tuple[tuple[str, str], ...] = (),
                 user: str = "mcp") -> str:  # fmt: skip
    """`docker run` of a shell in `image` (with its architecture's --platform, as the lab runs it)."""
    platform = where.engine.platform_of(image)
    parts = ["docker run --rm -it", *([f"--platform {platform}"] if platform else []), "--network none",
             f"--user {user}", *(f"--mount {m}" for m in mounts), *(f"-e {k}={v}" for k, v in env),
             f"--entrypoint /bin/sh {image}"]  # fmt: skip
    return " ".join(parts)


def _kept(where: Surroundings, result: tuple[SuiteResult, Kept | None]) -> SuiteResult:
    if result[1] is not None:
        where.kept(result[1])
    return result[0]


@dataclass(frozen=True, kw_only=True)
class InTestImage(Runner):
    """unit, http, payload, hostile: pytest of tests/<suite> in a fresh container of the cell's test image."""

    image_id: str = field(metadata=DECLARED)  # the test image: the code, the suites and the interpreter
    volume: str = field(metadata=DECLARED)  # the pytest folder's volume, named by its exact wheels
    env: tuple[tuple[str, str], ...] = field(metadata=DECLARED)  # suite_env
    cpu_cache_kb: int = field(metadata=DECLARED)  # the cache /proc/cpuinfo reports in it (0: this machine's)
    scope: tuple[str, ...] = field(metadata=DECLARED)  # the test files it is cut to under emulation; () for all
    image: str  # the tag that names image_id
    folder: Path  # what the volume is filled from

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        pytest_volume(where.engine, self.volume, self.folder, self.image)
        binds: tuple[tuple[str, str], ...] = ()
        if self.cpu_cache_kb:  # a local engine's (cell.known_unavailable): this path is the engine's too
            cpuinfo = where.workdir / f"cpuinfo-{self.cpu_cache_kb}KB"
            cpuinfo.write_text(cpuinfo_reporting(self.cpu_cache_kb))
            binds = ((str(cpuinfo), "/proc/cpuinfo"),)
        return _kept(where, run_in_container(
            where.engine, run_id=where.run_id, cell=name, suite=self.suite, image=self.image, volume=self.volume,
            timeout=where.timeout, logdir=where.logdir, keep=where.keep, env=dict(self.env), binds=binds,
            paths=self.scope,
        ))  # fmt: skip

    def by_hand(self, where: Surroundings) -> str:
        cpuinfo = where.workdir / f"cpuinfo-{self.cpu_cache_kb}KB"
        binds = [f"type=bind,source={cpuinfo},target=/proc/cpuinfo,readonly"] if self.cpu_cache_kb else []
        return docker_shell(where, self.image, f"type=volume,source={self.volume},target={PYTEST_MOUNT},readonly",
                            *binds, env=self.env)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class InstallInImage(Runner):
    """install: the wheel installed by pip in the cell's install image (no embedded server), then the suites."""

    image_id: str = field(metadata=DECLARED)  # the install image: the interpreter, the user and the suites
    volume: str = field(metadata=DECLARED)  # the pytest folder, with pip's wheel in it
    wheel: str = field(metadata=DECLARED)  # the wheel's content
    twine: bool = field(metadata=DECLARED)  # whether `twine check` passed on the host
    driver: str = field(metadata=DECLARED)  # install_driver.sh
    image: str
    folder: Path
    pip: str  # pip's wheel's file name in the folder (named by volume)
    distribution: Distribution  # named by wheel and twine

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        pytest_volume(where.engine, self.volume, self.folder, self.image)
        return _kept(where, install.run_in_container(
            where.engine, self.distribution, run_id=where.run_id, cell=name, image=self.image, volume=self.volume,
            pip_wheel=self.pip, timeout=where.timeout, logdir=where.logdir, keep=where.keep,
        ))  # fmt: skip

    def by_hand(self, where: Surroundings) -> str:
        mount = f"type=volume,source={self.volume},target={PYTEST_MOUNT},readonly"
        return f"{docker_shell(where, self.image, mount)} (the wheel: {self.distribution.wheel})"


@dataclass(frozen=True, kw_only=True)
class ImageChecks(Runner):
    """images: the testinfra checks of tests/images from the host against the runtime image."""

    runtime_id: str = field(metadata=DECLARED)
    python_id: str = field(metadata=DECLARED)  # the python stage, which the checks compare the runtime image with
    checks: str = field(metadata=DECLARED)  # tests/images
    promises: str = field(metadata=DECLARED)  # what the cell promises (its Python, its family, ...)
    cell: Cell  # named by promises: the checks are given those fields of it
    runtime: str
    python: str

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        return run_image_checks(where.processes, run_id=where.run_id, cell=self.cell, name=name,
                                runtime_image=self.runtime, python_image=self.python, timeout=where.timeout,
                                logdir=where.logdir, workdir=where.workdir)  # fmt: skip

    def by_hand(self, where: Surroundings) -> str:
        return docker_shell(where, self.runtime)


@dataclass(frozen=True, kw_only=True)
class ConformanceOfImage(Runner):
    """conformance: the official suite from the host against everything.py served by the runtime image."""

    runtime_id: str = field(metadata=DECLARED)
    script: str = field(metadata=DECLARED)  # scripts/conformance.py, which pins the suite
    runtime: str

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        return conformance.run_against_container(where.engine, where.conformance, image=self.runtime,
                                                 run_id=where.run_id, cell=name, timeout=where.timeout,
                                                 logdir=where.logdir, workdir=where.workdir)  # fmt: skip

    def by_hand(self, where: Surroundings) -> str:
        return docker_shell(where, self.runtime)


@dataclass(frozen=True, kw_only=True)
class OnHost(Runner):
    """What every suite on a host interpreter depends on."""

    interpreter: str = field(metadata=DECLARED)  # the real path of the cell's python3.X
    python: str = field(metadata=DECLARED)
    code: str = field(metadata=DECLARED)  # server/, pyproject.toml, the files at the top of tests/
    wheels: str = field(metadata=DECLARED)  # the pytest folder's wheels
    venv_python: Path  # a venv of the interpreter with the code copied in (named by interpreter and code)
    folder: Path  # the pytest folder (named by wheels)
    root: Path

    def by_hand(self, where: Surroundings) -> str:
        return f"cd {self.root} && PYTHONPATH={self.folder} {self.venv_python} -m pytest tests/{self.suite.value}"


@dataclass(frozen=True, kw_only=True)
class HostPytest(OnHost):
    """unit, http, payload, hostile: pytest of tests/<suite> by the host cell's venv python."""

    tests: str = field(metadata=DECLARED)  # tests/<suite>
    env: tuple[tuple[str, str], ...] = field(metadata=DECLARED)

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        return run_on_host(where.processes, venv_python=self.venv_python, pytest_folder=self.folder, root=self.root,
                           cell=name, suite=self.suite, timeout=where.timeout, logdir=where.logdir,
                           workdir=where.workdir, extra_env=dict(self.env))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class InstallOnHost(OnHost):
    """install: the wheel installed by pip for the host interpreter, then tests/install and tests/unit."""

    suites: str = field(metadata=DECLARED)  # every file the staged suites hold (tests/unit too)
    wheel: str = field(metadata=DECLARED)
    twine: bool = field(metadata=DECLARED)
    driver: str = field(metadata=DECLARED)
    pip: str
    distribution: Distribution

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        return install.run_on_host(where.processes, self.distribution, interpreter=self.interpreter,
                                   pytest_folder=self.folder, pip_wheel=self.pip, root=self.root, cell=name,
                                   timeout=where.timeout, logdir=where.logdir, workdir=where.workdir)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ConformanceOnHost(OnHost):
    """conformance: the official suite against everything.py served by the host cell's venv python."""

    script: str = field(metadata=DECLARED)

    def attempt(self, where: Surroundings, name: str) -> SuiteResult:
        return conformance.run_against_host(where.processes, where.conformance, python=self.venv_python,
                                            everything=self.root / "server/examples/everything.py", cell=name,
                                            env=host_env(self.folder), timeout=where.timeout, logdir=where.logdir,
                                            workdir=where.workdir)  # fmt: skip


# --- the tables: what each suite is in each place, from what a cell has ------------------------------------


@dataclass(frozen=True, kw_only=True)
class PytestFolder:
    folder: Path
    volume: str = ""  # containers: the volume it is copied into
    wheels: str = ""  # its wheels
    pip: str = ""  # the file name of pip's wheel in it


@dataclass(frozen=True, kw_only=True)
class ContainerCell:
    """What a container cell's suites run on: its built images (tags and IDs) and its pytest folder."""

    cell: Cell
    images: Images
    ids: Images
    pytest: PytestFolder | None
    distribution: Callable[[], Distribution]  # built once per run; DistributionError when it cannot be
    scope: Mapping[Suite, tuple[str, ...]] = field(default_factory=dict)  # budgets.UNDER_EMULATION, when emulated


@dataclass(frozen=True, kw_only=True)
class HostCell:
    """What a host cell's suites run on."""

    cell: Cell
    interpreter: str
    venv_python: Path
    code: str
    pytest: PytestFolder
    root: Path
    distribution: Callable[[], Distribution]


def _common(cell: Cell, suite: Suite) -> dict[str, Any]:
    budget = budget_for(suite, kind(cell.implementation, cell.flavour), cell.arch)
    return {"suite": suite, "harness": harness_digest(), "budget": budget}


def suite_env(cell: Cell, suite: Suite) -> tuple[tuple[str, str], ...]:
    """What pytest runs with: the cell's name (IN_A_CELL: tests/conftest.py then leaves out the host-only tests),
    MCPSERVER_STRESS for the suites holding the concurrency tests, in a cell that asks for it, MCPTEST_SLOWDOWN in an
    emulated cell, and the interpreter settings its budgets assume of pytest itself (budgets.DRIVER_ENV)."""
    stress = (("MCPSERVER_STRESS", str(cell.stress)),) if cell.stress and suite in STRESSED else ()
    # Under emulation, the factor tests scale their own tight timings by (a shell's start takes seconds there).
    emulated = (("MCPTEST_SLOWDOWN", f"{slowdown(cell.arch):g}"),) if slowdown(cell.arch) > 1 else ()
    return ((IN_A_CELL, cell.name), *stress, *emulated, *DRIVER_ENV.get(kind(cell.implementation, cell.flavour), ()))


def _in_test_image(at: ContainerCell, suite: Suite) -> Runner:
    assert at.pytest is not None
    return InTestImage(**_common(at.cell, suite), image_id=at.ids.test, volume=at.pytest.volume,
                       env=suite_env(at.cell, suite), cpu_cache_kb=at.cell.cpu_cache_kb,
                       scope=at.scope.get(suite, ()), image=at.images.test, folder=at.pytest.folder)  # fmt: skip


def _install_in_image(at: ContainerCell, suite: Suite) -> Runner:
    assert at.pytest is not None
    made = at.distribution()
    return InstallInImage(**_common(at.cell, suite), image_id=at.ids.install, volume=at.pytest.volume,
                          wheel=files_digest([made.wheel]), twine=made.ok, driver=files_digest([install.DRIVER]),
                          image=at.images.install, folder=at.pytest.folder, pip=at.pytest.pip,
                          distribution=made)  # fmt: skip


def _image_checks(at: ContainerCell, suite: Suite) -> Runner:
    return ImageChecks(**_common(at.cell, suite), runtime_id=at.ids.runtime, python_id=at.ids.python,
                       checks=files_digest([LAB_ROOT / "tests" / "images"]), promises=promises(at.cell), cell=at.cell,
                       runtime=at.images.runtime, python=at.images.python)  # fmt: skip


def promises(cell: Cell) -> str:
    """The fields of a cell that the image checks hold its image to (attempts.run_image_checks passes them)."""
    return " ".join((cell.python, cell.python_from.value, cell.family.value, cell.interpreter,
                     cell.implementation.value, cell.flavour.value))  # fmt: skip


def _conformance_of_image(at: ContainerCell, suite: Suite) -> Runner:
    return ConformanceOfImage(**_common(at.cell, suite), runtime_id=at.ids.runtime,
                              script=files_digest([conformance.SCRIPT]), runtime=at.images.runtime)  # fmt: skip


def _on_host(at: HostCell, suite: Suite) -> dict[str, Any]:
    return {**_common(at.cell, suite), "interpreter": at.interpreter, "python": at.cell.python, "code": at.code,
            "wheels": at.pytest.wheels, "venv_python": at.venv_python, "folder": at.pytest.folder, "root": at.root}


def _host_pytest(at: HostCell, suite: Suite) -> Runner:
    return HostPytest(**_on_host(at, suite), tests=files_digest([at.root / "tests" / suite.value]),
                      env=suite_env(at.cell, suite))  # fmt: skip


def _install_on_host(at: HostCell, suite: Suite) -> Runner:
    made = at.distribution()
    return InstallOnHost(**_on_host(at, suite), suites=digest(suite_files(at.root)), wheel=files_digest([made.wheel]),
                         twine=made.ok, driver=files_digest([install.DRIVER]), pip=at.pytest.pip,
                         distribution=made)  # fmt: skip


def _conformance_on_host(at: HostCell, suite: Suite) -> Runner:
    return ConformanceOnHost(**_on_host(at, suite), script=files_digest([conformance.SCRIPT]))


IN_CONTAINER: Mapping[Suite, Callable[[ContainerCell, Suite], Runner]] = {
    Suite.UNIT: _in_test_image, Suite.HTTP: _in_test_image, Suite.PAYLOAD: _in_test_image,
    Suite.HOSTILE: _in_test_image, Suite.INSTALL: _install_in_image, Suite.IMAGES: _image_checks,
    Suite.CONFORMANCE: _conformance_of_image,
}  # fmt: skip
ON_HOST: Mapping[Suite, Callable[[HostCell, Suite], Runner]] = {
    Suite.UNIT: _host_pytest, Suite.HTTP: _host_pytest, Suite.PAYLOAD: _host_pytest, Suite.HOSTILE: _host_pytest,
    Suite.INSTALL: _install_on_host, Suite.CONFORMANCE: _conformance_on_host,
}  # fmt: skip


# --- a suite's attempts ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Attempts:
    """How a suite's attempts go: --retries, the run they belong to, and the interrupt that stops reruns."""

    retries: int
    run_id: str
    started: str  # when the run started (UTC, ISO 8601), the time a pass is remembered by
    interrupted: threading.Event


def outcome_of(runner: Runner, where: Surroundings, memo: SuiteMemo, attempts: Attempts, name: str) -> SuiteResult:
    """An identical earlier pass, or the suite run (attempt 1, then up to --retries more while it does not
    pass) and remembered if it passed the first time. Either is held to its budget, a remembered pass too."""
    hit = memo.get(runner.key)
    if hit is not None:
        return within_budget(hit, runner.budget)
    where = replace(where, timeout=where.timeout * runner.budget.slowdown)  # an emulated architecture's time
    done = [within_budget(runner.attempt(where, name), runner.budget)]
    while done[-1].outcome in RETRIED and len(done) <= attempts.retries and not attempts.interrupted.is_set():
        done.append(within_budget(runner.attempt(where, f"{name}-run{len(done) + 1}"), runner.budget))
    result = replace(after_attempts(done), produced_by=attempts.run_id, produced_at=attempts.started)
    memo.put(runner.key, result)
    return result if result.outcome is Outcome.PASSED else replace(result, reproduce=reproduce(runner, where, name))
