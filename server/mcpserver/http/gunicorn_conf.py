"""gunicorn settings that mcpserver's WSGI app wants from gunicorn's master:

    gunicorn -c python:mcpserver.http.gunicorn_conf -w 4 'mcpserver.http:create_app("server.py")'

or, from a config file of your own, `from mcpserver.http.gunicorn_conf import on_starting`.

on_starting makes the master's signal queue safe on PyPy, where gunicorn's master can otherwise hang for ever on a
signal (mcpserver.http._host says why). With --preload the app does this itself, so the hook matters only without
it; on CPython it changes nothing.
"""

from __future__ import annotations

from typing import Any

from ._host import mend_master


def on_starting(server: Any) -> None:
    """gunicorn's hook, in the master before it starts its workers."""
    if mend_master(server):
        server.log.info("mcpserver: gunicorn's signal queue replaced by one a signal handler cannot hang")
