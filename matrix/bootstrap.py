"""How a base is made offline: debootstrap (Debian, Ubuntu) or apk.static (Alpine) into a folder, the tree made
fit to be an image, then `docker import`ed. Which way a base comes (present, the store, a pull, made here) is
decided in bases.py."""

from __future__ import annotations

import email.utils
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from .arches import ARCHES, emulator_env
from .engine import Engine
from .model import Bootstrap
from .processes import tail

BOOTSTRAP_TIMEOUT = 1200.0
SNAPSHOT_APT_CONF = "etc/apt/apt.conf.d/99mcplab-snapshot"


class BootstrapFailed(Exception):
    """Everything a bootstrap needs was there and it still broke: an error to look at."""


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


def import_rootfs(engine: Engine, root: Path, tag: str, log: Path, labels: Mapping[str, str], arch: str = "") -> None:
    """The tree as an image under `tag`, labelled as the lab's, of the architecture `arch` ('' for the machine's
    own) as `docker image inspect` tells it."""
    platform = ARCHES[arch].platform if arch else ""
    done = engine.import_rootfs(root, tag, labels=labels, log=log, timeout=BOOTSTRAP_TIMEOUT, platform=platform,
                                env=emulator_env(arch))  # fmt: skip
    if not done.ok:
        raise BootstrapFailed(f"docker import of {tag} failed: {tail(done.output, 3)}")


def debootstrap_base(engine: Engine, boot: Bootstrap, *, mirror: str, tag: str, workdir: Path, log: Path,
                     labels: Mapping[str, str]) -> str:  # fmt: skip
    """A Debian or Ubuntu base from `mirror` (debootstrap's default when ''), imported as `tag`; returns ''."""
    target = Path(tempfile.mkdtemp(prefix=f"debootstrap-{boot.suite}-", dir=workdir))
    try:
        # For another architecture debootstrap runs the second stage in the tree itself, through the kernel's
        # binfmt_misc emulator where this machine needs one (cell.known_unavailable checked it is registered).
        argv = ["debootstrap", "--variant=minbase", *([f"--arch={boot.arch}"] if boot.arch else [])]
        if boot.keyring:
            argv.append(f"--keyring={boot.keyring}")
        argv += [boot.suite, str(target)]
        if mirror:
            argv.append(mirror)
            if boot.script:
                argv.append(f"/usr/share/debootstrap/scripts/{boot.script}")
        env = {**os.environ, **emulator_env(boot.arch)}  # the second stage's emulated CPU (arches.py)
        done = engine.processes.command(argv, timeout=BOOTSTRAP_TIMEOUT, log=log, env=env)
        if not done.ok:
            raise BootstrapFailed(f"debootstrap {boot.suite} failed (exit {done.returncode}); see {log}")
        notes = prepare_rootfs(target, datetime.now(timezone.utc))
        with open(log, "a", encoding="utf-8") as sink:
            sink.writelines(f"mcplab: {n}\n" for n in notes)
        import_rootfs(engine, target, tag, log, labels, boot.arch)
        return ""
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


def apk_base(engine: Engine, boot: Bootstrap, *, mirror: str, tag: str, workdir: Path, log: Path,
             labels: Mapping[str, str]) -> str:  # fmt: skip
    """Alpine's minirootfs from apk.static: fetch apk-tools-static from the mirror's index, then let it
    install alpine-base into an empty root, imported as `tag`; returns ''."""
    arch = ARCHES[boot.arch].apk if boot.arch else os.uname().machine
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
        import_rootfs(engine, target, tag, log, labels, boot.arch)
        return ""
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
