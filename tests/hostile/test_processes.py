"""What command tools leave behind: nothing, whether they time out, daemonise or linger; and a server
that is PID 1 reaps what it is given, as an init must."""

import os
import shutil
import subprocess
import sys
import time

import pytest
from mcptest import StdioServer, call, read_text

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_tools.py")


def text(answer) -> str:
    return answer["result"]["content"][0]["text"]


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as gone (only its parent's wait remains)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_in(path, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while not read_text(path).strip():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.01)
    return int(read_text(path))


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, 9)  # do not leave it to the next test
            return False
        time.sleep(0.02)
    return True


def test_a_descendant_that_left_the_process_group_is_killed_at_the_timeout(tmp_path):
    pidfile = str(tmp_path / "pid")
    with StdioServer(TOOLS) as server:
        answer = server.ask(call("setsid_child", pidfile=pidfile))
        assert answer["result"]["isError"] is True and "timed out" in text(answer)
        assert gone_within(pid_in(pidfile), 5), "the setsid child outlived its run's timeout"


def test_a_daemon_left_by_a_finished_run_is_killed_when_the_server_exits(tmp_path):
    pidfile = str(tmp_path / "pid")
    with StdioServer(TOOLS) as server:
        assert server.ask(call("daemon", pidfile=pidfile))["result"].get("isError") is not True
        daemon = pid_in(pidfile)
        assert alive(daemon)
        assert server.close()[0] == 0
    assert gone_within(daemon, 5), "the daemon outlived the server"


def test_a_background_child_holding_stdout_does_not_hold_the_answer(tmp_path):
    # The run waited for EOF on stdout until the timeout (20 s), then reported "timed out".
    pidfile = str(tmp_path / "pid")
    with StdioServer(TOOLS) as server:
        started = time.monotonic()
        answer = server.ask(call("lingering", pidfile=pidfile))
        assert answer["result"].get("isError") is not True, answer
        assert text(answer) == "done\n" and time.monotonic() - started < 15
    shell = pid_in(pidfile)
    assert not alive(shell)


@pytest.mark.parametrize(("tool", "value", "refused"), [("echo_number", -5, True), ("echo_option", -5, False),
                                                        ("echo_number", 5, False)])
def test_a_value_that_would_start_an_argv_item_with_a_dash_is_refused(tool, value, refused):
    with StdioServer(TOOLS) as server:
        answer = server.ask(call(tool, n=value))
    if refused:
        assert answer["result"]["isError"] is True and "must not start with '-'" in text(answer)
    else:
        assert text(answer).strip() == ("--n=" if tool == "echo_option" else "") + str(value)


def can_be_pid1() -> str:
    if not shutil.which("unshare"):
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return "" if probe.returncode == 0 else f"cannot make a PID namespace here: {probe.stderr.decode().strip()}"


@pytest.mark.skipif(bool(can_be_pid1()), reason=can_be_pid1() or "")
def test_as_pid_1_the_orphans_of_timed_out_commands_are_reaped():
    # Before: 4 timed-out runs left 8 zombies that no one would ever wait for.
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "mcpserver", TOOLS]
    with StdioServer.from_argv(argv) as server:
        for attempt in range(4):
            answer = server.ask(call("orphans", id=attempt))
            assert "timed out" in text(answer)
        deadline = time.monotonic() + 10
        while (count := server.ask(call("zombies", id="z"))["result"]["structuredContent"]) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert count == 0
        assert server.close()[0] == 0


@pytest.mark.skipif(bool(can_be_pid1()), reason=can_be_pid1() or "")
def test_as_pid_1_sigterm_reaches_the_server_and_its_status_comes_back():
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "mcpserver", TOOLS]
    with StdioServer.from_argv(argv) as server:
        assert text(server.ask(call("tags", tags=["a"]))) == "1"
        # unshare --fork waits for its child, PID 1 of the namespace: signal that one.
        children = read_text(f"/proc/{server.process.pid}/task/{server.process.pid}/children").split()
        os.kill(int(children[0]), 15)
        assert server.process.wait(10) == 0
