"""What `make soak` serves: the demo's tools (echo for 500 KB payloads up, big for 5 MB down) and the
long-running example's (count reports progress and stops when cancelled; countdown is a command tool)."""

import os

from mcpserver import Server
from mcpserver._loader import load_target

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "server", "examples")

server = Server("soak", "1.0.0")
for _example in ("demo.py", "long_running.py"):
    for _tool in load_target(os.path.join(EXAMPLES, _example)).tools.values():
        server.add_tool(_tool)
