"""What `make clean-lab` removes: the lab's images by their identity, never a user's image built FROM one
(it inherits the lab's labels), and the lab's containers only. Read-only against the shared engine, but
for the image and container this test makes. Marked `engine`."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from matrix.build import context_tar
from matrix.clean import lab_containers, lab_images
from matrix.engine import LABEL, TAG_LABEL, ContainerSpec, Engine

from .test_engine import CONTAINER_CELL, cell_of, make_tree, run_matrix

pytestmark = pytest.mark.engine


def test_an_image_built_from_a_lab_image_is_the_users_and_stays(tmp_path: Path, engine: Engine) -> None:
    code, output, data = run_matrix(tmp_path, make_tree(tmp_path), "--cell", CONTAINER_CELL, "--suite", "unit")
    assert code == 0, output
    runtime = cell_of(data, CONTAINER_CELL)["image"]
    derived = f"mcplab-clean-test/derived:{secrets.token_hex(4)}"
    container = f"user-of-a-lab-image-{secrets.token_hex(3)}"
    dockerfile = f"FROM {runtime}\nLABEL user.owned=1\n".encode()
    try:
        built = engine.build(context_tar(dockerfile, []), target=None, tag=derived, build_args=(), labels={},
                             log=tmp_path / "build.log", timeout=300)  # fmt: skip
        assert built.ok, built.output
        labels = engine.image_facts(derived)["labels"]
        assert isinstance(labels, dict) and labels[LABEL] == "1" and labels[TAG_LABEL] == runtime  # inherited
        doomed = lab_images(engine)
        assert runtime in doomed and derived not in doomed
        assert engine.create(ContainerSpec(image=derived, name=container)).ok  # inherits the labels too
        assert container not in engine.container_names(lab_containers(engine)).values()
    finally:
        engine.remove_containers(container)
        engine.remove_images(derived)
