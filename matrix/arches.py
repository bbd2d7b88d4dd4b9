"""The architectures a cell can be built for, named as Debian names them (mmdebstrap --architectures), and what each is
called by the engine (docker's --platform), by the kernel (uname -m), by Alpine and by the kernel's binfmt_misc
handler that runs it when this machine cannot.

Pure data and lookups, plus `binfmt_problem`, which reads /proc to say why a foreign architecture cannot run
here ('' when it can). Nothing here starts a process.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

BINFMT = Path("/proc/sys/fs/binfmt_misc")


@dataclass(frozen=True, kw_only=True)
class Arch:
    name: str  # Debian's: amd64, i386, arm64, armhf, s390x, ppc64el, riscv64
    platform: str  # docker's: linux/amd64, linux/386, linux/arm/v7 ...
    machine: str  # what uname -m says on a kernel of its own
    apk: str  # Alpine's name, for apk.static's index
    handler: str  # qemu-user's binfmt_misc entry that runs it on another CPU
    bits: int
    big_endian: bool = False
    # The CPU qemu-user emulates for it (QEMU_CPU, set in its bases: emulator_env), when not qemu's default. arm64: a
    # Cortex-A72 (a Raspberry Pi 4's, the first Graviton's), where the pointer-authentication instructions trixie's
    # binaries carry are no-ops; qemu's default "max" CPU computes QARMA for each of them: a Python start-up took
    # 44 to 80 s instead of 4 to 8.
    emulated_cpu: str = ""


ARCHES: dict[str, Arch] = {a.name: a for a in (
    Arch(name="amd64", platform="linux/amd64", machine="x86_64", apk="x86_64", handler="qemu-x86_64", bits=64),
    Arch(name="i386", platform="linux/386", machine="i686", apk="x86", handler="qemu-i386", bits=32),
    Arch(name="arm64", platform="linux/arm64", machine="aarch64", apk="aarch64", handler="qemu-aarch64", bits=64,
         emulated_cpu="cortex-a72"),
    Arch(name="armhf", platform="linux/arm/v7", machine="armv7l", apk="armv7", handler="qemu-arm", bits=32),
    Arch(name="s390x", platform="linux/s390x", machine="s390x", apk="s390x", handler="qemu-s390x", bits=64,
         big_endian=True),
    Arch(name="ppc64el", platform="linux/ppc64le", machine="ppc64le", apk="ppc64le", handler="qemu-ppc64le", bits=64),
    Arch(name="riscv64", platform="linux/riscv64", machine="riscv64", apk="riscv64", handler="qemu-riscv64", bits=64),
)}  # fmt: skip

# What a kernel of each machine runs without an emulator: an x86_64 kernel runs i386 binaries itself, an arm64 one
# (most of them) 32-bit ARM.
_RUNS_NATIVELY = {"x86_64": ("amd64", "i386"), "aarch64": ("arm64", "armhf")}


def native(machine: str = "") -> str:
    """This machine's own architecture, by Debian's name ('' for a CPU the table does not know)."""
    machine = machine or platform.machine()
    return next((a.name for a in ARCHES.values() if a.machine == machine), "")


def emulated(arch: str, machine: str = "") -> bool:
    """Whether this machine needs an emulator (qemu-user through binfmt_misc) to run `arch`."""
    machine = machine or platform.machine()
    return arch not in _RUNS_NATIVELY.get(machine, (native(machine),))


def emulator_env(arch: str) -> dict[str, str]:
    """The environment qemu-user reads, for an architecture whose emulated CPU is not qemu's default: a base of
    that architecture carries it (ENV), so every build step and container of its images is emulated so, and the
    bootstrap's second stage runs with it. Inert where the architecture runs natively: nothing else reads it."""
    cpu = ARCHES[arch].emulated_cpu if arch else ""
    return {"QEMU_CPU": cpu} if cpu else {}


def binfmt_problem(arch: str, machine: str = "", binfmt: Path = BINFMT) -> str:
    """Why this machine's kernel cannot run `arch`'s binaries in a container ('' when it can): binfmt_misc not
    mounted, no qemu handler registered for it, or one registered without the F flag (the kernel then looks for
    the emulator inside each container's own root, where there is none)."""
    if not emulated(arch, machine):
        return ""
    handler = ARCHES[arch].handler
    fix = "make lab-engine installs and registers Debian's qemu-user-static (root, a kernel with binfmt_misc)"
    if not (binfmt / "status").exists():
        return f"{arch} needs an emulator here and binfmt_misc is not mounted at {binfmt} ({fix})"
    try:
        entry = (binfmt / handler).read_text()
    except OSError:
        return f"{arch} needs an emulator here and no {handler} handler is registered in binfmt_misc ({fix})"
    if not entry.startswith("enabled"):
        return f"{arch} needs an emulator here and binfmt_misc's {handler} handler is disabled"
    flags = next((line.split(":", 1)[1].strip() for line in entry.splitlines() if line.startswith("flags:")), "")
    if "F" not in flags:
        return (f"{arch} needs an emulator here and binfmt_misc's {handler} handler lacks the F flag, so containers, "
                "which have no emulator of their own, cannot use it (qemu-user-static registers it with F)")
    return ""
