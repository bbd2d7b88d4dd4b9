"""Build a cell's images: the python stage, the runtime stage (what a user ships) and the test stage.

The Dockerfile is assembled here: the family's recipe (images/<recipe>/Dockerfile: a base plus its
Python, as the `python` stage) followed by the one shared tail (images/tail.Dockerfile: the user, the
embedded server, the entrypoint and the test stage), so what every image shares is written once. The
build context is assembled here too, not taken from the repository root: only the files a stage needs,
in a tar with fixed metadata, so the layer cache and the image tags depend on content alone.

Each stage's tag carries a hash of exactly its inputs:
  python   = the family's recipe + base image ID + Python version and source
  runtime  = python + the shared tail + server/mcpserver + server/examples
  test     = runtime + the suites (tests/ without the lab's own trees) + pyproject.toml
  install  = python + the shared tail + the suites: no embedded server, for the install suite
A tag that exists is not rebuilt, so an unchanged rerun builds nothing, a change in tests/ rebuilds only
the test stage, and a change in server/ only the layers from the COPY of the code on. A cell whose Python
is compiled (python_from "builder") also tags the Dockerfile's `builder` stage, with the python key.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .arches import ARCHES
from .engine import LABEL, RUN_LABEL, TAG_LABEL, TREE_LABEL, Engine
from .errors import CellProblem
from .model import TESTS_DIR_SUITES, Cell, Implementation, Outcome
from .processes import Completed, tail
from .travel import Store, fetch_image, keep_image

IMAGE_REPO = "mcplab"
TAIL = "images/tail.Dockerfile"
BUILD_TIMEOUT = 1800.0
STAGES = ("python", "runtime", "test", "install")
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
    install: str


def walk(root: Path, source: Path, prefix: str) -> list[ContextFile]:
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
    return walk(root, root / "server/mcpserver", "") + walk(root, root / "server/examples", "")


def suite_files(root: Path) -> list[ContextFile]:
    """What the test stage copies into /lab: the suites run inside containers, the files at the top of
    tests/ (conftest.py and helpers), server/examples they may start, the official schemas tests/unit checks
    every result against (spec/schema-*.json) and the Server Card's (spec/server-card, for tests/http), and
    pyproject.toml for pytest's settings. The lab's own trees
    (tests/lab, tests/images) run from the host and stay out."""
    files: list[ContextFile] = []
    tests = root / "tests"
    if tests.is_dir():
        for path in sorted(tests.iterdir()):
            if path.is_file():
                files += walk(root, path, "lab/")
        for suite in TESTS_DIR_SUITES:
            files += walk(root, tests / suite.value, "lab/")
    files += walk(root, root / "server/examples", "lab/")
    for schema in sorted((root / "spec").glob("schema-*.json")):
        files += walk(root, schema, "lab/")
    files += walk(root, root / "spec/server-card", "lab/")
    if (root / "pyproject.toml").is_file():
        files += walk(root, root / "pyproject.toml", "lab/")
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
    recipe: bytes  # images/<recipe>/Dockerfile: the base plus its Python ('' when missing)
    tail: bytes  # images/tail.Dockerfile: what every family shares ('' when missing)
    code: tuple[ContextFile, ...]
    suites: tuple[ContextFile, ...]

    @property
    def dockerfile(self) -> bytes:
        """The recipe followed by the shared tail; b'' when either is missing."""
        if not (self.recipe and self.tail):
            return b""
        return self.recipe.rstrip(b"\n") + b"\n\n" + self.tail

    @property
    def build_args(self) -> tuple[str, ...]:
        cell = self.cell
        # The distribution's package for the interpreter: Debian's pypy3 holds pypy3.X, the recipe checks it.
        package = "pypy3" if cell.implementation is Implementation.PYPY else f"python{cell.python}"
        return (
            f"BASE={self.base_image}",
            f"PYTHON={cell.python}",
            f"PYTHON_FROM={cell.python_from.value}",
            f"INTERPRETER={cell.interpreter}",
            f"PACKAGE={package}",
            f"FLAVOUR={cell.flavour.value}",
        )

    @property
    def platform(self) -> str:
        """docker's name of the cell's architecture, for `docker build --platform`; '' for the machine's own."""
        return ARCHES[self.cell.arch].platform if self.cell.arch else ""

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages built and tagged, in order. A Python compiled in the Dockerfile's `builder` stage is
        tagged there too: the legacy builder leaves a stage that no later stage is FROM as an untagged
        image, which `docker image prune` removes, and the next code change would compile it again."""
        return ("builder", *STAGES) if self.cell.compiles_python else STAGES

    def keys(self) -> dict[str, str]:
        # The tail is not an input of the python stage: changing the user or the entrypoint must not
        # compile a builder stage's CPython again.
        python = digest(self.recipe, self.base_id, *self.build_args)
        runtime = digest(python, self.tail, self.code)
        test = digest(runtime, self.suites)
        install = digest(python, self.tail, self.suites)
        return {"builder": python, "python": python, "runtime": runtime, "test": test, "install": install}

    def tag_prefix(self, stage: str) -> str:
        """Every build of this cell's stage is tagged <prefix><hash of its inputs>."""
        cell = self.cell
        return f"{IMAGE_REPO}/{cell.family.value}:{cell.release}-{cell.slug}{cell.arch_tag}-{stage}-"

    def tag(self, stage: str) -> str:
        return self.tag_prefix(stage) + self.keys()[stage][:12]

    def tags(self) -> Images:
        return Images(**{stage: self.tag(stage) for stage in STAGES})

    def context(self, stage: str) -> bytes:
        # The python stage needs no files; later stages only what they copy. A smaller context is
        # also a cache key that moves only when it must.
        # The legacy builder builds every stage before the target, so the install stage needs the code too.
        files: list[ContextFile] = []
        if stage in ("runtime", "test", "install"):
            files += self.code
        if stage in ("test", "install"):
            files += self.suites
        return context_tar(self.dockerfile, files)


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""


