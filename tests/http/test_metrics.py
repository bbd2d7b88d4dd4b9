"""GET /metrics (--metrics, create_app(metrics=True)): what it counts, read with prometheus_client's own parser;
who may read it; a real Prometheus server scraping it; gunicorn's two workers answering for each other."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
from mcptest import (
    DEMO,
    EXAMPLES,
    GUNICORN_MISSING,
    HAS_GUNICORN,
    HAS_SQLITE,
    META,
    SLOW_TOOLS,
    SQLITE_MISSING,
    HttpServer,
    call,
    free_port,
    gunicorn_server,
    mcp_headers,
    request,
)

# Prometheus's own parser reads what we write: the test extra has it (`make test`); lab images carry none of it.
text_string_to_metric_families = pytest.importorskip(
    "prometheus_client.parser", reason="prometheus_client (Prometheus's own parser) is in the test extra; "
    "pip install prometheus_client").text_string_to_metric_families

NOTES = os.path.join(EXAMPLES, "notes.py")
JOBS = os.path.join(EXAMPLES, "jobs.py")
LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def scrape(server, headers=None):
    status, received, body = server.post(method="GET", path="/metrics", headers=headers or {})
    assert status == 200, (status, body)
    assert received["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {family.name: family for family in text_string_to_metric_families(body.decode())}


def value(families, family, sample=None, **labels):
    """The one sample of `family` (its `sample` name; the family's own by default) with these labels; 0 if none."""
    found = [s.value for s in families[family].samples if s.name == (sample or family) and
             all(s.labels.get(k) == v for k, v in labels.items())] if family in families else []
    assert len(found) <= 1, found
    return found[0] if found else 0


def requests_total(families, **labels):
    return sum(s.value for s in families.get("mcpserver_requests", ()).samples if s.name == "mcpserver_requests_total"
               and all(s.labels.get(k) == v for k, v in labels.items())) if "mcpserver_requests" in families else 0


def test_requests_are_counted_by_method_outcome_and_era_and_timed():
    with HttpServer(DEMO, "--metrics") as server:
        assert server.post(call("echo", text="hi"))[0] == 200
        assert server.post(call("echo", text="again"))[0] == 200
        assert server.post(call("echo"))[2]["result"]["isError"] is True  # missing argument: the tool's error
        assert "error" in server.post(call("no_such_tool"))[2]  # an unknown tool: the JSON-RPC error -32602
        assert server.post(request("tools/list"))[0] == 200
        _, headers, _ = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
            headers=LEGACY)
        session = {**LEGACY, "Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        assert server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=session)[0] == 200
        families = scrape(server)
    assert value(families, "mcpserver_requests", "mcpserver_requests_total", method="tools/call", outcome="ok",
                 era="2026-07-28") == 2
    assert value(families, "mcpserver_requests", "mcpserver_requests_total", method="tools/call",
                 outcome="tool_error", era="2026-07-28") == 1
    assert value(families, "mcpserver_requests", "mcpserver_requests_total", method="tools/call", outcome="error",
                 era="2026-07-28") == 1
    assert value(families, "mcpserver_requests", "mcpserver_requests_total", method="tools/list", outcome="ok",
                 era="2025-06-18") == 1
    assert value(families, "mcpserver_request_duration_seconds", "mcpserver_request_duration_seconds_count",
                 method="tools/call") == 4
    assert value(families, "mcpserver_request_duration_seconds", "mcpserver_request_duration_seconds_bucket",
                 method="tools/call", le="+Inf") == 4
    assert value(families, "mcpserver_legacy_sessions_opened", "mcpserver_legacy_sessions_opened_total") == 1
    assert value(families, "process_resident_memory_bytes") > 1_000_000
    assert value(families, "process_threads") >= 1 and value(families, "process_open_fds") >= 3


def test_refusals_are_counted_by_status_where_the_app_refuses(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with HttpServer(NOTES, "--metrics", "--token-file", str(token), "--max-listeners-per-peer", "1") as server:
        good = {"Authorization": "Bearer s3cret"}
        assert server.post(call("echo"), headers={"Content-Type": "application/json"})[0] == 401
        assert server.post(call("echo"), headers={"Content-Type": "application/json",
                                                  "Authorization": "Bearer wrong"})[0] == 401
        listen = request("subscriptions/listen", "l1", notifications={"toolsListChanged": True})
        first = server.connection()
        first.request("POST", server.path, body=json.dumps(listen).encode(), headers={**mcp_headers(listen), **good})
        assert first.getresponse().status == 200  # open, and held open while the second is refused
        listen2 = request("subscriptions/listen", "l2", notifications={"toolsListChanged": True})
        assert server.post(listen2, headers={**mcp_headers(listen2), **good})[0] == 503
        families = scrape(server, good)
        assert value(families, "mcpserver_listen_streams") == 1
        first.close()
    assert value(families, "mcpserver_http_refusals", "mcpserver_http_refusals_total", status="401") == 2
    assert value(families, "mcpserver_http_refusals", "mcpserver_http_refusals_total", status="503") == 1


def test_calls_in_flight_are_read_when_scraped():
    with HttpServer(SLOW_TOOLS, "--metrics") as server:
        caller = threading.Thread(target=server.post, args=(call("slow", seconds=3),))
        caller.start()
        deadline = time.monotonic() + 20
        while value(scrape(server), "mcpserver_requests_in_flight") != 1:
            assert time.monotonic() < deadline, "the slow call never showed as in flight"
            time.sleep(0.05)
        caller.join()
        assert value(scrape(server), "mcpserver_requests_in_flight") == 0


@pytest.mark.skipif(not HAS_SQLITE, reason=SQLITE_MISSING)
def test_tasks_are_counted_by_status_from_the_store(tmp_path):
    store = str(tmp_path / "tasks.db")
    with HttpServer(JOBS, "--metrics", "--task-store", store) as server:
        families = scrape(server)
        assert {s.labels["status"]: s.value for s in families["mcpserver_tasks"].samples} == {
            "working": 0, "input_required": 0, "completed": 0, "failed": 0, "cancelled": 0}
        meta = {**META, "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}}}
        created = server.post(request("tools/call", 7, meta=meta, name="backup", arguments={"seconds": 1}))[2]
        assert created["result"]["resultType"] == "task", created
        deadline = time.monotonic() + 20
        while value(scrape(server), "mcpserver_tasks", status="completed") != 1:
            assert time.monotonic() < deadline, "the task never showed as completed"
            time.sleep(0.1)


def test_metrics_need_the_endpoints_token_unless_public_and_are_absent_unless_asked(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with HttpServer(DEMO, "--metrics", "--token-file", str(token)) as server:
        assert server.post(method="GET", path="/metrics", headers={})[0] == 401
        assert server.post(method="GET", path="/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert "mcpserver_http_refusals" in scrape(server, {"Authorization": "Bearer s3cret"})
        good = {"Authorization": "Bearer s3cret"}
        assert server.post(method="POST", path="/metrics", body=b"", headers=good)[0] == 405
    with HttpServer(DEMO, "--public-metrics", "--token-file", str(token)) as server:
        assert "process_threads" in scrape(server)
    with HttpServer(DEMO) as server:
        assert server.post(method="GET", path="/metrics", headers={})[0] == 404


# --- a real Prometheus server --------------------------------------------------------------------------------------

def prometheus_binary():
    """Debian's prometheus, installed on first use (the package's own service is stopped: the test runs its own)."""
    found = shutil.which("prometheus")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("no prometheus on PATH, and apt-get cannot install it here (not root, or not Debian)")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"]
    if subprocess.run(install, env=environment, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=environment, capture_output=True)
        done = subprocess.run(install, env=environment, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"apt-get could not install prometheus: {done.stderr.strip()[-300:]}")
    subprocess.run(["service", "prometheus", "stop"], capture_output=True)
    return shutil.which("prometheus") or "/usr/bin/prometheus"


def query(port, expression):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.mark.host_only("runs a real Prometheus server, which apt-get installs as root: the lab's images have none")
def test_a_real_prometheus_scrapes_it_with_the_token_and_answers_a_query(tmp_path):
    binary = prometheus_binary()
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with HttpServer(DEMO, "--metrics", "--token-file", str(token)) as server:
        message = call("echo", text="hi")
        for _ in range(3):
            assert server.post(message, headers={**mcp_headers(message), "Authorization": "Bearer s3cret"})[0] == 200
        config = tmp_path / "prometheus.yml"
        config.write_text(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: mcpserver
    authorization:
      credentials_file: {token}
    static_configs:
      - targets: ["127.0.0.1:{server.port}"]
""")
        port = free_port()
        logged = tmp_path / "prometheus.log"
        with open(logged, "wb") as log:
            prometheus = subprocess.Popen([binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
                                           f"--storage.tsdb.path={tmp_path / 'data'}"], stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 90
            found = []
            while not found:
                assert prometheus.poll() is None, logged.read_text()[-2000:]
                assert time.monotonic() < deadline, "Prometheus never stored the series"
                time.sleep(0.5)
                try:
                    found = query(port, 'mcpserver_requests_total{method="tools/call",outcome="ok"}')
                except OSError:  # not listening yet
                    continue
            assert found[0]["metric"]["job"] == "mcpserver" and float(found[0]["value"][1]) == 3
            assert query(port, 'up{job="mcpserver"}')[0]["value"][1] == "1"
        finally:
            prometheus.terminate()
            prometheus.wait(20)


# --- gunicorn's workers ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
def test_under_gunicorn_any_worker_answers_for_both(tmp_path):
    directory = tmp_path / "metrics"
    directory.mkdir()
    app = f'mcpserver.http:create_app("{SLOW_TOOLS}", metrics=True)'
    with gunicorn_server(app, "-w", "2", env={"MCPSERVER_METRICS_DIR": str(directory)}) as server:
        pids, calls = set(), 0
        deadline = time.monotonic() + 30
        while len(pids) < 2 or calls < 20:  # each request on a new connection: the workers take them at random
            assert time.monotonic() < deadline, f"one worker served every request: {pids}"
            pids.add(server.post(call("pid"))[2]["result"]["content"][0]["text"])
            calls += 1
        deadline = time.monotonic() + 20
        while True:  # a worker's figures reach the others within a second
            totals = []
            for _ in range(6):
                families = scrape(server)
                totals.append(requests_total(families, method="tools/call"))
            if totals == [calls] * 6:
                break
            assert time.monotonic() < deadline, f"scrapes disagree with the {calls} calls: {totals}"
            time.sleep(0.3)
        per_process = {s.labels["pid"] for s in families["process_resident_memory_bytes"].samples}
        assert per_process == pids and len(pids) == 2
        assert value(families, "mcpserver_request_duration_seconds", "mcpserver_request_duration_seconds_count",
                     method="tools/call") == calls
        assert sorted(os.listdir(directory)) == sorted(f"{pid}.json" for pid in pids)


def test_a_metrics_directory_that_cannot_be_written_is_refused_at_start(tmp_path):
    from mcpserver.errors import ConfigError
    from mcpserver.http import create_app

    with pytest.raises(ConfigError, match="not a directory"):
        create_app(DEMO, metrics=True, metrics_dir=str(tmp_path / "missing"))


def test_a_worker_that_exits_keeps_its_counts_and_loses_its_gauges(tmp_path):
    """Counters never go backwards when gunicorn replaces a worker (its max_requests); its gauges leave with it."""
    from mcpserver import Server
    from mcpserver.http import create_app

    script = ("from mcpserver.http import create_app\n"
              f"app = create_app({DEMO!r}, metrics_dir={str(tmp_path)!r})\n"
              "app.metrics.refused('401')\n")
    subprocess.run([sys.executable, "-c", script], check=True)
    assert len(os.listdir(tmp_path)) == 1  # written when it exited
    app = create_app(Server("here", "1.0.0"), metrics_dir=str(tmp_path))
    families = {f.name: f for f in text_string_to_metric_families(app.metrics.render().decode())}
    assert value(families, "mcpserver_http_refusals", "mcpserver_http_refusals_total", status="401") == 1
    assert {s.labels["pid"] for s in families["process_threads"].samples} == {str(os.getpid())}


# --- OpenTelemetry's MCP conventions, in Prometheus's form -------------------------------------------------------

OPERATION = "mcp_server_operation_duration_seconds"
CONVENTION_BUCKETS = ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1.0", "2.0", "5.0", "10.0", "30.0", "60.0",
                      "120.0", "300.0", "+Inf"]  # semantic-conventions v1.41.1, docs/gen-ai/mcp.md


def operations(families):
    """mcp.server.operation.duration's series: {labels without le: count}, and every series' buckets."""
    samples = families[OPERATION].samples
    counts = {tuple(sorted(s.labels.items())): s.value for s in samples if s.name == OPERATION + "_count"}
    buckets = {}
    for s in samples:
        if s.name == OPERATION + "_bucket":
            buckets.setdefault(tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")), []).append(
                s.labels["le"])
    return counts, buckets


def test_the_conventions_histogram_has_their_name_buckets_and_attributes_beside_our_own_series():
    with HttpServer(DEMO, "--metrics") as server:
        assert server.post(call("echo", text="hi"))[0] == 200
        assert server.post(call("echo"))[2]["result"]["isError"] is True
        assert "error" in server.post(call("no_such_tool"))[2]
        assert server.post(request("tools/list"))[0] == 200
        _, headers, _ = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
            headers=LEGACY)
        session = {**LEGACY, "Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        assert server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"text": "old"}}}, headers=session)[0] == 200
        families = scrape(server)
    assert families[OPERATION].type == "histogram"
    counts, buckets = operations(families)
    modern = (("mcp_protocol_version", "2026-07-28"), ("network_transport", "tcp"))
    call_of = (("gen_ai_operation_name", "execute_tool"), ("mcp_method_name", "tools/call"))
    expected = {
        tuple(sorted((*call_of, ("gen_ai_tool_name", "echo"), *modern))): 1,
        tuple(sorted((*call_of, ("gen_ai_tool_name", "echo"), ("error_type", "tool_error"), *modern))): 1,
        tuple(sorted((*call_of, ("gen_ai_tool_name", "_OTHER"), ("error_type", "-32602"),
                      ("rpc_response_status_code", "-32602"), *modern))): 1,
        tuple(sorted((("mcp_method_name", "tools/list"), *modern))): 1,
        tuple(sorted((*call_of, ("gen_ai_tool_name", "echo"), ("mcp_protocol_version", "2025-06-18"),
                      ("network_transport", "tcp")))): 1,
    }
    assert {labels: count for labels, count in counts.items() if ("mcp_method_name", "initialize") not in labels} \
        == expected
    assert all(found == CONVENTION_BUCKETS for found in buckets.values())
    assert value(families, "mcpserver_request_duration_seconds", "mcpserver_request_duration_seconds_count",
                 method="tools/call") == 4  # the mcpserver_* series stay, as they were


def test_made_up_tool_names_never_make_a_series_of_their_own():
    with HttpServer(DEMO, "--metrics") as server:
        for number in range(300):
            server.post(call(f"made_up_{number}"))
        server.post(call("echo", text="x"))
        families = scrape(server)
    names = {s.labels.get("gen_ai_tool_name") for s in families[OPERATION].samples} - {None}
    assert names == {"_OTHER", "echo"}
    assert len(families[OPERATION].samples) < 60  # a handful of series, not one per name


def test_on_a_unix_socket_the_network_transport_is_unix():
    import tempfile

    directory = tempfile.mkdtemp(prefix="mcpm")
    try:
        with HttpServer(DEMO, "--metrics", unix=os.path.join(directory, "m.sock")) as server:
            server.post(call("echo", text="x"))
            families = scrape(server)
        assert {s.labels["network_transport"] for s in families[OPERATION].samples} == {"unix"}
    finally:
        shutil.rmtree(directory)
