"""Where bases come from: already present, else fetched from the lab's own store, else pulled, else made
offline (bootstrap.py), else unavailable with the reason.

`plan_base` is pure: the cell and what was found on this machine (`BaseFacts`, gathered by `gather_facts`)
in, an ordered list of ways to get the base out, so the rules are unit-tested with no engine
(tests/lab/test_bases.py). `Bases` walks that list against the engine, once per distinct base.

Bootstrapped bases get a deterministic tag from their inputs (method, suite, mirror, keyring), so a
second run finds them present and the lab never makes the same base twice.
"""

from __future__ import annotations

import enum
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import arches
from .bootstrap import ROOTFS_LABEL, SOURCE_DATE_EPOCH, BootstrapFailed, apk_base, mmdebstrap_base
from .engine import TAG_LABEL, Engine
from .errors import CellProblem, EngineError
from .model import BaseMade, Bootstrap, BootstrapMethod, Cell, Family, Outcome
from .processes import tail
from .text import shorten
from .travel import Store, fetch_image, keep_image

BASE_REPO = "mcplab/base"
REGISTRY_MIRROR_ENV = "LAB_REGISTRY_MIRROR"  # host[:port] of a pull-through mirror of the official images
BOOTSTRAP_VERSION = "2"  # bump to remake every bootstrapped base (e.g. when the recipe changes). 2: mmdebstrap


class BaseAction(str, enum.Enum):
    PRESENT = "present"
    FETCH = "fetch"  # from the lab's own image store (--registry, --cache-dir): made on another machine
    PULL = "pull"
    MMDEBSTRAP = "mmdebstrap"
    APK = "apk"
    UNAVAILABLE = "unavailable"

    @property
    def makes(self) -> bool:
        """Whether the step takes time worth doing in the background (a download or a bootstrap)."""
        return self not in (BaseAction.PRESENT, BaseAction.UNAVAILABLE)


@dataclass(frozen=True, kw_only=True)
class BaseFacts:
    """What this machine offers, gathered once per run (see `gather_facts`)."""

    engine: str = ""  # '' when an engine answers, else why not
    present: frozenset[str] = frozenset()  # image references present in the engine
    registry: str = ""  # '' when a registry may be reachable, else why not
    env: Mapping[str, str] | None = None
    mmdebstrap: bool = False  # the tool is installed
    arch_test: bool = False  # ... and arch-test, which it needs to make a tree of another architecture
    root: bool = False  # mmdebstrap's root mode needs root
    keyrings: frozenset[str] = frozenset()  # keyring files that exist
    store: bool = False  # an image store (--registry, --cache-dir) may hold bases made elsewhere
    arch: str = field(default_factory=arches.native)  # this machine's own architecture (Debian's name)


@dataclass(frozen=True, kw_only=True)
class BaseStep:
    """One way to get a base."""

    action: BaseAction
    image: str  # the reference the Dockerfile will build FROM once the step succeeded
    source: str = ""  # pull: the reference to pull (maybe through a mirror); bootstrap: the mirror
    reason: str = ""  # unavailable: why; otherwise a short description for the report
    bootstrap: Bootstrap | None = None  # mmdebstrap/apk: the recipe


def bootstrap_tag(cell: Cell, mirror: str) -> str:
    """mcplab/base:<family>-<suite or release>-<hash of the inputs>."""
    boot = cell.bootstrap
    assert boot is not None
    parts = (BOOTSTRAP_VERSION, boot.method.value, boot.suite, boot.release, mirror, boot.keyring,
             str(SOURCE_DATE_EPOCH))  # fmt: skip
    # The machine's own architecture is not an input, so the bases made before cells had one keep their tags.
    inputs = "\0".join(parts + ((cell.arch, *arches.emulator_env(cell.arch).values()) if cell.arch else ()))
    digest = hashlib.sha256(inputs.encode()).hexdigest()[:12]
    return f"{BASE_REPO}:{cell.family.value}-{boot.suite or boot.release}{cell.arch_tag}-{digest}"


def keyring_for(boot: Bootstrap, env: Mapping[str, str]) -> str:
    return (env.get(boot.keyring_env, "").strip() if boot.keyring_env else "") or boot.keyring


def mirror_for(boot: Bootstrap, env: Mapping[str, str]) -> str:
    return env.get(boot.mirror_env, "").strip().rstrip("/") if boot.mirror_env else ""


