"""Base images: already present, else pulled, else bootstrapped offline, else unavailable with the reason.

`plan_base` is pure: the cell and what was found on this machine (`BaseFacts`) in, an ordered list of
ways to get the base out. `obtain_base` walks that list against the real engine. The split lets the
selection rules be unit-tested with no engine (tests/lab/test_bases.py).

Bootstrapped bases get a deterministic tag from their inputs (method, suite, mirror, keyring), so a
second run finds them present and the lab never makes the same base twice.
"""

from __future__ import annotations

import email.utils
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from .engine import LABEL, Engine, run_command, tail
from .model import Bootstrap, Cell, Family

BASE_REPO = "mcplab/base"
REGISTRY_MIRROR_ENV = "LAB_REGISTRY_MIRROR"  # host[:port] of a pull-through mirror of the official images
BOOTSTRAP_VERSION = "1"  # bump to remake every bootstrapped base (e.g. when the recipe below changes)
PULL_TIMEOUT = 600.0
BOOTSTRAP_TIMEOUT = 1200.0
SNAPSHOT_APT_CONF = "etc/apt/apt.conf.d/99mcplab-snapshot"


@dataclass(frozen=True, kw_only=True)
class BaseFacts:
    """What this machine offers, gathered once per run (see `gather_facts`)."""

    engine: str = ""  # '' when an engine answers, else why not
    present: frozenset[str] = frozenset()  # image references present in the engine
    registry: str = ""  # '' when a registry may be reachable, else why not
    env: Mapping[str, str] | None = None
    debootstrap: bool = False  # the tool is installed
    root: bool = False  # debootstrap needs root
    keyrings: frozenset[str] = frozenset()  # keyring files that exist


@dataclass(frozen=True, kw_only=True)
class BaseStep:
    """One way to get a base: action is present, pull, debootstrap, apk, or unavailable."""

    action: str
    image: str  # the reference the Dockerfile will build FROM once the step succeeded
    source: str = ""  # pull: the reference to pull (maybe through a mirror); bootstrap: the mirror
    reason: str = ""  # unavailable: why; otherwise a short description for the report
    bootstrap: Bootstrap | None = None  # debootstrap/apk: the recipe


def bootstrap_tag(cell: Cell, mirror: str) -> str:
    """mcplab/base:<family>-<suite or release>-<hash of the inputs>."""
    boot = cell.bootstrap
    assert boot is not None
    inputs = "\0".join((BOOTSTRAP_VERSION, boot.method, boot.suite, boot.release, mirror, boot.keyring, boot.script))
    digest = hashlib.sha256(inputs.encode()).hexdigest()[:12]
    return f"{BASE_REPO}:{cell.family.value}-{boot.suite or boot.release}-{digest}"


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
        return (BaseStep(action="unavailable", image="", reason=f"{cell.base}: {facts.engine}"),)
    if cell.base in facts.present:
        return (BaseStep(action="present", image=cell.base, reason=f"{cell.base} present"),)
    boot = cell.bootstrap
    mirror = mirror_for(boot, env) if boot else ""
    tag = bootstrap_tag(cell, mirror) if boot and boot.method != "builder" else ""
    if tag and tag in facts.present:
        return (BaseStep(action="present", image=tag, reason=f"bootstrapped earlier as {tag}"),)

    steps: list[BaseStep] = []
    reasons = ["not present"]
    if facts.registry:
        reasons.append(facts.registry)
    else:
        source = pull_reference(cell.base, env.get(REGISTRY_MIRROR_ENV, ""))
        steps.append(BaseStep(action="pull", image=cell.base, source=source, reason=f"pulled {source}"))

    if boot is None:
        reasons.append("official images cannot be bootstrapped here (pull only)")
    elif boot.method == "debootstrap":
        why = _debootstrap_blocker(cell, boot, mirror, facts)
        if why:
            reasons.append(why)
        else:
            where = mirror or "debootstrap's default mirror"
            steps.append(
                BaseStep(
                    action="debootstrap",
                    image=tag,
                    source=mirror,
                    reason=f"debootstrapped from {where}",
                    bootstrap=replace(boot, keyring=keyring_for(boot, env)),
                )
            )
    elif boot.method == "apk":
        if mirror:
            steps.append(
                BaseStep(action="apk", image=tag, source=mirror, reason=f"apk.static from {mirror}", bootstrap=boot)
            )
        else:
            reasons.append(f"no Alpine mirror configured (set {boot.mirror_env} to bootstrap it with apk.static)")
    elif boot.method == "builder":
        # Only reached for a Cell built by hand without `base_cell` (cells.py always sets it).
        reasons.append("a builder cell's base is had like another cell's, and none was given")

    steps.append(BaseStep(action="unavailable", image="", reason=f"{cell.base}: " + ", ".join(reasons)))
    return tuple(steps)


