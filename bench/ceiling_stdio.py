"""The bare-stdlib ceiling over stdio: the least a Python process can do to answer an MCP tools/call.

A plain line loop: json.loads, a dict, json.dumps, write, flush. It checks nothing and knows two tools
(echo and big), so no real server can be faster on the same interpreter; the benchmark divides by it.

    python bench/ceiling_stdio.py < requests.jsonl
    python bench/ceiling_stdio.py --imports argparse,inspect,... < requests.jsonl

With --imports it first imports the standard-library modules named (the driver passes those that
mcpserver's own start-up imports), to show how much of mcpserver's cold start is the standard
library's import time rather than mcpserver's own work.
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
    if len(sys.argv) == 3 and sys.argv[1] == "--imports":
        for name in sys.argv[2].split(","):
            __import__(name)
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
