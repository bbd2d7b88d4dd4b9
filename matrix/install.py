"""The install suite (issue 16): the SDK as users get it. Once per run, on the host, PyPA `build` makes the
sdist and the wheel from the package's own files, `twine check` reads them, and the wheel is checked to hold every
file of the package's source; then in every cell install_driver.sh installs that wheel with pip (into a venv where
the cell's Python has venv and ensurepip, else with pip run from its own wheel, offline), and runs tests/install
against the installed copy: which copy is imported, that every module of it imports, that it serves by its console
script over stdio and over HTTP, --check of the examples, the wheel's contents. What the code does is the other
suites' to test, on the embedded copy: running tests/unit again here took a quarter of a cold run's suite time.

In a container the driver runs in the image's `install` stage: the cell's Python, the user and the suites,
but no embedded server, so nothing but the installed copy can be imported.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from .attempts import (
    PYTEST_ARGS,
    PYTEST_MOUNT,
    Kept,
    container_attempt,
    host_attempt,
    host_env,
    junit_in_container,
    settle,
    suite_spec,
)
from .build import ANSI, ContextFile, suite_files, unavailable_reason, walk
from .engine import Engine
from .model import Outcome, Suite, SuiteResult
from .outcomes import Attempt, judge
from .processes import Completed, Processes, tail

DRIVER = Path(__file__).with_name("install_driver.sh")
# The files the distribution is built from (pyproject.toml names the readme; setuptools adds LICENSE*).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "server/mcpserver")
BUILD_TIMEOUT = 600.0
WORK_IN_CONTAINER = "/tmp/mcplab-install"
# Set, to the cell's name, wherever the lab runs the project's suites: tests/conftest.py then leaves out the tests
# marked host_only (the README, docs/, mypy, a browser), and names them in the JUnit XML (matrix/skips.py).
IN_A_CELL = "MCPLAB_CELL"


@dataclass(frozen=True, kw_only=True)
class Distribution:
    wheel: Path
    sdist: Path
    twine: Completed  # `twine check` of both
    missing: tuple[str, ...] = ()  # files of the package's source the wheel lacks (pyproject.toml's packages)

    @property
    def ok(self) -> bool:
        return self.twine.ok and not self.missing

    def testcases(self) -> ET.Element:
        """What was checked on the host, as a JUnit testsuite to join each cell's own."""
        suite = ET.Element("testsuite", name="distribution", tests="2")
        case = ET.SubElement(suite, "testcase", classname="distribution", name="test_twine_check_passes")
        failures = 0
        if not self.twine.ok:
            failures += 1
            said = _xml_text(self.twine.output)
            last = (said.strip().splitlines() or ["no output"])[-1]
            ET.SubElement(case, "failure", message=f"twine check failed: {last}").text = tail(said)
        case = ET.SubElement(suite, "testcase", classname="distribution", name="test_the_wheel_holds_every_source_file")
        if self.missing:
            failures += 1
            said = f"the wheel lacks {len(self.missing)} files of server/mcpserver: {', '.join(self.missing[:10])}"
            ET.SubElement(case, "failure", message=f"{said} (pyproject.toml's packages list?)")
        if failures:
            suite.set("failures", str(failures))
        return suite


def _xml_text(text: str) -> str:
    """Text fit for XML: no colour codes (twine draws them even into a pipe), no other control characters."""
    plain = ANSI.sub("", text)
    return "".join(ch for ch in plain if ch in "\n\t" or ch >= " ")


class DistributionError(Exception):
    pass


def source_files(root: Path) -> list[ContextFile]:
    return [f for name in SOURCES for f in walk(root, root / name, "")]