def pull_reference(base: str, registry_mirror: str) -> str:
    """The reference to pull: through the mirror when one is set (Docker Hub's official images live
    under library/), else the base itself."""
    if not registry_mirror:
        return base
    path = base if "/" in base else f"library/{base}"
    return f"{registry_mirror.rstrip('/')}/{path}"


def plan_base(cell: Cell, facts: BaseFacts) -> tuple[BaseStep, ...]:
    """The ways to get `cell`'s base, in the order to try them. Ends with `unavailable` when nothing
    can work; every earlier step that is skipped adds its reason to that final message."""
    env = facts.env or {}
    if cell.base_cell is not None:
        # A builder cell's base only hosts its builder stage: had exactly as the cell it shares it with has
        # it, so the two plans are equal and the base is made once (Bases keys on the plan).
        return plan_base(cell.base_cell, facts)
    if facts.engine:
        return (BaseStep(action=BaseAction.UNAVAILABLE, image="", reason=f"{cell.base}: {facts.engine}"),)
    # `debian:bookworm` here is this machine's own architecture's, and pulling another's would take its tag.
    foreign = bool(cell.arch) and cell.arch != facts.arch
    if cell.base in facts.present and not foreign:
        return (BaseStep(action=BaseAction.PRESENT, image=cell.base, reason=f"{cell.base} present"),)
    boot = cell.bootstrap
    mirror = mirror_for(boot, env) if boot else ""
    tag = bootstrap_tag(cell, mirror) if boot and boot.method is not BootstrapMethod.BUILDER else ""
    if tag and tag in facts.present:
        return (BaseStep(action=BaseAction.PRESENT, image=tag, reason=f"bootstrapped earlier as {tag}"),)

    steps: list[BaseStep] = []
    if tag and facts.store:
        steps.append(BaseStep(action=BaseAction.FETCH, image=tag, reason=f"fetched {tag} from the image store"))
    reasons = [f"not present for {cell.arch}" if foreign else "not present"]
    if foreign:
        reasons.append(f"not pulled (a pull for {cell.arch} would retag this machine's own {cell.base})")
    elif facts.registry:
        reasons.append(facts.registry)
    else:
        source = pull_reference(cell.base, env.get(REGISTRY_MIRROR_ENV, ""))
        steps.append(BaseStep(action=BaseAction.PULL, image=cell.base, source=source, reason=f"pulled {source}"))
    made, why = _bootstrap_step(cell, tag, mirror, facts)
    steps += [made] if made else []
    reasons += [why] if why else []
    steps.append(BaseStep(action=BaseAction.UNAVAILABLE, image="", reason=f"{cell.base}: " + ", ".join(reasons)))
    return tuple(steps)


def _bootstrap_step(cell: Cell, tag: str, mirror: str, facts: BaseFacts) -> tuple[BaseStep | None, str]:
    """The step that makes the base offline, or why there is none."""
    boot, env = cell.bootstrap, facts.env or {}
    if boot is None:
        return None, "official images cannot be bootstrapped here (pull only)"
    if boot.method is BootstrapMethod.MMDEBSTRAP:
        why = _mmdebstrap_blocker(cell, boot, mirror, facts)
        if why:
            return None, why
        recipe = replace(boot, keyring=keyring_for(boot, env), arch=cell.arch)
        where = (f"for {cell.arch} " if cell.arch else "") + "from " + (mirror or "mmdebstrap's default mirror")
        return BaseStep(action=BaseAction.MMDEBSTRAP, image=tag, source=mirror, reason=f"mmdebstrapped {where}",
                        bootstrap=recipe), ""  # fmt: skip
    if boot.method is BootstrapMethod.APK:
        if not mirror:
            return None, f"no Alpine mirror configured (set {boot.mirror_env} to bootstrap it with apk.static)"
        return BaseStep(action=BaseAction.APK, image=tag, source=mirror, reason=f"apk.static from {mirror}",
                        bootstrap=replace(boot, arch=cell.arch)), ""  # fmt: skip
    # BUILDER, only reached for a Cell built by hand without `base_cell` (table.py always sets it).
    return None, "a builder cell's base is had like another cell's, and none was given"


