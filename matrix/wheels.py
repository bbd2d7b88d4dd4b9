"""A folder of pure-Python wheels per target Python: pytest, and what users deploy with the server (ADD_ONS),
downloaded once on the host and reused offline.

pip can download for another Python (`--python-version`), but it evaluates dependency markers against
the interpreter running pip, so from a 3.11 host it leaves out `exceptiongroup` and `tomli` that pytest
needs below 3.11. `resolve_for` therefore walks the requirements itself: it downloads each requirement
with --no-deps for the target version, reads the wheel's Requires-Dist and follows those whose markers
hold for the target. The wheels are unpacked into one folder that goes on PYTHONPATH, read-only.

The add-ons go in so that the paths a production deployment takes (gunicorn in front of the WSGI app, Prometheus
metrics, OpenTelemetry traces) run inside every image, on every interpreter and libc, not only on the host. Each is
resolved for the target Python as pytest is; where no release of one serves that Python, the folder is made without
it and its manifest says why (`missing`), which the cell's record repeats.

The folder also holds pip's own wheel, not unpacked (nothing imports it from there): the install suite
runs pip from it, offline, where a cell's Python has no ensurepip (`python pip-*.whl/pip install ...`).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import TYPE_CHECKING

from .model import Implementation
from .processes import Processes

if TYPE_CHECKING:
    from packaging.requirements import Requirement

# packaging (from the lab extra) is imported where it is used, so that --list, --github-matrix and
# --merge run on a bare standard-library Python (as in CI's listing and merging jobs).

REQUIREMENTS = ("pytest>=7",)
# What users deploy beside the server (pyproject's test extra has them for the host). opentelemetry-sdk comes before
# opentelemetry-api: it pins the API's exact version, which must be the one that lands, and the API is then had.
ADD_ONS = ("gunicorn", "prometheus_client", "opentelemetry-sdk", "opentelemetry-api")
PIP = "pip"
NO_RELEASE = "No matching distribution found"  # what pip says when no release fits the target Python
MANIFEST = "mcplab-wheels.json"  # written last: a folder without it is incomplete and is remade
FORMAT = 3  # 2: pip's wheel is in the folder too; 3: the add-ons. A folder of an older format is remade


class WheelError(Exception):
    pass


def target_environment(python: str, implementation: Implementation = Implementation.CPYTHON) -> dict[str, str]:
    """Marker environment of a Python X.Y on Linux, as far as pure-Python wheels care."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": implementation.value,
        "platform_python_implementation": "PyPy" if implementation is Implementation.PYPY else "CPython",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "extra": "",
    }


def marker_applies(marker: str | None, python: str, implementation: Implementation = Implementation.CPYTHON) -> bool:
    from packaging.markers import Marker

    return marker is None or Marker(marker).evaluate(target_environment(python, implementation))


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """Requires-Dist of a wheel, without the ones behind extras."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    return [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]


def _download(processes: Processes, requirement: str, python: str, dest: Path) -> Path:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    before = set(dest.iterdir())
    argv = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--python-version", python, "--implementation", "py", "--abi", "none", "--platform", "any",
        "--dest", str(dest), requirement,
    ]  # fmt: skip
    done = processes.command(argv, timeout=300)
    if not done.ok:
        raise WheelError(
            f"pip could not download {requirement} for Python {python} ({done.last_line()}). The host needs a package "
            "index once per Python version; later runs reuse .cache/lab/pytest."
        )
    new = sorted(set(dest.iterdir()) - before)
    if new:
        return new[0]
    # Already downloaded for another requirement: find it by project name.
    wanted = canonicalize_name(Requirement(requirement).name)
    for wheel in dest.glob("*.whl"):
        if canonicalize_name(wheel.name.split("-")[0]) == wanted:
            return wheel
    raise WheelError(f"pip reported success for {requirement} but left no wheel in {dest}")


def resolve_for(processes: Processes, python: str, dest: Path, requirements: tuple[str, ...] = REQUIREMENTS,
                implementation: Implementation = Implementation.CPYTHON, seen: set[str] | None = None
                ) -> list[Path]:  # fmt: skip
    """Download the closure of `requirements` for Python `python` into dest; returns the wheels. `seen` names the
    projects already had (they are left out), and gains those this adds."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen = set() if seen is None else seen
    queue = list(requirements)
    wheels: list[Path] = []
    while queue:
        requirement = queue.pop(0)
        name = canonicalize_name(Requirement(requirement).name)
        if name in seen:
            continue
        seen.add(name)
        wheel = _download(processes, requirement, python, dest)
        wheels.append(wheel)
        for dep in wheel_requirements(wheel):
            marker = str(dep.marker) if dep.marker else None
            if marker_applies(marker, python, implementation) and canonicalize_name(dep.name) not in seen:
                dep.marker = None
                queue.append(str(dep))
    return wheels


