"""The run context: what one run shares between its steps and threads (options, engine, tools, the stop
and interrupt flags), where it writes (its logs and temporary folder), and its clean-up."""

from __future__ import annotations

import hashlib
import platform
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import LAB_ROOT
from .attempts import Kept
from .bases import Bases
from .build import Builder, Unbuildable
from .cell import CellTools
from .conformance import ConformanceTool
from .engine import LABEL, RUN_LABEL, Engine
from .install import Distributions
from .memo import SuiteMemo
from .model import Cell, Environment
from .plan import Selection, Shard
from .progress import Progress
from .startup import StartupTarget
from .stopping import Stopping
from .suites import Attempts, Surroundings
from .travel import Archives, Registry, Store
from .wheels import PytestFolders

DEFAULT_TIMEOUT = 900.0  # seconds per suite: a hung suite's bound (PyPy's unit suite took 450 s on a loaded machine)
KEEP_RUNS = 20  # the newest runs' log folders (and report folders) are kept
INTERRUPT_GRACE = 30.0  # seconds the workers get to return after an interrupt killed their processes


@dataclass(frozen=True, kw_only=True)
class Options:
    selection: Selection = field(default_factory=Selection)
    jobs: int = 2
    fail_fast: bool = False
    keep: bool = False
    strict: bool = False
    timeout: float = DEFAULT_TIMEOUT
    root: Path = LAB_ROOT  # the source tree: server/, tests/, images/
    cache: Path = LAB_ROOT / ".cache" / "lab"
    results: Path = LAB_ROOT / "matrix" / "results"
    shard: Shard | None = None
    plan: str = ""  # plan.plan_digest of the selection, recorded for --merge
    use_cache: bool = True  # report an identical earlier pass instead of running the suite again
    retries: int = 1  # a suite that did not pass is run again this many times at most (a pass then: flaky)
    registry: str = ""  # HOST:PORT/PREFIX images and passed-suite records travel through
    cache_dir: Path | None = None  # a folder (a CI cache) they travel through
    durations: Mapping[str, float] = field(default_factory=dict)  # an earlier run's, to start the longest first
    table: tuple[Cell, ...] = ()  # the whole cell table, which the reports show every cell of
    publish: bool = False  # --publish: a whole run that passed writes what the repository shows of the lab


