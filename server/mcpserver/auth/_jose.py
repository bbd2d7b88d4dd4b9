"""JOSE for a resource server: compact JWS, JWK and JWKS, RS256 and ES256 verification.

Rules of this module:
- Verification only, with public keys, in Python integers and hashlib: there is no private key and
  no secret here, so nothing needs constant time except comparisons, which use hmac.compare_digest anyway.
- Everything in a token is hostile. Every part has a size limit; base64url must be canonical (one
  encoding per value, so a signature cannot be re-encoded into a "new" token); a JSON object with a
  repeated name is refused (parsers disagree on which one wins); a `crit` header is refused, since this
  module understands no extension.
- The key decides how to verify, not the token: the header's `alg` must be one the caller accepts AND
  fit the key's type (and the key's own `alg`, `use`, `key_ops`). A key is never taken from the token
  (`jwk`, `jku`, `x5u`, `x5c` are ignored), and there is no HMAC at all, so a public key can never be
  used as an HMAC secret (algorithm confusion) and `alg: none` is just an algorithm nobody accepts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Union

from .._json import MAX_JSON_DEPTH, PARSE_INT, nesting_depth

__all__ = [
    "SUPPORTED_ALGORITHMS",
    "CompactJws",
    "EcKey",
    "JoseError",
    "KeySet",
    "RsaKey",
    "UnknownKey",
    "b64url_decode",
    "b64url_encode",
    "key_from_jwk",
    "parse_compact",
    "parse_jwks",
    "verify_jws",
]

MAX_TOKEN_CHARS = 16 * 1024  # the whole compact token; real access tokens are 1 to 4 KiB
MAX_HEADER_CHARS = 2 * 1024  # the encoded protected header
MAX_SIGNATURE_CHARS = 1366  # the encoded signature: an 8192-bit RSA signature is 1024 bytes
MIN_RSA_BITS = 2048  # RFC 7518 §3.3: a key of 2048 bits or larger MUST be used with RS256
MAX_RSA_BITS = 8192
MAX_RSA_EXPONENT_BITS = 256  # FIPS 186-5: 2**16 < e < 2**256; a huge e would only make pow() slow
MAX_JWKS_KEYS = 64
SUPPORTED_ALGORITHMS = ("RS256", "ES256")

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class JoseError(ValueError):
    """A token or key that cannot be used; the message says why and is safe to show the client."""


class UnknownKey(JoseError):
    """The token names a `kid` the key set does not have (a reason to fetch the key set again)."""


# --- base64url and JSON ----------------------------------------------------------------------------------


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, what: str = "value") -> bytes:
    """Strict base64url without padding (RFC 7515 §2): one encoding per value, else JoseError."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise JoseError(f"the {what} is not base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise JoseError(f"the {what} is not base64url") from None
    # Unused low bits in the last character must be zero; otherwise several strings decode alike.
    if b64url_encode(data) != text:
        raise JoseError(f"the {what} is not canonical base64url")
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise JoseError(f"the JSON object repeats the member {name[:40]!r}")
        result[name] = value
    return result


def _reject_constant(name: str) -> Any:
    raise JoseError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant, parse_int=PARSE_INT)