class PytestFolders:
    """One unpacked folder per Python version under cache_dir, made once even with many threads asking."""

    def __init__(self, cache_dir: Path, processes: Processes) -> None:
        self.cache_dir = cache_dir
        self.processes = processes
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def folder(self, python: str, implementation: Implementation = Implementation.CPYTHON) -> Path:
        name = f"{implementation.command.replace('python', 'py')}{python}"  # py3.11, pypy3.11
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            final = self.cache_dir / name
            if _complete(final):
                return final
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.cache_dir))
            try:
                downloads = work / "wheels"
                site = work / "site"
                downloads.mkdir()
                site.mkdir()
                seen: set[str] = set()
                wheels = resolve_for(self.processes, python, downloads, implementation=implementation, seen=seen)
                add_ons, missing = self._add_ons(python, downloads, implementation, seen)
                wheels += add_ons
                for wheel in wheels:
                    with zipfile.ZipFile(wheel) as archive:
                        archive.extractall(site)
                (downloads / PIP).mkdir()
                (pip,) = resolve_for(self.processes, python, downloads / PIP, (PIP,), implementation)
                shutil.copy2(pip, site / pip.name)
                manifest = {
                    "format": FORMAT,
                    "python": python,
                    "implementation": implementation.value,
                    "requirements": list(REQUIREMENTS),
                    "add_ons": list(ADD_ONS),
                    "wheels": [w.name for w in wheels] + [pip.name],
                    "pip": pip.name,
                    "missing": missing,
                }
                (site / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
                shutil.rmtree(final, ignore_errors=True)
                site.rename(final)  # atomic: a half-made folder is never seen as done
            finally:
                shutil.rmtree(work, ignore_errors=True)
            return final

    def _add_ons(self, python: str, dest: Path, implementation: Implementation, seen: set[str]
                 ) -> tuple[list[Path], dict[str, str]]:  # fmt: skip
        """The add-ons' wheels for that Python, and for each add-on no release of which serves it, why."""
        wheels: list[Path] = []
        missing: dict[str, str] = {}
        for add_on in ADD_ONS:
            trial = set(seen)  # an add-on that cannot be had leaves none of its closure behind
            try:
                wheels += resolve_for(self.processes, python, dest, (add_on,), implementation, trial)
            except WheelError as exc:
                if NO_RELEASE not in str(exc):  # the index could not be reached: no folder rather than one without it
                    raise
                serves = f"{implementation.command}{python}"
                missing[add_on] = f"no release of {add_on} (or of what it needs) serves {serves}"
                continue
            seen |= trial
        return wheels, missing

    @staticmethod
    def missing(folder: Path) -> dict[str, str]:
        """The add-ons the folder lacks, each with why (no release of it serves the folder's Python)."""
        return dict(json.loads((folder / MANIFEST).read_text()).get("missing", {}))

    @staticmethod
    def wheels(folder: Path) -> list[str]:
        return list(json.loads((folder / MANIFEST).read_text())["wheels"])

    @staticmethod
    def pip(folder: Path) -> str:
        """The file name of pip's wheel in the folder."""
        return str(json.loads((folder / MANIFEST).read_text())["pip"])


def _complete(folder: Path) -> bool:
    try:
        return int(json.loads((folder / MANIFEST).read_text()).get("format", 1)) >= FORMAT
    except (OSError, ValueError, AttributeError):
        return False
