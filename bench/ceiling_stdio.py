"""The bare-stdlib ceiling over stdio: the least a Python process can do to answer an MCP tools/call.

A plain line loop: json.loads, a dict, json.dumps, write, flush. It checks nothing and knows two tools
(echo and big), so no real server can be faster on the same interpreter; the benchmark divides by it.

    python bench/ceiling_stdio.py < requests.jsonl
"""

import json
import sys


def serve(stdin, out):  # no annotations: importing typing would slow the start
    for line in stdin:
        message = json.loads(line)
        params = message["params"]
        arguments = params["arguments"]
        text = "x" * arguments["size"] if params["name"] == "big" else arguments["text"]
        response = {"jsonrpc": "2.0", "id": message["id"],
                    "result": {"content": [{"type": "text", "text": text}]}}
        out.write(json.dumps(response, separators=(",", ":")).encode() + b"\n")
        out.flush()


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