INCLUDE = "# include: "  # a recipe's line that stands for a fragment's lines (images/deb-src.Dockerfile)


def read_recipe(root: Path, path: Path) -> bytes:
    """A recipe with each `# include: images/X` line replaced by that fragment's lines, less its leading comments:
    what two recipes share is written once, and the expanded text, which keys the python stage, is what it was
    before the fragment was shared, so no compiled Python is built again for it. b'' when missing."""
    lines = []
    for line in _read(path).decode().splitlines(keepends=True):
        if line.startswith(INCLUDE):
            fragment = _read(root / line[len(INCLUDE) :].strip()).decode().splitlines(keepends=True)
            line = "".join(fragment[next((i for i, f in enumerate(fragment) if not f.startswith("#")), 0) :])
        lines.append(line)
    return "".join(lines).encode()


def plan_build(cell: Cell, root: Path, base_image: str, base_id: str) -> BuildPlan:
    return BuildPlan(
        cell=cell,
        base_image=base_image,
        base_id=base_id,
        recipe=read_recipe(root, root / "images" / cell.recipe / "Dockerfile"),
        tail=_read(root / TAIL),
        code=tuple(code_files(root)),
        suites=tuple(suite_files(root)),
    )


UNAVAILABLE_MARK = "mcplab-unavailable: "  # a recipe's way to say "this machine cannot build me", and why
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def unavailable_reason(output: str) -> str:
    """What a recipe or driver said this machine cannot do (its last UNAVAILABLE_MARK line), or ''. Only a
    line it printed counts (the legacy builder also echoes the failed command, which contains the mark),
    without the colour codes the builder wraps stderr in."""
    lines = (ANSI.sub("", line) for line in output.splitlines())
    said = [line[len(UNAVAILABLE_MARK) :].strip() for line in lines if line.startswith(UNAVAILABLE_MARK)]
    return said[-1] if said else ""


def _build_problem(stage: str, done: Completed, log: Path) -> CellProblem:
    """A failed build is an error to look at, unless the recipe said this machine cannot build it (no
    source package on the mirror, ...): then the cell is unavailable here, with the recipe's reason (and
    the log's path beside it, not in it: a reason is read in a table)."""
    said = unavailable_reason(done.output)
    if said and not done.timed_out:
        return CellProblem(Outcome.UNAVAILABLE, f"{said} (the {stage} stage's build said so)", f"build log: {log}")
    what = "timed out" if done.timed_out else f"failed (exit {done.returncode})"
    return CellProblem(Outcome.ERROR, f"docker build of the {stage} stage {what}; full log: {log}", tail(done.output))


class Unbuildable:
    """What a recipe said this machine cannot build, remembered by the stage's tag (a hash of all its inputs),
    so a run does not build it again only to hear the same, and --list can say it before any run. Rechecked
    when an input changes, after RECHECK_DAYS, or with --no-cache (a mirror may come to serve the source)."""

    RECHECK_DAYS = 7

    def __init__(self, folder: Path | None, *, enabled: bool = True) -> None:
        self.folder = folder  # None: nothing is remembered
        self.enabled = enabled  # False (--no-cache): build again whatever was found, and remember anew

    def _path(self, tag: str) -> Path | None:
        name = hashlib.sha256(tag.encode()).hexdigest()[:32] + ".json"
        return self.folder / name if self.folder is not None else None

    def reason(self, tag: str, *, now: float | None = None) -> str:
        """The remembered reason, with when and where it was found; '' when there is none (or it is stale)."""
        path = self._path(tag)
        if not self.enabled or path is None or not path.is_file():
            return ""
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
            age = (now or time.time()) - float(found["at"])
            reason, run = str(found["reason"]), str(found["run"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        if age > self.RECHECK_DAYS * 86400:
            return ""
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(found["at"])))
        return f"{reason}; found by run {run} on {when} (rechecked after {self.RECHECK_DAYS} days, or with --no-cache)"

    def remember(self, tag: str, reason: str, run_id: str) -> None:
        path = self._path(tag)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"tag": tag, "reason": reason, "run": run_id, "at": time.time()}) + "\n")


