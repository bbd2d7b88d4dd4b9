"""The bare-stdlib ceiling over HTTP: a ThreadingHTTPServer whose POST handler does the least it can.

HTTP/1.1 keep-alive and TCP_NODELAY (without it every keep-alive request stalls ~40 ms, see DESIGN.md),
then json.loads, a dict, json.dumps, one response. No header checks, no limits, no logging.

    python bench/ceiling_http.py [PORT]     # prints "ceiling: serving at http://127.0.0.1:PORT/mcp" on stderr
"""

import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        params = message["params"]
        arguments = params["arguments"]
        text = "x" * arguments["size"] if params["name"] == "big" else arguments["text"]
        response = {"jsonrpc": "2.0", "id": message["id"],
                    "result": {"content": [{"type": "text", "text": text}]}}
        body = json.dumps(response, separators=(",", ":")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def server_bind(self) -> None:  # skip HTTPServer's FQDN lookup
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    httpd = Server(("127.0.0.1", port), Handler)
    print(f"ceiling: serving at http://127.0.0.1:{httpd.server_address[1]}/mcp", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
