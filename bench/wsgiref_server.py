"""Reference only: our WSGI app (mcpserver.http.McpApp) under the plain wsgiref.simple_server.

wsgiref serves one request at a time over HTTP/1.0 (a new connection per request); it shows what the
app costs under the most basic WSGI server. Our default server is mcpserver.http.serve.

    PYTHONPATH=server python bench/wsgiref_server.py server/examples/demo.py PORT
"""

import sys
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from mcpserver.http import create_app


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log, as for every server here
        pass


def main() -> None:
    app = create_app(sys.argv[1])
    httpd = make_server("127.0.0.1", int(sys.argv[2]), app, handler_class=QuietHandler)
    print(f"wsgiref: serving at http://127.0.0.1:{httpd.server_address[1]}/mcp", file=sys.stderr, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