def _mmdebstrap_blocker(cell: Cell, boot: Bootstrap, mirror: str, facts: BaseFacts) -> str:
    if cell.family is not Family.DEBIAN and not mirror:
        # mmdebstrap's default mirror serves Debian only.
        name = cell.family.value.capitalize()
        return f"no {name} mirror configured (set {boot.mirror_env} to bootstrap it with mmdebstrap)"
    if not facts.mmdebstrap:
        return "mmdebstrap is not installed (apt-get install mmdebstrap; make lab-engine does)"
    if cell.arch and cell.arch != facts.arch and not facts.arch_test:
        return f"mmdebstrap needs arch-test to make a tree for {cell.arch} (apt-get install arch-test)"
    if not facts.root:
        return "mmdebstrap needs root"
    keyring = keyring_for(boot, facts.env or {})
    if keyring and keyring not in facts.keyrings:
        where = f", or set {boot.keyring_env} to the archive keyring file" if boot.keyring_env else ""
        return f"keyring {keyring} is missing (install the distribution's archive keyring{where})"
    return ""


# --- what this machine offers, and walking a plan against the engine ---------------------------------

PULL_TIMEOUT = 600.0


def probe_registry(engine: Engine, env: Mapping[str, str], ref: str) -> str:
    """'' when a registry (or the configured mirror) answers for `ref`, else a short reason.

    `docker manifest inspect` asks the registry without downloading layers. An engine configured with
    its own registry mirrors is given the benefit of the doubt: the pull itself decides.
    """
    if engine.registry_mirrors():
        return ""
    target = pull_reference(ref, env.get(REGISTRY_MIRROR_ENV, ""))
    done = engine.manifest(target)
    if done.ok:
        return ""
    last = done.last_line().rsplit(": ", 1)[-1]  # the cause ("no such host"), without the transport's preamble
    mirror = env.get(REGISTRY_MIRROR_ENV, "")
    what = f"registry mirror {mirror} not reachable" if mirror else "no registry reachable"
    return f"{what} ({shorten(last, 140)})"


def gather_facts(engine: Engine, cells: tuple[Cell, ...], env: Mapping[str, str], *, store: bool = False) -> BaseFacts:
    try:
        engine.version()
    except EngineError as exc:
        return BaseFacts(engine=exc.message, env=dict(env))
    # A builder cell's base is had like its base cell's: plan with that cell's recipe.
    recipes = [cell.base_cell or cell for cell in cells if cell.family.in_container]
    candidates: set[str] = set()
    for cell in recipes:
        candidates.add(cell.base)
        if cell.bootstrap and cell.bootstrap.method is not BootstrapMethod.BUILDER:
            candidates.add(bootstrap_tag(cell, mirror_for(cell.bootstrap, env)))
    present = frozenset(ref for ref in sorted(candidates) if engine.image_id(ref))
    missing = sorted(c.base for c in recipes if c.base not in present)
    registry = probe_registry(engine, env, missing[0]) if missing else ""
    wanted = {keyring_for(c.bootstrap, env) for c in recipes if c.bootstrap}
    keyrings = frozenset(k for k in wanted if k and Path(k).exists())
    return BaseFacts(
        engine="",
        present=present,
        registry=registry,
        env=dict(env),
        mmdebstrap=shutil.which("mmdebstrap") is not None,
        arch_test=shutil.which("arch-test") is not None,
        root=os.geteuid() == 0,
        keyrings=keyrings,
        store=store,
    )


@dataclass(frozen=True, kw_only=True)
class Base:
    image: str  # the reference to build FROM
    how: str  # which step worked, for the report
    sha256: str = ""  # the tarball it was made from, where the lab made it (bootstrap.ROOTFS_LABEL)


