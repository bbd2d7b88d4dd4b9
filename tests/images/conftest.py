"""Options and fixtures for the image checks: `pytest tests/images --image=IMAGE --python-image=PYIMAGE
--cell-python=3.11 [--python-from=distro] [--family=debian] [--interpreter=pypy3.11] [--implementation=pypy]
[--flavour=free-threaded]`. The lab passes them for every built cell; run by hand, point them at any image
built from images/<recipe>/Dockerfile (runtime and python stages).

A check marked `@pytest.mark.families("musl-busybox", ...)` holds only for those families, one marked
`@pytest.mark.flavours("free-threaded")` only for that build; for any other cell it is deselected (not
collected as skipped), so every cell's count is of checks that apply to it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from lab_checks import ENGINE, Cell, HttpServer, start_http, start_stdio


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcplab images")
    group.addoption("--image", help="the runtime image to check")
    group.addoption("--python-image", help="the same build's python stage (its base plus Python)")
    group.addoption("--cell-python", help="the X.Y the cell promises")
    group.addoption("--python-from", default="distro", help="distro, official or builder")
    group.addoption("--family", default="", help="the cell's family (images/<family>/Dockerfile)")
    group.addoption("--interpreter", default="", help="the interpreter's command (default: python<cell-python>)")
    group.addoption("--implementation", default="cpython", help="cpython or pypy")
    group.addoption("--flavour", default="", help="the build's flavour: '' or free-threaded")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "families(*names): the check holds only for images of these families")
    config.addinivalue_line("markers", "flavours(*names): the check holds only for interpreters of these builds")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cell = {"families": config.getoption("--family"), "flavours": config.getoption("--flavour")}
    keep, drop = [], []
    for item in items:
        applies = all(marker.args.count(cell[marker.name]) for marker in item.iter_markers() if marker.name in cell)
        (keep if applies else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def cell(request: pytest.FixtureRequest) -> Cell:
    get = request.config.getoption
    if not (get("--image") and get("--python-image") and get("--cell-python")):
        pytest.skip("image checks need --image, --python-image and --cell-python (the lab passes them)")
    return Cell(get("--image"), get("--python-image"), get("--cell-python"), get("--python-from"), get("--family"),
                get("--interpreter") or f"python{get('--cell-python')}", get("--implementation"), get("--flavour"))


@pytest.fixture(scope="module")
def http_server(cell: Cell) -> Iterator[HttpServer]:
    server = start_http(cell, token=uuid.uuid4().hex)
    yield server
    ENGINE.remove_containers(server.name)


@pytest.fixture(scope="module")
def stdio_server(cell: Cell) -> Iterator[str]:
    name = start_stdio(cell)
    yield name
    ENGINE.remove_containers(name)


@pytest.fixture(scope="module")
def host(stdio_server: str):  # type: ignore[no-untyped-def]
    """testinfra's view into a running server container, started as a user would (`docker run -i
    IMAGE`, the default command); the docker backend runs each check with `docker exec`."""
    import testinfra

    return testinfra.get_host(f"docker://{stdio_server}")
