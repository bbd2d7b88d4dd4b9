"""Published test keys (RFC 7515 appendix A), a signer for them, so the tests can make tokens with any header and
claims, and KeyServer, an issuer on 127.0.0.1 that publishes them. Signing needs the private key, which mcpserver
never has: it lives here only.

The RSA signer is checked against the RFC's own signature (PKCS#1 v1.5 is deterministic), and the EC
private key against its public point, in tests/unit/test_jose.py.
"""

import hashlib
import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcpserver.auth import _jose
from mcpserver.auth._jose import b64url_decode, b64url_encode

# RFC 7515 A.2 (RSA, 2048 bits) and A.3 (EC P-256). Public and private parts as the RFC prints them.
RSA_N = ("ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-"
         "SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-"
         "UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2eth"
         "FkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ")
RSA_D = ("Eq5xpGnNCivDflJsRQBXHx1hdR1k6Ulwe2JZD50LpXyWPEAeP88vLNO97IjlA7_GQ5sLKMgvfTeXZx9SE-7YwVol2NXOoAJe46sui39"
         "5IW_GO-pWJ1O0BkTGoVEn2bKVRUCgu-GjBVaYLU6f3l9kJfFNS3E0QbVdxzubSu3Mkqzjkn439X0M_V51gfpRLI9JYanrC4D4qAdGcop"
         "V_0ZHHzQlBjudU2QvXt4ehNYTCBr6XCLQUShb1juUO1ZdiYoFaFQT5Tw8bGUl_x_jTj3ccPDVZFD9pIuhLhBOneufuBiB4cS98l2SR_RQ"
         "yGWSeWjnczT0QU91p1DhOVRuOopznQ")
EC_X = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
EC_Y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
EC_D = "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"

# The RFC's complete example tokens (both sign the same payload).
RFC_PAYLOAD = b'{"iss":"joe",\r\n "exp":1300819380,\r\n "http://example.com/is_root":true}'
A2_TOKEN = ("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb2"
            "90Ijp0cnVlfQ.cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp"
            "5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0Gar"
            "ZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rq"
            "Vt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw")
A3_TOKEN = ("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb2"
            "90Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")

RSA_JWK = {"kty": "RSA", "kid": "rsa-1", "n": RSA_N, "e": "AQAB"}
EC_JWK = {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": EC_X, "y": EC_Y}


def number(text):
    return int.from_bytes(b64url_decode(text), "big")


def rsa_sign_encoded(encoded_message, n=RSA_N, d=RSA_D):
    """The raw RSA signature of an already padded block: lets a test sign a malformed encoding."""
    modulus = number(n)
    size = (modulus.bit_length() + 7) // 8
    return pow(int.from_bytes(encoded_message, "big"), number(d), modulus).to_bytes(size, "big")


SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def pkcs1_sha256_block(message, size=256, digest_info=SHA256_DIGEST_INFO):
    digest = hashlib.sha256(message).digest()
    return b"\x00\x01" + b"\xff" * (size - 3 - len(digest_info) - len(digest)) + b"\x00" + digest_info + digest


def ec_public(d):
    """The public point of a P-256 private key, with mcpserver's own arithmetic (checked against the RFC)."""
    point = _jose._to_affine(_jose._multiply_add(d, _ec_g_table(), 0, _ec_g_table()))
    assert point is not None
    return point


def _ec_g_table():
    if not _jose._G_TABLE:
        _jose._G_TABLE.append(_jose._comb_table(_jose.GX, _jose.GY))
    return _jose._G_TABLE[0]


def ecdsa_sign(message, d=EC_D):
    secret = number(d) if isinstance(d, str) else d
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")
    while True:
        k = secrets.randbelow(_jose.N - 1) + 1
        r = ec_public(k)[0] % _jose.N
        s = pow(k, -1, _jose.N) * (e + r * secret) % _jose.N
        if r and s:
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def ec_keypair():
    """A fresh P-256 key: (private scalar, public JWK without kid)."""
    d = secrets.randbelow(_jose.N - 1) + 1
    x, y = ec_public(d)
    return d, {"kty": "EC", "crv": "P-256", "x": b64url_encode(x.to_bytes(32, "big")),
               "y": b64url_encode(y.to_bytes(32, "big"))}


def encode_part(value):
    return b64url_encode(value if isinstance(value, bytes) else json.dumps(value).encode())


def rsa_keypair(bits):
    """A fresh RSA key of exactly `bits` bits, e = 65537: (n, d) in base64url like RSA_N and RSA_D. For keys
    too weak for an issuer to publish (no RFC prints a test key under 2048 bits)."""
    half = bits // 2

    def prime():
        while True:  # Fermat's test: a random odd number that passes four bases is prime for any test's purpose
            candidate = secrets.randbits(half) | 3 << (half - 2) | 1  # two top bits: p*q has all `bits`
            if (candidate - 1) % 65537 and all(pow(base, candidate - 1, candidate) == 1 for base in (2, 3, 5, 7)):
                return candidate

    p, q = prime(), prime()
    d = pow(65537, -1, (p - 1) * (q - 1))
    return tuple(b64url_encode(value.to_bytes((value.bit_length() + 7) // 8, "big")) for value in (p * q, d))


def sign(claims, header=None, *, alg="ES256", kid=None, ec_d=EC_D, rsa=(RSA_N, RSA_D)):
    """A compact JWS of `claims` (a dict or raw bytes) under `header` (default: alg and kid); `rsa` is the
    (n, d) that signs RS256."""
    header = dict(header if header is not None else {"alg": alg, **({"kid": kid} if kid else {})})
    signing_input = f"{encode_part(header)}.{encode_part(claims)}".encode()
    if header.get("alg") == "RS256":
        size = (number(rsa[0]).bit_length() + 7) // 8
        signature = rsa_sign_encoded(pkcs1_sha256_block(signing_input, size), *rsa)
    elif header.get("alg") == "ES256":
        signature = ecdsa_sign(signing_input, ec_d)
    else:
        signature = b"\x00"
    return f"{signing_input.decode()}.{b64url_encode(signature)}"


def hs256_with_public_key(claims, secret, kid=None):
    """The algorithm-confusion forgery: HS256 with the server's PUBLIC key material as the HMAC secret."""
    header = {"alg": "HS256", **({"kid": kid} if kid else {})}
    signing_input = f"{encode_part(header)}.{encode_part(claims)}".encode()
    return f"{signing_input.decode()}.{b64url_encode(hmac.new(secret, signing_input, hashlib.sha256).digest())}"


class KeyServer:
    """Serves an issuer's metadata and key set on 127.0.0.1, and counts the key-set fetches."""

    def __init__(self):
        self.keys = [RSA_JWK, EC_JWK]
        self.jwks_fetches = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/.well-known/oauth-authorization-server":
                    document = {"issuer": owner.issuer, "jwks_uri": owner.issuer + "/jwks"}
                elif self.path == "/jwks":
                    owner.jwks_fetches += 1
                    document = {"keys": list(owner.keys)}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
