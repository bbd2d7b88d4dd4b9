"""The lab's own environment on the host (.venv-lab): what the harness needs besides the standard library
(pytest and pytest-testinfra for the image checks, packaging for resolving pytest per target Python, build
and twine for the install suite's distribution),
from the `lab` extra of pyproject.toml. Like nox and tox, the lab provisions it itself, so
`python3 scripts/run_matrix.py` works with a bare system Python; `make matrix` uses the same code.

Standard library only: this runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from . import LAB_ROOT

LAB_VENV = LAB_ROOT / ".venv-lab"
STAMP = ".installed"  # holds the hash of the requirements it was made from
NEEDED = ("pytest", "testinfra", "packaging", "build", "twine")
PROVISIONED = "MCPLAB_PROVISIONED"  # set in the re-executed harness: never provision twice


class ProvisionError(Exception):
    pass


def requirements(pyproject: Path = LAB_ROOT / "pyproject.toml") -> list[str]:
    """The `lab` extra: a flat list of quoted strings (read without tomllib, which 3.10 lacks)."""
    found = re.search(r"^lab\s*=\s*\[(.*?)^\]", pyproject.read_text(encoding="utf-8"), re.S | re.M)
    if not found:
        raise ProvisionError(f"{pyproject} has no `lab = [...]` in [project.optional-dependencies]")
    return re.findall(r'^\s*"([^"]+)"', found.group(1), re.M)


def missing() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def venv_python(venv: Path = LAB_VENV) -> Path:
    return venv / "bin" / "python"


def provision(venv: Path = LAB_VENV, python: str = sys.executable) -> Path:
    """Make (or refresh) the venv with the lab extra; returns its python. ProvisionError says how to fix."""
    wanted = requirements()
    digest = hashlib.sha256("\n".join(wanted).encode()).hexdigest()
    stamp = venv / STAMP
    if venv_python(venv).exists() and stamp.is_file() and stamp.read_text().strip() == digest:
        return venv_python(venv)
    print(f"lab: creating {venv} with the lab extra of pyproject.toml ({', '.join(wanted)})", file=sys.stderr)
    steps = [
        [python, "-m", "venv", str(venv)],
        [str(venv_python(venv)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wanted],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            text = done.stderr.strip() or done.stdout.strip() or "no output"
            hint = " (on Debian or Ubuntu: apt-get install python3-venv)" if "ensurepip" in text else ""
            last = text.splitlines()[-1]
            raise ProvisionError(f"`{' '.join(argv[:4])} ...` failed: {last}{hint}. Fix that, or install "
                                 f"{', '.join(wanted)} for {python} yourself.")  # fmt: skip
    stamp.write_text(digest + "\n")
    return venv_python(venv)


def reexec_in_lab_venv(argv: list[str]) -> None:
    """If this interpreter lacks what a run needs, provision .venv-lab and run the same command in it.
    Returns (and the run goes on) when nothing is missing, or when provisioning failed: then the suites
    that need a missing tool come out as errors saying which command fixes it, never as test failures."""
    if not missing() or os.environ.get(PROVISIONED):
        return
    try:
        python = provision()
    except ProvisionError as exc:
        print(f"lab: cannot provision {LAB_VENV}: {exc}", file=sys.stderr)
        return
    os.environ[PROVISIONED] = "1"
    os.execv(str(python), [str(python), *argv])


if __name__ == "__main__":  # `make` builds .venv-lab with this: python3 -m matrix.venv [FOLDER]
    try:
        print(provision(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else LAB_VENV))
    except ProvisionError as exc:
        sys.exit(f"lab: {exc}")
