"""Build plans as pure data: which stages a cell builds and tags, and what their tags hash."""

from __future__ import annotations

import shutil
from pathlib import Path

from matrix.build import STAGES, plan_build, read_recipe
from matrix.model import Family
from matrix.table import load_cells

ROOT = Path(__file__).resolve().parents[2]
CELLS = {c.name: c for c in load_cells()}


def test_a_compiled_python_tags_its_builder_stage_too() -> None:
    # Untagged, the legacy builder's builder stage is a dangling image: `docker image prune` would take
    # the compiled CPython with it, and the next code change would compile it again.
    musl = plan_build(CELLS["musl-busybox-py3.13"], ROOT, "mcplab/base:x", "sha256:1")
    assert musl.stages == ("builder", *STAGES)
    assert musl.tag("builder").startswith("mcplab/musl-busybox:trixie-py3.13-builder-")
    assert musl.keys()["builder"] == musl.keys()["python"]
    assert musl.tags().python == musl.tag("python")
    assert b"FROM scratch AS python" in musl.dockerfile


def test_other_cells_build_the_three_stages() -> None:
    trixie = plan_build(CELLS["debian-trixie-py3.13"], ROOT, "mcplab/base:x", "sha256:1")
    assert trixie.stages == STAGES


def test_the_builder_stage_needs_no_files_and_moves_with_the_base() -> None:
    one = plan_build(CELLS["musl-busybox-py3.13"], ROOT, "mcplab/base:x", "sha256:1")
    two = plan_build(CELLS["musl-busybox-py3.13"], ROOT, "mcplab/base:x", "sha256:2")
    assert one.context("builder") == one.context("python")
    assert one.tag("builder") != two.tag("builder")
    assert one.tag("runtime") != two.tag("runtime")


def test_every_family_is_its_recipe_plus_the_one_shared_tail() -> None:
    tail = (ROOT / "images/tail.Dockerfile").read_bytes()
    recipes = {}
    for cell in CELLS.values():
        if not cell.family.in_container:
            continue
        plan = plan_build(cell, ROOT, "mcplab/base:x", "sha256:1")
        assert plan.dockerfile.endswith(tail), cell.name
        recipes[cell.family] = plan.dockerfile[: -len(tail)]
        assert b"\nUSER " not in recipes[cell.family] and b"\nENTRYPOINT" not in recipes[cell.family], cell.name
    assert recipes[Family.DEBIAN] == recipes[Family.UBUNTU]  # one apt recipe for both


def test_a_change_to_the_tail_rebuilds_from_the_runtime_stage_only(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "images", tmp_path / "images")
    cell = CELLS["musl-busybox-py3.13"]
    before = plan_build(cell, tmp_path, "mcplab/base:x", "sha256:1")
    with open(tmp_path / "images/tail.Dockerfile", "a") as tail:
        tail.write("# a comment\n")
    after = plan_build(cell, tmp_path, "mcplab/base:x", "sha256:1")
    assert before.tag("builder") == after.tag("builder") and before.tag("python") == after.tag("python")
    assert before.tag("runtime") != after.tag("runtime")


def test_the_recipes_that_compile_python_share_the_deb_src_lines_written_once() -> None:
    fragment = (ROOT / "images/deb-src.Dockerfile").read_text()
    shared = fragment[fragment.index("RUN set -eu;") :]
    for recipe in ("apt-source", "musl-busybox"):
        text = (ROOT / "images" / recipe / "Dockerfile").read_text()
        assert shared not in text and text.count("# include: images/deb-src.Dockerfile\n") == 1
        built = read_recipe(ROOT, ROOT / "images" / recipe / "Dockerfile").decode()
        assert built.count(shared) == 1 and "# include:" not in built and "# A fragment" not in built


def test_an_architecture_cell_builds_for_its_platform_under_tags_of_its_own() -> None:
    own = plan_build(CELLS["debian-trixie-py3.13"], ROOT, "mcplab/base:x", "sha256:1")
    arm = plan_build(CELLS["debian-trixie-py3.13-arm64"], ROOT, "mcplab/base:y", "sha256:2")
    assert (own.platform, arm.platform) == ("", "linux/arm64")
    assert arm.tag("runtime").startswith("mcplab/debian:trixie-py3.13-arm64-runtime-")
    assert not own.tag_prefix("runtime").startswith(arm.tag_prefix("runtime"))  # neither prunes the other's
    assert not arm.tag_prefix("runtime").startswith(own.tag_prefix("runtime"))
