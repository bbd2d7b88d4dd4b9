"""`mcpserver bundle TARGET`: an MCP Bundle that, unpacked, serves with nothing but a Python on PATH.

What a desktop client does with a bundle is done here by hand: unzip it, replace ${__dirname} and
${user_config.X} in manifest.json's mcp_config, and start that command in a clean environment whose
PATH holds a python3 and nothing else. (tests/bundle runs the official `mcpb` tool on the same bundles.)
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest
from mcptest import DEMO, EXAMPLES, call, line, request, responses

# The examples that need no program beside Python (long_running's countdown runs sh, git.json runs git).
SERVES_ALONE = ["demo.py", "movies.py", "interactive.py", "notes.py", "everything.py", "accounts.py", "handbook.py"]


def bundle(target, tmp_path, *extra, name="out.mcpb"):
    output = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "mcpserver", "bundle", target, "-o", str(output), *extra],
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    return done, output


def unpacked(output, folder):
    with zipfile.ZipFile(output) as archive:
        archive.extractall(folder)
    with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as file:
        return json.load(file)


def launch(manifest, folder, tmp_path, answers=None):
    """The command a client starts, with only a python3 on PATH (the interpreter running these tests)."""
    only_python = tmp_path / "only-python"
    only_python.mkdir(exist_ok=True)
    if not (only_python / "python3").exists():
        os.symlink(sys.executable, only_python / "python3")
    config = json.dumps(manifest["server"]["mcp_config"]).replace("${__dirname}", str(folder))
    for key, value in (answers or {}).items():
        config = config.replace(f"${{user_config.{key}}}", value)
    config = json.loads(config)
    env = {"PATH": str(only_python), **config.get("env", {})}  # no PYTHONPATH, no HOME: a clean start
    return [config["command"], *config["args"]], env


def serve_once(argv, env, *messages):
    done = subprocess.run(argv, input=b"".join(line(m) for m in messages), capture_output=True, timeout=60,
                          env=env, cwd="/")
    assert done.returncode == 0, done.stderr.decode()
    return responses(done.stdout)


@pytest.mark.parametrize("example", SERVES_ALONE)
def test_an_unpacked_bundle_answers_tools_list_with_only_python_on_path(example, tmp_path):
    done, output = bundle(os.path.join(EXAMPLES, example), tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = unpacked(output, tmp_path / "installed")
    argv, env = launch(manifest, tmp_path / "installed", tmp_path)
    assert argv[0] == "python3"
    listed = serve_once(argv, env, request("tools/list"))[0]["result"]["tools"]
    assert [t["name"] for t in listed] == [t["name"] for t in manifest.get("tools", [])]


def test_the_manifest_is_the_bundle_format_s(tmp_path):
    _, output = bundle(DEMO, tmp_path)
    with zipfile.ZipFile(output) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("manifest.json"))
    assert manifest["manifest_version"] == "0.3"
    assert (manifest["name"], manifest["version"]) == ("demo", "1.0.0")
    assert manifest["description"].startswith("The demo server")
    assert manifest["server"] == {"type": "python", "entry_point": "server/mcpb_launch.py",
                                  "mcp_config": {"command": "python3", "args": ["${__dirname}/server/mcpb_launch.py"]}}
    assert manifest["server"]["entry_point"] in names and "server/demo.py" in names
    assert "server/lib/mcpserver/__main__.py" in names and "server/lib/mcpserver/py.typed" in names
    assert not any("__pycache__" in name for name in names)
    assert [t["name"] for t in manifest["tools"]] == ["echo", "add", "big"]
    assert manifest["compatibility"]["runtimes"] == {"python": ">=3.9"}
    assert "user_config" not in manifest


def test_the_same_target_makes_the_same_bundle(tmp_path):
    first = bundle(DEMO, tmp_path, name="a.mcpb")[1].read_bytes()
    assert bundle(DEMO, tmp_path, name="b.mcpb")[1].read_bytes() == first


GREETER = '''"""Greets with a word the user chose at install time."""
import os

from mcpserver import Server

MCPB_USER_CONFIG = {
    "GREETING": {"type": "string", "title": "Greeting", "description": "The word to greet with", "required": True},
    "LOUD": {"type": "boolean", "title": "Loud", "description": "Shout it", "default": False},
}
server = Server("greeter", "2.0.0")


@server.tool()
def greet(name: str) -> str:
    """Greet someone."""
    text = os.environ["GREETING"] + ", " + name
    return text.upper() if os.environ.get("LOUD") == "true" else text
'''


def test_declared_user_configuration_reaches_the_server_as_environment_variables(tmp_path):
    target = tmp_path / "greeter.py"
    target.write_text(GREETER)
    done, output = bundle(str(target), tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = unpacked(output, tmp_path / "installed")
    assert manifest["user_config"]["GREETING"] == {"type": "string", "title": "Greeting",
                                                   "description": "The word to greet with", "required": True}
    assert manifest["server"]["mcp_config"]["env"] == {"GREETING": "${user_config.GREETING}",
                                                       "LOUD": "${user_config.LOUD}"}
    argv, env = launch(manifest, tmp_path / "installed", tmp_path, {"GREETING": "Ahoy", "LOUD": "false"})
    result = serve_once(argv, env, call("greet", name="Ada"))[0]["result"]
    assert result["content"][0]["text"] == "Ahoy, Ada"


def test_a_manifest_target_declares_it_under_user_config(tmp_path):
    manifest_target = tmp_path / "tools.json"
    manifest_target.write_text(json.dumps({
        "name": "tools", "version": "1.0.0", "instructions": "Command tools.",
        "userConfig": {"WORKDIR": {"type": "directory", "title": "Folder", "description": "Where to work"}},
        "tools": [{"name": "where", "command": ["pwd"], "stdin": "none"}]}))
    done, output = bundle(str(manifest_target), tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = unpacked(output, tmp_path / "installed")
    assert manifest["description"] == "Command tools."
    assert manifest["server"]["mcp_config"]["env"] == {"WORKDIR": "${user_config.WORKDIR}"}
    assert os.path.isfile(tmp_path / "installed" / "server" / "tools.json")


@pytest.mark.parametrize(("declared", "says"), [
    ('["KEY"]', "must map environment variable names"),
    ('{"1KEY": {"type": "string", "title": "t", "description": "d"}}', "is not an environment variable name"),
    ('{"MCPSERVER_TOKEN": {"type": "string", "title": "t", "description": "d"}}', "mcpserver's own variable"),
    ('{"KEY": {"type": "string", "title": "t"}}', 'needs "type", "title" and "description"'),
    ('{"KEY": {"type": "text", "title": "t", "description": "d"}}', "type must be one of"),
    ('{"KEY": {"type": "string", "title": "t", "description": "d", "secret": True}}', "unknown key 'secret'"),
])
def test_a_user_configuration_the_format_would_refuse_is_refused_when_bundling(declared, says, tmp_path):
    target = tmp_path / "bad.py"
    target.write_text(f"from mcpserver import Server\nMCPB_USER_CONFIG = {declared}\nserver = Server('bad')\n")
    done, output = bundle(str(target), tmp_path)
    assert done.returncode == 1 and says in done.stderr and "Traceback" not in done.stderr
    assert not output.exists()


def test_a_package_target_is_bundled_whole_with_what_include_adds(tmp_path):
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "prices.py").write_text("PRICE = 3\n")
    (package / "app.py").write_text("from mcpserver import Server\nfrom shop.prices import PRICE\n"
                                    "from catalogue import ITEMS\nserver = Server('shop')\n\n@server.tool()\n"
                                    "def price() -> int:\n    return PRICE * len(ITEMS)\n")
    (tmp_path / "catalogue.py").write_text("ITEMS = ['a', 'b']\n")
    env_path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "mcpserver", "bundle", "shop.app:server", "-o", "shop.mcpb",
                           "--include", "catalogue.py"], capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": env_path})
    assert done.returncode == 0, done.stderr
    manifest = unpacked(tmp_path / "shop.mcpb", tmp_path / "installed")
    argv, env = launch(manifest, tmp_path / "installed", tmp_path)
    result = serve_once(argv, env, call("price"))[0]["result"]
    assert result["content"][0]["text"] == "6"


def test_an_include_that_is_not_there_is_a_usage_error(tmp_path):
    done, output = bundle(DEMO, tmp_path, "--include", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "no such file or folder" in done.stderr and not output.exists()


def test_the_skills_a_server_serves_travel_in_its_bundle_where_it_finds_them(tmp_path):
    done, output = bundle(os.path.join(EXAMPLES, "handbook.py"), tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = unpacked(output, tmp_path / "installed")
    argv, env = launch(manifest, tmp_path / "installed", tmp_path)
    entries = serve_once(argv, env, request("skills/list"))[0]["result"]["skills"]
    assert [e["uri"] for e in entries] == ["skill://build-a-server/SKILL.md", "skill://release-notes/SKILL.md",
                                           "skill://tool-review/SKILL.md"]
    outside = tmp_path / "elsewhere"
    (outside / "notes").mkdir(parents=True)
    (outside / "notes" / "SKILL.md").write_text("---\nname: notes\ndescription: Notes.\n---\n")
    target = tmp_path / "project" / "server.py"
    target.parent.mkdir()
    target.write_text(f"from mcpserver import Server\nserver = Server('s')\nserver.skills({str(outside)!r})\n")
    done, _ = bundle(str(target), tmp_path, name="outside.mcpb")
    assert done.returncode == 1 and f"serves the skills in {outside}, which is not beside it" in done.stderr