class Bases:
    """Obtains each distinct base once per run, however many cells and threads ask for it. A base that
    cannot be had raises CellProblem: unavailable when every step was skipped or refused, error when a
    step that should have worked broke."""

    def __init__(self, engine: Engine, *, workdir: Path, logdir: Path, cache: Path, labels: Mapping[str, str],
                 stores: Sequence[Store] = ()) -> None:  # fmt: skip
        self.engine = engine
        self.workdir = workdir
        self.logdir = logdir
        self.labels = labels
        self.stores = stores
        self.pulled = cache / "pulled.txt"  # pulled images carry no lab label; clean-lab reads this
        self._lock = threading.Lock()
        self._locks: dict[tuple[BaseStep, ...], threading.Lock] = {}
        self._done: dict[tuple[BaseStep, ...], Base | CellProblem] = {}
        self._made: list[BaseMade] = []
        self._digests: dict[str, str] = {}  # a made base's tarball digest, by its tag (bootstrap.py)

    def made(self) -> tuple[BaseMade, ...]:
        """The bases this run made or fetched, in the order they were ready, each with its time and digest."""
        with self._lock:
            return tuple(self._made)

    def done(self, steps: tuple[BaseStep, ...]) -> bool:
        """Whether that base has been dealt with (made, found, or given up on) in this run."""
        with self._lock:
            return steps in self._done

    def obtain(self, steps: tuple[BaseStep, ...]) -> Base:
        with self._lock:
            lock = self._locks.setdefault(steps, threading.Lock())
        with lock:
            if steps not in self._done:
                try:
                    self._done[steps] = self._walk(steps)
                except CellProblem as problem:
                    self._done[steps] = problem
            found = self._done[steps]
        if isinstance(found, CellProblem):
            raise found
        return found

    def _walk(self, steps: tuple[BaseStep, ...]) -> Base:
        failures: list[str] = []
        for step in steps:
            if step.action is BaseAction.UNAVAILABLE:
                reason = step.reason + ("; " + "; ".join(failures) if failures else "")
                raise CellProblem(Outcome.UNAVAILABLE, reason)
            log = self.logdir / f"base-{_slug(step.image)}-{step.action.value}.log"
            began = time.monotonic()
            failure = self._try(step, log)
            if failure is None:
                if step.action.makes:
                    made = BaseMade(image=step.image, how=step.reason, seconds=round(time.monotonic() - began, 3),
                                    sha256=self._digests.get(step.image, ""))  # fmt: skip
                    with self._lock:
                        self._made.append(made)
                if step.action is not BaseAction.PULL:  # pulled bases come from a registry already
                    keep_image(self.stores, self.engine, step.image, log)
                return Base(image=step.image, how=step.reason, sha256=self._rootfs_digest(step.image))
            failures.append(failure)
        raise CellProblem(Outcome.UNAVAILABLE, "no way to get the base")

    def _rootfs_digest(self, image: str) -> str:
        """What the base's label says its tarball's sha256 was ('' for a base the lab did not make)."""
        with self._lock:
            if image in self._digests:
                return self._digests[image]
        labels = self.engine.image_facts(image).get("labels") or {}
        return str(labels.get(ROOTFS_LABEL, "")) if isinstance(labels, dict) else ""

    def _try(self, step: BaseStep, log: Path) -> str | None:
        """Take one step: None when the base is there now, else why this way did not work. A bootstrap
        that breaks is an error to look at, not a cell that cannot run here: CellProblem."""
        if step.action is BaseAction.PRESENT:
            return None if self.engine.image_id(step.image) else f"{step.image} vanished"
        if step.action is BaseAction.FETCH:
            return None if fetch_image(self.stores, self.engine, step.image, log) else "not in the image store"
        if step.action is BaseAction.PULL:
            return self._pull(step, log)
        maker = mmdebstrap_base if step.action is BaseAction.MMDEBSTRAP else apk_base
        try:
            assert step.bootstrap is not None
            made = maker(self.engine, step.bootstrap, mirror=step.source, tag=step.image, workdir=self.workdir, log=log,
                         labels={**self.labels, TAG_LABEL: step.image})  # fmt: skip
            with self._lock:
                self._digests[step.image] = made
        except BootstrapFailed as exc:
            raise CellProblem(Outcome.ERROR, f"base: {exc}", _log_tail(log)) from exc
        return None

    def _pull(self, step: BaseStep, log: Path) -> str | None:
        done = self.engine.pull(step.source, log=log, timeout=PULL_TIMEOUT)
        if not done.ok:
            return f"pull {step.source} failed: {shorten(done.last_line(), 140)}"
        if step.source != step.image:
            self.engine.tag(step.source, step.image)
        with self._lock, open(self.pulled, "a", encoding="utf-8") as record:
            record.write("".join(f"{ref}\n" for ref in {step.source, step.image}))
        return None


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text)


def _log_tail(path: Path) -> str:
    try:
        return tail(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