def json_object(data: Union[bytes, str], what: str) -> dict[str, Any]:
    """A JSON object from UTF-8 bytes or text: depth-limited, no repeated names, else JoseError."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise JoseError(f"the {what} is not UTF-8") from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and nesting_depth(text) > MAX_JSON_DEPTH:
        raise JoseError(f"the {what} is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError) as error:
        if isinstance(error, JoseError):
            raise
        raise JoseError(f"the {what} is not JSON") from None
    if not isinstance(value, dict):
        raise JoseError(f"the {what} is not a JSON object")
    return value


# --- compact JWS -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactJws:
    """A compact JWS split and decoded, not yet verified: trust nothing in it before verify_jws."""

    header: dict[str, Any]
    payload: bytes
    signing_input: bytes
    signature: bytes

    @property
    def alg(self) -> str:
        return str(self.header["alg"])

    @property
    def kid(self) -> Optional[str]:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else None


def parse_compact(token: str) -> CompactJws:
    """Split and decode a compact JWS (RFC 7515 §7.1), checking shape and sizes; JoseError if malformed."""
    if not isinstance(token, str):
        raise JoseError("the token is not a string")
    if len(token) > MAX_TOKEN_CHARS:
        raise JoseError(f"the token is longer than {MAX_TOKEN_CHARS} characters")
    parts = token.split(".")
    if len(parts) == 5:
        raise JoseError("the token is encrypted (JWE); only signed tokens (JWS) are accepted")
    if len(parts) != 3:
        raise JoseError("the token is not a JWS: it must have three dot-separated parts")
    encoded_header, encoded_payload, encoded_signature = parts
    if not encoded_header or len(encoded_header) > MAX_HEADER_CHARS:
        raise JoseError(f"the JWS header must be 1 to {MAX_HEADER_CHARS} characters")
    header = json_object(b64url_decode(encoded_header, "JWS header"), "JWS header")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise JoseError("the JWS header has no algorithm (alg)")
    if alg.lower() == "none":
        raise JoseError("unsigned tokens (alg none) are not accepted")
    if not encoded_signature or len(encoded_signature) > MAX_SIGNATURE_CHARS:
        raise JoseError(f"the JWS signature must be 1 to {MAX_SIGNATURE_CHARS} characters")
    if "crit" in header:
        raise JoseError("the JWS header lists critical extensions (crit), and none is supported")
    if header.get("b64", True) is not True:  # RFC 7797 unencoded payloads are only valid under crit
        raise JoseError("unencoded JWS payloads (b64) are not supported")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise JoseError("the JWS key id (kid) is not a string")
    return CompactJws(
        header=header,
        payload=b64url_decode(encoded_payload, "JWS payload"),
        signing_input=f"{encoded_header}.{encoded_payload}".encode("ascii"),
        signature=b64url_decode(encoded_signature, "JWS signature"),
    )


# --- RSA: RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2.2) ---------------------------------------------------

# DER of DigestInfo{ sha256, NULL } (RFC 8017 §9.2 note 1), which precedes the hash in the encoded message.
_SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def _rsa_pkcs1_sha256_verify(n: int, e: int, message: bytes, signature: bytes) -> bool:
    size = (n.bit_length() + 7) // 8
    if len(signature) != size:
        return False
    s = int.from_bytes(signature, "big")
    if s >= n:
        return False
    encoded = pow(s, e, n).to_bytes(size, "big")
    # Build the one valid encoding and compare it whole: parsing the decrypted block instead is what let
    # Bleichenbacher's 2006 forgery through (garbage after the hash, loose padding) with small exponents.
    digest = hashlib.sha256(message).digest()
    padding = size - 3 - len(_SHA256_DIGEST_INFO) - len(digest)
    expected = b"\x00\x01" + b"\xff" * padding + b"\x00" + _SHA256_DIGEST_INFO + digest
    return hmac.compare_digest(encoded, expected)


# --- ECDSA on P-256 with SHA-256 (FIPS 186-5 §6.4.2; SEC 2 §2.4.2) -------------------------------------------

P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
GX = 0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296
GY = 0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5
WINDOW_BITS = 5  # comb windows: 52 windows of 32 precomputed multiples per point (about 20 ms once per key)
WINDOWS = (256 + WINDOW_BITS - 1) // WINDOW_BITS

# Points are Jacobian (X, Y, Z), standing for (X/Z^2, Y/Z^3); Z == 0 is the point at infinity.
Jacobian = tuple[int, int, int]
Affine = tuple[int, int]
_INFINITY: Jacobian = (1, 1, 0)


def on_curve(x: int, y: int) -> bool:
    """y^2 = x^3 - 3x + b over P-256's field. The cofactor is 1, so on the curve means in the group."""
    return 0 <= x < P and 0 <= y < P and (y * y - (x * x * x - 3 * x + B)) % P == 0


