"""The SDK as pip installed it: the lab's install suite (matrix/install.py) builds the wheel, installs it with pip
in each cell (a venv, or pip from its own wheel into a user site of its own) and runs this module against that copy:
that it is the copy pip recorded, that every module of it imports, and that it serves, by its console script over
stdio and over HTTP. What the code does is the other suites' to test, on the embedded copy; the wheel holding every
module of the source is checked on the host, where the source is. Outside the lab (no MCPLAB_INSTALLED) every test
here skips, saying so."""

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import zipfile

import mcpserver
import pytest
from mcptest import HttpServer, StdioServer, call

INSTALLED = os.environ.get("MCPLAB_INSTALLED", "")  # "venv" or "pip-wheel": how the driver installed it
SCRIPTS = os.environ.get("MCPLAB_SCRIPTS", "")  # where pip put the console script
WHEEL = os.environ.get("MCPLAB_WHEEL", "")
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "server",
                        "examples")

pytestmark = pytest.mark.skipif(not INSTALLED, reason="run by the lab's install suite, which installs the wheel first")


def installed_package_dir() -> str:
    return os.path.dirname(os.path.abspath(mcpserver.__file__))


def test_mcpserver_is_the_copy_pip_installed():
    here = installed_package_dir()
    assert os.path.basename(os.path.dirname(here)) in ("site-packages", "dist-packages"), here
    assert not here.startswith(("/opt/mcpserver", os.path.dirname(EXAMPLES))), f"not the installed copy: {here}"
    record = [name for name in os.listdir(os.path.dirname(here)) if name.startswith("mcpserver-")]
    assert len(record) == 1 and record[0].endswith(".dist-info"), record


def test_pip_recorded_every_file_it_installed_and_nothing_else_is_there():
    site = os.path.dirname(installed_package_dir())
    (info,) = [name for name in os.listdir(site) if name.startswith("mcpserver-") and name.endswith(".dist-info")]
    with open(os.path.join(site, info, "RECORD")) as record:
        recorded = {line.split(",")[0] for line in record if line.strip()}
    with open(os.path.join(site, info, "INSTALLER")) as installer:
        assert installer.read().strip() == "pip"
    package = {os.path.relpath(os.path.join(folder, name), site).replace(os.sep, "/")
               for folder, _, names in os.walk(installed_package_dir()) for name in names
               if "__pycache__" not in folder}
    assert package and package <= recorded, sorted(package - recorded)


def test_a_child_process_imports_the_installed_copy_too():
    # Tests start servers with PYTHONPATH replaced: what they start must still be the installed copy.
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(EXAMPLES)))
    done = subprocess.run([sys.executable, "-c", "import mcpserver; print(mcpserver.__file__)"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.path.dirname(os.path.abspath(done.stdout.strip())) == installed_package_dir()


def test_the_console_script_prints_the_version():
    script = os.path.join(SCRIPTS, "mcpserver")
    assert os.access(script, os.X_OK), f"pip put no mcpserver script in {SCRIPTS}"
    with open(script, "rb") as head:
        first = head.readline()
    assert first.startswith(b"#!") and os.path.basename(sys.executable).encode() in first, first
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["mcpserver", mcpserver.__version__], done.stdout


def test_every_module_of_the_installed_package_imports():
    names = [module.name for module in pkgutil.walk_packages(mcpserver.__path__, "mcpserver.")]
    assert len(names) > 30, names
    for name in names:
        assert importlib.import_module(name).__file__.startswith(installed_package_dir()), name


def test_the_console_script_serves_a_tool_call_over_stdio():
    argv = [os.path.join(SCRIPTS, "mcpserver"), os.path.join(EXAMPLES, "demo.py")]
    with StdioServer.from_argv(argv) as server:
        answer = server.ask(call("echo", text="from the installed copy"))
        assert answer["result"]["content"][0]["text"] == "from the installed copy", answer


def test_the_installed_copy_serves_a_tool_call_over_http():
    with HttpServer(os.path.join(EXAMPLES, "demo.py")) as server:
        status, _, body = server.post(call("add", a=2, b=3))
        assert status == 200 and body["result"]["structuredContent"] == {"sum": 5}, body


def missing_programs(example: str) -> list[str]:
    """The programs a command manifest runs that are not on PATH here (a server refuses such a manifest)."""
    if not example.endswith(".json"):
        return []
    with open(os.path.join(EXAMPLES, example)) as manifest:
        tools = json.load(manifest).get("tools", [])
    return sorted({tool["command"][0] for tool in tools if not shutil.which(tool["command"][0])})


@pytest.mark.parametrize("example", sorted(name for name in os.listdir(EXAMPLES) if name.endswith((".py", ".json"))))
def test_check_passes_for_every_example(example):
    missing = missing_programs(example)
    if missing:
        pytest.skip(f"{example} runs {', '.join(missing)}, which is not installed here")
    done = subprocess.run([sys.executable, "-m", "mcpserver", "--check", os.path.join(EXAMPLES, example)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tools" in done.stdout


def test_the_wheel_is_pure_and_holds_only_the_package_and_its_metadata():
    name = os.path.basename(WHEEL)
    assert name.startswith(f"mcpserver-{mcpserver.__version__}-") and name.endswith("-py3-none-any.whl"), name
    info = f"mcpserver-{mcpserver.__version__}.dist-info/"
    with zipfile.ZipFile(WHEEL) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(info + "WHEEL").decode()
        requires = [line for line in wheel.read(info + "METADATA").decode().splitlines()
                    if line.startswith(("Requires-Dist:", "Requires-Python:"))]
    assert [n for n in names if not n.startswith(("mcpserver/", info))] == []
    assert not [n for n in names if n.endswith((".pyc", ".so")) or "__pycache__" in n]
    assert "mcpserver/py.typed" in names and "mcpserver/__main__.py" in names
    assert "Root-Is-Purelib: true" in metadata and "Tag: py3-none-any" in metadata
    # The standard library only: nothing is required but by an extra (test, dev, lab) a user asks for.
    assert [line for line in requires if "extra ==" not in line] == ["Requires-Python: >=3.9"], requires
