"""mcpserver.auth._jose: published test vectors, and every way a token or key can be wrong."""

import base64
import hashlib
import hmac
import json

import pytest
from jose_keys import (
    A2_TOKEN,
    A3_TOKEN,
    EC_D,
    EC_JWK,
    EC_X,
    EC_Y,
    RFC_PAYLOAD,
    RSA_JWK,
    RSA_N,
    ec_keypair,
    ec_public,
    encode_part,
    hs256_with_public_key,
    number,
    pkcs1_sha256_block,
    rsa_sign_encoded,
    sign,
)
from mcpserver.auth import _jose
from mcpserver.auth._jose import (
    EcKey,
    JoseError,
    RsaKey,
    UnknownKey,
    b64url_decode,
    b64url_encode,
    key_from_jwk,
    parse_compact,
    parse_jwks,
    verify_jws,
)

RFC_CLAIMS = {"iss": "joe", "exp": 1300819380, "http://example.com/is_root": True}
PUBLIC_RSA = {"kty": "RSA", "n": RSA_N, "e": "AQAB"}
PUBLIC_EC = {"kty": "EC", "crv": "P-256", "x": EC_X, "y": EC_Y}
BOTH = parse_jwks({"keys": [RSA_JWK, EC_JWK]})

# RFC 6979 A.2.5: P-256 with SHA-256, the key and the signatures of "sample" and "test".
RFC6979_UX = 0x60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6
RFC6979_UY = 0x7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299
RFC6979_X = 0xC9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721
RFC6979 = [
    (b"sample", 0xEFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716,
     0xF7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8),
    (b"test", 0xF1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367,
     0x019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083),
]


def raw(r, s):
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def flip(token, part, position=5):
    """The token with one character of one part changed (to another valid base64url character)."""
    parts = token.split(".")
    text = parts[part]
    char = "A" if text[position] != "A" else "B"
    parts[part] = text[:position] + char + text[position + 1:]
    return ".".join(parts)


# --- published vectors ---------------------------------------------------------------------------------------

def test_rfc7515_a2_rs256_example_verifies():
    assert parse_compact(A2_TOKEN).payload == RFC_PAYLOAD
    assert verify_jws(parse_compact(A2_TOKEN), parse_jwks({"keys": [PUBLIC_RSA]})) == RFC_CLAIMS


def test_rfc7515_a3_es256_example_verifies():
    assert verify_jws(parse_compact(A3_TOKEN), parse_jwks({"keys": [PUBLIC_EC]})) == RFC_CLAIMS


def test_the_test_signer_reproduces_the_rfc_signature_and_public_point():
    """PKCS#1 v1.5 is deterministic: signing the RFC's input must give the RFC's signature byte for byte."""
    signing_input, _, signature = A2_TOKEN.rpartition(".")
    assert b64url_encode(rsa_sign_encoded(pkcs1_sha256_block(signing_input.encode()))) == signature
    assert ec_public(number(EC_D)) == (number(EC_X), number(EC_Y))
    assert ec_public(RFC6979_X) == (RFC6979_UX, RFC6979_UY)


@pytest.mark.parametrize(("message", "r", "s"), RFC6979)
def test_rfc6979_a25_p256_sha256_signatures_verify(message, r, s):
    key = EcKey(RFC6979_UX, RFC6979_UY)
    assert key.verify("ES256", message, raw(r, s))
    assert not key.verify("ES256", message + b".", raw(r, s))
    assert not key.verify("ES256", message, raw(r, (s + 1) % _jose.N))
    assert not key.verify("ES256", message, raw(s, r))


def test_ecdsa_accepts_both_s_and_its_negation_as_the_standard_does():
    message, r, s = RFC6979[0]
    assert EcKey(RFC6979_UX, RFC6979_UY).verify("ES256", message, raw(r, _jose.N - s))


def test_fresh_keys_sign_and_verify_many_times():
    for _ in range(5):
        d, jwk = ec_keypair()
        keys = parse_jwks({"keys": [dict(jwk, kid="k")]})
        assert verify_jws(parse_compact(sign({"n": 1}, kid="k", ec_d=d)), keys) == {"n": 1}


