"""Shared by every suite. The suites need only the standard library and pytest: they run on the
host and unchanged inside every lab image, where `mcpserver` is the copy embedded in the image."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:  # the installed (or image-embedded) package wins, so the lab tests what users ship
    import mcpserver  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "server"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "server"),
                                                             os.environ.get("PYTHONPATH")]))
