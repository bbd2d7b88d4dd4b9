"""/healthz and /readyz (--health, create_app(health=True)): no token, GET only, not in the access log unless asked,
readiness read from a background check; under gunicorn the app answers them itself. The task store's and the
authorization server's parts: tests/task_store/test_readiness.py and tests/http/test_http_oauth.py."""

import os
import time

import pytest
from mcptest import (
    DEMO,
    EXAMPLES,
    GUNICORN_MISSING,
    HAS_GUNICORN,
    HAS_SQLITE,
    SQLITE_MISSING,
    HttpServer,
    call,
    gunicorn_server,
)

JOBS = os.path.join(EXAMPLES, "jobs.py")


def probe(server, path, method="GET"):
    status, headers, body = server.post(method=method, path=path, headers={}, body=b"" if method == "POST" else None)
    return status, headers, body


def ready_soon(server, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        status, _, body = probe(server, "/readyz")
        if status == 200 or time.monotonic() > deadline:
            return status, body
        time.sleep(0.05)


def test_both_answer_without_a_token_and_say_nothing_else(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    # A Python built without SQLite (the lab's musl cell): the memory store is checked instead.
    store = ["--task-store", str(tmp_path / "tasks.db")] if HAS_SQLITE else []
    with HttpServer(JOBS, "--health", "--token-file", str(token), *store) as server:
        assert probe(server, "/healthz")[0::2] == (200, b"ok\n")
        assert ready_soon(server) == (200, b"ready\n")
        status, headers, body = probe(server, "/readyz", "HEAD")
        assert (status, body, headers["content-length"]) == (200, b"", "6")
        status, headers, _ = probe(server, "/healthz", "POST")
        assert status == 405 and headers["allow"] == "GET, HEAD"
        assert server.post(call("migrate", tables=1))[0] == 401  # the endpoint still needs its token
        server.stop()
    assert "/healthz" not in server.stderr and "/readyz" not in server.stderr  # probes are not clients
    assert '"POST /mcp" 401' in server.stderr  # ... while the access log is on


def test_log_health_puts_them_in_the_access_log():
    with HttpServer(DEMO, "--log-health") as server:
        assert probe(server, "/healthz")[0] == 200
        ready_soon(server)
        server.stop()
    assert '"GET /healthz" 200' in server.stderr and '"GET /readyz" 200' in server.stderr


def test_without_health_they_are_the_endpoints_404():
    with HttpServer(DEMO) as server:
        assert probe(server, "/healthz")[0] == 404 and probe(server, "/readyz")[0] == 404


@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
@pytest.mark.skipif(not HAS_SQLITE, reason=SQLITE_MISSING)  # its readiness follows an SQLite task store
def test_under_gunicorn_the_app_answers_them(tmp_path):
    app = f'mcpserver.http:create_app("{JOBS}", health=True, task_store="{tmp_path / "tasks.db"}")'
    with gunicorn_server(app, "-w", "2") as server:
        assert probe(server, "/healthz")[0::2] == (200, b"ok\n")
        assert ready_soon(server) == (200, b"ready\n")