# --- ECDSA edges ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("r", "s"), [(0, 1), (1, 0), (_jose.N, 1), (1, _jose.N), (_jose.N + 1, 1),
                                      (2**256 - 1, 2**256 - 1)])
def test_ecdsa_r_and_s_out_of_range_are_refused(r, s):
    message, good_r, good_s = RFC6979[0]
    key = EcKey(RFC6979_UX, RFC6979_UY)
    assert not key.verify("ES256", message, raw(r, s))
    # r + N is the classic range-check bypass: it would match R.x when R.x < P - N.
    assert not key.verify("ES256", message, raw(good_r + _jose.N, good_s) if good_r + _jose.N < 2**256 else raw(0, 0))


def test_ecdsa_signature_must_be_raw_64_bytes():
    message, r, s = RFC6979[0]
    key = EcKey(RFC6979_UX, RFC6979_UY)
    good = raw(r, s)
    assert not key.verify("ES256", message, good[:-1])
    assert not key.verify("ES256", message, good + b"\x00")
    der = b"\x30\x45\x02\x21\x00" + good[:32] + b"\x02\x20" + good[32:]
    assert not key.verify("ES256", message, der)
    # A zero byte before s leaves the numbers unchanged: only the length check refuses this twin.
    assert not key.verify("ES256", message, good[:32] + b"\x00" + good[32:])


def test_points_off_the_curve_or_outside_the_field_are_refused():
    with pytest.raises(JoseError, match="not on P-256"):
        EcKey(RFC6979_UX, RFC6979_UY + 1)
    with pytest.raises(JoseError, match="not on P-256"):
        EcKey(RFC6979_UX + _jose.P, RFC6979_UY)
    with pytest.raises(JoseError, match="not on P-256"):
        EcKey(0, 0)
    with pytest.raises(JoseError, match="not on P-256"):
        key_from_jwk(dict(PUBLIC_EC, y=b64url_encode((number(EC_Y) ^ 1).to_bytes(32, "big"))))


def test_point_arithmetic_edge_cases_agree_with_the_group_law():
    g = (_jose.GX, _jose.GY)
    table = _jose._comb_table(*g)
    # n*G is infinity; (n-1)*G is -G; P + (-P) and P + P go through the special cases of the addition.
    assert _jose._to_affine(_jose._multiply_add(_jose.N, table, 0, table)) is None
    assert _jose._to_affine(_jose._multiply_add(_jose.N - 1, table, 0, table)) == (_jose.GX, _jose.P - _jose.GY)
    assert _jose._to_affine(_jose._multiply_add(1, table, _jose.N - 1, table)) is None
    assert _jose._to_affine(_jose._multiply_add(1, table, 1, table)) == _jose._to_affine(_jose._double((*g, 1)))


# --- RSA edges -----------------------------------------------------------------------------------------------

RSA_KEY = key_from_jwk(PUBLIC_RSA)


def test_rsa_accepts_only_the_exact_pkcs1_encoding():
    message = b"header.payload"
    assert RSA_KEY.verify("RS256", message, rsa_sign_encoded(pkcs1_sha256_block(message)))
    digest = hashlib.sha256(message).digest()
    info = bytes.fromhex("3031300d060960864801650304020105000420")
    bad_blocks = {
        "hash of another message": pkcs1_sha256_block(b"other"),
        "DigestInfo without NULL parameters": pkcs1_sha256_block(
            message, digest_info=bytes.fromhex("302f300b0609608648016503040201") + b"\x04\x20"),
        "SHA-1 DigestInfo": b"\x00\x01" + b"\xff" * 218 + b"\x00" + bytes.fromhex("3021300906052b0e03021a05000414")
        + digest[:20],
        # Bleichenbacher 2006: short padding, the hash, then garbage where a lax parser stops reading.
        "garbage after the hash": b"\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff\x00" + info + digest + b"\x42" * 194,
        "block type 2": b"\x00\x02" + pkcs1_sha256_block(message)[2:],
        "a zero byte in the padding": pkcs1_sha256_block(message)[:50] + b"\x00" + pkcs1_sha256_block(message)[51:],
    }
    for name, block in bad_blocks.items():
        assert len(block) == 256, name
        assert not RSA_KEY.verify("RS256", message, rsa_sign_encoded(block)), name


