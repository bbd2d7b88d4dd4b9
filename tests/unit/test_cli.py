"""`python -m mcpserver`: targets, --check, --version, and one clear line when a server cannot start."""

import subprocess
import sys
import textwrap

import pytest
from mcpserver import __version__
from mcptest import DEMO, EXAMPLES, GIT, MOVIES, line, request, responses, server_command


def cli(*args, cwd=None, timeout=30):
    return subprocess.run([sys.executable, "-m", "mcpserver", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_version_names_the_package_and_protocol():
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"mcpserver {__version__} (protocol 2026-07-28)"


def test_check_prints_what_is_advertised():
    done = cli("--check", MOVIES)
    assert done.returncode == 0
    assert "movies 1.0.0: 2 tools" in done.stdout
    assert "tool book_tickets: Book seats" in done.stdout and "prompt recommend" in done.stdout


@pytest.mark.parametrize("target", [DEMO, DEMO[:-3], "demo:server", "demo"])
def test_targets_by_file_path_or_module(target):
    done = subprocess.run(server_command(target), input=line(request("tools/list")), capture_output=True,
                          timeout=30, cwd=EXAMPLES)
    assert [t["name"] for t in responses(done.stdout)[0]["result"]["tools"]] == ["echo", "add", "big"]


def test_a_manifest_target():
    done = cli("--check", GIT)
    if done.returncode != 0 and "'git' is not on PATH" in done.stderr:
        pytest.skip("git is not installed here")
    assert done.returncode == 0 and "tool git_log" in done.stdout


def write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


@pytest.mark.parametrize("source, message", [
    ("x = 1\n", "defines no mcpserver.Server"),
    ("from mcpserver import Server\na = Server('a')\nb = Server('b')\n", "defines several servers"),
    ("import no_such_module_here\n", "No module named 'no_such_module_here'"),
    ("def broken(:\n", "SyntaxError"),
    ("from mcpserver import Server\ns = Server('s')\ns.tool(lambda: '', name='bad name')\n",
     "invalid tool name 'bad name'"),
    ("from mcpserver import Server\ns = Server('s')\ns.command('gone', ['no-such-program-x'])\n",
     "program 'no-such-program-x' is not on PATH"),
])
def test_a_server_that_cannot_start_says_why_in_one_line(tmp_path, source, message):
    target = write(tmp_path, "target.py", source)
    for args in (["--check", target], [target]):
        done = cli(*args)
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert lines[-1].startswith("mcpserver: ") and message in lines[-1], done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""


def test_missing_targets_and_attributes():
    assert "no file or module of that name" in cli("no_such_target_anywhere").stderr
    assert "'nothing' is not an mcpserver.Server" in cli(f"{DEMO}:nothing").stderr
    assert cli().returncode == 2


def test_several_servers_can_be_picked_by_name(tmp_path):
    target = write(tmp_path, "two.py", """
        from mcpserver import Server
        a = Server("first")
        b = Server("second")
    """)
    assert "second 0.0.0" in cli("--check", f"{target}:b").stdout
