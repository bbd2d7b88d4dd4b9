"""Follow one keep-alive request through the generic HTTP server and count its stops between files.

The server (mcpserver.httpd serving the MCP app for server/examples/demo.py, as `python -m mcpserver --http` does)
runs in this process, its threads under a profile hook that records each call into a file of the server's
folder (httpd/, or http/ for a tree from before issue 49). After a warm-up on one keep-alive connection, and a
pause so the worker has given the connection back to the loop, one echo request is sent, its answer read, and
the server is left a moment to re-arm for the next one; the calls of that window are the request's path. The
loop's periodic sweep is left out (it runs on a clock, not for the request).

A stop is a call into a different file than the thread's previous call, counted per thread in time order; the
first call of a thread is a stop. "Returns" are stops into a file that thread had left before.

    python bench/path_stops.py                      # this checkout's server/
    python bench/path_stops.py --server /tmp/x/server  # another tree's (e.g. a git worktree of main)
    python bench/path_stops.py --server /tmp/28a94a9/server \
        --files _accepting,_connection,_head,_loop,_poller,_pushing,_reading,_server,_working,_writing
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SETTLE_SECONDS = 0.3  # longer than the worker's keep-alive linger and the loop's re-arming, shorter than a sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.path.join(ROOT, "server"), help="the folder holding mcpserver/")
    parser.add_argument("--calls", action="store_true", help="also list every call (thread, file, function)")
    parser.add_argument("--files", metavar="NAMES", default="",
                        help="count only these files of the folder (comma-separated, e.g. the generic server's modules "
                             "of a tree where http/ also held the MCP app)")
    args = parser.parse_args()
    server_folder = os.path.abspath(args.server)
    sys.path.insert(0, server_folder)
    sys.path.insert(0, HERE)
    import clients
    from mcpserver import http as mcp_http

    httpd_folder = os.path.join(server_folder, "mcpserver", "httpd")
    if not os.path.isdir(httpd_folder):  # before issue 49 the generic server lived in http/
        httpd_folder = os.path.join(server_folder, "mcpserver", "http")
        from mcpserver.http._server import serve_app
    else:
        from mcpserver.httpd import serve_app
    prefix = httpd_folder + os.sep
    counted = {name if name.endswith(".py") else name + ".py" for name in args.files.split(",") if name}

    recording = [False]
    calls: list[tuple[int, str, str]] = []  # (thread, file, function)

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not recording[0]:
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(prefix) or (counted and os.path.basename(filename) not in counted):
            return
        outer = frame
        while outer is not None:  # the loop's sweep runs on its clock, not for this request
            if outer.f_code.co_name == "_sweep" and outer.f_code.co_filename.startswith(prefix):
                return
            outer = outer.f_back
        calls.append((threading.get_ident(), os.path.basename(filename), frame.f_code.co_name))

    app = mcp_http.create_app(os.path.join(server_folder, "examples", "demo.py"))
    bound: list[int] = []
    listening = threading.Event()

    def banner(host: str, port: int) -> None:
        bound.append(port)
        listening.set()

    threading.setprofile(hook)  # the loop thread and the workers, started from here on
    where = {"host": "127.0.0.1", "port": 0, "banner": banner}
    threading.Thread(target=serve_app, args=(app,), kwargs=where, daemon=True).start()
    if not listening.wait(30):
        raise SystemExit("the server did not start")
    client = clients.HttpClient("127.0.0.1", bound[0])
    for request_id in range(1, 21):  # warm-up, as bench/measure.py's http_sequential
        client.send(client.request_bytes(clients.echo_line(request_id)[:-1], name="echo"))
    time.sleep(SETTLE_SECONDS)
    request = client.request_bytes(clients.echo_line(100)[:-1], name="echo")
    recording[0] = True
    response = client.send(request)
    time.sleep(SETTLE_SECONDS)
    recording[0] = False
    client.close()
    if response.status != 200:
        raise SystemExit(f"the request was answered {response.status}")
    report(calls, args.calls)
    return 0


def report(calls: list[tuple[int, str, str]], listed: bool) -> None:
    threads: dict[int, list[tuple[str, str]]] = {}
    for thread, filename, function in calls:
        threads.setdefault(thread, []).append((filename, function))
    total_stops = total_returns = 0
    files = {filename for _, filename, _ in calls}
    for number, (_, thread_calls) in enumerate(threads.items(), start=1):
        stops: list[str] = []
        left: set[str] = set()
        returns = 0
        for filename, _ in thread_calls:
            if stops and stops[-1] == filename:
                continue
            if stops:
                left.add(stops[-1])
            if filename in left:
                returns += 1
            stops.append(filename)
        total_stops += len(stops)
        total_returns += returns
        print(f"thread {number} (first call {thread_calls[0][1]}): {len(thread_calls)} calls, {len(stops)} stops, "
              f"{returns} returns: {' > '.join(name[:-3] for name in stops)}")
        if listed:
            for filename, function in thread_calls:
                print(f"    {filename}:{function}")
    print(f"total: {len(calls)} calls, {len(files)} files, {total_stops} stops, {total_returns} returns to a file left")


if __name__ == "__main__":
    sys.exit(main())
