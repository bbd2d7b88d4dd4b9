"""Bad input on the command line: a usage error that says what is wrong, never a traceback, and one exit
status per outcome whatever the command (the table in `mcpserver --help` and the README)."""

import os
import subprocess
import sys

import pytest
from mcptest import DEMO, EXAMPLES, ROOT


def mcpserver(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "mcpserver", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def usage_error(done, says):
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and says in done.stderr, done.stderr
    return True


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "x"])
def test_a_port_out_of_range_is_a_usage_error(port):
    # Both parsers: the quick one (the common line) declines it, argparse says why.
    says = "not a whole number" if port == "x" else "a port is 0 to 65535"
    assert usage_error(mcpserver("--http", "--port", port, DEMO), says)
    assert usage_error(mcpserver("--http", f"--port={port}", DEMO), says)


@pytest.mark.parametrize(("host", "says"), [
    ("300.1.1.1", "'300.1.1.1' is not an IPv4 address"), ("", "'' is not an address"),
    ("[::1]", "without brackets"), ("1.2.3", "not an IPv4 address"), ("no..such", "not an address or a host name"),
    ("::g", "not an IPv6 address"),
])
def test_a_host_that_is_no_address_is_said_to_be_none(host, says):
    done = mcpserver("--http", "--host", host, DEMO)
    assert usage_error(done, says)
    assert "refusing" not in done.stderr and "authentication" not in done.stderr


def test_a_host_name_and_addresses_are_still_taken(tmp_path):
    # Parsing only (--check): the values pass the parser and reach the server's own checks.
    for host in ("localhost", "::1", "0.0.0.0", "my_service.internal", "fe80::1%eth0"):
        done = mcpserver("--check", "--http", "--host", host, DEMO)
        assert done.returncode == 0, (host, done.stderr)


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--max-concurrent", "0", "must be at least 1"), ("--max-concurrent", "-1", "must be at least 1"),
    ("--max-body-bytes", "0", "must be at least 1"), ("--max-connections", "0", "must be at least 1"),
    ("--grace", "-1", "finite and at least 0"), ("--grace", "nan", "finite and at least 0"),
    ("--grace", "inf", "finite and at least 0"), ("--read-timeout", "0", "would drop every client"),
    ("--header-timeout", "nan", "finite and at least 0"), ("--grace", "soon", "not a number of seconds"),
])
def test_numbers_out_of_range_are_usage_errors(option, value, says):
    # --max-concurrent 0 was a ValueError traceback from the stdio transport; --grace nan was taken.
    assert usage_error(mcpserver(option, value, DEMO), says)


def test_a_one_shot_call_says_nothing_about_sharing_a_state_key():
    done = mcpserver("call", os.path.join(EXAMPLES, "interactive.py"), "trip_plan")
    assert done.returncode == 3 and "Where to?" in done.stderr
    assert "MCPSERVER_STATE_KEY" not in done.stderr and "replicas" not in done.stderr


def test_an_unknown_tool_names_the_tools_there_are():
    done = mcpserver("call", DEMO, "nosuch")
    assert done.returncode == 1 and "Unknown tool: nosuch" in done.stderr
    assert "demo's tools: echo, add, big" in done.stderr
    assert "did you mean echo?" in mcpserver("call", DEMO, "ecko").stderr


@pytest.mark.parametrize("command", [[], ["--check"], ["call"], ["list"], ["config"], ["bundle"]],
                         ids=["serve", "check", "call", "list", "config", "bundle"])
def test_a_target_that_cannot_load_exits_1_from_every_command(command, tmp_path):
    # `mcpserver call` said 2 (a usage error) where `python -m mcpserver` said 1.
    broken = tmp_path / "broken.py"
    broken.write_text("def broken(:\n")
    done = mcpserver(*command, str(broken), *(["echo"] if command == ["call"] else []))
    assert done.returncode == 1, (command, done.stderr)
    assert "SyntaxError" in done.stderr and "Traceback" not in done.stderr


def test_help_shows_the_commands_first_and_the_exit_status_table():
    from mcpserver.cli import EXIT_STATUS

    shown = mcpserver("--help").stdout
    assert shown.startswith("usage: mcpserver call|list|config|bundle|dev")
    commands = [shown.index(f"mcpserver {name} ") for name in ("call", "list", "config", "bundle", "dev")]
    assert commands == sorted(commands) and commands[-1] < shown.index("\n  --http ")  # before the options
    assert EXIT_STATUS in shown
    assert EXIT_STATUS in mcpserver("call", "--help").stdout


CLI_PAGE = os.path.join(ROOT, "docs", "reference", "cli.md")


@pytest.mark.host_only("reads docs/, which the lab's images do not carry")
def test_the_command_line_reference_shows_the_same_exit_status_table():
    from mcpserver.cli import EXIT_STATUS

    with open(CLI_PAGE, encoding="utf-8") as file:
        assert EXIT_STATUS in file.read()  # word for word