def test_rsa_signature_length_and_range():
    message = b"header.payload"
    good = rsa_sign_encoded(pkcs1_sha256_block(message))
    assert not RSA_KEY.verify("RS256", message, good[1:] if good[0] == 0 else good[:-1])
    assert not RSA_KEY.verify("RS256", message, b"\x00" + good)
    n = number(RSA_N)
    # s + n is the same residue, so pow() alone would accept it: only the s < n check refuses it.
    message = next(m for m in (b"m%d" % i for i in range(100))
                   if int.from_bytes(rsa_sign_encoded(pkcs1_sha256_block(m)), "big") + n < 1 << 2048)
    good = rsa_sign_encoded(pkcs1_sha256_block(message))
    assert RSA_KEY.verify("RS256", message, good)
    assert not RSA_KEY.verify("RS256", message, (int.from_bytes(good, "big") + n).to_bytes(256, "big"))
    assert not RSA_KEY.verify("RS256", message, n.to_bytes(256, "big"))


def test_weak_or_broken_rsa_keys_are_refused():
    with pytest.raises(JoseError, match="1024 bits"):
        RsaKey((1 << 1023) + 1, 65537)
    with pytest.raises(JoseError, match="bits"):
        RsaKey((1 << 8200) + 1, 65537)
    with pytest.raises(JoseError, match="bits"):
        RsaKey(number(RSA_N) + 1, 65537)  # even modulus
    for e in (1, 2, 65536, number(RSA_N) + 2, 1 << 300 | 1):
        with pytest.raises(JoseError, match="exponent"):
            RsaKey(number(RSA_N), e)


# --- compact JWS parsing ---------------------------------------------------------------------------------------

def test_base64url_is_strict_and_canonical():
    assert b64url_decode("QQ") == b"A"
    for bad in ("QQ==", "QR", "Q", "Q+", "Q/", "Q Q", "QQ\n", "é"):
        with pytest.raises(JoseError):
            b64url_decode(bad)


def test_a_signature_re_encoded_with_different_unused_bits_is_refused():
    """64 bytes take 86 characters; the last one carries 2 bits and 4 unused ones. Flipping an unused bit
    gives a string a lax decoder maps to the same bytes: a "different" token with the same signature."""
    head, payload, signature = A3_TOKEN.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(signature[-1]) ^ 1]
    assert base64.urlsafe_b64decode(signature[:-1] + twin + "==") == b64url_decode(signature)
    with pytest.raises(JoseError, match="canonical"):
        parse_compact(f"{head}.{payload}.{signature[:-1]}{twin}")