class Builder:
    """Builds tags at most once per run, whichever cells share them. A failed stage raises CellProblem
    (error, with the build log's tail), and again for every cell that asks for it."""

    def __init__(self, engine: Engine, *, logdir: Path, run_id: str, tree: str, stores: Sequence[Store] = (),
                 unbuildable: Unbuildable | None = None) -> None:  # fmt: skip
        self.engine = engine
        self.logdir = logdir
        self.run_id = run_id
        self.tree = tree
        self.stores = stores
        self.unbuildable = unbuildable or Unbuildable(None)
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, CellProblem] = {}

    def build(self, plan: BuildPlan, on_stage: Callable[[str], None] | None = None) -> Images:
        if not plan.dockerfile:
            recipe = f"images/{plan.cell.recipe}/Dockerfile"
            raise CellProblem(Outcome.ERROR, f"{recipe} or {TAIL} does not exist")
        built = False
        for stage in plan.stages:
            if on_stage is not None:
                on_stage(stage)
            built = self._build_stage(plan, stage, plan.tag(stage)) or built
        if built:
            self.prune_superseded(plan)
        for stage in plan.stages if self.stores else ():
            keep_image(self.stores, self.engine, plan.tag(stage), self.logdir / "store.log")
        return plan.tags()

    def _build_stage(self, plan: BuildPlan, stage: str, tag: str) -> bool:
        """Make `tag` present: already there, fetched from a store, or built (and then kept in the stores).
        Returns whether it was built."""
        with self._lock:
            lock = self._locks.setdefault(tag, threading.Lock())
        with lock:
            if tag in self._failed:
                raise self._failed[tag]
            log = self.logdir / f"build-{plan.cell.name}-{stage}.log"
            if self.engine.image_id(tag) or fetch_image(self.stores, self.engine, tag, self.logdir / "fetch.log"):
                return False
            said = self.unbuildable.reason(tag)
            if said:
                raise CellProblem(Outcome.UNAVAILABLE, said)
            labels = {LABEL: "1", RUN_LABEL: self.run_id, TAG_LABEL: tag, TREE_LABEL: self.tree}
            done = self.engine.build(plan.context(stage), target=stage, tag=tag, build_args=plan.build_args,
                                     labels=labels, log=log, timeout=BUILD_TIMEOUT, platform=plan.platform)  # fmt: skip
            if done.ok and self.engine.image_id(tag):
                return True
            problem = self._failed[tag] = _build_problem(stage, done, log)
            if problem.outcome is Outcome.UNAVAILABLE:
                self.unbuildable.remember(tag, problem.message, self.run_id)
            raise problem

    def prune_superseded(self, plan: BuildPlan) -> list[str]:
        """Remove this checkout's older builds of the cell's stages (other hashes under the same prefix),
        keeping the current ones. Images another checkout built, a user's image built FROM a lab image (it
        inherits the labels but not the tag its TAG_LABEL names) and images a container uses all stay."""
        current = {plan.tag(stage) for stage in plan.stages}
        doomed = []
        for stage in plan.stages:
            repository, _, prefix = plan.tag_prefix(stage).partition(":")
            for ref in self.engine.references(repository):
                if ref in current or not ref.partition(":")[2].startswith(prefix):
                    continue
                facts = self.engine.image_facts(ref)
                labels = facts.get("labels") or {}
                assert isinstance(labels, dict)
                if labels.get(TAG_LABEL) == ref and labels.get(TREE_LABEL) == self.tree:
                    doomed.append(ref)
        for ref in doomed:
            self.engine.remove_images(ref)
        return doomed


if __name__ == "__main__":  # a recipe's Dockerfile, by hand: python3 -m matrix.build apt-source | docker build -f -
    import sys

    from . import LAB_ROOT

    sys.stdout.write((read_recipe(LAB_ROOT, LAB_ROOT / "images" / sys.argv[1] / "Dockerfile").rstrip(b"\n") + b"\n\n"
                      + _read(LAB_ROOT / TAIL)).decode())
