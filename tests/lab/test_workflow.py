"""The GitHub workflow against the lab it drives, where it repeats what the lab knows. actionlint (`make
lint`) checks the workflow itself; nothing here can run it (no GitHub)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from matrix import conformance, install, memo
from matrix.build import TAIL, code_files, suite_files
from matrix.table import CELLS_TOML

from .conftest import LAB_ROOT

WORKFLOW = LAB_ROOT / ".github" / "workflows" / "matrix.yml"


def hashed_for_the_store() -> list[str]:
    """The patterns the shard job hashes into its store's cache key (its `inputs` step)."""
    found = re.findall(r"echo \"hash=\$\{\{ hashFiles\(([^)]*)\) \}\}\"", WORKFLOW.read_text())
    assert len(found) == 1, "the shard job hashes the memo keys' inputs in one step"
    return re.findall(r"'([^']+)'", found[0])


def relative(path: str | Path) -> str:
    return Path(path).resolve().relative_to(LAB_ROOT).as_posix()


def test_the_store_cache_key_hashes_every_file_the_memo_keys_and_image_tags_read() -> None:
    # A file read by a memo key or an image tag but missing here would not break the store (its cache is
    # named by what it holds) but would make a run restore a store made from other sources.
    patterns = [p.replace("**", "*") for p in hashed_for_the_store()]  # fnmatch's * crosses folders too
    read = {
        *install.SOURCES,  # what the wheel and sdist are built from: the install suites' keys
        relative(conformance.SCRIPT),
        relative(install.DRIVER),
        relative(CELLS_TOML),
        relative(memo.__file__),  # MEMO_VERSION
        "matrix/bases.py",  # BOOTSTRAP_VERSION, in every bootstrapped base's tag
        TAIL,
        *(f"images/{d.name}/Dockerfile" for d in (LAB_ROOT / "images").iterdir() if d.is_dir()),
        *(f.arcname.removeprefix("lab/") for f in code_files(LAB_ROOT) + suite_files(LAB_ROOT)),
        *(relative(p) for p in (LAB_ROOT / "tests" / "images").iterdir() if p.is_file()),  # the image checks
    }
    missing = sorted(path for path in read if not any(fnmatch.fnmatchcase(path, p) for p in patterns))
    assert not missing, f"the workflow's store cache key does not hash {missing}"
