"""One suite of one cell: which runner it goes to, and the memo key of everything that decides its result
(an identical earlier pass is reported instead of running it again: memo.py).

  unit, http, payload, hostile   pytest of tests/<suite> in the test image, or by the host cell's venv python
  install                        the built wheel installed by pip in the install image (or a host venv),
                                 then tests/install and tests/unit against it (install.py)
  images                         the testinfra checks from the host against the runtime image (attempts.py)
  conformance                    the official suite from the host against the cell's server (conformance.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import LAB_ROOT, conformance, install
from .attempts import host_env, pytest_volume, run_image_checks, run_in_container, run_on_host
from .budgets import Budget, budget_for, kind
from .build import Images
from .install import DistributionError
from .lab import Lab
from .memo import files_digest, memo_key
from .model import Cell, Outcome, Suite, SuiteResult

STRESSED = (Suite.UNIT, Suite.HTTP)  # where the concurrency tests are (tests/unit, tests/http)


def budget(cell: Cell, suite: Suite) -> Budget:
    return budget_for(suite, kind(cell.implementation, cell.flavour))


def run_name(cell: Cell, attempt: int) -> str:
    """What one attempt of a cell's suite is called in container names, logs and JUnit files: a rerun
    (--retries) gets names of its own, so a kept first attempt's container and its log stay as they were."""
    return cell.name if attempt == 1 else f"{cell.name}-run{attempt}"


def stress_env(cell: Cell, suite: Suite) -> dict[str, str]:
    """MCPSERVER_STRESS for the suites holding the concurrency tests, in a cell that asks for it."""
    return {"MCPSERVER_STRESS": str(cell.stress)} if cell.stress and suite in STRESSED else {}


@dataclass(frozen=True, kw_only=True)
class PytestFolder:
    folder: Path
    volume: str = ""  # containers: the volume it is copied into
    wheels: str = ""  # its wheels, for memo keys
    pip: str = ""  # the file name of pip's wheel in it


def _distribution(lab: Lab) -> install.Distribution | SuiteResult:
    try:
        return lab.distributions.get()
    except DistributionError as exc:
        return SuiteResult(suite=Suite.INSTALL, outcome=Outcome.ERROR, message=str(exc))


@dataclass(frozen=True, kw_only=True)
class HostCell:
    interpreter: str  # the real path of the cell's python3.X
    venv_python: Path  # a venv of it with the source tree's package copied in
    inputs: str  # digest of what every suite run depends on (code, examples, top-level test helpers)
    pytest: PytestFolder


def host_suite(lab: Lab, cell: Cell, host: HostCell, suite: Suite) -> SuiteResult:
    root, options = lab.options.root, lab.options
    tests = files_digest([root / "tests" / suite.value]) if suite.has_tests_dir else ""
    common = ("host", suite.value, host.interpreter, cell.python, host.inputs, tests, host.pytest.wheels)
    if suite is Suite.CONFORMANCE:
        key = memo_key(*common, files_digest([conformance.SCRIPT]))
        return lab.remembered(key, lambda attempt: conformance.run_against_host(
            lab.processes, lab.conformance, python=host.venv_python, everything=root / "server/examples/everything.py",
            cell=run_name(cell, attempt), env=host_env(host.pytest.folder), timeout=options.timeout,
            logdir=lab.logdir, workdir=lab.workdir,
        ), budget(cell, suite))  # fmt: skip
    if suite is Suite.INSTALL:
        made = _distribution(lab)
        if isinstance(made, SuiteResult):
            return made
        key = memo_key(*common, files_digest([made.wheel]), str(made.twine.ok), files_digest([install.DRIVER]))
        return lab.remembered(key, lambda attempt: install.run_on_host(
            lab.processes, made, interpreter=host.interpreter, pytest_folder=host.pytest.folder,
            pip_wheel=host.pytest.pip, root=root, cell=run_name(cell, attempt), timeout=options.timeout,
            logdir=lab.logdir, workdir=lab.workdir,
        ), budget(cell, suite))  # fmt: skip
    extra = stress_env(cell, suite)
    return lab.remembered(memo_key(*common, str(sorted(extra.items()))), lambda attempt: run_on_host(
        lab.processes, venv_python=host.venv_python, pytest_folder=host.pytest.folder, root=root,
        cell=run_name(cell, attempt), suite=suite, timeout=options.timeout, logdir=lab.logdir, workdir=lab.workdir,
        extra_env=extra,
    ), budget(cell, suite))  # fmt: skip


def container_suite(lab: Lab, cell: Cell, built: Images, pytest: PytestFolder | None, suite: Suite) -> SuiteResult:
    image_id = lab.engine.image_id
    options = lab.options
    if suite is Suite.IMAGES:
        key = memo_key(
            "images", image_id(built.runtime) or "", image_id(built.python) or "",
            files_digest([LAB_ROOT / "tests" / "images"]), cell.python, cell.python_from.value, cell.family.value,
            cell.interpreter, cell.implementation.value, cell.flavour.value,
        )  # fmt: skip
        return lab.remembered(key, lambda attempt: run_image_checks(
            lab.processes, run_id=lab.run_id, cell=cell, name=run_name(cell, attempt), runtime_image=built.runtime,
            python_image=built.python, timeout=options.timeout, logdir=lab.logdir, workdir=lab.workdir,
        ), budget(cell, suite))  # fmt: skip
    if suite is Suite.CONFORMANCE:
        key = memo_key("conformance", image_id(built.runtime) or "", files_digest([conformance.SCRIPT]))
        return lab.remembered(key, lambda attempt: conformance.run_against_container(
            lab.engine, lab.conformance, image=built.runtime, run_id=lab.run_id, cell=run_name(cell, attempt),
            timeout=options.timeout, logdir=lab.logdir, workdir=lab.workdir,
        ), budget(cell, suite))  # fmt: skip
    assert pytest is not None
    if suite is Suite.INSTALL:
        return _install_in_container(lab, cell, built, pytest)
    extra = stress_env(cell, suite)

    def in_container(attempt: int) -> SuiteResult:
        pytest_volume(lab.engine, pytest.volume, pytest.folder, built.test)
        result, kept = run_in_container(
            lab.engine, run_id=lab.run_id, cell=run_name(cell, attempt), suite=suite, image=built.test,
            volume=pytest.volume, timeout=options.timeout, logdir=lab.logdir, keep=options.keep, env=extra,
        )  # fmt: skip
        if kept is not None:
            lab.keep(kept)
        return result

    key = memo_key("container", image_id(built.test) or "", suite.value, pytest.volume, str(sorted(extra.items())))
    return lab.remembered(key, in_container, budget(cell, suite))


def _install_in_container(lab: Lab, cell: Cell, built: Images, pytest: PytestFolder) -> SuiteResult:
    made = _distribution(lab)
    if isinstance(made, SuiteResult):
        return made

    def in_container(attempt: int) -> SuiteResult:
        pytest_volume(lab.engine, pytest.volume, pytest.folder, built.install)
        result, kept = install.run_in_container(
            lab.engine, made, run_id=lab.run_id, cell=run_name(cell, attempt), image=built.install,
            volume=pytest.volume, pip_wheel=pytest.pip, timeout=lab.options.timeout, logdir=lab.logdir,
            keep=lab.options.keep,
        )  # fmt: skip
        if kept is not None:
            lab.keep(kept)
        return result

    key = memo_key("install", lab.engine.image_id(built.install) or "", pytest.volume, files_digest([made.wheel]),
                   str(made.twine.ok), files_digest([install.DRIVER]))  # fmt: skip
    return lab.remembered(key, in_container, budget(cell, Suite.INSTALL))