def _double(point: Jacobian) -> Jacobian:
    x1, y1, z1 = point
    if z1 == 0 or y1 == 0:
        return _INFINITY
    delta = z1 * z1 % P
    gamma = y1 * y1 % P
    beta = x1 * gamma % P
    alpha = 3 * (x1 - delta) * (x1 + delta) % P  # a = -3 lets 3*X^2 + a*Z^4 factor like this
    x3 = (alpha * alpha - 8 * beta) % P
    z3 = ((y1 + z1) * (y1 + z1) - gamma - delta) % P
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % P
    return x3, y3, z3


def _add_affine(point: Jacobian, other: Affine) -> Jacobian:
    """point + other, where other has Z = 1 (a "mixed" addition: fewer multiplications)."""
    x1, y1, z1 = point
    x2, y2 = other
    if z1 == 0:
        return x2, y2, 1
    z1z1 = z1 * z1 % P
    h = (x2 * z1z1 - x1) % P
    r = (y2 * z1 * z1z1 - y1) % P
    if h == 0:  # same x: either the same point (double it) or its negative (the sum is infinity)
        return _double(point) if r == 0 else _INFINITY
    hh = h * h % P
    hhh = h * hh % P
    v = x1 * hh % P
    x3 = (r * r - hhh - 2 * v) % P
    y3 = (r * (v - x3) - y1 * hhh) % P
    return x3, y3, z1 * h % P


def _to_affine(point: Jacobian) -> Optional[Affine]:
    x, y, z = point
    if z == 0:
        return None
    z_inverse = pow(z, -1, P)
    z2 = z_inverse * z_inverse % P
    return x * z2 % P, y * z2 * z_inverse % P


def _comb_table(x: int, y: int) -> tuple[Optional[Affine], ...]:
    """d * 2^(WINDOW_BITS*i) * Q in affine form at index i*2^WINDOW_BITS + d (d = 0 unused), so that
    u*Q is one mixed addition per window and no doubling at all."""
    row_size = 1 << WINDOW_BITS
    points: list[Jacobian] = []
    base: Jacobian = (x, y, 1)
    for _ in range(WINDOWS):
        base_affine = _to_affine(base)
        assert base_affine is not None  # a multiple below the group order is never infinity
        row = [_INFINITY, base]
        for _ in range(2, row_size):
            row.append(_add_affine(row[-1], base_affine))
        points.extend(row)
        for _ in range(WINDOW_BITS):
            base = _double(base)
    return _batch_to_affine(points)


def _batch_to_affine(points: list[Jacobian]) -> tuple[Optional[Affine], ...]:
    """Many points to affine with one modular inversion (Montgomery's trick) instead of one each."""
    prefix = [1]
    for _, _, z in points:
        prefix.append(prefix[-1] * (z or 1) % P)
    inverse = pow(prefix[-1], -1, P)
    result: list[Optional[Affine]] = [None] * len(points)
    for index in range(len(points) - 1, -1, -1):
        x, y, z = points[index]
        if z == 0:
            continue
        z_inverse = inverse * prefix[index] % P
        inverse = inverse * z % P
        z2 = z_inverse * z_inverse % P
        result[index] = (x * z2 % P, y * z2 * z_inverse % P)
    return tuple(result)


def _multiply_add(u1: int, table1: tuple[Optional[Affine], ...], u2: int,
                  table2: tuple[Optional[Affine], ...]) -> Jacobian:
    """u1*A + u2*B from the comb tables of A and B."""
    accumulator = _INFINITY
    mask = (1 << WINDOW_BITS) - 1
    for offset in range(0, WINDOWS << WINDOW_BITS, 1 << WINDOW_BITS):
        first = table1[offset + (u1 & mask)]
        if first is not None:
            accumulator = _add_affine(accumulator, first)
        second = table2[offset + (u2 & mask)]
        if second is not None:
            accumulator = _add_affine(accumulator, second)
        u1 >>= WINDOW_BITS
        u2 >>= WINDOW_BITS
    return accumulator


