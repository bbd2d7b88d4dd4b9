"""Getting base images: the facts a plan needs (gather_facts), and walking a plan (Bases): present, fetched
from the image store, pulled, or made offline with debootstrap (Debian, Ubuntu) or apk.static (Alpine) into
a folder, made fit to be an image, then `docker import`ed. The plan itself is pure (bases.py)."""

from __future__ import annotations

import email.utils
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .bases import (
    REGISTRY_MIRROR_ENV,
    BaseAction,
    BaseFacts,
    BaseStep,
    bootstrap_tag,
    keyring_for,
    mirror_for,
    pull_reference,
)
from .engine import TAG_LABEL, Engine
from .errors import CellProblem, EngineError
from .model import BootstrapMethod, Cell, Outcome
from .processes import tail
from .text import shorten
from .travel import Store, fetch_image, keep_image

PULL_TIMEOUT = 600.0
BOOTSTRAP_TIMEOUT = 1200.0
SNAPSHOT_APT_CONF = "etc/apt/apt.conf.d/99mcplab-snapshot"


class BootstrapFailed(Exception):
    """Everything a bootstrap needs was there and it still broke: an error to look at."""


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
        debootstrap=shutil.which("debootstrap") is not None,
        root=os.geteuid() == 0,
        keyrings=keyrings,
        store=store,
    )


@dataclass(frozen=True, kw_only=True)
class Base:
    image: str  # the reference to build FROM
    how: str  # which step worked, for the report


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
            failure = self._try(step, log)
            if failure is None:
                if step.action is not BaseAction.PULL:  # pulled bases come from a registry already
                    keep_image(self.stores, self.engine, step.image, log)
                return Base(image=step.image, how=step.reason)
            failures.append(failure)
        raise CellProblem(Outcome.UNAVAILABLE, "no way to get the base")

    def _try(self, step: BaseStep, log: Path) -> str | None:
        """Take one step: None when the base is there now, else why this way did not work. A bootstrap
        that breaks is an error to look at, not a cell that cannot run here: CellProblem."""
        if step.action is BaseAction.PRESENT:
            return None if self.engine.image_id(step.image) else f"{step.image} vanished"
        if step.action is BaseAction.FETCH:
            return None if fetch_image(self.stores, self.engine, step.image, log) else "not in the image store"
        if step.action is BaseAction.PULL:
            return self._pull(step, log)
        maker = debootstrap_base if step.action is BaseAction.DEBOOTSTRAP else apk_base
        try:
            maker(self.engine, step, self.workdir, log, {**self.labels, TAG_LABEL: step.image})
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


def _release_valid_until(text: str) -> datetime | None:
    """Valid-Until of a Debian Release file, or None when it has none."""
    for line in text.splitlines():
        if line.startswith("Valid-Until:"):
            parsed = email.utils.parsedate_to_datetime(line.partition(":")[2].strip())
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    return None


def snapshot_expired(release_text: str, now: datetime) -> bool:
    """True when a Release file's Valid-Until is past: a frozen snapshot mirror, on which apt refuses
    to update unless told Acquire::Check-Valid-Until=false."""
    valid_until = _release_valid_until(release_text)
    return valid_until is not None and valid_until < now


def prepare_rootfs(root: Path, now: datetime) -> list[str]:
    """Make a fresh debootstrap tree fit to be an image; returns what it did, for the log.

    - If the suite's Release file has expired (a frozen snapshot), tell apt not to check Valid-Until,
      or every `apt-get update` in the Dockerfile would refuse.
    - Drop the package lists and downloaded .debs: the Dockerfile updates them anyway, and they are
      half the size of a minbase tree.
    """
    notes = []
    lists = root / "var/lib/apt/lists"
    releases = sorted(lists.glob("*_Release")) + sorted(lists.glob("*_InRelease"))
    if any(snapshot_expired(p.read_text(encoding="utf-8", errors="replace"), now) for p in releases):
        conf = root / SNAPSHOT_APT_CONF
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(
            "// The mirror is a frozen snapshot whose Release files have expired (written by mcplab).\n"
            'Acquire::Check-Valid-Until "false";\n'
        )
        notes.append(f"Release expired: wrote {SNAPSHOT_APT_CONF}")
    for path in list(lists.glob("*")) + list((root / "var/cache/apt/archives").glob("*.deb")):
        if path.is_file():
            path.unlink()
    for path in (root / "var/cache/apt").glob("*.bin"):
        path.unlink()
    return notes


