"""A stand-in OAuth authorization server on 127.0.0.1, for the benchmark's OAuth run (issue 18).

    python bench/auth_server.py [PORT]   # prints "auth: issuer http://127.0.0.1:PORT" on stderr

It serves what a resource server needs from its issuer: the RFC 8414 metadata
(/.well-known/oauth-authorization-server: issuer and jwks_uri) and the key set (/jwks: the RFC 7515
appendix A public keys, RSA_JWK and EC_JWK). It also issues the benchmark's tokens, signed with those
keys by tests/jose_keys.py: `GET /token?alg=RS256&audience=URL&count=N` answers {"tokens": [...]}, N
JWT access tokens for that audience with scope "mcp:read", an hour to live and a distinct jti each (so
each is new to a resource server's cache). Every request is logged to stderr: the log shows how often
the resource server fetched the metadata and the keys.

The tests use a real, certified authorization server (tests/auth); the benchmark needs only the two
documents and the signer, and nothing that costs CPU while mcpserver is measured.
"""

import json
import os
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # mcpserver itself comes from PYTHONPATH, as for every system

from ceiling_http import Server  # noqa: E402  (the bare ceiling's server: threaded, no FQDN lookup)
from jose_keys import EC_JWK, RSA_JWK, sign  # noqa: E402

KIDS = {"RS256": RSA_JWK["kid"], "ES256": EC_JWK["kid"]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        if url.path == "/.well-known/oauth-authorization-server":
            self._json({"issuer": issuer, "jwks_uri": f"{issuer}/jwks", "scopes_supported": ["mcp:read"]})
        elif url.path == "/jwks":
            self._json({"keys": [RSA_JWK, EC_JWK]})
        elif url.path == "/token":
            query = dict(urllib.parse.parse_qsl(url.query))
            alg = query.get("alg", "RS256")
            if alg not in KIDS or "audience" not in query:
                self._json({"error": "invalid_request"}, 400)
                return
            now = int(time.time())
            tokens = [sign({"iss": issuer, "aud": query["audience"], "sub": "bench", "client_id": "bench",
                            "scope": "mcp:read", "iat": now, "exp": now + 3600, "jti": f"{alg}-{now}-{i}"},
                           alg=alg, kid=KIDS[alg])
                      for i in range(int(query.get("count", "1")))]
            self._json({"tokens": tokens})
        else:
            self._json({"error": "not_found"}, 404)

    def _json(self, document: dict, status: int = 200) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"auth: {format % args}\n")
        sys.stderr.flush()


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    httpd = Server(("127.0.0.1", port), Handler)
    print(f"auth: issuer http://127.0.0.1:{httpd.server_address[1]}", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
