"""Large payloads arrive intact through every path, on every platform (issue: MAX_ARG_STRLEN).

Linux refuses any single argv or environment string over 128 KiB with E2BIG; other systems do not,
so a tool passing data through argv works on a laptop and dies in production. These tests move
500 KB and 5 MB texts through every path the server has and check each by sha256 and length; the
canaries prove the limit this suite guards is really there.
"""

import errno
import json
import os
import platform
import subprocess
import sys

import pytest
from mcpserver import ConfigError, Server
from mcptest import HttpServer, StdioServer, call, line, mcp_headers, request
from payloads import SHAPES, SIZES, fingerprint, payload

TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "payload_server.py")
CASES = [(shape, size) for size in SIZES for shape in SHAPES]
IDS = [f"{shape}-{size}" for shape, size in CASES]
ON_LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def stdio():
    with StdioServer(TARGET) as server:
        yield server


@pytest.fixture(scope="module")
def http():
    with HttpServer(TARGET) as server:
        yield server


def text_of(response):
    assert "result" in response, str(response)[:500]
    result = response["result"]
    assert not result.get("isError"), result["content"][0]["text"][:500]
    return result["content"][0]["text"]


def test_the_payloads_are_what_they_claim():
    for shape, size in CASES:
        text = payload(shape, SIZES[size])
        characters, data_bytes, _ = fingerprint(text)
        assert data_bytes == SIZES[size]
        assert (characters == data_bytes) == (shape != "utf8")
    assert any(ord(c) > 0xFFFF for c in payload("utf8", 1000))
    assert set("\n\t\"\\\x00\x1f\x7f") <= set(payload("escapes", 1000))


@pytest.mark.parametrize("shape, size", CASES, ids=IDS)
def test_stdio_argument_echoed_back(stdio, shape, size):
    text = payload(shape, SIZES[size])
    assert fingerprint(text_of(stdio.ask(call("echo", text=text)))) == fingerprint(text)


@pytest.mark.parametrize("shape, size", CASES, ids=IDS)
def test_stdio_tool_result(stdio, shape, size):
    expected = payload(shape, SIZES[size])
    answer = text_of(stdio.ask(call("produce", shape=shape, size=SIZES[size])))
    assert fingerprint(answer) == fingerprint(expected)


@pytest.mark.parametrize("shape, size", CASES, ids=IDS)
def test_http_request_body_and_response(http, shape, size):
    text = payload(shape, SIZES[size])
    status, _, body = http.post(call("echo", text=text))
    assert status == 200 and fingerprint(text_of(body)) == fingerprint(text)
    status, _, body = http.post(call("produce", shape=shape, size=SIZES[size]))
    assert status == 200 and fingerprint(text_of(body)) == fingerprint(text)


@pytest.mark.parametrize("shape, size", CASES, ids=IDS)
def test_command_tool_gets_it_on_stdin_and_returns_it_on_stdout(stdio, shape, size):
    text = payload(shape, SIZES[size])
    characters, data_bytes, digest = fingerprint(text)
    assert fingerprint(text_of(stdio.ask(call("cat_text", text=text)))) == (characters, data_bytes, digest)
    assert text_of(stdio.ask(call("count_bytes", text=text))).split()[0] == str(data_bytes)
    assert text_of(stdio.ask(call("hash_text", text=text))).split()[0] == digest


@pytest.mark.parametrize("shape", SHAPES)
def test_command_tool_gets_the_whole_arguments_object_as_json(stdio, shape):
    text = payload(shape, SIZES["500KB"])
    echoed = json.loads(text_of(stdio.ask(call("cat_json", text=text))))
    assert fingerprint(echoed["text"]) == fingerprint(text)


def test_python_and_command_tools_both_return_5mb_over_http(http):
    text = payload("utf8", SIZES["5MB"])
    status, _, body = http.post(call("produce", shape="utf8", size=SIZES["5MB"]))
    assert status == 200 and fingerprint(text_of(body)) == fingerprint(text)
    status, _, body = http.post(call("cat_text", text=text))
    assert status == 200 and fingerprint(text_of(body)) == fingerprint(text)


# What the server may add to its peak memory for 5 MB each way: CPython needs about 9x; PyPy 15x, and up to
# 20x on a loaded machine (its GC frees large strings late); free-threaded CPython up to 22x there (mimalloc
# keeps freed pages with the thread that used them). PyPy's JSON paths for hook-free decoding and for
# escaping ASCII are native; before the server used them it took 45-50x (docs/platforms/pypy.md), and three such
# processes in one cell passed its 4 GiB limit.
FREE_THREADED = "t" in getattr(sys, "abiflags", "")
EXCHANGE_MEMORY_FACTOR = 30 if sys.implementation.name == "pypy" or FREE_THREADED else 20


def peak_rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmHWM:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the server's peak RSS from /proc")
def test_5mb_each_way_on_one_keep_alive_connection_costs_a_small_multiple_of_5mb():
    with HttpServer(TARGET) as http:
        connection = http.connection()
        try:
            assert http.post(call("echo", id="warm", text="x"), connection=connection)[0] == 200
            before = peak_rss_mib(http.process.pid)
            for i, shape in enumerate(SHAPES):
                text = payload(shape, SIZES["5MB"])
                _, _, body = http.post(call("echo", id=i, text=text), connection=connection)
                assert body["id"] == i and fingerprint(text_of(body)) == fingerprint(text)
            grown = peak_rss_mib(http.process.pid) - before
        finally:
            connection.close()
    budget = EXCHANGE_MEMORY_FACTOR * SIZES["5MB"] // 2**20
    assert grown <= budget, f"the server's peak grew {grown} MiB for 5 MB each way (budget {budget} MiB)"


