"""`python -m mcpserver`: targets, --check, --version, and one clear line when a server cannot start."""

import json
import os
import re
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
    said = f"mcpserver {__version__} (protocol 2026-07-28; 2025-11-25 down to 2024-11-05 by initialize)"
    assert done.stdout.strip() == said


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


def mcpserver(*args, stdin=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "mcpserver", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_call_prints_a_text_result():
    done = mcpserver("call", DEMO, "echo", '{"text":"hi"}')
    assert (done.returncode, done.stdout, done.stderr) == (0, "hi\n", "")


def test_call_prints_structured_content_as_json():
    done = mcpserver("call", DEMO, "add", '{"a": 2, "b": 3.5}')
    assert done.returncode == 0 and json.loads(done.stdout) == {"sum": 5.5}


def test_the_demo_adds_integers_of_any_size_exactly():
    """Found by make fuzz (fuzz F): 10**400 went through float() and raised OverflowError in the tool."""
    huge = 10**400
    done = mcpserver("call", DEMO, "add", json.dumps({"a": huge, "b": 1}))
    assert done.returncode == 0 and json.loads(done.stdout) == {"sum": huge + 1}
    mixed = mcpserver("call", DEMO, "add", json.dumps({"a": 0.5, "b": huge}))
    assert mixed.returncode == 1 and "too large for a floating-point number" in mixed.stderr
    assert "Traceback" not in mixed.stderr


def test_call_failures_say_why_and_exit_non_zero():
    invalid = mcpserver("call", DEMO, "add", '{"a": 1, "b": "x"}')
    assert invalid.returncode == 1 and "b: expected number, got string" in invalid.stderr and invalid.stdout == ""
    unknown = mcpserver("call", DEMO, "nope")
    assert unknown.returncode == 1 and "Unknown tool: nope" in unknown.stderr
    not_json = mcpserver("call", DEMO, "echo", "{text: hi}")
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr
    not_object = mcpserver("call", DEMO, "echo", "[1]")
    assert not_object.returncode == 2 and "must be a JSON object" in not_object.stderr
    no_target = mcpserver("call", "no/such/server.py", "echo")
    assert no_target.returncode == 1 and "no file or module" in no_target.stderr  # 1, as when serving it
    for done in (invalid, unknown, not_json, not_object, no_target):
        assert "Traceback" not in done.stderr


def test_call_reads_5_mb_of_arguments_from_stdin():
    text = "é" * 2_500_000  # 5 MB of UTF-8
    done = mcpserver("call", DEMO, "echo", "-", stdin=json.dumps({"text": text}))
    assert done.returncode == 0 and done.stdout == text + "\n"


def test_call_shows_progress_on_stderr_and_says_when_a_tool_needs_input():
    counted = mcpserver("call", os.path.join(EXAMPLES, "long_running.py"), "count", '{"to": 3, "delay": 0}')
    assert counted.stdout == "counted to 3\n" and "progress 3/3 counted to 3" in counted.stderr
    asks = mcpserver("call", os.path.join(EXAMPLES, "interactive.py"), "trip_plan")
    assert asks.returncode == 3 and "Where to?" in asks.stderr


def test_list_is_readable_and_json_on_request():
    done = mcpserver("list", MOVIES)
    assert done.returncode == 0
    assert "tool book_tickets: Book seats" in done.stdout and "  adults: integer" in done.stdout
    assert "resource template movies://films/{movie_id}" in done.stdout and "prompt recommend(mood, company?)" \
        in done.stdout
    listed = json.loads(mcpserver("list", MOVIES, "--json").stdout)
    assert [t["name"] for t in listed["tools"]] == ["search_movies", "book_tickets"]
    assert listed["server"]["name"] == "movies" and listed["resourceTemplates"][0]["name"] == "film"


def test_config_prints_an_entry_that_works_from_any_directory(tmp_path):
    entry = json.loads(mcpserver("config", DEMO, cwd=str(tmp_path)).stdout)["mcpServers"]["demo"]
    assert os.path.isabs(entry["command"]) and os.path.isabs(entry["args"][-1])
    done = subprocess.run([entry["command"], *entry["args"]], input=line(request("tools/list")), capture_output=True,
                          timeout=30, cwd="/", env={**os.environ, **entry.get("env", {})})
    assert responses(done.stdout)[0]["result"]["tools"]
    # The generic shape is taken literally by its readers: no ${VAR} in it (test_cli_config has each client's).
    http = json.loads(mcpserver("config", DEMO, "--http", "http://127.0.0.1:3000/mcp").stdout)["mcpServers"]["demo"]
    assert http == {"type": "http", "url": "http://127.0.0.1:3000/mcp"}


JOBS = os.path.join(EXAMPLES, "jobs.py")


def test_call_follows_a_task_to_its_result_showing_its_progress():
    done = mcpserver("call", JOBS, "backup", '{"seconds": 2}')
    assert (done.returncode, done.stdout) == (0, "backed up in 2 s\n"), done.stderr
    # Which steps a poll lands on depends on the machine's load; that what it shows comes in order does not.
    steps = re.findall(r"^task working: (\d)/2: copying$", done.stderr, re.M)
    assert "runs as task" in done.stderr and steps and steps == sorted(steps), done.stderr


def test_call_of_a_task_that_needs_input_says_what_it_asks_and_exits_3():
    done = mcpserver("call", JOBS, "migrate", '{"tables": 1}')
    assert done.returncode == 3 and "drop-old: elicitation/create Drop the 1 old tables?" in done.stderr
