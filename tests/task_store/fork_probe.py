"""A fork at any moment (issue 50, item 3): `python fork_probe.py STORE METRICS_DIR` builds the WSGI app gunicorn's
master builds under --preload (a task store, the bus, metrics in a directory, legacy sessions, sealed state), warms
it with the requests a worker serves, then finds every lock the package holds: each lock, condition and semaphore
reachable from the app and from the package's modules. For each in turn, another thread takes it (a semaphore: every
permit), the process forks, and the child serves the same requests again, as a freshly forked worker does: it must
answer them all within CHILD_SECONDS. A lock the child inherited held, and never re-made, hangs it there.

Prints one line per lock ("ok" or what hung) and exits 1 if any child hung or failed."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "server"), os.path.join(ROOT, "tests")]

CHILD_SECONDS = 10
LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))
WAITABLE = (threading.Condition, threading.Semaphore)  # BoundedSemaphore is a Semaphore
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {
    "extensions": {"io.modelcontextprotocol/tasks": {}}}}


def wsgi(app, method, body=None, headers=None, path="/mcp"):
    data = json.dumps(body).encode() if body is not None else b""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
               "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1", "wsgi.input": io.BytesIO(data),
               "CONTENT_LENGTH": str(len(data)), "CONTENT_TYPE": "application/json", "wsgi.url_scheme": "http",
               "HTTP_ACCEPT": "application/json, text/event-stream"}
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answer = {}
    chunks = app(environ, lambda status, sent, exc_info=None: answer.update(status=status, headers=dict(sent)))
    payload = b"".join(chunks)
    if hasattr(chunks, "close"):
        chunks.close()
    return answer["status"], answer["headers"], payload


def modern(app, method, named=None, **params):
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if named is not None:
        headers["Mcp-Name"] = named
    status, _, payload = wsgi(app, "POST", message, headers)
    assert status.startswith("200"), (status, payload)
    return json.loads(payload)["result"]


def serve_a_worker_s_requests(app):
    """What a worker answers: a plain call (a change on the bus), a task to its end, a legacy session, metrics."""
    assert modern(app, "tools/call", "touch", name="touch", arguments={"uri": "res://x"})["content"]
    task_id = modern(app, "tools/call", "wait", name="wait", arguments={"seconds": 0})["taskId"]
    deadline = time.monotonic() + CHILD_SECONDS
    while modern(app, "tasks/get", task_id, taskId=task_id)["status"] == "working":
        assert time.monotonic() < deadline, "the task never finished"
        time.sleep(0.01)
    status, headers, _ = wsgi(app, "POST", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
    assert status.startswith("200"), status
    session = {"Mcp-Session-Id": headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-06-18"}
    wsgi(app, "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    status, _, payload = wsgi(app, "POST", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session)
    assert status.startswith("200") and b"touch" in payload, (status, payload)
    status, _, payload = wsgi(app, "GET", path="/metrics")
    assert status.startswith("200") and b"mcpserver_requests_total" in payload, (status, payload[:200])
    status, _, payload = wsgi(app, "GET", path="/readyz")
    assert status.startswith("200"), (status, payload)


def locks(app):
    """(where, lock) for every lock, condition and semaphore reachable from the app and the package's modules."""
    found, seen = [], set()
    start = [(f"module {name}", module) for name, module in sorted(sys.modules.items())
             if name == "mcpserver" or name.startswith("mcpserver.")] + [("app", app)]
    queue = list(start)
    while queue:
        where, thing = queue.pop()
        if id(thing) in seen:
            continue
        seen.add(id(thing))
        if isinstance(thing, LOCK_TYPES + WAITABLE):
            found.append((where, thing))
            continue
        if isinstance(thing, types.ModuleType):
            children = vars(thing).items()
        elif isinstance(thing, dict):
            children = [(repr(key)[:40], value) for key, value in thing.items()]
        elif isinstance(thing, (list, tuple, set, frozenset)):
            children = [(f"[{index}]", value) for index, value in enumerate(thing)]
        elif isinstance(thing, threading.Thread):  # its own locks are the thread's, which the child never has
            continue
        elif isinstance(thing, threading.Event):
            children = [("_cond", thing._cond)]
        elif isinstance(thing, type):  # a class of the package: its class attributes (a lock kept there)
            children = [(name, value) for name, value in vars(thing).items() if not name.startswith("__")]
        elif type(thing).__module__.startswith("mcpserver") or isinstance(thing, types.MethodType):
            attributes = dict(getattr(thing, "__dict__", {}))
            for slot in getattr(type(thing), "__slots__", ()):
                if hasattr(thing, slot):
                    attributes[slot] = getattr(thing, slot)
            if isinstance(thing, types.MethodType):
                attributes = {"__self__": thing.__self__}
            children = attributes.items()
        elif isinstance(thing, types.FunctionType) and thing.__closure__:
            children = [(f"closure {name}", cell.cell_contents) for name, cell in
                        zip(thing.__code__.co_freevars, thing.__closure__) if cell.cell_contents is not None]
        else:
            continue
        for name, child in children:
            if isinstance(child, (str, bytes, int, float, bool, type(None))):
                continue
            if isinstance(child, type) and not child.__module__.startswith("mcpserver"):
                continue
            if isinstance(child, types.ModuleType) and not child.__name__.startswith("mcpserver"):
                continue
            queue.append((f"{where}.{name}", child))
    return found


def hold(lock, taken, release):
    """Take `lock` (a semaphore: every permit) until `release` is set."""
    if isinstance(lock, threading.Semaphore):
        permits = 0
        while lock.acquire(blocking=False):
            permits += 1
        taken.set()
        release.wait()
        for _ in range(permits):
            lock.release()
        return
    lock.acquire()
    taken.set()
    release.wait()
    lock.release()


def fork_while_held(app, where, lock):
    taken, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold, args=(lock, taken, release), daemon=True)
    holder.start()
    if not taken.wait(5):  # held by the package itself right now: try it as it comes
        release.set()
        return f"{where}: busy (never free for 5 s)"
    child = os.fork()
    if child == 0:
        signal.alarm(CHILD_SECONDS)  # SIGALRM's default action: the child dies of it, and the parent says so
        try:
            serve_a_worker_s_requests(app)
        except BaseException as exc:  # reported by the exit status; the detail on stderr
            print(f"child at {where}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            os._exit(2)
        os._exit(0)
    release.set()
    holder.join(5)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        return f"{where}: the child hung ({CHILD_SECONDS} s) on the {type(lock).__name__} held at the fork"
    if os.waitstatus_to_exitcode(status) != 0:
        return f"{where}: the child failed (status {os.waitstatus_to_exitcode(status)})"
    return ""


def main():
    """`fork_probe.py STORE METRICS_DIR [SEED]`: with SEED, one lock drawn from them (make soak's fault mode)."""
    from mcpserver.http import create_app

    store, metrics_dir = sys.argv[1:3]
    app = create_app(os.path.join(ROOT, "tests", "fault_tools.py"), task_store=store, metrics=True,
                     metrics_dir=metrics_dir, public_metrics=True, health=True, rate_limit="1000/s")
    serve_a_worker_s_requests(app)
    found = locks(app)
    if len(sys.argv) > 3:
        import random

        found = [random.Random(int(sys.argv[3])).choice(found)]
    failures = []
    for where, lock in found:
        failure = fork_while_held(app, where, lock)
        print(failure or f"{where}: ok", flush=True)
        if failure and "busy" not in failure:
            failures.append(failure)
    print(f"forked while each of {len(found)} locks was held: {len(failures)} children hung or failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