# --- the canaries: the limit this suite guards against must really exist -----------------------
# They start programs the way the server's command tools do (mcpserver/_command.py: start_new_session), which keeps
# subprocess on its fork and exec path: the child reports a failed exec through a pipe, so E2BIG reaches the parent
# everywhere. Python 3.13+ starts other programs with posix_spawn, where glibc's child reports it through memory it
# shares with the parent (clone with CLONE_VM|CLONE_VFORK); qemu-user runs that clone as a fork, the report is lost,
# and the parent sees a child that started and exited 127 (test_what_posix_spawn_reports_depends_on_the_emulator).


def start(argv, **options):
    return subprocess.run(argv, start_new_session=True, check=False, **options)


@pytest.mark.skipif(not ON_LINUX, reason="MAX_ARG_STRLEN (128 KiB per argv/env string) is a Linux limit")
def test_canary_a_500kb_argv_entry_fails_with_e2big():
    with pytest.raises(OSError) as caught:
        start([sys.executable, "-c", "pass", "x" * 500_000])
    assert caught.value.errno == errno.E2BIG


@pytest.mark.skipif(not ON_LINUX, reason="MAX_ARG_STRLEN (128 KiB per argv/env string) is a Linux limit")
def test_canary_a_500kb_environment_variable_fails_with_e2big():
    with pytest.raises(OSError) as caught:
        start([sys.executable, "-c", "pass"], env=dict(os.environ, BIG="x" * 500_000))
    assert caught.value.errno == errno.E2BIG


def emulator():
    """The emulator running this process, as the kernel names it ('' when the CPU runs it itself). qemu-user answers
    a process's reads of its own /proc/self entries (its exe is the program it emulates); the same entry under
    /proc/PID/task/PID/ is the kernel's (qemu-aarch64-static)."""
    pid = os.getpid()
    try:
        kernel_says, told = os.readlink(f"/proc/{pid}/task/{pid}/exe"), os.readlink("/proc/self/exe")
    except OSError:
        return ""
    return kernel_says if kernel_says != told else ""


@pytest.mark.skipif(not ON_LINUX, reason="MAX_ARG_STRLEN (128 KiB per argv/env string) is a Linux limit")
@pytest.mark.skipif(not hasattr(os, "posix_spawn"), reason="this Python has no os.posix_spawn")
def test_what_posix_spawn_reports_depends_on_the_emulator():
    """Natively, posix_spawn raises E2BIG for a 500 KB argument, and ENOENT for a program that is not there. glibc's
    under qemu-user does not: its child's report is lost (see above), and the child exits 127. (musl's child reports
    through a pipe, which survives the emulator.) This states which holds here, so a change in either fails it."""
    qemu = emulator()
    lost = bool(qemu) and platform.libc_ver()[0] == "glibc"
    for argv, errno_natively in (([sys.executable, "-c", "pass", "x" * 500_000], errno.E2BIG),
                                 (["/no/such/program"], errno.ENOENT)):
        try:
            pid = os.posix_spawn(argv[0], argv, dict(os.environ))
        except OSError as error:
            assert not lost, f"under {qemu}, glibc's posix_spawn of {argv[0]} reported {error}"
            assert error.errno == errno_natively
            continue
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        assert lost, f"posix_spawn started {argv[0][:40]} (exit {status}) where the kernel refuses it"
        assert status == 127, f"under {qemu}, the child of a failed exec exited {status}"


@pytest.mark.skipif(not ON_LINUX, reason="MAX_ARG_STRLEN (128 KiB per argv/env string) is a Linux limit")
def test_canary_the_limit_is_per_string_not_in_total():
    """Four 100 KB entries (400 KB in all) start fine: it is the single-string cap that bites."""
    done = subprocess.run([sys.executable, "-c", "import sys; print(len(sys.argv))", *["y" * 100_000] * 4],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "5"


# --- the guard in the code: unbounded request values never reach argv or the environment --------


@pytest.mark.parametrize("command, env", [(["echo", "{text}"], None), (["echo", "--data={text}"], None),
                                          (["env"], {"DATA": "{text}"})])
def test_a_command_tool_cannot_be_configured_to_put_unbounded_text_in_argv(command, env):
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    with pytest.raises(ConfigError, match="unbounded; Linux refuses a single argv/env string over 128 KiB"):
        Server("guarded").command("leaky", command, input_schema=schema, env=env)


def test_a_manifest_that_would_leak_refuses_to_start(tmp_path):
    manifest = tmp_path / "leaky.json"
    manifest.write_text(json.dumps({"name": "leaky", "tools": [{
        "name": "leaky", "command": ["echo", "{text}"],
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]}))
    done = subprocess.run([sys.executable, "-m", "mcpserver", str(manifest)], input=line(request("tools/list")),
                          capture_output=True, timeout=30)
    assert done.returncode == 1 and done.stdout == b""
    assert b"argument 'text' would go into argv or the environment unbounded" in done.stderr


def test_http_headers_for_large_calls_stay_small(http):
    """Only the tool name travels in a header; the payload stays in the body."""
    headers = mcp_headers(call("echo", text=payload("ascii", SIZES["500KB"])))
    assert sum(len(k) + len(v) for k, v in headers.items()) < 300
