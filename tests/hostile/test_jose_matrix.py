"""Every kind of forged or wrong token, one after another through one real server, each with the one answer
RFC 6750 §3.1 gives it: 401 `invalid_token` for a token that is no good, whatever came before it (a 503
would tell the client to keep the token and retry for ever); 400 `invalid_request` for a request without
one; a challenge with no error for no token at all; 403 `insufficient_scope`.

The issuer on 127.0.0.1 publishes its two good keys and four that the server must drop (an RSA key of
1,024 bits, an EC key for encryption, an EC point off the curve, an x equal to the field's prime). The
kinds run in the order listed, so the unknown and dropped kids arrive right after the key set was fetched
for the first of them, while the refresh floor holds.
"""

import json
import re
import secrets
import time

import pytest
from jose_keys import (
    EC_D,
    EC_JWK,
    EC_Y,
    RSA_JWK,
    ec_keypair,
    ecdsa_sign,
    encode_part,
    hs256_with_public_key,
    number,
    rsa_keypair,
    sign,
)
from mcpserver.auth import _jose
from mcpserver.auth._jose import b64url_encode
from test_auth_abuse import AuthorizationServer, resource_server

WEAK_RSA = rsa_keypair(1024)
OUTSIDER_D, OUTSIDER_JWK = ec_keypair()
DROPPED = {  # kid: a key the issuer publishes and the server must not use
    "rsa-1024": {"kty": "RSA", "kid": "rsa-1024", "n": WEAK_RSA[0], "e": "AQAB"},
    "ec-enc": dict(EC_JWK, kid="ec-enc", use="enc"),
    "ec-off-curve": dict(EC_JWK, kid="ec-off-curve", y=b64url_encode((number(EC_Y) ^ 1).to_bytes(32, "big"))),
    "ec-x-is-p": dict(EC_JWK, kid="ec-x-is-p", x=b64url_encode(_jose.P.to_bytes(32, "big"))),
}
UNKNOWN_KIDS = 30
TRAVERSALS = ["../../../../etc/passwd", "../jwks", "/.well-known/oauth-authorization-server", "..%2f..%2fadmin",
              "..\\..\\windows\\win.ini", "jwks?kid=ec-1", "http://127.0.0.1:1/jwks"]


class Forge:
    """Tokens for this server: claims with a fresh jti each (no two tokens alike, so none is answered from
    the server's cache of decisions)."""

    def __init__(self, issuer, audience):
        self.issuer = issuer
        self.audience = audience

    def claims(self, **changes):
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.audience, "sub": "alice", "iat": now, "exp": now + 300,
                  "scope": "mcp:read", "jti": secrets.token_hex(8), **changes}
        return {name: value for name, value in claims.items() if value is not None}

    def payload(self, **changes):
        return json.dumps(self.claims(**changes)).encode()


def bearer(token):
    return f"Bearer {token}"


def es256(header, payload, d=EC_D):
    """A JWS signed with the issuer's EC key over exactly these header and payload bytes."""
    signing_input = f"{encode_part(header)}.{encode_part(payload)}"
    return f"{signing_input}.{b64url_encode(ecdsa_sign(signing_input.encode(), d))}"


def good(forge, **changes):
    return sign(forge.claims(**changes), kid="ec-1")


def cut(token, part, keep):
    parts = token.split(".")
    parts[part] = parts[part][:keep]
    return ".".join(parts)


