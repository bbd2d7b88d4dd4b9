"""The lab's own structure: its modules in layers whose imports point down only, and no function over 50 lines.
Pure: the sources are read, never imported."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import LAB_ROOT

MATRIX = LAB_ROOT / "matrix"
# matrix/'s layers, lowest first. A module imports only from layers below its own, wherever the import stands,
# so the arrows point down: the command line -> the scheduler -> the run context -> a cell -> a suite's runner
# -> an attempt -> the engine and the process tracker -> the plain data. __init__ holds LAB_ROOT only.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "model", "arches", "exits", "text", "stopping", "progress", "venv", "probe_first_answer"),
    # pure rules; the tracker of every host process
    ("errors", "budgets", "junit", "compare", "history", "timing", "processes"),
    ("outcomes", "plan", "table", "engine", "host", "wheels", "skips"),  # the outcome rules; the docker CLI
    ("records", "travel", "attempts", "bootstrap", "conformance", "startup", "clean"),  # one attempt, one base
    ("memo", "report", "bases", "build"),  # remembered passes, renderings, where bases come from, images
    ("install", "publish"),  # the install suite's attempts; what the repository shows of a run
    ("suites",),  # what a suite is in each place: the table of runners
    ("cell",),  # one cell from its base to its record
    ("lab",),  # the run context, which makes every tool once
    ("schedule",),  # cells in parallel, stop and interrupt
    ("cli",),  # the command line
)


def imports_of(source: str) -> set[str]:
    """The matrix modules a module's source imports (relative imports: the lab imports itself that way)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
    return found


def layering_problems(sources: dict[str, str]) -> list[str]:
    layer = {module: index for index, modules in enumerate(LAYERS) for module in modules}
    problems = [f"{module} is in no layer: place it in LAYERS" for module in sources if module not in layer]
    for module, source in sorted(sources.items()):
        for imported in sorted(imports_of(source) - {"__init__"}):
            if module in layer and imported in layer and layer[imported] >= layer[module]:
                problems.append(f"{module} (layer {layer[module]}) imports {imported} (layer {layer[imported]})")
    return problems


def test_the_labs_imports_only_point_down_the_layers() -> None:
    sources = {path.stem: path.read_text(encoding="utf-8") for path in MATRIX.glob("*.py")}
    assert layering_problems(sources) == []
    assert not {m for modules in LAYERS for m in modules} - set(sources), "LAYERS names a module that is gone"


def test_the_layer_rule_catches_an_upward_import() -> None:
    # The arrow issue 24 removed: the records of passed suites importing the renderer to (de)serialise them.
    memo = layering_problems({"memo": "from .report import suite_from_dict\n"})
    assert memo == ["memo (layer 4) imports report (layer 4)"]
    lazy = layering_problems({"engine": "def f():\n    from .lab import Lab\n"})
    assert lazy == ["engine (layer 2) imports lab (layer 8)"]
    assert layering_problems({"newcomer": ""}) == ["newcomer is in no layer: place it in LAYERS"]


def long_functions(paths: list[Path], limit: int = 50) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(LAB_ROOT)}:{node.lineno} {node.name} is {lines} lines")
    return found


def test_no_function_of_the_lab_is_over_50_lines() -> None:
    assert long_functions(sorted(MATRIX.glob("*.py")) + sorted((LAB_ROOT / "scripts").glob("*.py"))) == []
    assert long_functions([Path(__file__)], limit=5), "the check sees a long function"
