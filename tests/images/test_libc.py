"""Which C library and which shell each image really has. The musl-busybox cell exists for exactly these
facts (docs/platforms/musl.md), so they are read from the image, not assumed from its name."""

from __future__ import annotations

import json

import pytest
from lab_checks import Cell, elf_interpreter, output_of, run

MUSL_FAMILIES = {"musl-busybox", "alpine"}
BUSYBOX_FAMILIES = {"musl-busybox", "alpine"}

# Recorded for the musl-busybox cell (docs/platforms/musl.md): stdlib modules its CPython does not have. The extension
# modules whose libraries are not built against musl (OpenSSL, zlib, libffi, sqlite, bzip2, xz, ncurses,
# readline, gdbm/ndbm, Tk, libuuid), and what the Dockerfile trims because it cannot work or is not needed.
MUSL_BUILD_MISSING = {
    "_bz2", "_ctypes", "_curses", "_curses_panel", "_dbm", "_gdbm", "_lzma", "_sqlite3", "_tkinter", "_uuid",
    "readline",
    "ensurepip", "idlelib", "tkinter", "turtle", "turtledemo",
}  # fmt: skip
NOT_ON_LINUX = {"_overlapped", "_scproxy", "_winapi", "_wmi", "msvcrt", "nt", "winreg", "winsound"}
LIST_MISSING = (
    "import importlib.util, json, sys; "
    "print(json.dumps(sorted(n for n in sys.stdlib_module_names if importlib.util.find_spec(n) is None)))"
)
# What CPython's json decoder does with 2,000 levels in a thread with the libc's default stack.
RAW_DEEP_JSON_IN_A_THREAD = (
    "import json, threading; "
    "t = threading.Thread(target=json.loads, args=('[' * 2000 + ']' * 2000,)); t.start(); t.join(); print('alive')"
)


def test_python_links_the_cells_libc(host, cell: Cell) -> None:  # type: ignore[no-untyped-def]
    executable = host.check_output(f"{cell.interpreter} -c 'import os, sys; print(os.path.realpath(sys.executable))'")
    loader = elf_interpreter(host.file(executable).content)
    if cell.family in MUSL_FAMILIES:
        assert loader == f"/lib/ld-musl-{host.check_output('uname -m')}.so.1", (executable, loader)
    else:  # glibc's loader: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ...; ld64.so.1 on s390x, ld64.so.2 on ppc64le
        assert "/ld-linux" in loader or "/ld64.so." in loader, (executable, loader)
    assert host.file(loader).exists, f"{executable} names {loader}, which the image does not have"


def test_only_the_cells_libc_is_present(host, cell: Cell) -> None:  # type: ignore[no-untyped-def]
    found = host.run(
        "find / -xdev \\( -name 'ld-linux*.so*' -o -name 'libc.so.6' -o -name 'ld-musl-*.so.1' \\) 2>/dev/null"
    ).stdout.split()
    musl = [path for path in found if "/ld-musl-" in path]
    glibc = [path for path in found if path not in musl]
    if cell.family in MUSL_FAMILIES:
        assert musl and not glibc, f"musl loaders {musl}, glibc files {glibc}"
    else:
        assert glibc and not musl, f"glibc files {glibc}, musl loaders {musl}"


def test_shell_is_the_cells(host, cell: Cell) -> None:  # type: ignore[no-untyped-def]
    shell = host.check_output("readlink -f /bin/sh")
    if cell.family in BUSYBOX_FAMILIES:
        assert shell == "/bin/busybox"
        assert host.run("/bin/busybox").stdout.startswith("BusyBox v")
    else:
        assert "busybox" not in shell


@pytest.mark.families("musl-busybox")
def test_the_applets_command_tools_and_checks_use_are_there(host) -> None:  # type: ignore[no-untyped-def]
    for applet in ("sh", "cat", "wc", "sha256sum", "env", "id", "find", "readlink", "uname", "echo"):
        assert host.exists(applet), applet


@pytest.mark.families("musl-busybox")
def test_missing_stdlib_modules_are_the_recorded_ones(cell: Cell) -> None:
    listed = output_of(run(cell, "-I", "-c", LIST_MISSING, entrypoint=cell.interpreter))
    missing = set(json.loads(listed)) - NOT_ON_LINUX
    assert missing == MUSL_BUILD_MISSING, (
        f"newly missing: {sorted(missing - MUSL_BUILD_MISSING)}; no longer missing: "
        f"{sorted(MUSL_BUILD_MISSING - missing)} (update MUSL_BUILD_MISSING and docs/platforms/musl.md)"
    )


@pytest.mark.families("musl-busybox")
def test_raw_deep_json_in_a_thread_still_kills_this_python(cell: Cell) -> None:
    """Why the cell exists: musl's 128 KiB thread stacks. CPython 3.13's decoder, called directly (not
    through mcpserver's guard), dies with SIGSEGV here on 2,000 levels; glibc survives ~20,000. If this
    stops crashing, the cell no longer exercises the hazard the server guards against (see docs/platforms/musl.md)."""
    done = run(cell, "-I", "-c", RAW_DEEP_JSON_IN_A_THREAD, entrypoint=cell.interpreter)
    assert done.returncode == 139 and "alive" not in done.output, (done.returncode, done.output)
