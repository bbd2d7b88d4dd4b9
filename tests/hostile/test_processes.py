"""What command tools leave behind: nothing, whether they time out, daemonise or linger; and a server
that is PID 1 reaps what it is given, as an init must."""

import os
import shutil
import signal
import socket
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
        answer = server.ask(call("lingering", pidfile=pidfile))
        assert answer["result"].get("isError") is not True, answer  # held, it would be "timed out"
        assert text(answer) == "done\n"
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


@pytest.mark.skipif(bool(can_be_pid1()), reason=can_be_pid1() or "")
def test_as_pid_1_a_sigterm_while_the_server_starts_stops_it_cleanly(tmp_path):
    """docker stop just after docker run: the SIGTERM reaches the init (PID 1) while the server child is still
    loading its target (here, for a second). It used to kill the child by the signal's default action (status
    143); it now stops it as an exit, status 0."""
    target = tmp_path / "slow_start.py"
    target.write_text("import time\nfrom mcpserver import Server\ntime.sleep(1)\nserver = Server('slow', '1')\n")
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "mcpserver", str(target)]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        init = None
        while init is None and time.monotonic() < deadline:  # the namespace's PID 1, once it forwards SIGTERM
            children = read_text(f"/proc/{process.pid}/task/{process.pid}/children").split()
            if children and (int(_status_field(int(children[0]), "SigCgt"), 16) >> (signal.SIGTERM - 1)) & 1:
                init = int(children[0])
            time.sleep(0.005)
        assert init is not None, "the init never set its SIGTERM handler"
        os.kill(init, signal.SIGTERM)
        assert process.wait(10) == 0, process.stderr.read().decode()
    finally:
        process.kill()
        process.wait()
        process.stdin.close()
        process.stdout.close()
        process.stderr.close()


def _status_field(pid: int, name: str) -> str:
    for line in read_text(f"/proc/{pid}/status").splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    return "0"


def blocks(pid: int, tid: int, signum: int) -> bool:
    """Whether thread `tid` of `pid` blocks `signum` (its SigBlk mask in /proc); False when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as status:
            mask = next(line.split()[1] for line in status if line.startswith("SigBlk:"))
    except (OSError, StopIteration):
        return False
    return bool(int(mask, 16) >> (signum - 1) & 1)


def send_to_a_worker_thread(pid: int, signum: int) -> None:
    """Deliver `signum` to one of `pid`'s threads other than the main one (tgkill), as the kernel may do
    with a signal sent to the process: a free-threaded CPython then left the main thread asleep."""
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    # The number is the process's ABI's, not the kernel's: a 32-bit x86 process on an x86_64 kernel (uname says
    # x86_64) asks for tgkill by i386's number, and 234 there is another call (the lab's i386 cell: EBADF).
    abi = (os.uname().machine, sys.maxsize > 2**32)
    sys_tgkill = {("x86_64", True): 234, ("x86_64", False): 270, ("i686", False): 270, ("aarch64", True): 131,
                  ("armv7l", False): 268, ("s390x", True): 241, ("ppc64le", True): 250, ("riscv64", True): 131,
                  }.get(abi)  # fmt: skip
    if sys_tgkill is None:
        pytest.skip(f"tgkill's system call number on {abi[0]} ({'64' if abi[1] else '32'}-bit) is not in this test")
    deadline = time.monotonic() + 10
    threads: list = []
    # A thread listed a moment ago may have ended since (its work done, or the stdio reader role passed on),
    # and the one to aim at may not have started yet (a connection not accepted yet): list again until one is hit.
    while time.monotonic() < deadline:
        threads = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
        # Only a thread that does not block it: the kernel delivers the process's signal to one of those, and an
        # emulator's own thread blocks every signal (qemu-user's RCU thread: SIGTERM aimed at it is lost).
        for tid in [tid for tid in threads if not blocks(pid, tid, signum)]:
            if libc.syscall(sys_tgkill, pid, tid, signum) == 0:
                return
            assert ctypes.get_errno() == errno.ESRCH, os.strerror(ctypes.get_errno())
        time.sleep(0.01)
    pytest.fail(f"every worker thread of {pid} ended before the signal reached one: {threads}")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_handed_to_a_worker_thread_still_stops_the_server(transport):
    pytest.importorskip("ctypes", reason="this Python has no ctypes, which the test needs to call tgkill")
    import signal

    from mcptest import HttpServer

    if transport == "http":
        server = HttpServer(TOOLS)
        assert server.post(call("tags", tags=["a"]))[0] == 200
        # A connection that has sent half its headers keeps its thread waiting (until the header timeout),
        # so there is a worker thread to aim at for as long as the test needs one.
        half_open = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        half_open.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
    else:
        server = StdioServer(TOOLS)
        server.ask(call("tags", tags=["a"]))
    with server:
        send_to_a_worker_thread(server.process.pid, signal.SIGTERM)
        assert server.process.wait(10) == 0
    if transport == "http":
        half_open.close()
