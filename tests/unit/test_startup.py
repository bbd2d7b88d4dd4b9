"""What a server imports before its first answer: nothing the answer does not need.

MCP clients start a stdio server for every conversation, so the time to its first answer is what
users feel most (docs/reports/performance.md). Each module below costs milliseconds to import and is not
needed to answer the demo's first tools/call; a test fails if one comes back onto that path.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from mcptest import DEMO, GIT, ROOT, call, line

# The list, in one place: module -> why it stays off the path to the first answer.
HEAVY = {
    "inspect": "brings ast, dis, tokenize and more; _signature reads a function's code object instead",
    "ast": "only for `X | Y` string annotations on 3.9, evaluated when a tool has one",
    "dis": "comes with inspect",
    "tokenize": "comes with inspect, linecache and traceback; tracebacks are formatted only on errors",
    "dataclasses": "builds classes with exec; the registry's classes are plain",
    "argparse": "with gettext, locale and textwrap; the common command lines are parsed without it",
    "logging": "with traceback, string and weakref; _log writes records itself until the server's code uses logging",
    "typing": "annotations are for type checkers only (TYPE_CHECKING); a tool's own typing imports are its own",
    "email": "what http.server parses headers with; _httpd parses request heads itself",
    "http.client": "the same, for http.server",
    "subprocess": "only servers with command tools run programs",
    "base64": "for binary content, cursors and sealed state: loaded when one is used",
    "hashlib": "for sealed requestState and tokens: loaded when one is used",
    "ipaddress": "is_loopback reads addresses itself",
    "shutil": "with bz2, lzma and zlib; command tools look programs up on PATH themselves",
    "secrets": "with random and hashlib; os.urandom is enough for run marks",
    "urllib": "only to parse an Origin header or a percent-encoded path",
    "mcpserver.testing": "the in-process client (with queue and typing) is for tests: only a test imports it",
    "mcpserver._apps": "MCP Apps: loaded by a server that registers an app or links a tool to one",
}
ALLOWED = {"manifest": {"subprocess"}}  # a manifest is command tools: running programs is the point
needs_importtime = pytest.mark.skipif(sys.implementation.name != "cpython",
                                      reason=f"-X importtime is CPython's; {sys.implementation.name} has none")


def imported_before_the_first_answer(argv, http=False):
    """Run `python -X importtime -m mcpserver ...`, get one answer, stop it; the modules it imported."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"))
    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "mcpserver", *argv],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        before = b""  # what stderr said up to the banner: the imports too
        if http:
            banner = b""
            while b" at http://" not in banner:
                banner = process.stderr.readline()
                assert banner, "the server did not start"
                before += banner
            port = int(re.search(rb"127\.0\.0\.1:(\d+)", banner).group(1))
            import http.client  # the test's client, in the test's process

            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            body = line(call("echo", text="hi"))
            connection.request("POST", "/mcp", body, {"Content-Type": "application/json", "Mcp-Method": "tools/call",
                                                      "MCP-Protocol-Version": "2026-07-28", "Mcp-Name": "echo"})
            assert connection.getresponse().status == 200
            connection.close()
        else:
            process.stdin.write(line(call("echo", text="hi") if "git" not in argv[-1] else call("git_status")))
            process.stdin.flush()
            assert process.stdout.readline().startswith(b'{"jsonrpc"')
        time.sleep(0.05)
    finally:
        process.kill()
        _, stderr = process.communicate(timeout=10)
    return {match.group(1) for match in re.finditer(rb"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", before + stderr)}


def names(modules):
    return {m.decode() for m in modules}