@pytest.mark.parametrize(("token", "message"), [
    ("a.b", "three dot-separated parts"),
    ("a.b.c.d", "three dot-separated parts"),
    ("a.b.c.d.e", "encrypted"),
    (".e30.AA", "header must be"),
    ("eyJhbGciOiJFUzI1NiJ9.e30.", "signature must be"),
    (encode_part(b"not json") + ".e30.AA", "not JSON"),
    (encode_part([1, 2]) + ".e30.AA", "not a JSON object"),
    (encode_part(b'{"alg":"ES256","alg":"none"}') + ".e30.AA", "repeats the member 'alg'"),
    (encode_part(b'{"alg":NaN}') + ".e30.AA", "NaN"),
    (encode_part(b"\xff\xfe") + ".e30.AA", "not UTF-8"),
    (encode_part({"typ": "JWT"}) + ".e30.AA", "no algorithm"),
    (encode_part({"alg": 5}) + ".e30.AA", "no algorithm"),
    (encode_part({"alg": "ES256", "crit": ["exp"], "exp": 1}) + ".e30.AA", "critical"),
    (encode_part({"alg": "ES256", "b64": False}) + ".e30.AA", "unencoded"),
    (encode_part({"alg": "ES256", "kid": 7}) + ".e30.AA", "kid"),
    (encode_part(b'{"alg":"ES256","x":' + b"[" * 70 + b"]" * 70 + b"}") + ".e30.AA", "nested"),
    (encode_part({"alg": "ES256", "pad": "x" * 2000}) + ".e30.AA", "header must be"),
    ("eyJhbGciOiJFUzI1NiJ9.e30." + "A" * 1367, "signature must be"),
    ("eyJhbGciOiJFUzI1NiJ9." + "A" * 16 * 1024 + ".AA", "longer than"),
    ("eyJhbGciOiJFUzI1NiJ9.e30=.AA", "not base64url"),
    ("eyJhbGciOiJFUzI1NiJ9.e30.A+", "not base64url"),
])
def test_malformed_tokens_are_refused_with_a_reason(token, message):
    with pytest.raises(JoseError, match=message):
        parse_compact(token)


def test_alg_none_is_refused_whatever_its_spelling_or_signature():
    for alg in ("none", "None", "NONE", "nOnE"):
        for signature in ("", "AA"):
            with pytest.raises(JoseError, match="alg none"):
                parse_compact(f"{encode_part({'alg': alg})}.{encode_part(RFC_CLAIMS)}.{signature}")


def test_a_payload_that_is_not_a_json_object_is_refused_after_verification():
    token = sign(b"[1, 2]", kid="ec-1")
    with pytest.raises(JoseError, match="payload is not a JSON object"):
        verify_jws(parse_compact(token), BOTH)
    with pytest.raises(JoseError, match="repeats"):
        verify_jws(parse_compact(sign(b'{"sub":"a","sub":"b"}', kid="ec-1")), BOTH)


# --- keys and algorithms ---------------------------------------------------------------------------------------

def test_tampered_payload_or_signature_fails():
    for token in (A2_TOKEN, A3_TOKEN):
        keys = parse_jwks({"keys": [PUBLIC_RSA if token is A2_TOKEN else PUBLIC_EC]})
        for part in (0, 1, 2):
            tampered = flip(token, part)
            with pytest.raises(JoseError):
                verify_jws(parse_compact(tampered), keys)
        swapped = token.split(".")
        swapped[1] = encode_part(dict(RFC_CLAIMS, iss="mallory"))
        with pytest.raises(JoseError, match="does not verify"):
            verify_jws(parse_compact(".".join(swapped)), keys)


def test_a_token_signed_by_another_key_with_the_same_kid_fails():
    d, _ = ec_keypair()
    with pytest.raises(JoseError, match="does not verify"):
        verify_jws(parse_compact(sign({"sub": "x"}, kid="ec-1", ec_d=d)), BOTH)


def test_a_key_embedded_in_the_token_is_never_used():
    d, attacker = ec_keypair()
    for name, value in (("jwk", attacker), ("jku", "https://attacker.example/jwks"), ("x5u", "https://a.example/c")):
        token = sign({"sub": "admin"}, {"alg": "ES256", "kid": "ec-1", name: value}, ec_d=d)
        with pytest.raises(JoseError, match="does not verify"):
            verify_jws(parse_compact(token), BOTH)


def test_hs256_signed_with_the_public_key_is_refused():
    """Algorithm confusion: a verifier that lets the token pick HMAC would check this 'signature' with the
    public key bytes as the secret, and accept it."""
    secrets_an_attacker_knows = [json.dumps(PUBLIC_RSA).encode(), json.dumps(RSA_JWK).encode(),
                                 b64url_decode(RSA_N), RSA_N.encode()]
    for secret in secrets_an_attacker_knows:
        token = hs256_with_public_key({"sub": "admin"}, secret, kid="rsa-1")
        with pytest.raises(JoseError, match="'HS256' is not accepted"):
            verify_jws(parse_compact(token), BOTH)
        with pytest.raises(JoseError, match="'HS256' is not accepted"):
            verify_jws(parse_compact(token), BOTH, algorithms=["HS256", "RS256"])
    assert hmac.compare_digest(b"a", b"a")  # (the forgery above is a real HMAC, made with the stdlib)


