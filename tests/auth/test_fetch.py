"""What mcpserver.auth does when the authorization server misbehaves, over a real socket.

A standard-library HTTP server on 127.0.0.1 plays the authorization server; each path answers in
one bad way. (oidc-provider, in test_oidc_provider.py, is the well-behaved one.)
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from jose_keys import EC_JWK, sign
from mcpserver.auth import (
    MAX_DOCUMENT_BYTES,
    AuthUnavailable,
    JwtValidator,
    discover_authorization_server,
    fetch_json,
)

RESOURCE = "https://mcp.example.test/mcp"


class Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict] = {}
    hits: ClassVar[list] = []

    def do_GET(self):
        self.hits.append(self.path)
        status, body, headers = self.routes.get(self.path, (404, b"not found", {}))
        if callable(body):
            body = body()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    Handler.routes = {
        "/.well-known/oauth-authorization-server": (200, json.dumps(
            {"issuer": base, "jwks_uri": base + "/jwks"}).encode(), {}),
        "/jwks": (200, json.dumps({"keys": [EC_JWK]}).encode(), {}),
        "/redirect": (302, b"", {"Location": base + "/jwks"}),
        "/huge": (200, b'{"pad":"' + b"x" * MAX_DOCUMENT_BYTES + b'"}', {}),
        "/html": (200, b"<html>hello</html>", {}),
        "/array": (200, b"[1, 2]", {}),
        "/deep": (200, b"[" * 10_000 + b"]" * 10_000, {}),
        "/error": (500, b"oops", {}),
        "/slow": (200, lambda: time.sleep(2) or b"{}", {}),
    }
    yield base
    server.shutdown()
    server.server_close()


def test_rfc8414_metadata_is_found_first(site):
    Handler.hits.clear()
    assert discover_authorization_server(site)["jwks_uri"] == site + "/jwks"
    assert Handler.hits == ["/.well-known/oauth-authorization-server"]
    validator = JwtValidator(issuer=site, audience=RESOURCE)
    token = sign({"iss": site, "aud": RESOURCE, "exp": time.time() + 60, "sub": "s"}, kid="ec-1")
    assert validator(token).subject == "s"


@pytest.mark.parametrize(("path", "message"), [
    ("/redirect", "answered 302"),
    ("/huge", "larger than"),
    ("/html", "not JSON"),
    ("/array", "not a JSON object"),
    ("/deep", "nested deeper"),
    ("/error", "answered 500"),
    ("/missing", "answered 404"),
])
def test_bad_documents_are_503_with_the_reason(site, path, message):
    with pytest.raises(AuthUnavailable, match=message) as caught:
        fetch_json(site + path)
    assert caught.value.status == 503


def test_a_slow_server_times_out(site):
    started = time.monotonic()
    with pytest.raises(AuthUnavailable, match="could not be reached"):
        fetch_json(site + "/slow", timeout=0.3)
    assert time.monotonic() - started < 1.5


def test_nothing_listening_is_503():
    with pytest.raises(AuthUnavailable, match="could not be reached"):
        fetch_json("http://127.0.0.1:9/jwks", timeout=2)


def test_metadata_naming_another_issuer_is_refused(site):
    with pytest.raises(AuthUnavailable, match="not 'http"):
        discover_authorization_server(site + "/")  # the document says the issuer without the slash
