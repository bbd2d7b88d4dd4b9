"""The cell table: matrix/cells.toml read into Cell values, anything malformed refused with where and why."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .arches import ARCHES
from .errors import LabInputError
from .model import SUITES, Bootstrap, BootstrapMethod, Cell, Family, Flavour, Implementation, PythonFrom, Suite

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the lab venv installs tomli below 3.11
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

CELLS_TOML = Path(__file__).with_name("cells.toml")
SCHEMA = 1
_CELL_KEYS = {"name", "family", "release", "python", "base", "python_from", "bootstrap", "implementation", "flavour",
              "stress", "arch", "opt_in", "suites"}
# A variant names the cell whose images it runs, and says only how its machine differs.
_VARIANT_KEYS = {"name", "like", "cpu_cache", "suites"}
_CACHE_UNITS = {"KiB": 1, "MiB": 1024}
_BOOTSTRAP_KEYS = {"method", "suite", "release", "mirror_env", "keyring", "keyring_env"}


def load_cells(path: Path = CELLS_TOML) -> tuple[Cell, ...]:
    """Parse and validate the cell table; names are unique and every field has a known value."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LabInputError(f"{path}: cannot read the cell table ({exc}). Fix the file and run again.") from exc
    return parse_cells(data, source=str(path))


def parse_cells(data: dict[str, Any], *, source: str = "cells.toml") -> tuple[Cell, ...]:
    if data.get("schema") != SCHEMA:
        raise LabInputError(f"{source}: expected `schema = {SCHEMA}` at the top, found {data.get('schema')!r}.")
    entries = data.get("cell")
    if not isinstance(entries, list) or not entries:
        raise LabInputError(f"{source}: no [[cell]] entries; the matrix needs at least one cell.")
    parsed: dict[str, Cell] = {}
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and "like" in entry:
            cell = _parse_variant(entry, index, source, parsed)
        else:
            cell = _parse_cell(entry, index, source)
        if cell.name in parsed:
            raise LabInputError(f"{source}: two cells are named {cell.name!r}; names must be unique.")
        parsed[cell.name] = cell
    cells = tuple(parsed.values())
    images: dict[str, str] = {}
    for cell in cells:
        # Image tags are <family>:<release>-<interpreter>-...: two cells sharing them would overwrite (and
        # prune) each other's images. A variant shares its cell's on purpose: they are the same images.
        image = f"{cell.family.value}:{cell.release}-{cell.slug}{cell.arch_tag}"
        if cell.family.in_container and not cell.like and images.setdefault(image, cell.name) != cell.name:
            raise LabInputError(f"{source}: cells {images[image]!r} and {cell.name!r} would build the same images "
                              f"({image}); give them different releases, interpreters or architectures.")
    return tuple(_with_base_cell(cell, cells, source) for cell in cells)


def _base_cell_for(cell: Cell, cells: tuple[Cell, ...]) -> Cell | None:
    """For a cell whose bootstrap method is "builder": the first other container cell with the same `base`
    that is not a builder cell itself; its way of getting the base is the builder cell's too."""
    return next(
        (
            other
            for other in cells
            if other.base == cell.base
            and other.family.in_container
            and not other.like
            and not (other.bootstrap and other.bootstrap.method is BootstrapMethod.BUILDER)
        ),
        None,
    )


def _with_base_cell(cell: Cell, cells: tuple[Cell, ...], source: str) -> Cell:
    if not (cell.bootstrap and cell.bootstrap.method is BootstrapMethod.BUILDER):
        return cell
    donor = _base_cell_for(cell, cells)
    if donor is None:
        raise LabInputError(
            f"{source}: cell {cell.name!r} builds on {cell.base!r} (bootstrap method 'builder'), but no other "
            f"cell has that base to say how to get it; add one, or change `base`."
        )
    return replace(cell, base_cell=donor)


