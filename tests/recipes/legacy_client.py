"""A small legacy-era client (2025-11-25, Streamable HTTP), standard library only, for docs/guides/sessions.md.

    python3 tests/recipes/legacy_client.py URL SESSIONS

Each session: initialize, notifications/initialized, tools/call delete_file (interactive.py), whose SSE
stream carries elicitation/create; the answer is POSTed on a connection of its own; the result must say
the file was deleted. Prints how many sessions got there, exits 1 unless all did.
"""

import http.client
import json
import sys
from urllib.parse import urlsplit

REVISION = "2025-11-25"


def post(url, message, session_id=None):
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session_id:
        headers.update({"Mcp-Session-Id": session_id, "MCP-Protocol-Version": REVISION})
    connection.request("POST", parts.path, body=json.dumps(message).encode(), headers=headers)
    return connection, connection.getresponse()


def one_session(url, number):
    connection, response = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": REVISION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "r", "version": "1"}}})
    session_id = response.getheader("Mcp-Session-Id")
    response.read()
    connection.close()
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},):
        connection, response = post(url, message, session_id)
        response.read()
        connection.close()
    connection, response = post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "delete_file", "arguments": {"path": f"/tmp/file-{number}"}}}, session_id)
    try:
        for raw in response:
            if not raw.startswith(b"data: ") or not raw[6:].strip():  # the stream's priming event has no data
                continue
            frame = json.loads(raw[6:])
            if frame.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": frame["id"], "result": {"action": "accept",
                                                                            "content": {"confirm": True}}}
                other, reply = post(url, answer, session_id)
                reply.read()
                other.close()
                if reply.status != 202:
                    return False
            elif frame.get("id") == 1:
                return frame["result"]["content"][0]["text"] == f"Deleted /tmp/file-{number}."
        return False
    finally:
        connection.close()


def main():
    url, sessions = sys.argv[1], int(sys.argv[2])
    done = sum(one_session(url, n) for n in range(sessions))
    print(f"{done} of {sessions} sessions: the elicitation's answer reached the waiting tool")
    return 0 if done == sessions else 1


if __name__ == "__main__":
    sys.exit(main())