def prune_runs(folder: Path, *, keep: int) -> None:
    """Run ids sort by time; drop all but the newest `keep` run folders."""
    if folder.is_dir():
        runs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        for old in runs[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


def stores(options: Options) -> tuple[Store, ...]:
    found: list[Store] = []
    if options.registry:
        found.append(Registry(options.registry))
    if options.cache_dir is not None:
        found.append(Archives(options.cache_dir))
    return tuple(found)


def tree_identity(root: Path) -> str:
    """Which checkout on which machine: superseded images are pruned per checkout (engine.TREE_LABEL)."""
    return hashlib.sha256(f"{socket.gethostname()}:{root.resolve()}".encode()).hexdigest()[:12]


class Lab:
    """What one run shares between its steps and threads."""

    def __init__(self, options: Options, progress: Progress, engine: Engine | None = None) -> None:
        self.options = options
        self.progress = progress
        self.engine = engine or Engine()
        self.processes = self.engine.processes  # docker clients and host processes alike
        self.run_id = time.strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(3)
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.began = time.monotonic()
        self.workdir = options.cache / "tmp" / self.run_id
        self.logdir = options.cache / "logs" / self.run_id
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logdir.mkdir(parents=True, exist_ok=True)
        prune_runs(self.logdir.parent, keep=KEEP_RUNS)
        travel = stores(options)
        labels = {LABEL: "1", RUN_LABEL: self.run_id}
        self.bases = Bases(self.engine, workdir=self.workdir, logdir=self.logdir, cache=options.cache, labels=labels,
                           stores=travel)  # fmt: skip
        unbuildable = Unbuildable(options.cache / "unbuildable", enabled=options.use_cache)
        self.builder = Builder(self.engine, logdir=self.logdir, run_id=self.run_id, tree=tree_identity(options.root),
                               stores=travel, unbuildable=unbuildable)  # fmt: skip
        self.pytest = PytestFolders(options.cache / "pytest", self.processes)
        self.memo = SuiteMemo(options.cache / "passed", enabled=options.use_cache, engine=self.engine, stores=travel)
        self.conformance = ConformanceTool(self.processes, self.logdir / "conformance-install.log")
        self.distributions = Distributions(self.processes, options.root, options.cache / "dist",
                                           self.logdir / "dist.log")  # fmt: skip
        self.startup_targets: dict[str, StartupTarget] = {}  # where each finished cell's server starts
        self.stopping = Stopping()
        self.stop, self.interrupted = self.stopping.stop, self.stopping.interrupted
        self.kept: list[Kept] = []
        self.measuring = 0.0  # seconds the first answers took, after the suites (schedule.py)
        self.compiling: set[str] = set()  # cells whose compiled Python is being built in the background (schedule.py)
        self._lock = threading.Lock()

    def surroundings(self) -> Surroundings:
        """What each attempt of a suite is given besides its inputs."""
        options = self.options
        return Surroundings(engine=self.engine, processes=self.processes, conformance=self.conformance,
                            run_id=self.run_id, logdir=self.logdir, workdir=self.workdir, timeout=options.timeout,
                            keep=options.keep, kept=self.keep)  # fmt: skip

    def attempts(self) -> Attempts:
        return Attempts(retries=self.options.retries, run_id=self.run_id, started=self.started,
                        interrupted=self.interrupted)  # fmt: skip

    @property
    def stop_reason(self) -> str:
        return self.stopping.reason

    def request_stop(self, reason: str) -> None:
        self.stopping.request(reason)

    def interrupt(self, reason: str) -> None:
        """Stop now: no new work, and every process this run started is killed so the workers return.
        Called from a signal handler, so it takes no lock that the interrupted code may hold."""
        self.stopping.interrupt(reason)
        self.processes.kill_all()

    def tools(self) -> CellTools:
        """What each cell's steps use: the run's tools, and nothing of the run context beyond them."""
        options = self.options
        return CellTools(engine=self.engine, processes=self.processes, bases=self.bases, builder=self.builder,
                         pytest=self.pytest, distributions=self.distributions, memo=self.memo,
                         attempts=self.attempts(), surroundings=self.surroundings(), selection=options.selection,
                         root=options.root, cache=options.cache, stopping=self.stopping, progress=self.progress,
                         startup_targets=self.startup_targets, began=self.began)  # fmt: skip

    def keep(self, kept: Kept) -> None:
        with self._lock:
            self.kept.append(kept)

    def cleanup(self) -> int:
        """Remove this run's containers (but those kept for debugging) and temporary folder; returns how
        many containers went."""
        self.processes.kill_all()
        ids = self.engine.containers(f"{RUN_LABEL}={self.run_id}")
        names = self.engine.container_names(ids) if self.kept else {}
        kept = {k.container for k in self.kept}
        removed = self.engine.remove_containers(*[i for i in ids if names.get(i) not in kept])
        self.engine.remove_abandoned()  # after the containers: a killed build's step images are gone only then
        shutil.rmtree(self.workdir, ignore_errors=True)
        return removed


def git_state(root: Path) -> tuple[str, tuple[str, ...]]:
    """The commit the tree is at, and the files with uncommitted changes ('' and () outside git)."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=False).stdout.strip()  # fmt: skip
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
                                capture_output=True, text=True, timeout=10, check=False).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return "", ()
    return commit, tuple(line[3:] for line in status.splitlines() if len(line) > 3)


def environment(lab: Lab, *, engine_version: str, partial: str = "") -> Environment:
    commit, dirty = git_state(lab.options.root)
    return Environment(
        engine=engine_version,
        kernel=platform.release(),
        commit=commit,
        dirty=dirty,
        date=lab.started,
        host=f"{platform.system()} {platform.machine()} Python {platform.python_version()}",
        run_id=lab.run_id,
        logs=str(lab.logdir),
        shard=str(lab.options.shard) if lab.options.shard else "",
        plan=lab.options.plan,
        partial=partial,
        subset=lab.options.selection.subset,
        duration=round(time.monotonic() - lab.began, 3),
        measuring=round(lab.measuring, 3),
        bases=lab.bases.made(),
    )

