#!/usr/bin/env python3
"""The cost of bearer-token checks in mcpserver.auth, in process (no HTTP).

    python bench/auth_verify.py              # median and best of 7 rounds, per operation
    python bench/auth_verify.py --rounds 15
    python bench/auth_verify.py --json       # for bench/run.py, which puts the figures into the report

Rows: one JWT validation without any cache (parse, verify the signature, check the claims) for RS256
and ES256; the one-time work an ES256 key costs (its precomputed table); an Authenticator cache hit
(what every request with a known token pays); a static token; and, for scale, the single
hmac.compare_digest that the transport does for a static token. Then one whole echo call through
mcpserver's WSGI app (no socket, no HTTP parsing) with a static token, and with each JWT once cached:
what the OAuth path adds per request, all of it. Tokens are signed with the RFC 7515 appendix A keys.
The rows are timed in interleaved rounds, so a change in the machine's load hits them alike.
"""

import argparse
import hmac
import io
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# mcpserver from server/, unless PYTHONPATH says where (bench/run.py --server-dir measures another checkout)
sys.path[:0] = ([] if os.environ.get("PYTHONPATH") else [os.path.join(ROOT, "server")]) + [os.path.join(ROOT, "tests")]

from jose_keys import EC_JWK, RSA_JWK, sign  # noqa: E402
from mcpserver.auth import (  # noqa: E402
    Authenticator,
    JwtValidator,
    ResourceServer,
    StaticTokens,
    _jose,
)
from mcpserver.http import create_app  # noqa: E402

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"


DEMO = os.path.join(ROOT, "server", "examples", "demo.py")


def per_call(rows, rounds):
    """Seconds per call of each (name, function, count) row: each round times `count` calls of every row
    in turn; returns (name, median, best) over the rounds."""
    times = {name: [] for name, _, _ in rows}
    for _ in range(rounds):
        for name, function, count in rows:
            started = time.perf_counter()
            for _ in range(count):
                function()
            times[name].append((time.perf_counter() - started) / count)
    return [(name, statistics.median(times[name]), min(times[name])) for name, _, _ in rows]


def wsgi_echo(app, authorization):
    """One tools/call echo through a WSGI app, as the HTTP server would hand it over; checks the answer."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
        "name": "echo", "arguments": {"text": "hello"}}}).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "CONTENT_TYPE": "application/json",
               "CONTENT_LENGTH": str(len(body)), "HTTP_ACCEPT": "application/json, text/event-stream",
               "HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "echo",
               "HTTP_HOST": "mcp.example.com", "HTTP_AUTHORIZATION": authorization, "REMOTE_ADDR": "127.0.0.1",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "443", "wsgi.url_scheme": "https"}
    statuses = []

    def call():
        request = dict(environ, **{"wsgi.input": io.BytesIO(body)})
        answer = b"".join(app(request, lambda status, headers, exc_info=None: statuses.append(status)))
        if not statuses.pop().startswith("200") or b'"hello"' not in answer:
            raise SystemExit(f"the WSGI app did not answer the echo: {answer[:200]!r}")

    call()
    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (seconds per call)")
    args = parser.parse_args()

    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "app", "exp": time.time() + 3600,
              "scope": "mcp:read mcp:write"}
    validator = JwtValidator(issuer=ISSUER, audience=RESOURCE, jwks={"keys": [RSA_JWK, EC_JWK]})
    rs256 = sign(claims, alg="RS256", kid="rsa-1")
    es256 = sign(claims, alg="ES256", kid="ec-1")
    auth = Authenticator(validator, required_scopes=["mcp:read"])
    cached = f"Bearer {es256}"
    auth.authenticate(cached)
    static = Authenticator(StaticTokens(["s3cret-token-0123456789"], scopes=["mcp:read"]), required_scopes=["mcp:read"])
    static.authenticate("Bearer s3cret-token-0123456789")
    expected = b"s3cret-token-0123456789"
    static_app = create_app(DEMO, token="s3cret-token-0123456789", allowed_hosts=["mcp.example.com"])
    oauth_app = create_app(DEMO, oauth=ResourceServer(RESOURCE, [ISSUER], scopes=["mcp:read"], validator=validator),
                           allowed_hosts=["mcp.example.com"])

    rows = [
        ("RS256 validation, no cache (2048-bit key)", lambda: validator(rs256), 200),
        ("ES256 validation, no cache (P-256)", lambda: validator(es256), 100),
        ("ES256 key table, once per key", lambda: _jose._comb_table(_jose.GX, _jose.GY), 5),
        ("Authenticator cache hit (JWT)", lambda: auth.authenticate(cached), 20_000),
        ("Authenticator, static token (cache hit)", lambda: static.authenticate("Bearer s3cret-token-0123456789"),
         20_000),
        ("the transport's static-token check: hmac.compare_digest",
         lambda: hmac.compare_digest(b"s3cret-token-0123456789", expected), 20_000),
        ("WSGI app, one echo call: static token", wsgi_echo(static_app, "Bearer s3cret-token-0123456789"), 5_000),
        ("WSGI app, one echo call: RS256 JWT, cached", wsgi_echo(oauth_app, f"Bearer {rs256}"), 5_000),
        ("WSGI app, one echo call: ES256 JWT, cached", wsgi_echo(oauth_app, f"Bearer {es256}"), 5_000),
    ]
    measured = per_call(rows, args.rounds)
    if args.json:
        print(json.dumps({"python": platform.python_version(), "rounds": args.rounds,
                          "rows": [{"operation": name, "median_s": median, "best_s": best}
                                   for name, median, best in measured]}))
        return 0
    print(f"Python {platform.python_version()} ({platform.python_implementation()}), {platform.machine()}, "
          f"{args.rounds} rounds")
    print("| operation | median | best |")
    print("|---|---:|---:|")
    for name, median, best in measured:
        unit, scale = ("ms", 1e3) if median >= 1e-4 else ("µs", 1e6)
        print(f"| {name} | {median * scale:.3f} {unit} | {best * scale:.3f} {unit} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
