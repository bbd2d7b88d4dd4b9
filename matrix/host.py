"""Host cells: the suites on each python3.X found on this machine, like tox or nox, no container.

Each interpreter gets a venv under the cache with mcpserver copied into its site-packages (as an install
would put it) and the same pytest folder the containers mount, on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .processes import Processes

PROBE = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"


def candidates(python: str, env: Mapping[str, str]) -> list[str]:
    """python3.X on PATH first, then pyenv's versions, newest patch release first."""
    found: list[str] = []
    on_path = shutil.which(f"python{python}", path=env.get("PATH"))
    if on_path:
        found.append(on_path)
    pyenv_root = Path(env.get("PYENV_ROOT") or Path(env.get("HOME", "/root")) / ".pyenv")
    versions = pyenv_root / "versions"
    if versions.is_dir():

        def patch(p: Path) -> tuple[int, ...]:
            tail = p.name.split(".")[2:3] or ["0"]
            return (int(tail[0]) if tail[0].isdigit() else -1,)

        dirs = sorted(versions.glob(f"{python}.*"), key=patch, reverse=True)
        found += [str(d / "bin" / f"python{python}") for d in dirs if (d / "bin" / f"python{python}").exists()]
    return found


def find_interpreter(python: str, env: Mapping[str, str] | None = None) -> str:
    """The real path of a working python{X.Y}, or '' when none runs. Shims (pyenv's refuse versions
    not asked for) are seen through by asking the interpreter for sys.executable."""
    env = dict(os.environ) if env is None else dict(env)
    for candidate in candidates(python, env):
        try:
            done = subprocess.run([candidate, "-c", PROBE], capture_output=True, text=True, timeout=30, env=env)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = done.stdout.split()
        if done.returncode == 0 and len(lines) == 2 and lines[0] == python:
            return lines[1]
    return ""


def _ask(processes: Processes, python: Path | str, code: str) -> str:
    done = processes.command([str(python), "-I", "-c", code], timeout=60)
    if not done.ok:
        raise RuntimeError(f"{python} -c {code!r} failed: {done.last_line()}")
    return str(done.output.strip())


# What an interpreter says it is; runs on every Python the lab has (3.9 and up, CPython and PyPy).
FACTS_PROBE = (
    "import json, platform, sys, sysconfig; pypy = getattr(sys, 'pypy_version_info', None); "
    "print(json.dumps({'version': platform.python_version(), 'implementation': platform.python_implementation() "
    "+ (' %d.%d.%d' % tuple(pypy[:3]) if pypy else ''), "
    "'free_threaded': bool(sysconfig.get_config_var('Py_GIL_DISABLED')), 'machine': platform.machine(), "
    "'byteorder': sys.byteorder, 'maxsize': sys.maxsize}))"
)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """The interpreter a cell's suites ran on, as it names itself."""

    version: str = ""  # 3.11.17
    implementation: str = ""  # "CPython", "PyPy 7.3.19"
    flavour: str = ""  # "free-threaded" for a --disable-gil build
    # Its machine as it sees it: what an architecture cell shows ran there, not only that it was asked to.
    machine: str = ""  # platform.machine()
    byteorder: str = ""  # sys.byteorder
    maxsize: int = 0  # sys.maxsize: 2**31 - 1 on a 32-bit build

    @classmethod
    def parse(cls, output: str) -> Facts:
        try:
            data = json.loads(output.strip().splitlines()[-1])
            return cls(version=str(data["version"]), implementation=str(data["implementation"]),
                       flavour="free-threaded" if data["free_threaded"] else "", machine=str(data["machine"]),
                       byteorder=str(data["byteorder"]), maxsize=int(data["maxsize"]))  # fmt: skip
        except (ValueError, KeyError, IndexError, TypeError):
            return cls()


def facts(processes: Processes, python: Path | str) -> Facts:
    return Facts.parse(_ask(processes, python, FACTS_PROBE))


def prepare_venv(processes: Processes, interpreter: str, python: str, root: Path, cache: Path) -> Path:
    """A venv for `interpreter` with root/server/mcpserver copied in; returns its python."""
    venv = cache / f"py{python}"
    marker = venv / "mcplab-interpreter"
    if not marker.exists() or marker.read_text() != interpreter:
        shutil.rmtree(venv, ignore_errors=True)
        made = processes.command([interpreter, "-m", "venv", "--without-pip", str(venv)], timeout=120)
        if not made.ok:
            raise RuntimeError(f"{interpreter} -m venv failed: {made.last_line()}")
        marker.write_text(interpreter)
    venv_python = venv / "bin" / "python"
    site = Path(_ask(processes, venv_python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    target = site / "mcpserver"
    shutil.rmtree(target, ignore_errors=True)
    source = root / "server" / "mcpserver"
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return venv_python
