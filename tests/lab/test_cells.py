"""The cell table: the shipped one is valid and covers what the issues ask; malformed ones are refused."""

from __future__ import annotations

import pytest

from matrix.cells import load_cells, parse_cells
from matrix.errors import ConfigError
from matrix.model import Family, PythonFrom


def test_shipped_table_loads_and_covers_the_matrix() -> None:
    cells = {c.name: c for c in load_cells()}
    debian = {c.python for c in cells.values() if c.family is Family.DEBIAN and c.python_from is PythonFrom.DISTRO}
    assert debian == {"3.9", "3.11", "3.13", "3.14", "3.15"}
    official_slim = {
        c.python for c in cells.values() if c.family is Family.DEBIAN and c.python_from is PythonFrom.OFFICIAL
    }
    assert official_slim == {"3.10", "3.12"}
    assert {"ubuntu-22.04-py3.10", "ubuntu-24.04-py3.12"} <= set(cells)
    assert len([c for c in cells.values() if c.family is Family.UBUNTU]) >= 3
    alpine = {(c.python_from, c.base) for c in cells.values() if c.family is Family.ALPINE}
    assert (PythonFrom.OFFICIAL, "python:3.13-alpine") in alpine
    assert (PythonFrom.OFFICIAL, "python:3.14-alpine") in alpine
    assert any(p is PythonFrom.DISTRO for p, _ in alpine)
    hosts = {c.python for c in cells.values() if c.family is Family.HOST}
    assert hosts == {f"3.{minor}" for minor in range(9, 16)}


def test_every_debian_distro_cell_can_be_bootstrapped() -> None:
    for cell in load_cells():
        if cell.family is Family.DEBIAN and cell.python_from is PythonFrom.DISTRO:
            assert cell.bootstrap is not None and cell.bootstrap.method == "debootstrap", cell.name


def _table(**overrides: object) -> dict[str, object]:
    cell = {
        "name": "c",
        "family": "debian",
        "release": "bookworm",
        "python": "3.11",
        "base": "debian:bookworm",
        "python_from": "distro",
    }
    cell.update(overrides)
    return {"schema": 1, "cell": [cell]}


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"family": "gentoo"}, "family 'gentoo'"),
        ({"python": "2.7"}, "python must be like"),
        ({"base": ""}, "needs `base`"),
        ({"python_from": "host"}, "family 'host' goes with"),
        ({"colour": "red"}, "unknown keys"),
        ({"bootstrap": {"method": "apk", "release": "v3.23"}}, "needs `release` and `mirror_env`"),
        ({"bootstrap": {"method": "debootstrap"}}, "needs `suite`"),
        ({"bootstrap": {"method": "nix"}}, "bootstrap method 'nix'"),
    ],
)
def test_malformed_cells_are_refused_with_the_reason(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace("`", "`")):
        parse_cells(_table(**overrides))


def test_duplicate_names_are_refused() -> None:
    table = _table()
    table["cell"] = [*table["cell"], *table["cell"]]  # type: ignore[misc]
    with pytest.raises(ConfigError, match="two cells are named 'c'"):
        parse_cells(table)


def test_schema_is_required() -> None:
    with pytest.raises(ConfigError, match="schema = 1"):
        parse_cells({"cell": []})


def test_builder_family_fits_the_model() -> None:
    # A family whose base is made by a builder stage (the musl+busybox cell to come) needs no new field.
    cells = parse_cells(
        _table(python_from="builder", bootstrap={"method": "builder", "builder_base": "debian:bookworm"})
    )
    assert cells[0].bootstrap is not None and cells[0].bootstrap.builder_base == "debian:bookworm"
