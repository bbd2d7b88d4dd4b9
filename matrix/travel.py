"""Images and passed-suite records that travel between machines, keyed by the same content hashes.

A run given `--registry HOST:PORT/PREFIX` pushes what it builds (and the bases it bootstrapped) there and,
before building or bootstrapping, tries to pull; `--cache-dir DIR` does the same with `docker save`
archives in a folder that a CI cache carries. The records of passed suites (memo.py) travel the same way,
so a fresh runner with the same images and inputs does not run those suites again: in the folder as
files, in the registry as one-file images. A store that does not answer is a warning, never a failure.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .engine import LABEL, ContainerSpec, Engine

RECORD_REPO = "mcplab/passed"
RECORD_FILE = "passed.json"


class Store:
    """One place images and records travel through."""

    def fetch(self, engine: Engine, tag: str, log: Path) -> bool:
        """Make `tag` present in the engine from the store; whether it now is."""
        raise NotImplementedError

    def has(self, engine: Engine, tag: str) -> bool:
        raise NotImplementedError

    def keep(self, engine: Engine, tag: str, log: Path) -> None:
        raise NotImplementedError

    def fetch_record(self, engine: Engine, key: str) -> bytes | None:
        raise NotImplementedError

    def has_record(self, engine: Engine, key: str) -> bool:
        raise NotImplementedError

    def keep_record(self, engine: Engine, key: str, data: bytes) -> None:
        raise NotImplementedError


class Registry(Store):
    """An OCI registry: `HOST:PORT/PREFIX/<the lab's tag>`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.rstrip("/")

    def remote(self, tag: str) -> str:
        return f"{self.prefix}/{tag}"

    def fetch(self, engine: Engine, tag: str, log: Path) -> bool:
        if not engine.pull(self.remote(tag), log=log).ok:
            return False
        engine.tag(self.remote(tag), tag)
        engine.remove_images(self.remote(tag))  # the lab's own name is enough; keep one name per image
        return engine.image_id(tag) is not None

    def has(self, engine: Engine, tag: str) -> bool:
        return engine.manifest(self.remote(tag)).ok

    def keep(self, engine: Engine, tag: str, log: Path) -> None:
        engine.tag(tag, self.remote(tag))
        engine.push(self.remote(tag), log=log)
        engine.remove_images(self.remote(tag))

    def fetch_record(self, engine: Engine, key: str) -> bytes | None:
        ref = self.remote(f"{RECORD_REPO}:{key}")
        if not engine.pull(ref, timeout=120).ok:
            return None
        holder = f"mcplab-record-{key[:16]}-{hashlib.sha256(ref.encode()).hexdigest()[:6]}"
        try:
            if not engine.create(ContainerSpec(image=ref, name=holder, labels={LABEL: "1"})).ok:
                return None
            return engine.read_file(holder, f"/{RECORD_FILE}")
        finally:
            engine.remove_containers(holder)
            engine.remove_images(ref)

    def has_record(self, engine: Engine, key: str) -> bool:
        return engine.manifest(self.remote(f"{RECORD_REPO}:{key}")).ok

    def keep_record(self, engine: Engine, key: str, data: bytes) -> None:
        ref = self.remote(f"{RECORD_REPO}:{key}")
        with tempfile.TemporaryDirectory(prefix="mcplab-record-") as folder:
            (Path(folder) / RECORD_FILE).write_bytes(data)
            if engine.import_rootfs(Path(folder), ref, labels={LABEL: "1"}, log=Path(folder) / "log", timeout=120).ok:
                engine.push(ref, timeout=120)
        engine.remove_images(ref)


class Archives(Store):
    """A folder (a CI cache): images/<tag>.tar from `docker save`, passed/<key>.json."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def archive(self, tag: str) -> Path:
        return self.folder / "images" / (tag.replace("/", "_").replace(":", "__") + ".tar")

    def fetch(self, engine: Engine, tag: str, log: Path) -> bool:
        archive = self.archive(tag)
        return archive.is_file() and engine.load(archive).ok and engine.image_id(tag) is not None

    def has(self, engine: Engine, tag: str) -> bool:
        return self.archive(tag).is_file()

    def keep(self, engine: Engine, tag: str, log: Path) -> None:
        archive = self.archive(tag)
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".partial")
        if engine.save(tag, partial).ok:
            partial.replace(archive)  # a half-written archive is never taken for a whole one
        else:
            partial.unlink(missing_ok=True)

    def fetch_record(self, engine: Engine, key: str) -> bytes | None:
        path = self.folder / "passed" / f"{key}.json"
        return path.read_bytes() if path.is_file() else None

    def has_record(self, engine: Engine, key: str) -> bool:
        return (self.folder / "passed" / f"{key}.json").is_file()

    def keep_record(self, engine: Engine, key: str, data: bytes) -> None:
        path = self.folder / "passed" / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def fetch_image(stores: Sequence[Store], engine: Engine, tag: str, log: Path) -> bool:
    return any(store.fetch(engine, tag, log) for store in stores)


def keep_image(stores: Sequence[Store], engine: Engine, tag: str, log: Path) -> None:
    """Put a present image into every store that does not have it yet (built here, or found present)."""
    for store in stores:
        if not store.has(engine, tag):
            store.keep(engine, tag, log)