def _debootstrap_blocker(cell: Cell, boot: Bootstrap, mirror: str, facts: BaseFacts) -> str:
    if cell.family is not Family.DEBIAN and not mirror:
        # debootstrap's default mirror serves Debian only.
        name = cell.family.value.capitalize()
        return f"no {name} mirror configured (set {boot.mirror_env} to bootstrap it with debootstrap)"
    if not facts.debootstrap:
        return "debootstrap is not installed (apt-get install debootstrap)"
    if not facts.root:
        return "debootstrap needs root"
    keyring = keyring_for(boot, facts.env or {})
    if keyring and keyring not in facts.keyrings:
        where = f", or set {boot.keyring_env} to the archive keyring file" if boot.keyring_env else ""
        return f"keyring {keyring} is missing (install the distribution's archive keyring{where})"
    return ""


# --- gathering facts and acting on a plan (engine needed) --------------------------------------------


def probe_registry(engine: Engine, env: Mapping[str, str], ref: str) -> str:
    """'' when a registry (or the configured mirror) answers for `ref`, else a short reason.

    `docker manifest inspect` asks the registry without downloading layers. An engine configured with
    its own registry mirrors is given the benefit of the doubt: the pull itself decides.
    """
    if engine.registry_mirrors():
        return ""
    target = pull_reference(ref, env.get(REGISTRY_MIRROR_ENV, ""))
    done = engine.run(["manifest", "inspect", target], timeout=30)
    if done.returncode == 0:
        return ""
    last = (done.output.strip().splitlines() or ["no answer"])[-1]
    last = last.rsplit(": ", 1)[-1]  # the cause ("no such host"), without the transport's preamble
    mirror = env.get(REGISTRY_MIRROR_ENV, "")
    what = f"registry mirror {mirror} not reachable" if mirror else "no registry reachable"
    return f"{what} ({_short(last)})"


def _short(text: str, limit: int = 140) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gather_facts(engine: Engine, cells: tuple[Cell, ...], env: Mapping[str, str]) -> BaseFacts:
    why = engine.available()
    if why:
        return BaseFacts(engine=why, env=dict(env))
    # A builder cell's base is had like its base cell's: plan with that cell's recipe.
    recipes = [cell.base_cell or cell for cell in cells if cell.family.in_container]
    candidates: set[str] = set()
    for cell in recipes:
        candidates.add(cell.base)
        if cell.bootstrap and cell.bootstrap.method != "builder":
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
    )


@dataclass(frozen=True, kw_only=True)
class BaseOutcome:
    image: str = ""  # '' when no step worked
    how: str = ""  # which step worked, for the report
    unavailable: str = ""  # the reason, when every step was skipped or refused
    error: str = ""  # a step that should have worked broke
    log_tail: str = ""


class Bases:
    """Obtains each distinct base once per run, however many cells and threads ask for it."""

    def __init__(self, engine: Engine, workdir: Path, logdir: Path, cache: Path) -> None:
        self.engine = engine
        self.workdir = workdir
        self.logdir = logdir
        self.pulled = cache / "pulled.txt"  # pulled images carry no lab label; clean-lab reads this
        self._lock = threading.Lock()
        self._locks: dict[tuple[BaseStep, ...], threading.Lock] = {}
        self._done: dict[tuple[BaseStep, ...], BaseOutcome] = {}

    def done(self, steps: tuple[BaseStep, ...]) -> bool:
        """Whether that base has been dealt with (made, found, or given up on) in this run."""
        with self._lock:
            return steps in self._done

    def obtain(self, steps: tuple[BaseStep, ...]) -> BaseOutcome:
        with self._lock:
            lock = self._locks.setdefault(steps, threading.Lock())
        with lock:
            if steps not in self._done:
                self._done[steps] = self._walk(steps)
            return self._done[steps]

    def _walk(self, steps: tuple[BaseStep, ...]) -> BaseOutcome:
        failures: list[str] = []
        for step in steps:
            if step.action == "unavailable":
                reason = step.reason + ("; " + "; ".join(failures) if failures else "")
                return BaseOutcome(unavailable=reason)
            log = str(self.logdir / f"base-{_slug(step.image)}-{step.action}.log")
            if step.action == "present":
                if self.engine.image_id(step.image):
                    return BaseOutcome(image=step.image, how=step.reason)
                failures.append(f"{step.image} vanished")
            elif step.action == "pull":
                done = pull(self.engine, step, log)
                if not done:
                    with self._lock, open(self.pulled, "a", encoding="utf-8") as record:
                        record.write("".join(f"{ref}\n" for ref in {step.source, step.image}))
                    return BaseOutcome(image=step.image, how=step.reason)
                failures.append(done)
            else:
                maker = debootstrap_base if step.action == "debootstrap" else apk_base
                error = maker(self.engine, step, self.workdir, log)
                if error:
                    # The lab had everything a bootstrap needs and it still broke: that is an error to
                    # look at, not a cell that cannot run here.
                    return BaseOutcome(error=error, log_tail=_log_tail(log))
                return BaseOutcome(image=step.image, how=step.reason)
        return BaseOutcome(unavailable="no way to get the base")


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text)


