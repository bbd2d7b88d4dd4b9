"""`make clean-lab`: remove everything the lab created and nothing else.

An image built FROM a lab image inherits the lab's labels, so a label alone proves nothing: a lab image
is one that still wears the tag its TAG_LABEL names (the identity the lab gave it when it built it); a
user's derived image wears the user's tags and stays. Containers are the lab's when they carry the label
and a name the lab gives (mcplab-...); volumes do not inherit labels. Pulled bases are listed in
.cache/lab/pulled.txt. The Docker engine and mmdebstrap stay installed.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from . import LAB_ROOT
from .engine import LABEL, TAG_LABEL, Engine
from .errors import EngineError

LEGACY_REPOSITORIES = ("mcplab/",)  # images built before TAG_LABEL existed: their tags say they are the lab's


def lab_images(engine: Engine) -> list[str]:
    """The references of the images the lab built or imported (never one merely derived from them)."""
    refs = []
    for image in engine.images(LABEL):
        facts = engine.image_facts(image)
        tags = facts.get("tags") or []
        labels = facts.get("labels") or {}
        assert isinstance(tags, list) and isinstance(labels, dict)
        identity = labels.get(TAG_LABEL)
        if identity:
            refs += [tag for tag in tags if tag == identity]
        else:
            refs += [tag for tag in tags if tag.startswith(LEGACY_REPOSITORIES)]
    return refs


def lab_containers(engine: Engine) -> list[str]:
    ids = engine.containers(LABEL)
    return [cid for cid, name in engine.container_names(ids).items() if name.startswith("mcplab-")]


def clean(engine: Engine, cache: Path, folders: Iterable[Path]) -> None:
    def tell(message: str) -> None:
        print(f"clean-lab: {message}", file=sys.stderr)

    try:
        engine.version()
    except EngineError as exc:
        tell(f"{exc.message.split('.')[0]}: engine-side leftovers (label {LABEL}) cannot be removed now")
    else:
        tell(f"removed {engine.remove_containers(*lab_containers(engine))} containers")
        pulled = cache / "pulled.txt"
        if pulled.is_file():
            refs = sorted({line.strip() for line in pulled.read_text().splitlines() if line.strip()})
            engine.remove_images(*refs)
        # Newest first would not matter: removing a tag never removes an image another tag still names.
        refs = lab_images(engine)
        engine.remove_images(*refs)
        tell(f"removed {len(refs)} lab images; kept any image built FROM them")
        engine.prune_dangling(LABEL)  # the legacy builder's intermediate layers of lab builds
        engine.remove_volumes(*engine.volumes(LABEL))
    for folder in folders:
        if folder.exists() or folder.is_symlink():
            tell(f"removing {folder}")
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    CACHE = Path(os.environ.get("LAB_CACHE", LAB_ROOT / ".cache" / "lab"))
    clean(Engine(), CACHE, [CACHE, LAB_ROOT / "matrix" / "results", LAB_ROOT / ".venv-lab"])