def _parse_cell(entry: Any, index: int, source: str) -> Cell:
    where = f"{source}: cell #{index + 1}"
    if not isinstance(entry, dict):
        raise LabInputError(f"{where} is not a table.")
    unknown = set(entry) - _CELL_KEYS
    if unknown:
        raise LabInputError(f"{where} has unknown keys {sorted(unknown)}; known keys: {sorted(_CELL_KEYS)}.")
    for key in ("name", "family", "release", "python", "python_from"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise LabInputError(f"{where} needs a non-empty string `{key}`.")
    where = f"{source}: cell {entry['name']!r}"
    try:
        family = Family(entry["family"])
    except ValueError:
        known = ", ".join(f.value for f in Family)
        raise LabInputError(f"{where}: family {entry['family']!r} is not one of {known}.") from None
    try:
        python_from = PythonFrom(entry["python_from"])
    except ValueError:
        known = ", ".join(p.value for p in PythonFrom)
        raise LabInputError(f"{where}: python_from {entry['python_from']!r} is not one of {known}.") from None
    python = entry["python"]
    major, _, minor = python.partition(".")
    if major != "3" or not minor.isdigit():
        raise LabInputError(f"{where}: python must be like '3.12', found {python!r}.")
    base = entry.get("base", "")
    if family.in_container and not base:
        raise LabInputError(f"{where}: a container cell needs `base` (the image it builds FROM).")
    if (family is Family.HOST) != (python_from is PythonFrom.HOST):
        raise LabInputError(f"{where}: family 'host' goes with python_from 'host', and only with it.")
    bootstrap = _parse_bootstrap(entry.get("bootstrap"), where)
    if (python_from is PythonFrom.BUILDER) != (bootstrap is not None and bootstrap.method is BootstrapMethod.BUILDER):
        raise LabInputError(f"{where}: python_from 'builder' goes with bootstrap method 'builder', and only with it.")
    implementation, flavour = _interpreter_kind(entry, where)
    stress = entry.get("stress", 0)
    if not isinstance(stress, int) or isinstance(stress, bool) or stress < 0:
        raise LabInputError(f"{where}: stress must be a whole number of repetitions (0 for none), found {stress!r}.")
    arch, opt_in = _architecture(entry, family, where)
    return Cell(name=entry["name"], family=family, release=entry["release"], python=python, base=base,
                python_from=python_from, bootstrap=bootstrap, implementation=implementation, flavour=flavour,
                stress=stress, arch=arch, opt_in=opt_in, only=_suites(entry.get("suites", []), SUITES, where))


def _parse_variant(entry: dict[str, Any], index: int, source: str, earlier: dict[str, Cell]) -> Cell:
    """A cell `like` an earlier one: its images, on a machine whose /proc/cpuinfo reports `cpu_cache`, running
    `suites` (every one that applies when absent)."""
    where = f"{source}: cell #{index + 1}"
    unknown = set(entry) - _VARIANT_KEYS
    if unknown:
        raise LabInputError(f"{where} is a variant (`like`), which takes only {sorted(_VARIANT_KEYS)}; found "
                          f"{sorted(unknown)}. A cell with other fields of its own is a cell of its own.")
    if not isinstance(entry.get("name"), str) or not entry["name"]:
        raise LabInputError(f"{where} needs a non-empty string `name`.")
    where = f"{source}: cell {entry['name']!r}"
    like = earlier.get(entry["like"]) if isinstance(entry["like"], str) else None
    if like is None or like.like:
        raise LabInputError(f"{where}: like = {entry['like']!r} names no cell above it that is not a variant itself.")
    if not like.family.in_container:
        raise LabInputError(f"{where}: a variant changes what a container sees, and {like.name!r} is a host cell.")
    cache = entry.get("cpu_cache")
    if cache is None:
        raise LabInputError(f"{where}: a variant says how its machine differs: `cpu_cache` (\"480 MiB\").")
    number, _, unit = str(cache).partition(" ")
    if not number.isdigit() or int(number) < 1 or unit not in _CACHE_UNITS:
        raise LabInputError(f"{where}: cpu_cache is a size like \"480 MiB\" or \"512 KiB\", found {cache!r}.")
    only = _suites(entry.get("suites", []), like.suites, where)
    return replace(like, name=entry["name"], like=like.name, cpu_cache_kb=int(number) * _CACHE_UNITS[unit],
                   only=only)


def _suites(names: Any, known: tuple[Suite, ...], where: str) -> tuple[Suite, ...]:
    """A cell's `suites`: the ones it runs, out of those that apply to it (every one when absent)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise LabInputError(f"{where}: suites is a list of suite names, found {names!r}.")
    try:
        return tuple(Suite(n) for n in names)
    except ValueError:
        listed = ", ".join(s.value for s in known)
        raise LabInputError(f"{where}: suites {names!r} names a suite that is not one of {listed}.") from None


def _architecture(entry: dict[str, Any], family: Family, where: str) -> tuple[str, bool]:
    arch, opt_in = entry.get("arch", ""), entry.get("opt_in", False)
    if arch and arch not in ARCHES:
        raise LabInputError(f"{where}: arch {arch!r} is not one of {', '.join(ARCHES)} (Debian's names).")
    if arch and not family.in_container:
        raise LabInputError(f"{where}: a host cell runs on this machine's own architecture; arch is for images.")
    if not isinstance(opt_in, bool):
        raise LabInputError(f"{where}: opt_in is true or false, found {opt_in!r}.")
    return arch, opt_in


def _interpreter_kind(entry: dict[str, Any], where: str) -> tuple[Implementation, Flavour]:
    try:
        implementation = Implementation(entry.get("implementation", "cpython"))
    except ValueError:
        known = ", ".join(i.value for i in Implementation)
        raise LabInputError(f"{where}: implementation {entry['implementation']!r} is not one of {known}.") from None
    try:
        flavour = Flavour(entry.get("flavour", ""))
    except ValueError:
        known = ", ".join(f.value for f in Flavour if f.value)
        raise LabInputError(f"{where}: flavour {entry['flavour']!r} is not one of {known} (or absent).") from None
    if flavour is Flavour.FREE_THREADED and implementation is not Implementation.CPYTHON:
        raise LabInputError(f"{where}: only CPython has a free-threaded build.")
    if implementation is not Implementation.CPYTHON and entry["family"] == "host":
        raise LabInputError(f"{where}: host cells find python3.X on this machine; other implementations need an image.")
    return implementation, flavour


def _parse_bootstrap(raw: Any, where: str) -> Bootstrap | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LabInputError(f"{where}: bootstrap must be an inline table.")
    unknown = set(raw) - _BOOTSTRAP_KEYS
    if unknown:
        raise LabInputError(f"{where}: bootstrap has unknown keys {sorted(unknown)}.")
    try:
        method = BootstrapMethod(raw.get("method"))
    except ValueError:
        known = ", ".join(m.value for m in BootstrapMethod)
        raise LabInputError(f"{where}: bootstrap method {raw.get('method')!r} is not one of {known}.") from None
    boot = Bootstrap(**{k: str(v) for k, v in raw.items() if k != "method"}, method=method)
    if method is BootstrapMethod.MMDEBSTRAP and not boot.suite:
        raise LabInputError(f"{where}: an mmdebstrap bootstrap needs `suite`.")
    if method is BootstrapMethod.APK and not (boot.release and boot.mirror_env):
        raise LabInputError(f"{where}: an apk bootstrap needs `release` and `mirror_env`.")
    if method is BootstrapMethod.BUILDER and set(raw) != {"method"}:
        raise LabInputError(f"{where}: a builder bootstrap takes no other keys (its base is had like other cells').")
    return boot
