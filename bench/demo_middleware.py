"""demo.py with one middleware that only passes each request on: what `make bench-compare` counts as the cost of
the seam when something uses it (python bench/compare.py --candidate-target bench/demo_middleware.py)."""

import os
import runpy

server = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server", "examples",
                                     "demo.py"))["server"]


@server.middleware
def passing(call, proceed):
    return proceed()
