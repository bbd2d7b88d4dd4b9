"""Build a cell's images: the python stage, the runtime stage (what a user ships) and the test stage.

The build context is assembled here, not taken from the repository root: only the files a stage needs,
in a tar with fixed metadata, so the layer cache and the image tags depend on content alone.

Each stage's tag carries a hash of exactly its inputs:
  python   = Dockerfile + base image ID + Python version and source
  runtime  = python + server/mcpserver + server/examples
  test     = runtime + the suites (tests/ without the lab's own trees) + pyproject.toml
A tag that exists is not rebuilt, so an unchanged rerun builds nothing, a change in tests/ rebuilds only
the test stage, and a change in server/ only the layers from the COPY of the code on. A cell whose Python
is compiled (python_from "builder") also tags the Dockerfile's `builder` stage, with the python key.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .engine import LABEL, Engine, tail
from .model import IN_CONTAINER_SUITES, Cell, PythonFrom

IMAGE_REPO = "mcplab"
BUILD_TIMEOUT = 1800.0
STAGES = ("python", "runtime", "test")
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


@dataclass(frozen=True, kw_only=True)
class ContextFile:
    arcname: str  # path inside the build context
    data: bytes
    mode: int


@dataclass(frozen=True, kw_only=True)
class Images:
    python: str
    runtime: str
    test: str


@dataclass(frozen=True, kw_only=True)
class BuildFailure:
    stage: str
    message: str
    log_tail: str


def _walk(root: Path, source: Path, prefix: str) -> list[ContextFile]:
    files = []
    if source.is_file():
        paths: Iterable[Path] = [source]
    elif source.is_dir():
        paths = sorted(p for p in source.rglob("*") if p.is_file() and not (_SKIP_DIRS & set(p.parts)))
    else:
        paths = []
    for path in paths:
        if path.suffix in (".pyc", ".pyo"):
            continue
        rel = path.relative_to(root).as_posix()
        # Only the executable bit matters to the image; the rest of the mode is normalised.
        mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        files.append(ContextFile(arcname=f"{prefix}{rel}", data=path.read_bytes(), mode=mode))
    return files


def code_files(root: Path) -> list[ContextFile]:
    """What the runtime stage copies: the server package and its examples."""
    return _walk(root, root / "server/mcpserver", "") + _walk(root, root / "server/examples", "")


def suite_files(root: Path) -> list[ContextFile]:
    """What the test stage copies into /lab: the suites run inside containers, the files at the top of
    tests/ (conftest.py and helpers), server/examples they may start, and pyproject.toml for pytest's
    settings. The lab's own trees (tests/lab, tests/images) run from the host and stay out."""
    files: list[ContextFile] = []
    tests = root / "tests"
    if tests.is_dir():
        for path in sorted(tests.iterdir()):
            if path.is_file():
                files += _walk(root, path, "lab/")
        for suite in IN_CONTAINER_SUITES:
            files += _walk(root, tests / suite, "lab/")
    files += _walk(root, root / "server/examples", "lab/")
    if (root / "pyproject.toml").is_file():
        files += _walk(root, root / "pyproject.toml", "lab/")
    return files


def digest(*parts: bytes | str | Iterable[ContextFile]) -> str:
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            part = part.encode()
        if isinstance(part, bytes):
            h.update(len(part).to_bytes(8, "big") + part)
            continue
        for f in part:
            h.update(f"{f.arcname}\0{f.mode:o}\0{len(f.data)}\0".encode())
            h.update(f.data)
    return h.hexdigest()