def import_rootfs(engine: Engine, root: Path, tag: str, log: Path, labels: Mapping[str, str]) -> None:
    """The tree as an image under `tag`, labelled as the lab's."""
    done = engine.import_rootfs(root, tag, labels=labels, log=log, timeout=BOOTSTRAP_TIMEOUT)
    if not done.ok:
        raise BootstrapFailed(f"docker import of {tag} failed: {tail(done.output, 3)}")


def debootstrap_base(engine: Engine, step: BaseStep, workdir: Path, log: Path, labels: Mapping[str, str]) -> None:
    boot = step.bootstrap
    assert boot is not None
    target = Path(tempfile.mkdtemp(prefix=f"debootstrap-{boot.suite}-", dir=workdir))
    try:
        argv = ["debootstrap", "--variant=minbase"]
        if boot.keyring:
            argv.append(f"--keyring={boot.keyring}")
        argv += [boot.suite, str(target)]
        if step.source:
            argv.append(step.source)
            if boot.script:
                argv.append(f"/usr/share/debootstrap/scripts/{boot.script}")
        done = engine.processes.command(argv, timeout=BOOTSTRAP_TIMEOUT, log=log)
        if not done.ok:
            raise BootstrapFailed(f"debootstrap {boot.suite} failed (exit {done.returncode}); see {log}")
        notes = prepare_rootfs(target, datetime.now(timezone.utc))
        with open(log, "a", encoding="utf-8") as sink:
            sink.writelines(f"mcplab: {n}\n" for n in notes)
        import_rootfs(engine, target, step.image, log, labels)
    finally:
        remove_tree(target)


def remove_tree(target: Path) -> None:
    """rm -rf a bootstrap tree, first unmounting what a killed debootstrap may have left mounted in it
    (proc, sys, devpts), deepest first, so nothing outside the tree is touched."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    inside = [m.split()[1] for m in mounts if len(m.split()) > 1 and m.split()[1].startswith(f"{target}/")]
    for point in sorted(inside, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=60, check=False)
    shutil.rmtree(target, ignore_errors=True)


def apk_base(engine: Engine, step: BaseStep, workdir: Path, log: Path, labels: Mapping[str, str]) -> None:
    """Alpine's minirootfs from apk.static: fetch apk-tools-static from the mirror's index, then let it
    install alpine-base into an empty root."""
    boot = step.bootstrap
    assert boot is not None
    mirror, arch = step.source, os.uname().machine
    repo = f"{mirror}/{boot.release}/main"
    target = Path(tempfile.mkdtemp(prefix=f"apk-{boot.release}-", dir=workdir))
    tools = Path(tempfile.mkdtemp(prefix="apk-tools-", dir=workdir))
    try:
        with urllib.request.urlopen(f"{repo}/{arch}/APKINDEX.tar.gz", timeout=60) as answer:
            index = answer.read()
        with tarfile.open(fileobj=io.BytesIO(index)) as tar:
            member = tar.extractfile("APKINDEX")
            assert member is not None
            text = member.read().decode()
        version = apk_version(text, "apk-tools-static")
        if not version:
            raise BootstrapFailed(f"{repo}: the index has no apk-tools-static")
        with urllib.request.urlopen(f"{repo}/{arch}/apk-tools-static-{version}.apk", timeout=120) as answer:
            package = answer.read()
        # An .apk is concatenated gzip streams of tar; Python's tarfile reads through them.
        with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as tar:
            tar.extractall(tools, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tools)
        apk = tools / "sbin/apk.static"
        argv = [str(apk), "-X", repo, "-U", "--allow-untrusted", "--root", str(target), "--initdb", "add"]
        argv.append("alpine-base")
        done = engine.processes.command(argv, timeout=BOOTSTRAP_TIMEOUT, log=log)
        if not done.ok:
            raise BootstrapFailed(f"apk.static failed (exit {done.returncode}); see {log}")
        (target / "etc/apk/repositories").write_text(f"{repo}\n{mirror}/{boot.release}/community\n")
        import_rootfs(engine, target, step.image, log, labels)
    except OSError as exc:
        raise BootstrapFailed(f"Alpine bootstrap from {mirror} failed: {exc}") from exc
    finally:
        remove_tree(target)
        shutil.rmtree(tools, ignore_errors=True)


def apk_version(index_text: str, package: str) -> str:
    """The version of `package` in an APKINDEX (records of `X:value` lines separated by blank lines)."""
    for record in index_text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in record.splitlines() if ":" in line)
        if fields.get("P") == package:
            return fields.get("V", "")
    return ""