def non_canonical(token):
    """The same token with its signature's last character changed only in the bits that encode nothing: 64
    bytes take 86 characters, whose last one carries 2 bits of the signature and 4 that must be zero."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return token[:-1] + alphabet[alphabet.index(token[-1]) + 1]


OK = (200, None)
INVALID = (401, "invalid_token")
KINDS = [
    # the controls: the issuer's own keys pass
    ("RS256, the issuer's key", lambda f: bearer(sign(f.claims(), kid="rsa-1", alg="RS256")), OK),
    ("ES256, the issuer's key", lambda f: bearer(good(f)), OK),
    ("ES256 naming no kid, the one EC key the set has", lambda f: bearer(sign(f.claims())), OK),
    # no token, or not a bearer token
    ("no Authorization", lambda f: None, (401, None)),
    ("the Basic scheme", lambda f: "Basic YWxpY2U6c2VjcmV0", (401, None)),
    ("Bearer with no token", lambda f: "Bearer ", (400, "invalid_request")),
    ("a valid token without the scope", lambda f: bearer(good(f, scope="mcp:write")), (403, "insufficient_scope")),
    # algorithms
    ("alg none", lambda f: bearer(f"{encode_part({'alg': 'none', 'kid': 'ec-1'})}.{encode_part(f.claims())}."),
     INVALID),
    ("alg NONE with a signature", lambda f: bearer(sign(f.claims(), {"alg": "NONE", "kid": "ec-1"})), INVALID),
    ("alg confusion: HS256 keyed with the RSA public key", lambda f: bearer(hs256_with_public_key(
        f.claims(), json.dumps(RSA_JWK, sort_keys=True).encode(), kid="rsa-1")), INVALID),
    ("alg confusion: HS256 keyed with the modulus", lambda f: bearer(hs256_with_public_key(
        f.claims(), RSA_JWK["n"].encode(), kid="rsa-1")), INVALID),
    ("RS256 naming the EC key", lambda f: bearer(sign(f.claims(), {"alg": "RS256", "kid": "ec-1"})), INVALID),
    ("ES256 naming the RSA key", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": "rsa-1"})), INVALID),
    ("PS256", lambda f: bearer(sign(f.claims(), {"alg": "PS256", "kid": "rsa-1"})), INVALID),
    # keys: unknown, dropped, carried by the token, path traversal
    *[(f"unknown kid, {n + 1} of {UNKNOWN_KIDS} in a row",
       lambda f: bearer(sign(f.claims(), kid=f"kid-{secrets.token_hex(4)}", ec_d=OUTSIDER_D)), INVALID)
      for n in range(UNKNOWN_KIDS)],
    ("dropped: an RSA key of 1,024 bits, validly signed",
     lambda f: bearer(sign(f.claims(), kid="rsa-1024", alg="RS256", rsa=WEAK_RSA)), INVALID),
    ("dropped: the EC key published with use=enc, validly signed", lambda f: bearer(sign(f.claims(), kid="ec-enc")),
     INVALID),
    ("dropped: an EC point off the curve", lambda f: bearer(sign(f.claims(), kid="ec-off-curve")), INVALID),
    ("dropped: an EC x equal to p", lambda f: bearer(sign(f.claims(), kid="ec-x-is-p")), INVALID),
    *[(f"path traversal kid {kid!r}", lambda f, kid=kid: bearer(sign(f.claims(), kid=kid)), INVALID)
      for kid in TRAVERSALS],
    ("the attacker's key carried in the header (jwk)", lambda f: bearer(sign(
        f.claims(), {"alg": "ES256", "jwk": OUTSIDER_JWK}, ec_d=OUTSIDER_D)), INVALID),
    ("the attacker's key set named in the header (jku)", lambda f: bearer(sign(
        f.claims(), {"alg": "ES256", "kid": "theirs", "jku": "http://127.0.0.1:1/jwks"}, ec_d=OUTSIDER_D)), INVALID),
    ("a known kid, signed with another key", lambda f: bearer(sign(f.claims(), kid="ec-1", ec_d=OUTSIDER_D)),
     INVALID),
    ("kid a number", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": 1})), INVALID),
    ("kid an object", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": {"$ne": ""}})), INVALID),
    ("kid a list", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": ["ec-1"]})), INVALID),
    # claims, validly signed
    ("expired", lambda f: bearer(good(f, exp=int(time.time()) - 3600)), INVALID),
    ("not yet valid", lambda f: bearer(good(f, nbf=int(time.time()) + 3600)), INVALID),
    ("no exp", lambda f: bearer(good(f, exp=None)), INVALID),
    ("exp 10**400", lambda f: bearer(good(f, exp=10**400)), INVALID),
    ("exp a string", lambda f: bearer(good(f, exp="tomorrow")), INVALID),
    ("another audience", lambda f: bearer(good(f, aud="https://other.example.com/mcp")), INVALID),
    ("the audience with a trailing slash", lambda f: bearer(good(f, aud=f.audience + "/")), INVALID),
    ("another issuer", lambda f: bearer(good(f, iss="https://evil.example.com")), INVALID),
    ("no issuer", lambda f: bearer(good(f, iss=None)), INVALID),
    # signatures and shapes
    ("a tampered payload", lambda f: bearer(".".join(
        [good(f).split(".")[0], encode_part(f.claims(sub="mallory")), good(f).split(".")[2]])), INVALID),
    ("the signature of another token", lambda f: bearer(cut(good(f), 2, 0) + good(f).split(".")[2]), INVALID),
    ("a signature one byte short", lambda f: bearer(cut(good(f), 2, 84)), INVALID),
    ("no signature", lambda f: bearer(cut(good(f), 2, 0)), INVALID),
    ("truncated to two parts", lambda f: bearer(good(f).rsplit(".", 1)[0]), INVALID),
    ("truncated inside the header", lambda f: bearer(good(f)[:10]), INVALID),
    ("a signature in non-canonical base64url", lambda f: bearer(non_canonical(good(f))), INVALID),
    ("encrypted (JWE, five parts)", lambda f: bearer("eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d"), INVALID),
    ("oversized: claims past 16 KiB", lambda f: bearer(good(f, pad="x" * 17_000)), INVALID),
    ("oversized: past the Authorization limit", lambda f: bearer("a" * 20_000), INVALID),
    ("a header past 2 KiB", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": "ec-1", "x": "y" * 3000})),
     INVALID),
    ("a repeated member in the header", lambda f: bearer(es256(b'{"alg":"ES256","kid":"rsa-1","kid":"ec-1"}',
                                                              f.payload())), INVALID),
    ("a repeated member in the payload, validly signed", lambda f: bearer(es256(
        b'{"alg":"ES256","kid":"ec-1"}', f.payload()[:-1] + b', "sub": "mallory"}')), INVALID),
    ("a payload that is a JSON array, validly signed", lambda f: bearer(es256(
        b'{"alg":"ES256","kid":"ec-1"}', b"[1]")), INVALID),
    ("a payload nested 100 deep, validly signed", lambda f: bearer(es256(
        b'{"alg":"ES256","kid":"ec-1"}', f.payload()[:-1] + b', "x": ' + b"[" * 100 + b"]" * 100 + b"}")), INVALID),
    ("a payload with NaN, validly signed", lambda f: bearer(es256(
        b'{"alg":"ES256","kid":"ec-1"}', f.payload()[:-1] + b', "x": NaN}')), INVALID),
    ("a payload with a 5,000-digit integer, validly signed", lambda f: bearer(es256(
        b'{"alg":"ES256","kid":"ec-1"}', f.payload()[:-1] + b', "x": ' + b"9" * 5000 + b"}")), INVALID),
    ("a header that is not JSON", lambda f: bearer(es256(b"alg=ES256", f.payload())), INVALID),
    ("crit", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": "ec-1", "crit": ["exp"]})), INVALID),
    ("b64 false", lambda f: bearer(sign(f.claims(), {"alg": "ES256", "kid": "ec-1", "b64": False})), INVALID),
    ("a character no token has", lambda f: bearer(good(f)[:20] + "\u00e9" + good(f)[20:]), INVALID),
    ("a control character, which HTTP refuses first", lambda f: bearer(good(f)[:20] + "\x01" + good(f)[20:]),
     (400, None)),
    ("not a JWT at all", lambda f: bearer("opaque-garbage"), INVALID),
]


@pytest.fixture(scope="module")
def issuer():
    server = AuthorizationServer()
    server.keys = [RSA_JWK, EC_JWK, *DROPPED.values()]
    yield server
    server.stop()


@pytest.fixture(scope="module")
def resource(issuer):
    with resource_server(issuer.issuer, "--scope", "mcp:read") as server:
        yield server, Forge(issuer.issuer, server.url)
    assert "Traceback" not in server.stderr


def answer(server, authorization):
    """(status, the challenge's error) for tools/list with this Authorization header (None: none sent)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    if authorization is not None:
        headers["Authorization"] = authorization
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    status, received, _ = server.post(message, headers=headers)
    challenge = received.get("www-authenticate", "")
    if status in (401, 403) or challenge:
        assert challenge.startswith("Bearer resource_metadata="), challenge
    error = re.search(r'error="([^"]*)"', challenge)
    return status, error.group(1) if error else None


@pytest.mark.parametrize(("kind", "authorization", "expected"), KINDS, ids=[kind for kind, _, _ in KINDS])
def test_each_kind_of_token_gets_the_answer_rfc6750_gives_it(resource, kind, authorization, expected):
    server, forge = resource
    assert answer(server, authorization(forge)) == expected


def test_the_key_set_was_fetched_for_the_first_unknown_kid_only_and_no_kid_became_a_path(resource, issuer):
    """Run after the matrix (pytest keeps the file's order): the refresh floor held through every unknown
    and dropped kid, and the issuer was asked for its metadata and key set, nothing else."""
    server, forge = resource
    answer(server, bearer(good(forge)))
    assert issuer.jwks_fetches <= 2  # the first check's, and the first unknown kid's
    assert set(issuer.paths) <= {"/.well-known/oauth-authorization-server", "/jwks"}
