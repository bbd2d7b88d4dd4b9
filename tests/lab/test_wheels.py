"""The wheel folder of a target Python: pytest and the add-ons users deploy, each closure resolved for that Python,
an add-on no release of which serves it left out with why, and an index that cannot be reached never mistaken for
that. pip is stood in for by an index of made-up wheels (real pip runs in every lab run's folders)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from matrix.processes import Completed
from matrix.wheels import ADD_ONS, MANIFEST, NO_RELEASE, PytestFolders, WheelError

# project -> (version, Requires-Dist); a project absent here has no release for the target
INDEX: dict[str, tuple[str, tuple[str, ...]]] = {
    "pytest": ("8.4.2", ("pluggy>=1.5", "tomli>=1; python_version < '3.11'")),
    "pluggy": ("1.6.0", ()),
    "tomli": ("2.2.1", ()),
    "pip": ("25.2", ()),
    "gunicorn": ("23.0.0", ("packaging",)),
    "packaging": ("25.0", ()),
    "opentelemetry-sdk": ("1.36.0", ("opentelemetry-api==1.36.0", "typing-extensions>=4.5")),
    "opentelemetry-api": ("1.36.0", ("typing-extensions>=4.5",)),
    "typing-extensions": ("4.14.1", ()),
}


class Index:
    """Stands in for `pip download --no-deps ... REQUIREMENT`: writes the project's wheel into --dest."""

    def __init__(self, projects: dict[str, tuple[str, tuple[str, ...]]], *, offline: tuple[str, ...] = ()) -> None:
        self.projects = projects
        self.offline = offline  # the projects whose download breaks as an unreachable index does
        self.asked: list[str] = []

    def command(self, argv: list[str], **_: object) -> Completed:
        requirement, dest = argv[-1], Path(argv[argv.index("--dest") + 1])
        name = requirement.split("=")[0].split(">")[0].split("<")[0].strip()
        self.asked.append(name)
        if name in self.offline:
            return Completed(returncode=1, output="ERROR: Could not fetch URL: connection refused")
        if name not in self.projects:
            return Completed(returncode=1, output=f"ERROR: {NO_RELEASE} for {requirement}")
        version, requires = self.projects[name]
        wheel = dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{name.replace('-', '_')}/__init__.py", "")
            metadata = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
            archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(metadata) + "\n")
        return Completed(returncode=0, output="")


def manifest(folder: Path) -> dict[str, object]:
    return dict(json.loads((folder / MANIFEST).read_text()))


def test_every_add_on_goes_in_with_its_closure_for_the_target_python(tmp_path: Path) -> None:
    projects = {**INDEX, "prometheus_client": ("0.22.1", ())}
    folder = PytestFolders(tmp_path, Index(projects)).folder("3.9")  # type: ignore[arg-type]
    wheels = [name.split("-")[0] for name in PytestFolders.wheels(folder)]
    assert wheels == ["pytest", "pluggy", "tomli", "gunicorn", "packaging", "prometheus_client", "opentelemetry_sdk",
                      "opentelemetry_api", "typing_extensions", "pip"]  # fmt: skip
    assert set(ADD_ONS) <= {name.replace("_", "-") for name in wheels} | {"prometheus_client"}
    assert PytestFolders.missing(folder) == {}
    assert (folder / "gunicorn" / "__init__.py").is_file()  # unpacked, to be imported from PYTHONPATH


def test_an_add_on_no_release_serves_is_left_out_saying_so_and_the_rest_go_in(tmp_path: Path) -> None:
    index = Index(INDEX)  # no prometheus_client for this Python
    folder = PytestFolders(tmp_path, index).folder("3.15")  # type: ignore[arg-type]
    assert PytestFolders.missing(folder) == {
        "prometheus_client": "no release of prometheus_client (or of what it needs) serves python3.15"}
    assert "gunicorn-23.0.0-py3-none-any.whl" in PytestFolders.wheels(folder)
    assert manifest(folder)["add_ons"] == list(ADD_ONS)
    assert "tomli" not in index.asked  # markers are the target's: 3.15 needs no tomli


@pytest.mark.parametrize("unreachable", ["pytest", "gunicorn"])
def test_an_index_that_cannot_be_reached_makes_no_folder_rather_than_one_without_add_ons(tmp_path: Path,
                                                                                        unreachable: str) -> None:
    folders = PytestFolders(tmp_path, Index(INDEX, offline=(unreachable,)))  # type: ignore[arg-type]
    with pytest.raises(WheelError, match=f"could not download {unreachable}"):
        folders.folder("3.11")
    assert not (tmp_path / "py3.11").exists()