_G_TABLE: list[tuple[Optional[Affine], ...]] = []  # built on the first ES256 verification, kept for the process


def _ecdsa_p256_sha256_verify(table: tuple[Optional[Affine], ...], message: bytes, signature: bytes) -> bool:
    if len(signature) != 64:  # JWS uses the raw r || s form (RFC 7518 §3.4), never DER
        return False
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:], "big")
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")  # 256 bits: no truncation for P-256
    w = pow(s, -1, N)
    if not _G_TABLE:
        _G_TABLE.append(_comb_table(GX, GY))
    point = _to_affine(_multiply_add(e * w % N, _G_TABLE[0], r * w % N, table))
    return point is not None and point[0] % N == r


# --- keys ----------------------------------------------------------------------------------------------------


def _jwk_integer(jwk: Mapping[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str) or not value:
        raise JoseError(f"the key has no {name!r}")
    return int.from_bytes(b64url_decode(value, f"key's {name!r}"), "big")


def _check_use(jwk: Mapping[str, Any]) -> None:
    use = jwk.get("use")
    if use is not None and use != "sig":
        raise JoseError(f"the key is for {use!r}, not for signatures")
    operations = jwk.get("key_ops")
    if operations is not None and (not isinstance(operations, list) or "verify" not in operations):
        raise JoseError("the key's key_ops do not include verify")


@dataclass(frozen=True)
class RsaKey:
    n: int
    e: int
    kid: Optional[str] = None
    alg: Optional[str] = None

    def __post_init__(self) -> None:
        bits = self.n.bit_length()
        if not MIN_RSA_BITS <= bits <= MAX_RSA_BITS or self.n % 2 == 0:
            raise JoseError(f"the RSA modulus has {bits} bits; {MIN_RSA_BITS} to {MAX_RSA_BITS} are accepted")
        if self.e < 3 or self.e % 2 == 0 or self.e.bit_length() > MAX_RSA_EXPONENT_BITS or self.e >= self.n:
            raise JoseError("the RSA public exponent is not usable")

    def fits(self, alg: str) -> bool:
        return alg == "RS256" and self.alg in (None, alg)

    def verify(self, alg: str, message: bytes, signature: bytes) -> bool:
        return self.fits(alg) and _rsa_pkcs1_sha256_verify(self.n, self.e, message, signature)


@dataclass(frozen=True)
class EcKey:
    x: int
    y: int
    kid: Optional[str] = None
    alg: Optional[str] = None
    _table: list[tuple[Optional[Affine], ...]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # An off-curve point would let a signature be checked in a weaker group (invalid-curve attacks).
        if not on_curve(self.x, self.y):
            raise JoseError("the EC key's point is not on P-256")

    def fits(self, alg: str) -> bool:
        return alg == "ES256" and self.alg in (None, alg)

    def verify(self, alg: str, message: bytes, signature: bytes) -> bool:
        if not self.fits(alg):
            return False
        if not self._table:  # built on first use, so keys in a key set that never sign cost nothing
            self._table.append(_comb_table(self.x, self.y))
        return _ecdsa_p256_sha256_verify(self._table[0], message, signature)


PublicKey = Union[RsaKey, EcKey]


def key_from_jwk(jwk: Mapping[str, Any]) -> PublicKey:
    """A verification key from a public JWK (RFC 7517, 7518 §6): RSA, or EC on P-256. JoseError otherwise."""
    if not isinstance(jwk, Mapping):
        raise JoseError("the key is not a JSON object")
    kid = jwk.get("kid")
    alg = jwk.get("alg")
    if kid is not None and not isinstance(kid, str):
        raise JoseError("the key's kid is not a string")
    if alg is not None and alg not in SUPPORTED_ALGORITHMS:
        raise JoseError(f"the key is for algorithm {str(alg)[:20]!r}, which is not supported")
    _check_use(jwk)
    kty = jwk.get("kty")
    if alg is not None and kty != {"RS256": "RSA", "ES256": "EC"}[alg]:
        raise JoseError(f"the key is of type {str(kty)[:20]!r} but says it is for {alg}")
    if kty == "RSA":
        return RsaKey(_jwk_integer(jwk, "n"), _jwk_integer(jwk, "e"), kid, alg)
    if kty == "EC":
        if jwk.get("crv") != "P-256":
            raise JoseError(f"the EC key is on curve {str(jwk.get('crv'))[:20]!r}; only P-256 is supported")
        for name in ("x", "y"):
            if len(b64url_decode(str(jwk.get(name, "")), f"key's {name!r}")) != 32:
                raise JoseError(f"the P-256 key's {name!r} is not 32 bytes")
        return EcKey(_jwk_integer(jwk, "x"), _jwk_integer(jwk, "y"), kid, alg)
    raise JoseError(f"the key type {str(kty)[:20]!r} cannot verify RS256 or ES256")


@dataclass(frozen=True)
class KeySet:
    """Verification keys by kid. `dropped` holds the (kid, why) of each key the set published and this module
    cannot use: a token naming one is refused for that reason, not taken for a key the set does not have."""

    keys: tuple[PublicKey, ...]
    dropped: tuple[tuple[Optional[str], str], ...] = ()

    def candidates(self, kid: Optional[str], alg: str) -> list[PublicKey]:
        """The keys that may verify a token with this kid and alg; UnknownKey or JoseError if none."""
        if kid is None:
            fitting = [key for key in self.keys if key.fits(alg)]
            if len(fitting) != 1:
                raise JoseError(f"the token names no key (kid) and {len(fitting)} keys fit {alg}")
            return fitting
        named = [key for key in self.keys if key.kid == kid]
        if not named:
            why = next((why for dropped_kid, why in self.dropped if dropped_kid == kid), None)
            if why is not None:
                raise JoseError(f"the key {kid[:80]!r} is not usable: {why}")
            raise UnknownKey(f"no key has the id {kid[:80]!r}")
        fitting = [key for key in named if key.fits(alg)]
        if not fitting:
            raise JoseError(f"the key {kid[:80]!r} cannot verify {alg}")
        return fitting


def parse_jwks(document: Any) -> KeySet:
    """The usable keys of a JWKS document (RFC 7517 §5). Keys this module cannot use (other types,
    encryption keys) are skipped, as the RFC asks; a set with no usable key at all is a JoseError."""
    if isinstance(document, (bytes, str)):
        document = json_object(document, "key set")
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise JoseError("the key set is not a JSON object with a keys array")
    entries = document["keys"]
    if len(entries) > MAX_JWKS_KEYS:
        raise JoseError(f"the key set has {len(entries)} keys; at most {MAX_JWKS_KEYS} are accepted")
    keys: list[PublicKey] = []
    dropped: list[tuple[Optional[str], str]] = []
    for entry in entries:
        try:
            keys.append(key_from_jwk(entry))
        except JoseError as error:
            kid = entry.get("kid") if isinstance(entry, Mapping) else None
            dropped.append((kid if isinstance(kid, str) else None, str(error)))
    if not keys:
        reasons = "; ".join(f"{kid!r}: {why}" for kid, why in dropped)
        raise JoseError("the key set has no RS256 or ES256 key" + (f" ({reasons})" if reasons else ""))
    return KeySet(tuple(keys), tuple(dropped))


def verify_jws(jws: CompactJws, keys: KeySet, algorithms: Iterable[str] = SUPPORTED_ALGORITHMS) -> dict[str, Any]:
    """The payload of a verified JWS as a JSON object; JoseError (UnknownKey for an unknown kid) if it
    does not verify with a key of `keys` under one of `algorithms`."""
    alg = jws.alg
    accepted = tuple(algorithms)
    if alg not in accepted or alg not in SUPPORTED_ALGORITHMS:
        raise JoseError(f"the algorithm {alg[:20]!r} is not accepted (accepted: {', '.join(accepted)})")
    for key in keys.candidates(jws.kid, alg):
        if key.verify(alg, jws.signing_input, jws.signature):
            return json_object(jws.payload, "JWS payload")
    raise JoseError("the signature does not verify")
