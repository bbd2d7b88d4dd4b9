"""A server whose tools misbehave on purpose, for the stdio and HTTP transport tests.

`slow` says on stderr when it starts, so a test can signal the server mid-call on evidence, not on a
guess by sleeping; `chatty` prints to stdout every way a tool can; `pid` tells worker processes apart.
"""

import os
import subprocess
import sys
import time

from mcpserver import Server

server = Server("slow-tools")


@server.tool()
def slow(seconds: float) -> str:
    sys.stderr.write("slow: started\n")
    sys.stderr.flush()
    time.sleep(seconds)
    return "slept"


@server.tool()
def chatty(text: str) -> str:
    print("python print to stdout")
    sys.stdout.write("partial line without newline")
    os.write(1, b"raw write to fd 1\n")
    subprocess.run(["echo", "child process output"], check=True)
    return text


@server.tool()
def pid() -> str:
    return str(os.getpid())


@server.tool()
def slow_pid(seconds: float) -> str:
    time.sleep(seconds)
    return str(os.getpid())
