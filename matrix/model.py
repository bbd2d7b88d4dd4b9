"""The lab's plain data: cells in, records out.

Everything here is a frozen keyword-only dataclass or an enum with no behaviour beyond small derived
properties, so every step of the pipeline can be tested on values built by hand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Suite(str, enum.Enum):
    """Every suite the lab knows, in report column order."""

    UNIT = "unit"
    HTTP = "http"
    PAYLOAD = "payload"
    HOSTILE = "hostile"
    INSTALL = "install"  # the built wheel installed by pip, then tests/install and tests/unit against it
    IMAGES = "images"  # the testinfra checks of tests/images, run from the host against a built image
    CONFORMANCE = "conformance"  # the official conformance suite from the host against the cell's server

    @property
    def in_container(self) -> bool:
        """The project's own suites (tests/<name>) run as they are inside each container or by each host
        interpreter."""
        return self in (Suite.UNIT, Suite.HTTP, Suite.PAYLOAD, Suite.HOSTILE)

    @property
    def has_tests_dir(self) -> bool:
        """Its tests live in tests/<name> and go into the test image (the install suite's too)."""
        return self.in_container or self is Suite.INSTALL

    @property
    def for_hosts(self) -> bool:
        """It applies to host cells too (the image checks need an image)."""
        return self is not Suite.IMAGES


SUITES: tuple[Suite, ...] = tuple(Suite)
TESTS_DIR_SUITES: tuple[Suite, ...] = tuple(s for s in Suite if s.has_tests_dir)


class Family(str, enum.Enum):
    """How a cell's image is made; `recipe` names its images/<recipe>/Dockerfile."""

    DEBIAN = "debian"
    UBUNTU = "ubuntu"
    ALPINE = "alpine"
    MUSL_BUSYBOX = "musl-busybox"  # musl libc + busybox, CPython compiled in a builder stage (no Alpine)
    HOST = "host"

    @property
    def in_container(self) -> bool:
        return self is not Family.HOST

    @property
    def recipe(self) -> str:
        """Debian and Ubuntu share one apt recipe; the others have their own."""
        return "apt" if self in (Family.DEBIAN, Family.UBUNTU) else self.value


class PythonFrom(str, enum.Enum):
    DISTRO = "distro"  # the distribution's python3.X package, installed in the image
    OFFICIAL = "official"  # already in an official python:X.Y base
    HOST = "host"  # an interpreter found on this machine
    BUILDER = "builder"  # built from source by a builder stage of the family's Dockerfile (e.g. musl)


class Implementation(str, enum.Enum):
    CPYTHON = "cpython"
    PYPY = "pypy"

    @property
    def command(self) -> str:
        """The interpreter's command without its version: python3.11, pypy3.11."""
        return "pypy" if self is Implementation.PYPY else "python"


class Flavour(str, enum.Enum):
    DEFAULT = ""
    FREE_THREADED = "free-threaded"  # CPython built with --disable-gil (PEP 703): python3.Xt


class BootstrapMethod(str, enum.Enum):
    MMDEBSTRAP = "mmdebstrap"
    APK = "apk"
    BUILDER = "builder"  # no recipe of its own: the base is had as another cell with that base has it


@dataclass(frozen=True, kw_only=True)
class Bootstrap:
    """How a base can be made without a registry.

    MMDEBSTRAP: `suite` (and optional `keyring`), mirror from `mirror_env` or mmdebstrap's default.
    APK: `release` ("v3.23"), mirror from `mirror_env`, which must be set. BUILDER: the cell's
    `base` only hosts a builder stage of the family's Dockerfile (the musl+busybox family compiles CPython
    there and ships an image FROM scratch); it is had exactly as the table's other cell with that `base`
    has it (`Cell.base_cell`), so both share one base.
    """

    method: BootstrapMethod
    suite: str = ""
    release: str = ""
    mirror_env: str = ""
    keyring: str = ""
    keyring_env: str = ""  # an environment variable that, when set, names the keyring file instead
    arch: str = ""  # mmdebstrap --architectures, apk.static's index: the cell's architecture ('' for the machine's)


@dataclass(frozen=True, kw_only=True)
class Cell:
    name: str
    family: Family
    release: str
    python: str
    base: str = ""
    python_from: PythonFrom
    bootstrap: Bootstrap | None = None
    base_cell: Cell | None = None  # method BUILDER: the cell whose way of getting `base` this one shares
    implementation: Implementation = Implementation.CPYTHON
    flavour: Flavour = Flavour.DEFAULT
    stress: int = 0  # MCPSERVER_STRESS for the unit and http suites: concurrency cases repeated this often
    # A variant of another cell (`like`): the same images, run on a machine that differs in what it reports.
    like: str = ""  # the cell whose images it runs
    cpu_cache_kb: int = 0  # the cache size its containers' /proc/cpuinfo reports (0: the machine's own)
    only: tuple[Suite, ...] = ()  # the suites it runs, when not every one that applies
    # The architecture it is built for, by Debian's name (arches.py); '' for the machine's own. A cell that names one
    # has images of its own (their tags say it), even where it is the machine's own.
    arch: str = ""
    opt_in: bool = False  # run only when --arch or --cell names it (emulated architectures that take long)

    @property
    def suites(self) -> tuple[Suite, ...]:
        """The suites that apply to this cell; host cells have no image to check."""
        applies = SUITES if self.family.in_container else tuple(s for s in SUITES if s.for_hosts)
        return tuple(s for s in applies if s in self.only) if self.only else applies

    @property
    def arch_tag(self) -> str:
        """What its image tags say of its architecture: '-arm64' for a cell that names one, '' otherwise."""
        return f"-{self.arch}" if self.arch else ""

    @property
    def compiles_python(self) -> bool:
        return self.python_from is PythonFrom.BUILDER

    @property
    def interpreter(self) -> str:
        """The command that starts the cell's Python: python3.11, pypy3.11, python3.14t."""
        suffix = "t" if self.flavour is Flavour.FREE_THREADED else ""
        return f"{self.implementation.command}{self.python}{suffix}"

    @property
    def slug(self) -> str:
        """The interpreter in image tags and folder names: py3.11, pypy3.11, py3.14t."""
        return self.interpreter.replace("python", "py", 1)

    @property
    def recipe(self) -> str:
        """images/<recipe>/Dockerfile: a Debian or Ubuntu cell whose CPython is compiled uses apt-source."""
        if self.compiles_python and self.family.recipe == "apt":
            return "apt-source"
        return self.family.recipe


class Outcome(str, enum.Enum):
    """A suite's or a cell's result. Only PASSED, FLAKY and FAILED are verdicts on the code."""

    PASSED = "passed"
    FLAKY = "flaky"  # failed, then passed when run again: reported apart, never as a pass
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    CANCELLED = "cancelled"
    NOT_RUN = "not-run"  # a suite that does not apply to the cell, or was not selected


@dataclass(frozen=True, kw_only=True)
class TestFailure:
    """One failing (or erroring) test case, as pytest's JUnit XML names it."""

    __test__ = False  # not a pytest class, whatever its name

    test_id: str
    message: str
    details: str = ""


@dataclass(frozen=True, kw_only=True)
class Skip:
    """A test pytest skipped, and the reason it gave: skips are reported, never silently counted."""

    test_id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What one suite run used: the peak memory and the CPU time of everything it ran, and how that was
    measured (a container's cgroup, or getrusage of a host process tree: see attempts.py)."""

    peak_memory: int = 0  # bytes
    cpu_time: float = 0.0  # seconds, user plus system
    measured_by: str = ""  # '' when nothing could be measured
    limit: int = 0  # bytes: the memory limit it ran under (a container's), 0 when none


@dataclass(frozen=True, kw_only=True)
class EarlierAttempt:
    """A run of a suite that did not pass and was run again (--retries): what it said, kept beside the
    final result so a flaky suite shows the failure that went away."""

    outcome: Outcome
    failures: tuple[TestFailure, ...] = ()
    message: str = ""
    duration: float = 0.0
    log_tail: str = ""
    usage: Usage = field(default_factory=Usage)

    @property
    def summary(self) -> str:
        """ "2 failed", or the outcome when no test failed (error, timeout)."""
        return f"{len(self.failures)} failed" if self.failures else self.outcome.value


SKIPPED_MARK = 0.05  # a suite that skipped more than this share of its tests is marked in every report


@dataclass(frozen=True, kw_only=True)
class SuiteResult:
    suite: Suite
    outcome: Outcome
    tests: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    duration: float = 0.0
    failures: tuple[TestFailure, ...] = ()
    skips: tuple[Skip, ...] = ()
    repetitions: int = 0  # stress mode: how many test cases were stress repetitions (ids with [stressN])
    message: str = ""  # why, for error/timeout/unavailable/cancelled
    log_tail: str = ""
    junit_xml: str = ""  # the suite's own JUnit XML, kept to merge into junit.xml
    cached: bool = False  # an identical run (same image or interpreter, code, suite) passed before
    produced_by: str = ""  # the run id that ran it (for a cached result: the earlier run)
    produced_at: str = ""  # when that run ran it (UTC, ISO 8601)
    usage: Usage = field(default_factory=Usage)
    over_budget: str = ""  # which budget (budgets.py) its usage broke, and by how much: a failure
    near_limit: str = ""  # its peak came within budgets.NEAR_LIMIT of the memory limit: a warning, even on a pass
    earlier: tuple[EarlierAttempt, ...] = ()  # the attempts before this one that did not pass (--retries)
    scope: tuple[str, ...] = ()  # the test files it was cut to (an emulated cell's: budgets.UNDER_EMULATION); () all
    # One did not pass: the command that reruns only it in only its cell, and after a `#` (so a pasted line runs the
    # rerun alone) the `docker run` into the same image with the same mounts, for debugging by hand.
    reproduce: str = ""

    @property
    def counts(self) -> str:
        """ "1,113 passed", "1,110 passed, 3 skipped", "1,108 passed, 2 failed, 3 skipped": never a full score when
        something did not run. A suite that skipped more than SKIPPED_MARK of its tests is marked, with the share."""
        said = [f"{self.passed:,} passed"]
        said += [f"{self.failed:,} failed"] if self.failed else []
        said += [f"{self.errors:,} errors"] if self.errors else []
        said += [f"{self.skipped:,} skipped"] if self.skipped else []
        text = ", ".join(said)
        if self.tests and self.skipped > SKIPPED_MARK * self.tests:
            text += f" ⚠ {self.skipped / self.tests:.0%} skipped"
        notes = [f"{self.repetitions} stress"] if self.repetitions else []
        notes += [f"run {n}: {e.summary}" for n, e in enumerate(self.earlier, 1)]
        notes += ["cached"] if self.cached else []
        return f"{text} ({', '.join(notes)})" if notes else text


@dataclass(frozen=True, kw_only=True)
class FirstAnswer:
    """Time from spawning `python -m mcpserver demo.py` to its first tools/call answer, in the cell's own
    runtime, against the same interpreter answering from a bare json line loop. A measurement, never a
    verdict: it does not change any outcome."""

    runs: int = 0
    median_ms: float = 0.0
    bare_median_ms: float = 0.0
    samples_ms: tuple[float, ...] = ()
    bare_samples_ms: tuple[float, ...] = ()
    error: str = ""  # why there is no measurement
    produced_by: str = ""  # the run that measured it
    cached: bool = False  # remembered from that run: the same image (or interpreter and code) and probe

    @property
    def ratio(self) -> float:
        return self.median_ms / self.bare_median_ms if self.bare_median_ms else 0.0

    @property
    def text(self) -> str:
        if self.error or not self.runs:
            return "—"
        return f"{self.median_ms:.0f} ms ({self.ratio:.1f}x)"


@dataclass(frozen=True, kw_only=True)
class Phase:
    """One step of a cell's run and its wall time: "base" (had, or waited for while another thread made it),
    "build runtime", "pytest folder", "suite unit", ... Where a run's time goes is the sum of these."""

    name: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BaseMade:
    """A base this run made or fetched (not one it found present), how, in how long, and the sha256 of the tree it
    was made from when that tree is a tarball (mmdebstrap's, reproducible: the same inputs give the same digest)."""

    image: str
    how: str
    seconds: float
    sha256: str = ""


@dataclass(frozen=True, kw_only=True)
class CellResult:
    cell: str
    outcome: Outcome
    suites: tuple[SuiteResult, ...] = ()
    duration: float = 0.0
    message: str = ""  # the reason for unavailable, the error for error
    log_tail: str = ""
    image: str = ""
    base: str = ""  # how the base was had, e.g. "mmdebstrapped from mmdebstrap's default mirror"
    base_image: str = ""  # the base it was built FROM
    base_sha256: str = ""  # the sha256 of the tarball its base was made from (bootstrap.ROOTFS_LABEL), if made
    family: str = ""
    python: str = ""
    python_version: str = ""  # the exact version the suites ran on, e.g. 3.9.2
    implementation: str = ""  # as the interpreter names itself: "CPython", "PyPy 7.3.19"
    flavour: str = ""  # "free-threaded" for a --disable-gil build
    first_answer: FirstAnswer | None = None  # start-up time, measured after the suites (startup.py)
    arch: str = ""  # the architecture it was built for (Debian's name): the cell's, else the machine's own
    release: str = ""  # the cell's release ("bookworm"), and its interpreter in tags ("py3.11", "pypy3.11")
    interpreter: str = ""
    # What the interpreter the suites ran on says of its machine: platform.machine(), sys.byteorder, sys.maxsize.
    machine: str = ""
    byteorder: str = ""
    maxsize: int = 0
    notes: tuple[str, ...] = ()  # what it ran without, and why: an add-on no release of which serves its Python
    started: float = 0.0  # seconds after the run began that a job slot took it up (waiting for a slot or its base)
    phases: tuple[Phase, ...] = ()  # what its time went on, in order

    def suite(self, name: Suite) -> SuiteResult | None:
        return next((s for s in self.suites if s.suite is name), None)


@dataclass(frozen=True, kw_only=True)
class Environment:
    """Where and on what a run happened; recorded in results.json and shown in every report."""

    engine: str = ""
    kernel: str = ""
    commit: str = ""
    dirty: tuple[str, ...] = ()  # files with uncommitted changes in the tested tree
    date: str = ""
    host: str = ""
    run_id: str = ""
    logs: str = ""
    shard: str = ""
    plan: str = ""  # a digest of the cell table and selection, the same for every shard of one plan
    partial: str = ""  # why the report does not cover the whole plan (interrupted, stopped early)
    # '' for a whole run (every cell that is not opt-in, every suite), which fails on a test no cell ran
    # (skips.ran_nowhere); else what it was limited to, and such a run names those tests without failing on them
    subset: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    duration: float = 0.0  # the run's wall time, planning to reports
    measuring: float = 0.0  # of which the first answers, measured one cell at a time after the suites
    bases: tuple[BaseMade, ...] = ()  # the bases it made or fetched
