"""A WSGI app over a task store, for gunicorn: POST `[operation, [arguments], {keywords}]`, get the
store's answer and the worker's pid back. The store opens at import, so under `--preload` it is opened
in gunicorn's master and inherited by every forked worker, as create_app(task_store=...) will be."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))

from mcpserver.tasks import Tasks, open_task_store
from task_store_worker import run

store = Tasks(open_task_store(os.environ["MCPSERVER_TEST_TASK_STORE"]))


def app(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    operation, arguments, keywords = json.loads(environ["wsgi.input"].read(length))
    body = json.dumps(run(store, operation, arguments, keywords)).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
