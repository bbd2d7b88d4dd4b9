"""How a base is made offline: mmdebstrap (Debian, Ubuntu) or apk.static (Alpine), as a tarball of the tree, made
fit to be an image, then imported. Which way a base comes (present, the store, a pull, made here) is decided in
bases.py.

mmdebstrap makes the same tarball, byte for byte, from the same inputs and the same mirror content, given
SOURCE_DATE_EPOCH: the time it stamps everything with, pinned here (and an input of the base's tag). Each base image
carries its tarball's sha256 (ROOTFS_LABEL), which every report gives. Run as `python -m matrix.bootstrap TREE`,
this module is mmdebstrap's customize hook (CUSTOMIZE): prepare_rootfs on the tree before it is packed.
"""

from __future__ import annotations

import email.utils
import hashlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from . import LAB_ROOT
from .arches import ARCHES, emulator_env
from .engine import Engine
from .model import Bootstrap
from .processes import tail

BOOTSTRAP_TIMEOUT = 1200.0
SNAPSHOT_APT_CONF = "etc/apt/apt.conf.d/99mcplab-snapshot"
SOURCE_DATE_EPOCH = 1767225600  # 2026-01-01T00:00:00Z: every file of a base is stamped with it
ROOTFS_LABEL = "org.mcpserver.lab.rootfs-sha256"  # a base image's label: the sha256 of the tarball it was made from
MERGED_USR = "/usr/share/mmdebstrap/hooks/maybe-merged-usr"  # mmdebstrap's own: merge /usr where the suite can
# Run on the host with the tree as $1, before mmdebstrap packs it (its own cleanup then drops what it put there).
CUSTOMIZE = f'PYTHONPATH={shlex.quote(str(LAB_ROOT))} {shlex.quote(sys.executable)} -m matrix.bootstrap "$1"'
# Inside the tree, and not to be kept: the host's resolver and name (the engine gives every container its own),
# and the bootstrap's own apt setting (--aptopt writes it here).
NOT_KEPT = ("etc/resolv.conf", "etc/hostname", "etc/apt/apt.conf.d/99mmdebstrap")


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
    """Make a fresh tree fit to be an image; returns what it did, for the log.

    - If the suite's Release file has expired (a frozen snapshot), tell apt not to check Valid-Until,
      or every `apt-get update` in the Dockerfile would refuse.
    - Drop the package lists and downloaded .debs: the Dockerfile updates them anyway, and they are
      half the size of a minbase tree.
    - Drop what the host put in it (NOT_KEPT): a base is the same whichever machine made it.
    """
    notes = []
    for name in NOT_KEPT:
        (root / name).unlink(missing_ok=True)
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


def import_rootfs(engine: Engine, rootfs: Path, tag: str, log: Path, labels: Mapping[str, str], arch: str = "") -> str:
    """The tarball as an image under `tag`, labelled as the lab's and with the tarball's sha256 (ROOTFS_LABEL), of the
    architecture `arch` ('' for the machine's own) as `docker image inspect` tells it; returns the sha256."""
    platform = ARCHES[arch].platform if arch else ""
    sha256 = file_digest(rootfs)
    done = engine.import_rootfs(rootfs, tag, labels={**labels, ROOTFS_LABEL: sha256}, log=log,
                                timeout=BOOTSTRAP_TIMEOUT, platform=platform, env=emulator_env(arch))  # fmt: skip
    if not done.ok:
        raise BootstrapFailed(f"docker import of {tag} failed: {tail(done.output, 3)}")
    return sha256


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def mmdebstrap_argv(boot: Bootstrap, mirror: str, tarball: Path) -> list[str]:
    """mmdebstrap's command for a minbase tree as a tarball. /usr is merged where the suite has usr-is-merged, as
    debootstrap merges it; the Release files' Valid-Until is not checked while bootstrapping (a frozen snapshot's
    has passed), and the customize hook (CUSTOMIZE) decides from those files whether the base's apt checks it."""
    argv = ["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar", f"--hook-dir={MERGED_USR}",
            '--aptopt=Acquire::Check-Valid-Until "false"', f"--customize-hook={CUSTOMIZE}"]  # fmt: skip
    argv += [f"--architectures={boot.arch}"] if boot.arch else []
    argv += [f"--keyring={boot.keyring}"] if boot.keyring else []
    return [*argv, boot.suite, str(tarball), *([mirror] if mirror else [])]


def mmdebstrap_base(engine: Engine, boot: Bootstrap, *, mirror: str, tag: str, workdir: Path, log: Path,
                    labels: Mapping[str, str]) -> str:  # fmt: skip
    """A Debian or Ubuntu base from `mirror` (mmdebstrap's default when ''), as a tarball that the same inputs make
    byte for byte again (SOURCE_DATE_EPOCH), imported as `tag`; returns the tarball's sha256."""
    folder = Path(tempfile.mkdtemp(prefix=f"mmdebstrap-{boot.suite}-", dir=workdir))
    tarball = folder / "rootfs.tar"
    try:
        # For another architecture mmdebstrap runs the packages' scripts in the tree through the kernel's binfmt_misc
        # emulator where this machine needs one (cell.known_unavailable checked it is registered), as its CPU.
        # TMPDIR: the tree it mounts /proc and /dev in is made under `folder`, which remove_tree unmounts if killed.
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH), "TMPDIR": str(folder),
               **emulator_env(boot.arch)}  # fmt: skip
        done = engine.processes.command(mmdebstrap_argv(boot, mirror, tarball), timeout=BOOTSTRAP_TIMEOUT, log=log,
                                        env=env)  # fmt: skip
        if not done.ok:
            raise BootstrapFailed(f"mmdebstrap {boot.suite} failed (exit {done.returncode}); see {log}")
        return import_rootfs(engine, tarball, tag, log, labels, boot.arch)
    finally:
        remove_tree(folder)


def remove_tree(target: Path) -> None:
    """rm -rf a bootstrap tree, first unmounting what a killed bootstrap may have left mounted in it
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
    install alpine-base into an empty root, imported as `tag` from a tarball; returns its sha256."""
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
        tarball = tools / "rootfs.tar"
        packed = engine.processes.command(["tar", "--sort=name", "--numeric-owner", f"--mtime=@{SOURCE_DATE_EPOCH}",
                                           "--clamp-mtime", "-C", str(target), "-cf", str(tarball), "."],
                                          timeout=BOOTSTRAP_TIMEOUT, log=log)  # fmt: skip
        if not packed.ok:
            raise BootstrapFailed(f"tar of the Alpine tree failed: {packed.last_line()}")
        return import_rootfs(engine, tarball, tag, log, labels, boot.arch)
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


if __name__ == "__main__":  # mmdebstrap's customize hook (CUSTOMIZE): the tree's path is the argument
    for note in prepare_rootfs(Path(sys.argv[1]), datetime.now(timezone.utc)):
        print(f"mcplab: {note}")