def imported_by_python_dash_m():
    """What `python -m` imports for any module (runpy: on 3.9 that includes importlib.util, so typing),
    measured with the standard library's `this`: not ours to avoid."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "this"], capture_output=True, timeout=30)
    return names(match.group(1) for match in re.finditer(rb"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)",
                                                          done.stderr))


@needs_importtime
@pytest.mark.parametrize(("kind", "argv", "http"), [
    ("stdio", [DEMO], False), ("http", ["--http", "--port", "0", DEMO], True),
    pytest.param("manifest", [GIT], False, marks=pytest.mark.skipif(
        shutil.which("git") is None, reason="the manifest's tools run git, which is not on PATH here")),
])
def test_no_heavy_module_is_imported_before_the_first_answer(kind, argv, http):
    imported = names(imported_before_the_first_answer(argv, http)) - imported_by_python_dash_m()
    heavy = {module for module in HEAVY if module in imported} - ALLOWED.get(kind, set())
    assert heavy == set(), {module: HEAVY[module] for module in heavy}


def test_a_tool_author_importing_the_sdk_loads_none_of_them():
    def loaded_by(code):
        done = subprocess.run([sys.executable, "-c", code + "; print(' '.join(sys.modules))"], capture_output=True,
                              text=True, check=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server")))
        return set(done.stdout.split())

    # What the interpreter loads before any script (site, .pth files of what is installed) is not ours, nor
    # what the two standard modules the server cannot do without bring on this interpreter (PyPy's threading
    # imports traceback, and with it tokenize).
    ours = (loaded_by("import sys; import mcpserver; from mcpserver import Server")
            - loaded_by("import sys, json, threading"))
    assert {module for module in HEAVY if module in ours} == set()


@needs_importtime
def test_the_check_sees_a_heavy_import():
    # The same measure, on a command line that imports argparse (--help): it must show up.
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcpserver", "--help"], capture_output=True,
                          env=env)
    assert "argparse" in {m.group(1).decode() for m in re.finditer(rb"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)",
                                                                      done.stderr)}


def package_modules_after(code):
    done = subprocess.run([sys.executable, "-c", code + "; print(' '.join(sys.modules))"], capture_output=True,
                          text=True, check=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server")))
    return {name for name in done.stdout.split() if name.startswith("mcpserver.")}


def test_import_mcpserver_imports_no_module_until_a_name_is_asked_for():
    # The facade is lazy (PEP 562), so the command line decides how the rest is imported (below).
    assert package_modules_after("import sys, mcpserver") == set()
    assert "mcpserver._server" in package_modules_after("import sys; from mcpserver import Server")
    assert package_modules_after("import sys, mcpserver; mcpserver.PROTOCOL_VERSION") == {"mcpserver._wire"}


def test_every_public_name_is_the_one_its_module_defines():
    import mcpserver
    import mcpserver._server
    import mcpserver.content

    assert mcpserver.Server is mcpserver._server.Server and mcpserver.content is mcpserver.content
    assert set(mcpserver.__all__) <= set(dir(mcpserver))
    with pytest.raises(AttributeError, match="no attribute 'Servr'"):
        mcpserver.Servr  # noqa: B018


GC_PROBE = '''
import gc
from mcpserver import Server

server = Server("gc-probe", "1.0.0")


@server.tool()
def collector() -> str:
    """How the collector stands while the server serves."""
    frozen = gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else -1
    return f"enabled={gc.isenabled()} frozen={frozen}"
'''


def test_the_command_line_collects_again_once_started_with_start_up_kept_out_of_the_way(tmp_path):
    # Start-up runs with the collector off (what it makes lives as long as the process); serving never does.
    target = tmp_path / "gc_probe.py"
    target.write_text(GC_PROBE)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"))
    done = subprocess.run([sys.executable, "-m", "mcpserver", str(target)], input=line(call("collector")),
                          capture_output=True, env=env, timeout=60, check=True)
    text = json.loads(done.stdout.splitlines()[0])["result"]["content"][0]["text"]
    enabled, frozen = (part.split("=")[1] for part in text.split())
    assert enabled == "True", text
    if hasattr(__import__("gc"), "freeze"):
        assert int(frozen) > 1000, text  # the package, the probe's module and its registry, at least


def test_a_start_that_fails_leaves_the_collector_as_it_found_it():
    import gc

    from mcpserver.__main__ import main

    assert gc.isenabled()
    assert main(["no/such/server.py"]) == 1
    assert gc.isenabled()
    gc.disable()
    try:
        assert main(["no/such/server.py"]) == 1
        assert not gc.isenabled()  # a caller that had it off gets it back off
    finally:
        gc.enable()


# The package's wings: a server that does not use one never imports it (docs/architecture.md).
WINGS = ("mcpserver.tasks", "mcpserver.store", "mcpserver.legacy", "mcpserver.http", "mcpserver.httpd", "mcpserver.cli",
         "mcpserver.skills")
# Nor the modules of what it does not serve, or of a process it is not: each costs a start-up its lookup, its
# read and its run however small it is (about 0.4M instructions), and the demo has tools only.
UNUSED_BY_THE_DEMO = ("mcpserver._resources", "mcpserver._prompts", "mcpserver._completions", "mcpserver._command",
                      "mcpserver.content", "mcpserver._pid1", "mcpserver._pypy", "mcpserver._heartbeat",
                      "mcpserver._deadlines")


@needs_importtime
def test_a_stdio_server_answering_a_modern_call_imports_no_wing_and_nothing_it_does_not_serve():
    imported = names(imported_before_the_first_answer([DEMO]))
    assert {name for name in imported if name.startswith(WINGS)} == set()
    assert sorted(name for name in imported if name in UNUSED_BY_THE_DEMO) == []


@needs_importtime
def test_the_control_each_wing_shows_up_where_it_is_used():
    # HTTP serves through its wing (and its sessions through the legacy one's table); a legacy client's
    # initialize brings the legacy wing; a task tool's call brings the tasks wing; skills, the skills wing.
    assert "mcpserver.http" in names(imported_before_the_first_answer(["--http", "--port", "0", DEMO], http=True))
    skills = os.path.join(ROOT, "server", "examples", "skills")
    assert "mcpserver.skills" in names(imported_before_the_first_answer(["--skills", skills, DEMO]))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"))
    everything = os.path.join(ROOT, "server", "examples", "everything.py")
    initialize = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    task_call = line(call("slow_compute", seconds=0))
    for data, wing in ((initialize, "mcpserver.legacy"), (task_call, "mcpserver.tasks")):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcpserver", everything], input=data,
                              capture_output=True, env=env, timeout=60)
        imported = names(re.findall(rb"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", done.stderr))
        assert wing in imported, done.stdout
        # everything.py registers resources, templates with completions and prompts: their modules come then
        assert {"mcpserver._resources", "mcpserver._prompts", "mcpserver._completions"} <= imported
    # heartbeats (and the deadline thread) come with the first call that beats: a tool with one, and a token
    beating = call("silent", seconds=0.01)
    beating["params"]["_meta"]["progressToken"] = 1
    for data, loaded in ((line(call("silent", seconds=0.01)), False), (line(beating), True)):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcpserver",
                               os.path.join(ROOT, "tests", "heartbeat_tools.py")], input=data, capture_output=True,
                              env=env, timeout=60)
        imported = names(re.findall(rb"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", done.stderr))
        assert ("mcpserver._heartbeat" in imported) is loaded and ("mcpserver._deadlines" in imported) is loaded