class Distributions:
    """`python -m build` at most once per run and per content: the sdist and wheel live in
    CACHE/<hash of the sources>/, so an unchanged package is not built again on the next run either."""

    def __init__(self, processes: Processes, root: Path, cache: Path, log: Path) -> None:
        self.processes = processes
        self.root = root
        self.cache = cache
        self.log = log
        self._lock = threading.Lock()
        self._made: Distribution | DistributionError | None = None

    def get(self) -> Distribution:
        with self._lock:
            if self._made is None:
                try:
                    self._made = self._make()
                except DistributionError as exc:
                    self._made = exc
            if isinstance(self._made, DistributionError):
                raise self._made
            return self._made

    def _make(self) -> Distribution:
        files = source_files(self.root)
        key = hashlib.sha256(b"".join(f.arcname.encode() + b"\0" + f.data for f in files)).hexdigest()[:16]
        out = self.cache / key
        if not (list(out.glob("*.whl")) and list(out.glob("*.tar.gz"))):
            self._build(files, out)
        wheel, sdist = sorted(out.glob("*.whl"))[0], sorted(out.glob("*.tar.gz"))[0]
        return Distribution(wheel=wheel, sdist=sdist, twine=self._twine_check(out, wheel, sdist),
                            missing=missing_from(wheel, files))  # fmt: skip

    def _twine_check(self, out: Path, wheel: Path, sdist: Path) -> Completed:
        """`twine check` of these very files, run once and remembered beside them (it takes seconds, and a
        rerun with nothing changed should not)."""
        said = out / "twine-check.json"
        try:
            found = json.loads(said.read_text(encoding="utf-8"))
            return Completed(returncode=int(found["returncode"]), output=str(found["output"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        done = self.processes.command([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                                   timeout=120, log=self.log)  # fmt: skip
        if not done.timed_out:
            said.write_text(json.dumps({"returncode": done.returncode, "output": done.output}) + "\n")
        return done

    def _build(self, files: list[ContextFile], out: Path) -> None:
        """Build from a copy of exactly the package's files: the checkout stays clean (no egg-info) and
        nothing outside SOURCES can slip into the sdist."""
        self.cache.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix="src-", dir=self.cache))
        built = Path(tempfile.mkdtemp(prefix="out-", dir=self.cache))
        try:
            for f in files:
                (stage / f.arcname).parent.mkdir(parents=True, exist_ok=True)
                (stage / f.arcname).write_bytes(f.data)
            done = self.processes.command([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(built),
                                        str(stage)], timeout=BUILD_TIMEOUT, log=self.log)  # fmt: skip
            if not done.ok:
                raise DistributionError(f"`python -m build` failed ({done.last_line()}); see {self.log}")
            shutil.rmtree(out, ignore_errors=True)
            built.rename(out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            shutil.rmtree(built, ignore_errors=True)


def missing_from(wheel: Path, files: list[ContextFile]) -> tuple[str, ...]:
    """The files of the package's source (server/mcpserver) that the wheel does not hold."""
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
    package = (f.arcname.removeprefix("server/") for f in files if f.arcname.startswith("server/mcpserver/"))
    return tuple(sorted(name for name in package if name not in held))


def with_host_checks(junit: str, distribution: Distribution) -> str:
    """The cell's JUnit XML with the host's checks of the distribution joined in ('' stays '')."""
    if not junit:
        return junit
    try:
        root = ET.fromstring(junit)
    except ET.ParseError:
        return junit
    if root.tag == "testsuite":
        root = ET.Element("testsuites")
        root.append(ET.fromstring(junit))
    root.append(distribution.testcases())
    return ET.tostring(root, encoding="unicode")


def stage_suites(root: Path, folder: Path) -> Path:
    """The suites as a test image holds them (tests/, server/examples, pyproject.toml; no server package),
    written under `folder` for a host cell's install suite: the source tree's copy must not be imported."""
    lab = folder / "lab"
    for f in suite_files(root):
        path = folder / f.arcname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.data)
    return lab


def _judged(attempt: Attempt, distribution: Distribution) -> SuiteResult:
    """The cell's run with the host's checks joined in; a failed host check fails the suite. A driver that
    said this interpreter cannot install a wheel at all (no zlib) makes the suite unavailable, with why."""
    said = unavailable_reason(attempt.output) if attempt.returncode != 0 and not attempt.timed_out else ""
    if said:
        return SuiteResult(suite=Suite.INSTALL, outcome=Outcome.UNAVAILABLE, message=said,
                           duration=attempt.duration)  # fmt: skip
    failed_here = not distribution.ok and attempt.returncode == 0
    joined = replace(attempt, junit=with_host_checks(attempt.junit, distribution),
                     returncode=1 if failed_here else attempt.returncode)  # fmt: skip
    return judge(Suite.INSTALL, joined)


def run_in_container(engine: Engine, distribution: Distribution, *, run_id: str, cell: str, image: str, volume: str,
                     pip_wheel: str, timeout: float, logdir: Path, keep: bool
                     ) -> tuple[SuiteResult, Kept | None]:  # fmt: skip
    """The driver in the cell's install image (no embedded server), the wheel on its stdin."""
    spec = suite_spec(
        run_id=run_id, cell=cell, suite=Suite.INSTALL, image=image, volume=volume, interactive=True,
        env={"MCPLAB_WORK": WORK_IN_CONTAINER, "MCPLAB_PIP": f"{PYTEST_MOUNT}/{pip_wheel}", IN_A_CELL: cell},
        command=("/bin/sh", "-c", DRIVER.read_text(encoding="utf-8"), "install", distribution.wheel.name,
                 *PYTEST_ARGS, f"--junitxml={junit_in_container(Suite.INSTALL)}"),
    )  # fmt: skip
    attempt = container_attempt(engine, spec, Suite.INSTALL, timeout=timeout, log=logdir / f"{cell}-install.log",
                                input=distribution.wheel.read_bytes())  # fmt: skip
    return settle(engine, spec, _judged(attempt, distribution), keep=keep, cell=cell, suite=Suite.INSTALL,
                  volume=volume)  # fmt: skip


def run_on_host(processes: Processes, distribution: Distribution, *, interpreter: str, pytest_folder: Path,
                pip_wheel: str, root: Path, cell: str, timeout: float, logdir: Path, workdir: Path
                ) -> SuiteResult:  # fmt: skip
    """The same driver with a host interpreter, from a copy of the suites (no source tree beside them)."""
    work = workdir / f"{cell}-install"
    shutil.rmtree(work, ignore_errors=True)
    lab = stage_suites(root, work)
    env = host_env(pytest_folder, {"MCP_PYTHON": interpreter, "MCPLAB_WORK": str(work / "install"), IN_A_CELL: cell,
                                   "MCPLAB_PIP": str(pytest_folder / pip_wheel)})  # fmt: skip
    junit = workdir / f"{cell}-install.xml"
    argv = ["sh", "-c", DRIVER.read_text(encoding="utf-8"), "install", distribution.wheel.name, *PYTEST_ARGS,
            f"--junitxml={junit}"]  # fmt: skip
    attempt = host_attempt(processes, argv, junit=junit, env=env, cwd=lab, timeout=timeout,
                           log=logdir / f"{cell}-install.log", input=distribution.wheel.read_bytes())  # fmt: skip
    return _judged(attempt, distribution)
