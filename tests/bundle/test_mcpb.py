"""Bundles of every example, checked by the official MCP Bundle tool (`mcpb`, npm @anthropic-ai/mcpb).

`mcpb unpack` reads the zip as a client would, `mcpb validate` checks its manifest.json against the
format's schema for its manifest_version, `mcpb info` reads the file. The folder `mcpb` unpacked then
serves tools/list with only a python3 on PATH. Run on the host by `make test` (installs Node 22 and
the tool into .cache/mcpb on first use).
"""

import json
import os
import subprocess
import sys

import pytest
from mcpb_tool import install, mcpb
from mcptest import EXAMPLES, line, request, responses

EXAMPLE_TARGETS = sorted(name for name in os.listdir(EXAMPLES) if name.endswith((".py", ".json")))
# Command tools: Python alone cannot serve them.
NEEDS_A_PROGRAM = {"git.json": "git", "long_running.py": "sh", "jobs.py": "sh"}


@pytest.fixture(scope="module")
def tool():
    return install()


def bundled(target, tmp_path):
    output = tmp_path / "bundle.mcpb"
    done = subprocess.run([sys.executable, "-m", "mcpserver", "bundle", target, "-o", str(output)],
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    return output


def test_every_example_is_bundled_here():
    assert len(EXAMPLE_TARGETS) >= 8 and "git.json" in EXAMPLE_TARGETS


@pytest.mark.parametrize("example", EXAMPLE_TARGETS)
def test_mcpb_validates_a_bundle_of_each_example_and_its_unpacked_folder_serves(example, tool, tmp_path):
    output = bundled(os.path.join(EXAMPLES, example), tmp_path)
    folder = tmp_path / "unpacked"
    unpacked = mcpb("unpack", str(output), str(folder))
    assert unpacked.returncode == 0, unpacked.stdout + unpacked.stderr
    validated = mcpb("validate", str(folder))
    assert validated.returncode == 0 and "Manifest schema validation passes" in validated.stdout, validated.stdout
    info = mcpb("info", str(output))
    assert info.returncode == 0 and "File: bundle.mcpb" in info.stdout, info.stdout + info.stderr
    if example in NEEDS_A_PROGRAM:
        return
    manifest = json.loads((folder / "manifest.json").read_text())
    only_python = tmp_path / "only-python"
    only_python.mkdir()
    os.symlink(sys.executable, only_python / "python3")
    config = manifest["server"]["mcp_config"]
    argv = [config["command"], *(a.replace("${__dirname}", str(folder)) for a in config["args"])]
    done = subprocess.run(argv, input=line(request("tools/list")), capture_output=True, timeout=60, cwd="/",
                          env={"PATH": str(only_python)})
    listed = [t["name"] for t in responses(done.stdout)[0]["result"]["tools"]]
    assert listed == [t["name"] for t in manifest.get("tools", [])], done.stderr


def test_declared_user_configuration_passes_validation(tool, tmp_path):
    target = tmp_path / "configured.py"
    target.write_text('"""Needs a folder and a key."""\nfrom mcpserver import Server\n'
                      'MCPB_USER_CONFIG = {"NOTES_DIR": {"type": "directory", "title": "Notes", "description": "d", '
                      '"required": True}, "API_KEY": {"type": "string", "title": "Key", "description": "d", '
                      '"sensitive": True}, "LIMIT": {"type": "number", "title": "Limit", "description": "d", '
                      '"min": 1, "max": 10, "default": 5}}\nserver = Server("configured")\n')
    output = bundled(str(target), tmp_path)
    assert mcpb("unpack", str(output), str(tmp_path / "unpacked")).returncode == 0
    validated = mcpb("validate", str(tmp_path / "unpacked"))
    assert validated.returncode == 0, validated.stdout


def test_the_validator_refuses_what_the_format_does_not_allow(tool, tmp_path):
    # Not vacuous: the same manifest with one key the schema does not know fails.
    output = bundled(os.path.join(EXAMPLES, "demo.py"), tmp_path)
    folder = tmp_path / "unpacked"
    assert mcpb("unpack", str(output), str(folder)).returncode == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["server"]["mcp_config"]["cwd"] = "/"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    validated = mcpb("validate", str(folder))
    assert validated.returncode == 1 and "validation failed" in validated.stdout
