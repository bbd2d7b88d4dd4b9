"""What the conformance suite's `tasks-status-notifications` scenario describes, asked of everything.py over HTTP
by hand: the pinned suite (scripts/conformance.py) runs it, but its release returns one skipped check without
connecting ("pending subscriptions/listen rewrite"), so `make conformance` reports it not exercised.

The scenario's requirements, in its own words: a server MAY emit `notifications/tasks` on the
subscriptions/listen stream; when sent, the params MUST carry `taskId` and `status`, and for terminal statuses
MAY inline the `result` or `error` (SEP-2663's DetailedTask). Here: a listen stream asking for three tasks' ids
hears each of them to its end, a completed one with its result, a failed job's isError result, a cancelled one
cancelled; each terminal notification says what tasks/get says afterwards.
"""

import json
import os

from mcptest import EXAMPLES, META, HttpServer, mcp_headers, request

EVERYTHING = os.path.join(EXAMPLES, "everything.py")
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}})
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
TERMINAL = ("completed", "failed", "cancelled")
STATUSES = ("working", "input_required", *TERMINAL)


def post(server, method, task_id=None, **params):
    message = request(method, f"{method}-{task_id or params.get('name')}", meta=WITH_TASKS, **params)
    headers = mcp_headers(message)
    if task_id is not None:
        headers["Mcp-Name"] = task_id  # tasks/* name their task (SEP-2663's routing header)
    status, _, body = server.post(message, headers=headers)
    assert status == 200, body
    return body["result"]


def start(server, name, **arguments):
    created = post(server, "tools/call", name=name, arguments=arguments)
    assert created["resultType"] == "task", created
    return created["taskId"]


def test_a_listen_stream_hears_every_task_it_asked_for_to_its_end():
    with HttpServer(EVERYTHING) as server:
        done = start(server, "slow_compute", seconds=2, label="heard")
        failing = start(server, "failing_job")
        cancelled = start(server, "slow_compute", seconds=60, label="never")
        listen = request("subscriptions/listen", "tasks", meta=WITH_TASKS,
                         notifications={"taskIds": [done, failing, cancelled, "not-a-task"]})
        connection = server.connection(timeout=30)
        connection.request("POST", server.path, body=json.dumps(listen).encode(), headers=mcp_headers(listen))
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        frames = (json.loads(line[6:]) for line in response if line.startswith(b"data: "))
        acknowledged = next(frames)
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        assert sorted(acknowledged["params"]["notifications"]["taskIds"]) == sorted([done, failing, cancelled])
        assert post(server, "tasks/cancel", cancelled, taskId=cancelled)["resultType"] == "complete"
        last = {}
        while set(last) != {done, failing, cancelled} or any(n["status"] not in TERMINAL for n in last.values()):
            note = next(frames)
            assert note["method"] == "notifications/tasks", note
            params = note["params"]
            assert params["taskId"] in (done, failing, cancelled) and params["status"] in STATUSES, note
            assert params["_meta"][SUBSCRIPTION] == "tasks" and "resultType" not in params
            assert last.get(params["taskId"], {}).get("status") not in TERMINAL, "a task heard after its end"
            last[params["taskId"]] = params
        connection.close()
        assert last[done]["status"] == "completed"
        assert last[done]["result"]["content"] == [{"type": "text", "text": "heard finished after 2 s"}]
        assert last[failing]["status"] == "completed" and last[failing]["result"]["isError"] is True
        assert last[cancelled]["status"] == "cancelled"
        for task_id, heard in last.items():  # what tasks/get says once it is over
            got = post(server, "tasks/get", task_id, taskId=task_id)
            assert (got["status"], got.get("result"), got.get("error")) == (
                heard["status"], heard.get("result"), heard.get("error")), task_id