def _log_tail(path: str) -> str:
    try:
        return tail(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def pull(engine: Engine, step: BaseStep, log: str) -> str:
    """'' on success (and the image tagged as step.image), else why it failed."""
    done = engine.run(["pull", step.source], timeout=PULL_TIMEOUT, log=log)
    if done.returncode != 0:
        return f"pull {step.source} failed: {_short((done.output.strip().splitlines() or ['?'])[-1])}"
    if step.source != step.image:
        engine.run(["tag", step.source, step.image], timeout=60)
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


def import_rootfs(engine: Engine, root: Path, tag: str, log: str) -> str:
    """tar the tree into `docker import` under `tag`, labelled as the lab's; '' on success."""
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert tar.stdout is not None
    changes = ["--change", f"LABEL {LABEL}=1", "--change", 'CMD ["/bin/sh"]']
    imp = subprocess.run(
        [engine.docker, "import", *changes, "-", tag],
        stdin=tar.stdout,
        capture_output=True,
        timeout=BOOTSTRAP_TIMEOUT,
    )
    tar.stdout.close()
    tar.wait()
    with open(log, "ab") as sink:
        sink.write(imp.stdout + imp.stderr)
    if imp.returncode != 0 or tar.returncode != 0:
        return f"docker import of {tag} failed: {tail(imp.stderr.decode(errors='replace'), 3)}"
    return ""


def debootstrap_base(engine: Engine, step: BaseStep, workdir: Path, log: str) -> str:
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
        done = run_command(argv, timeout=BOOTSTRAP_TIMEOUT, log=log, tracker=engine)
        if done.returncode != 0:
            return f"debootstrap {boot.suite} failed (exit {done.returncode}); see {log}"
        notes = prepare_rootfs(target, datetime.now(timezone.utc))
        with open(log, "a", encoding="utf-8") as sink:
            sink.writelines(f"mcplab: {n}\n" for n in notes)
        return import_rootfs(engine, target, step.image, log)
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
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=60)
    shutil.rmtree(target, ignore_errors=True)


def apk_base(engine: Engine, step: BaseStep, workdir: Path, log: str) -> str:
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
            return f"{repo}: the index has no apk-tools-static"
        with urllib.request.urlopen(f"{repo}/{arch}/apk-tools-static-{version}.apk", timeout=120) as answer:
            package = answer.read()
        # An .apk is concatenated gzip streams of tar; Python's tarfile reads through them.
        with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as tar:
            tar.extractall(tools, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tools)
        apk = tools / "sbin/apk.static"
        argv = [
            str(apk),
            "-X",
            repo,
            "-U",
            "--allow-untrusted",
            "--root",
            str(target),
            "--initdb",
            "add",
            "alpine-base",
        ]
        done = run_command(argv, timeout=BOOTSTRAP_TIMEOUT, log=log, tracker=engine)
        if done.returncode != 0:
            return f"apk.static failed (exit {done.returncode}); see {log}"
        (target / "etc/apk/repositories").write_text(f"{repo}\n{mirror}/{boot.release}/community\n")
        return import_rootfs(engine, target, step.image, log)
    except OSError as exc:
        return f"Alpine bootstrap from {mirror} failed: {exc}"
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
