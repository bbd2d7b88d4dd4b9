"""Tools for the fault tests (issue 50, item 4) and make soak's fault mode: the bus tests' (a resource that changes
when told, a task that waits) and the resumption tests' call that reports progress as it goes."""

import os

from mcpserver._loader import load_target

HERE = os.path.dirname(os.path.abspath(__file__))

server = load_target(os.path.join(HERE, "bus_tools.py"))
server.add_tool(load_target(os.path.join(HERE, "resume_tools.py")).tools["count"])