def context_tar(dockerfile: bytes, files: Iterable[ContextFile]) -> bytes:
    """A build context as a tar with fixed owners and times, the Dockerfile at its root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = [ContextFile(arcname="Dockerfile", data=dockerfile, mode=0o644), *files]
        dirs: set[str] = set()
        for f in entries:
            parts = f.arcname.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
            info = tarfile.TarInfo(f.arcname)
            info.size, info.mode, info.mtime = len(f.data), f.mode, 0
            tar.addfile(info, io.BytesIO(f.data))
    return buffer.getvalue()


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    """Everything one cell's build needs, computed before touching the engine."""

    cell: Cell
    base_image: str
    base_id: str
    dockerfile: bytes
    code: tuple[ContextFile, ...]
    suites: tuple[ContextFile, ...]

    @property
    def build_args(self) -> tuple[str, ...]:
        return (
            f"BASE={self.base_image}",
            f"PYTHON={self.cell.python}",
            f"PYTHON_FROM={self.cell.python_from.value}",
        )

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages built and tagged, in order. A Python compiled in the Dockerfile's `builder` stage is
        tagged there too: the legacy builder leaves a stage that no later stage is FROM as an untagged
        image, which `docker image prune` removes, and the next code change would compile it again."""
        return ("builder", *STAGES) if self.cell.python_from is PythonFrom.BUILDER else STAGES

    def keys(self) -> dict[str, str]:
        python = digest(self.dockerfile, self.base_id, *self.build_args)
        runtime = digest(python, self.code)
        test = digest(runtime, self.suites)
        return {"builder": python, "python": python, "runtime": runtime, "test": test}

    def tag(self, stage: str) -> str:
        prefix = f"{IMAGE_REPO}/{self.cell.family.value}:{self.cell.release}-py{self.cell.python}"
        return f"{prefix}-{stage}-{self.keys()[stage][:12]}"

    def tags(self) -> Images:
        return Images(**{stage: self.tag(stage) for stage in STAGES})

    def context(self, stage: str) -> bytes:
        # The python stage needs no files; later stages only what they copy. A smaller context is
        # also a cache key that moves only when it must.
        files: list[ContextFile] = []
        if stage in ("runtime", "test"):
            files += self.code
        if stage == "test":
            files += self.suites
        return context_tar(self.dockerfile, files)


def plan_build(cell: Cell, root: Path, base_image: str, base_id: str) -> BuildPlan:
    dockerfile = root / "images" / cell.family.value / "Dockerfile"
    return BuildPlan(
        cell=cell,
        base_image=base_image,
        base_id=base_id,
        dockerfile=dockerfile.read_bytes() if dockerfile.is_file() else b"",
        code=tuple(code_files(root)),
        suites=tuple(suite_files(root)),
    )


class Builder:
    """Builds tags at most once per run, whichever cells share them."""

    def __init__(self, engine: Engine, logdir: Path, run_id: str) -> None:
        self.engine = engine
        self.logdir = logdir
        self.run_id = run_id
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, BuildFailure] = {}

    def build(self, plan: BuildPlan, on_stage: Callable[[str], None] | None = None) -> Images | BuildFailure:
        if not plan.dockerfile:
            path = f"images/{plan.cell.family.value}/Dockerfile"
            return BuildFailure(stage="python", message=f"{path} does not exist", log_tail="")
        for stage in plan.stages:
            if on_stage is not None:
                on_stage(stage)
            failure = self._build_stage(plan, stage, plan.tag(stage))
            if failure:
                return failure
        return plan.tags()

    def _build_stage(self, plan: BuildPlan, stage: str, tag: str) -> BuildFailure | None:
        with self._lock:
            lock = self._locks.setdefault(tag, threading.Lock())
        with lock:
            if tag in self._failed:
                return self._failed[tag]
            if self.engine.image_id(tag):
                return None
            log = self.logdir / f"build-{plan.cell.name}-{stage}.log"
            # --force-rm: a failed step's container goes too (the legacy builder keeps it otherwise).
            argv = ["build", "--force-rm", "--target", stage, "--label", f"{LABEL}=1", "--tag", tag]
            for arg in plan.build_args:
                argv += ["--build-arg", arg]
            argv.append("-")
            done = self.engine.run(argv, input=plan.context(stage), timeout=BUILD_TIMEOUT, log=str(log))
            if done.returncode == 0 and self.engine.image_id(tag):
                return None
            what = "timed out" if done.returncode < 0 else f"failed (exit {done.returncode})"
            failure = BuildFailure(
                stage=stage,
                message=f"docker build of the {stage} stage {what}; full log: {log}",
                log_tail=tail(done.output),
            )
            self._failed[tag] = failure
            return failure
