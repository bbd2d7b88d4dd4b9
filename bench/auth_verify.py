#!/usr/bin/env python3
"""The cost of bearer-token checks in mcpserver.auth, in process (no HTTP).

    python bench/auth_verify.py              # median and best of 7 rounds, per operation
    python bench/auth_verify.py --rounds 15

Rows: one JWT validation without any cache (parse, verify the signature, check the claims) for RS256
and ES256; the one-time work an ES256 key costs (its precomputed table); an Authenticator cache hit
(what every request with a known token pays); a static token; and, for scale, the single
hmac.compare_digest that the transport does today. Tokens are signed with the RFC 7515 appendix A keys.
"""

import argparse
import hmac
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "server"), os.path.join(ROOT, "tests")]

from jose_keys import EC_JWK, RSA_JWK, sign  # noqa: E402
from mcpserver import _jose  # noqa: E402
from mcpserver.auth import Authenticator, JwtValidator, StaticTokens  # noqa: E402

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"


def per_call(function, count, rounds):
    """Seconds per call: each round times `count` calls; returns (median, best) over the rounds."""
    results = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(count):
            function()
        results.append((time.perf_counter() - started) / count)
    return statistics.median(results), min(results)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
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

    rows = [
        ("RS256 validation, no cache (2048-bit key)", lambda: validator(rs256), 200),
        ("ES256 validation, no cache (P-256)", lambda: validator(es256), 100),
        ("ES256 key table, once per key", lambda: _jose._comb_table(_jose.GX, _jose.GY), 5),
        ("Authenticator cache hit (JWT)", lambda: auth.authenticate(cached), 20_000),
        ("Authenticator, static token (cache hit)", lambda: static.authenticate("Bearer s3cret-token-0123456789"),
         20_000),
        ("today's transport: hmac.compare_digest", lambda: hmac.compare_digest(b"s3cret-token-0123456789", expected),
         20_000),
    ]
    print(f"Python {platform.python_version()} ({platform.python_implementation()}), {platform.machine()}, "
          f"{args.rounds} rounds")
    print("| operation | median | best |")
    print("|---|---:|---:|")
    for name, function, count in rows:
        median, best = per_call(function, count, args.rounds)
        unit, scale = ("ms", 1e3) if median >= 1e-4 else ("µs", 1e6)
        print(f"| {name} | {median * scale:.3f} {unit} | {best * scale:.3f} {unit} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