def test_symmetric_and_other_keys_in_a_jwks_are_skipped_not_used():
    keys = parse_jwks({"keys": [{"kty": "oct", "kid": "rsa-1", "k": "c2VjcmV0"}, {"kty": "OKP", "crv": "Ed25519"},
                                dict(EC_JWK, kid="enc", use="enc"), dict(EC_JWK, kid="ops", key_ops=["sign"]),
                                dict(EC_JWK, kid="p384", crv="P-384"), RSA_JWK]})
    assert [key.kid for key in keys.keys] == ["rsa-1"]
    assert [kid for kid, _ in keys.dropped] == ["rsa-1", None, "enc", "ops", "p384"]
    with pytest.raises(JoseError, match="no RS256 or ES256 key"):
        parse_jwks({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})


def test_the_algorithm_must_fit_the_key():
    es_with_rsa_kid = sign({"sub": "x"}, {"alg": "ES256", "kid": "rsa-1"})
    with pytest.raises(JoseError, match="cannot verify ES256"):
        verify_jws(parse_compact(es_with_rsa_kid), BOTH)
    rs_with_ec_kid = sign({"sub": "x"}, {"alg": "RS256", "kid": "ec-1"})
    with pytest.raises(JoseError, match="cannot verify RS256"):
        verify_jws(parse_compact(rs_with_ec_kid), BOTH)
    pinned = parse_jwks({"keys": [dict(RSA_JWK, alg="RS256"), dict(EC_JWK, alg="ES256")]})
    assert verify_jws(parse_compact(sign({"a": 1}, kid="ec-1")), pinned) == {"a": 1}
    with pytest.raises(JoseError, match="says it is for ES256"):
        key_from_jwk(dict(RSA_JWK, alg="ES256"))
    with pytest.raises(JoseError, match="not supported"):
        key_from_jwk(dict(RSA_JWK, alg="PS256"))
    with pytest.raises(JoseError, match="not accepted"):
        verify_jws(parse_compact(sign({"a": 1}, kid="ec-1")), BOTH, algorithms=["RS256"])


def test_unknown_kid_and_missing_kid():
    with pytest.raises(UnknownKey, match="'gone'"):
        verify_jws(parse_compact(sign({"a": 1}, kid="gone")), BOTH)
    assert verify_jws(parse_compact(sign({"a": 1})), BOTH) == {"a": 1}  # one EC key fits: it is the one
    _, other = ec_keypair()
    two_ec = parse_jwks({"keys": [EC_JWK, dict(other, kid="ec-2")]})
    with pytest.raises(JoseError, match="names no key"):
        verify_jws(parse_compact(sign({"a": 1})), two_ec)


def test_a_kid_whose_key_was_dropped_is_refused_for_that_reason_not_as_unknown():
    keys = parse_jwks({"keys": [EC_JWK, dict(EC_JWK, kid="enc", use="enc")]})
    with pytest.raises(JoseError, match="the key 'enc' is not usable: the key is for 'enc'") as refused:
        verify_jws(parse_compact(sign({"a": 1}, kid="enc")), keys)
    assert not isinstance(refused.value, UnknownKey)  # the set has that kid: fetching it again would not help


def test_malformed_jwks_documents():
    for document in ([], {"keys": {}}, {"nokeys": []}, "not json", {"keys": [RSA_JWK] * 65}):
        with pytest.raises(JoseError):
            parse_jwks(document)
    for jwk in (dict(PUBLIC_RSA, n=""), dict(PUBLIC_RSA, n=5), dict(PUBLIC_RSA, n="AA=="),
                dict(PUBLIC_EC, x=EC_X[:-2]), dict(PUBLIC_EC, kid=3), "string"):
        with pytest.raises(JoseError):
            key_from_jwk(jwk)
