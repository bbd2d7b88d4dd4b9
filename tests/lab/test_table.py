"""The cell table: the shipped one is valid and covers what the issues ask; malformed ones are refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from matrix.errors import LabInputError
from matrix.model import Family, Implementation, PythonFrom, Suite
from matrix.table import load_cells, parse_cells


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
    musl = cells["musl-busybox-py3.13"]
    assert (musl.family, musl.python_from, musl.base) == (Family.MUSL_BUSYBOX, PythonFrom.BUILDER, "debian:trixie")
    assert not any("alpine" in c.name for c in cells.values() if c.family is not Family.ALPINE)
    hosts = {c.python for c in cells.values() if c.family is Family.HOST}
    assert hosts == {f"3.{minor}" for minor in range(9, 16)}


def test_every_debian_distro_cell_can_be_bootstrapped() -> None:
    for cell in load_cells():
        if cell.family is Family.DEBIAN and cell.python_from is PythonFrom.DISTRO:
            assert cell.bootstrap is not None and cell.bootstrap.method == "mmdebstrap", cell.name


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
        ({"bootstrap": {"method": "mmdebstrap"}}, "needs `suite`"),
        ({"bootstrap": {"method": "nix"}}, "bootstrap method 'nix'"),
        ({"arch": "x86_64"}, "arch 'x86_64' is not one of amd64, i386, arm64"),
        ({"opt_in": "yes"}, "opt_in is true or false"),
        ({"suites": ["unit", "gpu"]}, "names a suite that is not one of"),
    ],
)
def test_malformed_cells_are_refused_with_the_reason(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(LabInputError, match=fragment.replace("(", r"\(").replace("`", "`")):
        parse_cells(_table(**overrides))


def test_an_architecture_is_a_cell_of_its_own_with_images_of_its_own() -> None:
    table = _table()
    table["cell"] = [*table["cell"], {**table["cell"][0], "name": "c-s390x", "arch": "s390x"}]  # type: ignore[misc]
    own, s390x = parse_cells(table)
    assert (own.arch, own.arch_tag, s390x.arch, s390x.arch_tag) == ("", "", "s390x", "-s390x")
    table["cell"] = [*table["cell"], {**table["cell"][0], "name": "c-again", "arch": "s390x"}]  # type: ignore[misc]
    with pytest.raises(LabInputError, match="'c-s390x' and 'c-again' would build the same images"):
        parse_cells(table)
    with pytest.raises(LabInputError, match="a host cell runs on this machine's own architecture"):
        parse_cells(_table(name="h", family="host", python_from="host", base="", arch="arm64"))


def test_duplicate_names_are_refused() -> None:
    table = _table()
    table["cell"] = [*table["cell"], *table["cell"]]  # type: ignore[misc]
    with pytest.raises(LabInputError, match="two cells are named 'c'"):
        parse_cells(table)


def test_schema_is_required() -> None:
    with pytest.raises(LabInputError, match="schema = 1"):
        parse_cells({"cell": []})


def _builder_table(**overrides: object) -> dict[str, object]:
    table = _table()
    builder = {
        "name": "b",
        "family": "musl-busybox",
        "release": "bookworm",
        "python": "3.11",
        "base": "debian:bookworm",
        "python_from": "builder",
        "bootstrap": {"method": "builder"},
    }
    builder.update(overrides)
    table["cell"] = [builder, *table["cell"]]  # type: ignore[misc]
    return table


def test_a_builder_cell_gets_the_cell_whose_base_it_shares() -> None:
    builder, donor = parse_cells(_builder_table())
    assert builder.base_cell == donor and donor.base_cell is None


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"base": "debian:trixie"}, "no other cell has that base"),
        ({"bootstrap": {"method": "builder", "suite": "trixie"}}, "takes no other keys"),
        ({"bootstrap": None}, "python_from 'builder' goes with bootstrap method 'builder'"),
        ({"python_from": "distro"}, "python_from 'builder' goes with bootstrap method 'builder'"),
    ],
)
def test_malformed_builder_cells_are_refused(overrides: dict[str, object], fragment: str) -> None:
    table = _builder_table(**overrides)
    if overrides.get("bootstrap", "") is None:
        del table["cell"][0]["bootstrap"]  # type: ignore[index]
    with pytest.raises(LabInputError, match=fragment):
        parse_cells(table)


# --- variants: a cell's images on a machine that reports a different CPU -------------------------------


def _with_variant(**variant: object) -> dict[str, object]:
    table = _table(implementation="pypy")
    table["cell"] = [*table["cell"], {"name": "c-big", "like": "c", "cpu_cache": "480 MiB", **variant}]  # type: ignore[misc]
    return table


def test_a_variant_runs_its_cells_images_with_the_cache_it_names_and_the_suites_it_lists() -> None:
    cell, variant = parse_cells(_with_variant(suites=["payload"]))
    assert (variant.like, variant.cpu_cache_kb, variant.suites) == ("c", 491520, (Suite.PAYLOAD,))
    assert replace(variant, name="c", like="", cpu_cache_kb=0, only=()) == cell  # everything else is the cell's
    assert parse_cells(_with_variant(cpu_cache="512 KiB"))[1].cpu_cache_kb == 512
    assert parse_cells(_with_variant())[1].suites == cell.suites


def test_the_shipped_pypy_cells_each_have_a_big_cache_and_a_small_cache_variant() -> None:
    cells = load_cells()
    pypy = [c.name for c in cells if c.implementation is Implementation.PYPY and not c.like]
    variants = {(c.like, c.cpu_cache_kb) for c in cells if c.like}
    assert pypy and {(name, kb) for name in pypy for kb in (491520, 512)} <= variants


@pytest.mark.parametrize(
    ("variant", "fragment"),
    [
        ({"release": "sid"}, "takes only"),
        ({"like": "nope"}, "names no cell above it"),
        ({"cpu_cache": "480MB"}, "cpu_cache is a size like"),
        ({"cpu_cache": "0 KiB"}, "cpu_cache is a size like"),
        ({"suites": ["unit", "fast"]}, "names a suite that is not one of"),
        ({"suites": "payload"}, "suites is a list"),
    ],
)
def test_malformed_variants_are_refused_with_the_reason(variant: dict[str, object], fragment: str) -> None:
    with pytest.raises(LabInputError, match=fragment):
        parse_cells(_with_variant(**variant))


def test_a_variant_needs_a_cache_to_differ_by_and_a_container_cell_to_be_like() -> None:
    table = _with_variant()
    del table["cell"][1]["cpu_cache"]  # type: ignore[index]
    with pytest.raises(LabInputError, match="says how its machine differs"):
        parse_cells(table)
    host = {"name": "h", "family": "host", "release": "local", "python": "3.11", "python_from": "host"}
    with pytest.raises(LabInputError, match="is a host cell"):
        parse_cells({"schema": 1, "cell": [host, {"name": "h2", "like": "h", "cpu_cache": "1 MiB"}]})
