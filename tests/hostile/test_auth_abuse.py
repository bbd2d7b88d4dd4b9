"""OAuth against slow, broken and many peers: an authorization server that trickles, answers broken HTTP or
hangs, and clients whose tokens are validly signed but absurd, name keys nobody has, or are random.

The authorization server is a real one as far as a resource server can tell, on 127.0.0.1: RFC 8414
metadata, a key set and RFC 7662 introspection, each of which a test can make slow. Tokens are real
RS256/ES256 JWTs from tests/jose_keys.py. No bound here is tight: the deadline is 5 s, the tests allow
20 s, and what they guard against is an answer that never comes (or a 500).
"""

import json
import secrets
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from jose_keys import EC_JWK, EC_Y, RSA_JWK, ec_keypair, number, rsa_keypair, sign
from mcpserver.auth import Authenticator, AuthUnavailable, InvalidToken, JwtValidator, _jose, fetch_json
from mcpserver.auth._jose import b64url_encode
from mcpserver.auth._principal import DEFAULT_REFRESH_FLOOR
from mcptest import DEMO, HttpServer, free_port, mcp_headers, request

try:
    import ssl
except ImportError:  # a Python built without OpenSSL (the lab's musl cell)
    ssl = None

RESOURCE = "https://mcp.example.test/mcp"
BOUND = 20  # seconds: what "answered promptly" means here, for a deadline of 5 s on a loaded machine


class AuthorizationServer:
    """Metadata, a key set and introspection on 127.0.0.1. `slow` trickles the key set one byte a second
    from its first byte ("head") or after its headers ("body"); introspection of a token not in `active`
    trickles its answer the same way (an overloaded server)."""

    def __init__(self):
        self.keys = [RSA_JWK, EC_JWK]
        self.slow = None
        self.failing = False  # the key set answered 500
        self.active = {}
        self.jwks_fetches = 0
        self.paths = []  # of every GET, in order
        self.introspections = 0
        self.stopped = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                owner.get(self)

            def do_POST(self):
                owner.introspect(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.issuer = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def get(self, handler):
        self.paths.append(handler.path)
        if handler.path == "/.well-known/oauth-authorization-server":
            self.send(handler, {"issuer": self.issuer, "jwks_uri": self.issuer + "/jwks",
                                "introspection_endpoint": self.issuer + "/introspect"})
        elif handler.path == "/jwks":
            self.jwks_fetches += 1
            if self.failing:
                handler.send_error(500)
            else:
                self.send(handler, {"keys": list(self.keys)}, self.slow)
        else:
            handler.send_error(404)

    def introspect(self, handler):
        self.introspections += 1
        form = urllib.parse.parse_qs(handler.rfile.read(int(handler.headers["Content-Length"])).decode())
        token = form.get("token", [""])[0]
        if token in self.active:
            self.send(handler, {"active": True, **self.active[token]})
        else:
            self.send(handler, {"active": False}, "head")

    def send(self, handler, document, slow=None):
        body = json.dumps(document).encode()
        head = f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        quick, trickled = {None: (head + body, b""), "head": (b"", head + body), "body": (head, body)}[slow]
        try:
            handler.wfile.write(quick)
            for byte in trickled:
                if self.stopped.wait(1):
                    return
                handler.wfile.write(bytes([byte]))
        except OSError:  # the resource server gave up on us
            pass

    def stop(self):
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def authorization_server():
    server = AuthorizationServer()
    yield server
    server.stop()


def resource_server(issuer, *extra):
    """`python -m mcpserver --http` with OAuth: JWTs from `issuer` (a URL), keys from its metadata."""
    port = free_port()
    return HttpServer(DEMO, "--port", str(port), "--resource", f"http://127.0.0.1:{port}/mcp",
                      "--authorization-server", issuer, *extra)


def token(audience, issuer, kid="ec-1", ec_d=None, **changes):
    now = int(time.time())
    claims = {"iss": issuer, "aud": audience, "sub": "alice", "iat": now, "exp": now + 300,
              "jti": secrets.token_hex(8), **changes}  # a jti of its own: no two tokens alike, none cached
    alg = "RS256" if kid.startswith("rsa") else "ES256"
    return sign(claims, kid=kid, alg=alg, **({"ec_d": ec_d} if ec_d else {}))


def post(server, bearer, timeout=30):
    message = request("tools/list")
    headers = dict(mcp_headers(message), Authorization=f"Bearer {bearer}")
    connection = server.connection(timeout=timeout)
    try:
        return server.post(message, headers=headers, connection=connection)
    finally:
        connection.close()


def concurrently(seconds, *functions):
    """Each function on a thread of its own, all at once; their outcomes, ("returned", value) or ("raised",
    exception), once every one has ended within `seconds` of the start (else AssertionError)."""
    outcomes = [[] for _ in functions]

    def run(function, outcome):
        try:
            outcome.append(("returned", function()))
        except Exception as error:  # the outcome is what the test looks at
            outcome.append(("raised", error))

    threads = [threading.Thread(target=run, args=pair, daemon=True) for pair in zip(functions, outcomes)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    missing = sum(not outcome for outcome in outcomes)
    assert not missing, f"{missing} of {len(functions)} got no answer within {seconds} s"
    return [outcome[0] for outcome in outcomes]


def within(seconds, function):
    return concurrently(seconds, function)[0]


def until(condition, seconds=BOUND):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


# --- the deadline is the whole request's, and nobody queues behind a slow fetch -------------------------------

@pytest.mark.parametrize("slow", ["head", "body"])
def test_a_key_set_trickled_a_byte_a_second_is_503_within_the_deadline(authorization_server, slow):
    authorization_server.slow = slow
    issuer = authorization_server.issuer
    with resource_server(issuer) as server:
        answers = concurrently(BOUND, *[lambda kid=kid: post(server, token(server.url, issuer, kid=kid))
                                        for kid in ("ec-1", "rsa-1", "ec-1", "rsa-1")])
    for outcome, answer in answers:
        assert outcome == "returned", answer
        status, headers, _ = answer
        assert status == 503 and headers["retry-after"].isdigit()


def test_a_known_key_never_waits_for_a_slow_refresh(authorization_server):
    issuer = authorization_server.issuer
    check = JwtValidator(issuer=issuer, audience=RESOURCE, jwks_max_age=1, refresh_floor=1, timeout=60)
    assert check(token(RESOURCE, issuer)).subject == "alice"
    authorization_server.slow = "body"
    time.sleep(1.5)  # the keys are now older than jwks_max_age: the next check starts a refresh
    for _ in range(3):
        outcome, principal = within(BOUND, lambda: check(token(RESOURCE, issuer)))
        assert outcome == "returned" and principal.subject == "alice"
    until(lambda: authorization_server.jwks_fetches == 2)  # the refresh is under way, trickling


def test_unknown_kids_do_not_queue_behind_a_slow_fetch(authorization_server):
    issuer = authorization_server.issuer
    check = JwtValidator(issuer=issuer, audience=RESOURCE, timeout=60)
    check(token(RESOURCE, issuer))
    authorization_server.slow = "body"
    # The first unknown kid starts a fetch and waits for it (up to the validator's timeout, 60 s here).
    threading.Thread(target=concurrently, args=(90, lambda: check(token(RESOURCE, issuer, kid="new-1"))),
                     daemon=True).start()
    until(lambda: authorization_server.jwks_fetches == 2)  # the first unknown kid's fetch is trickling
    outcome, principal = within(BOUND, lambda: check(token(RESOURCE, issuer)))
    assert outcome == "returned" and principal.subject == "alice"
    outcome, refused = within(BOUND, lambda: check(token(RESOURCE, issuer, kid="new-2")))
    assert outcome == "raised" and isinstance(refused, AuthUnavailable), refused
    assert dict(refused.headers())["Retry-After"].isdigit()
    assert authorization_server.jwks_fetches == 2


# --- kids the key set lacks: 401 (RFC 6750 §3.1) once a fetch says so, 503 only while none can be fetched -------

class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


def test_unknown_kids_after_a_fetch_are_401_until_the_next_is_due_and_fetches_stay_rate_limited(authorization_server):
    issuer, clock = authorization_server.issuer, Clock()
    check = JwtValidator(issuer=issuer, audience=RESOURCE, clock=clock)
    check(token(RESOURCE, issuer))
    for attempt in range(30):  # an attacker's random kids: the first one's fetch answers for all of them
        clock.now += 1
        with pytest.raises(InvalidToken, match="no key has the id"):
            check(token(RESOURCE, issuer, kid=f"random-{attempt}"))
    assert authorization_server.jwks_fetches == 2
    d2, jwk2 = ec_keypair()
    authorization_server.keys = [EC_JWK, dict(jwk2, kid="ec-2")]  # rotated in while the floor holds: not seen yet
    with pytest.raises(InvalidToken, match="no key has the id 'ec-2'"):
        check(token(RESOURCE, issuer, kid="ec-2", ec_d=d2))
    assert authorization_server.jwks_fetches == 2
    clock.now += DEFAULT_REFRESH_FLOOR  # the floor ends: the next unknown kid is looked for, and found
    assert check(token(RESOURCE, issuer, kid="ec-2", ec_d=d2)).subject == "alice"
    assert authorization_server.jwks_fetches == 3


def test_a_kid_whose_key_the_issuer_published_unusable_is_401_at_once_without_a_fetch(authorization_server):
    weak_n, weak_d = rsa_keypair(1024)
    dropped = {
        "rsa-1024": ({"kty": "RSA", "kid": "rsa-1024", "n": weak_n, "e": "AQAB"}, "1024 bits"),
        "ec-enc": (dict(EC_JWK, kid="ec-enc", use="enc"), "for 'enc', not for signatures"),
        "ec-off-curve": (dict(EC_JWK, kid="ec-off-curve", y=b64url_encode((number(EC_Y) ^ 1).to_bytes(32, "big"))),
                         "not on P-256"),
        "ec-x-is-p": (dict(EC_JWK, kid="ec-x-is-p", x=b64url_encode(_jose.P.to_bytes(32, "big"))), "not on P-256"),
    }
    authorization_server.keys = [RSA_JWK, EC_JWK, *(jwk for jwk, _ in dropped.values())]
    issuer = authorization_server.issuer
    check = JwtValidator(issuer=issuer, audience=RESOURCE)
    check(token(RESOURCE, issuer))
    for kid, (_, why) in dropped.items():  # validly signed where the key allows it: refused for the key's flaw
        claims = {"iss": issuer, "aud": RESOURCE, "sub": "alice", "exp": int(time.time()) + 300}
        rsa = {"alg": "RS256", "rsa": (weak_n, weak_d)} if kid == "rsa-1024" else {}
        forged = sign(claims, kid=kid, **rsa)
        with pytest.raises(InvalidToken, match=f"the key '{kid}' is not usable: .*{why}"):
            check(forged)
    assert authorization_server.jwks_fetches == 1  # the set has these kids: fetching it again would not help


def test_a_path_traversal_kid_is_401_and_never_part_of_a_request(authorization_server):
    issuer = authorization_server.issuer
    check = JwtValidator(issuer=issuer, audience=RESOURCE)
    check(token(RESOURCE, issuer))
    for kid in ("../../../../etc/passwd", "../jwks", "/.well-known/oauth-authorization-server", "..%2f..%2fjwks",
                "jwks?kid=ec-1", "http://127.0.0.1:1/jwks", "..\\..\\jwks"):
        with pytest.raises(InvalidToken, match="no key has the id"):
            check(token(RESOURCE, issuer, kid=kid))
    assert authorization_server.paths == ["/.well-known/oauth-authorization-server", "/jwks", "/jwks"]


def test_an_unknown_kid_is_503_only_while_the_key_set_cannot_be_fetched(authorization_server):
    issuer, clock = authorization_server.issuer, Clock()
    check = JwtValidator(issuer=issuer, audience=RESOURCE, clock=clock)
    check(token(RESOURCE, issuer))
    authorization_server.failing = True
    with pytest.raises(AuthUnavailable, match="answered 500"):
        check(token(RESOURCE, issuer, kid="new-1"))
    clock.now += 20
    with pytest.raises(AuthUnavailable, match="could not be fetched again") as refused:
        check(token(RESOURCE, issuer, kid="new-2"))
    assert refused.value.headers() == [("Retry-After", str(int(DEFAULT_REFRESH_FLOOR) - 20))]
    assert check(token(RESOURCE, issuer)).subject == "alice"  # the keys it has still serve
    assert authorization_server.jwks_fetches == 2
    authorization_server.failing = False
    clock.now += DEFAULT_REFRESH_FLOOR
    with pytest.raises(InvalidToken, match="no key has the id 'new-2'"):
        check(token(RESOURCE, issuer, kid="new-2"))
    assert authorization_server.jwks_fetches == 3


def test_a_key_rotated_in_while_the_refresh_floor_holds_is_401_through_the_server(authorization_server):
    issuer = authorization_server.issuer
    d2, jwk2 = ec_keypair()
    with resource_server(issuer) as server:
        assert post(server, token(server.url, issuer))[0] == 200
        status, headers, _ = post(server, token(server.url, issuer, kid="ec-2", ec_d=d2))
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]  # fetched: it has no ec-2
        authorization_server.keys = [EC_JWK, dict(jwk2, kid="ec-2")]  # ... until now
        status, headers, _ = post(server, token(server.url, issuer, kid="ec-2", ec_d=d2))
        # A fetch less than a minute ago did not have it: invalid, like any unknown key, until the floor ends
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
    assert authorization_server.jwks_fetches == 2


# --- claims: every malformed token is 401, and refused from the cache the second time ----------------------------

ABSURD = [{"exp": 10**400}, {"nbf": 10**400}, {"exp": -(10**400)}, {"exp": 2**1023 * 2}, {"nbf": -(2**1100)}]


@pytest.mark.parametrize("changes", ABSURD, ids=["exp-huge", "nbf-huge", "exp-negative", "exp-2^1024", "nbf-neg"])
def test_a_validly_signed_token_with_an_absurd_time_is_401(authorization_server, changes):
    with resource_server(authorization_server.issuer) as server:
        bad = token(server.url, authorization_server.issuer, **changes)
        for _ in range(2):
            status, headers, _ = post(server, bad)
            assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
        assert post(server, token(server.url, authorization_server.issuer))[0] == 200
    assert "Traceback" not in server.stderr


@pytest.mark.parametrize("changes", ABSURD, ids=["exp-huge", "nbf-huge", "exp-negative", "exp-2^1024", "nbf-neg"])
def test_an_absurd_token_is_checked_once_then_refused_from_the_cache(changes):
    calls = []
    inner = JwtValidator(issuer="https://as.example.test", audience=RESOURCE, jwks={"keys": [EC_JWK]})
    auth = Authenticator(lambda bearer: calls.append(bearer) or inner(bearer))
    bad = token(RESOURCE, "https://as.example.test", **changes)
    for _ in range(3):
        with pytest.raises(InvalidToken):
            auth.authenticate(f"Bearer {bad}")
    assert len(calls) == 1


# --- an authorization server that speaks broken HTTP is 503, never 500 -----------------------------------------

def raw_server(reply, trickle=False):
    """Answers every connection with `reply` (after reading what was sent), a byte a second if `trickle`."""
    listener = socket.create_server(("127.0.0.1", 0))
    stopped = threading.Event()

    def answer(connection):
        with connection:
            try:
                connection.recv(65536)
                if not trickle:
                    connection.sendall(reply)
                    return
                for byte in reply:
                    if stopped.wait(1):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                pass

    def serve():
        while not stopped.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, stopped


BROKEN = {
    "101-headers": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"\r\n{}",
    "long-header-line": b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n{}",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "cut-short": b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"keys": []}',
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
}


@pytest.mark.parametrize("reply", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_http_from_the_authorization_server_is_503(reply):
    listener, stopped = raw_server(reply)
    try:
        with pytest.raises(AuthUnavailable) as refused:
            fetch_json(f"http://127.0.0.1:{listener.getsockname()[1]}/jwks", timeout=5)
        assert refused.value.status == 503
    finally:
        stopped.set()
        listener.close()


def test_broken_http_from_the_authorization_server_is_503_through_the_server():
    listener, stopped = raw_server(BROKEN["101-headers"])
    issuer = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with resource_server(issuer) as server:
            status, headers, _ = post(server, token(server.url, issuer))
        assert status == 503 and "retry-after" in headers
        assert "Traceback" not in server.stderr
    finally:
        stopped.set()
        listener.close()


@pytest.mark.skipif(ssl is None, reason="this Python has no ssl module")
def test_a_tls_handshake_trickled_a_byte_a_second_is_cut_at_the_deadline():
    # A TLS record header announcing a 16 KiB handshake message, then its bytes one a second.
    listener, stopped = raw_server(b"\x16\x03\x03\x40\x00" + b"\x02" * 16_384, trickle=True)
    try:
        outcome, refused = within(BOUND, lambda: fetch_json(f"https://127.0.0.1:{listener.getsockname()[1]}/jwks",
                                                            timeout=2))
        assert outcome == "raised" and isinstance(refused, AuthUnavailable), refused
    finally:
        stopped.set()
        listener.close()


# --- introspection: random tokens cannot take every connection while the authorization server is slow ----------

def test_random_tokens_cannot_take_every_connection_while_introspection_is_slow(authorization_server, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("introspection-secret\n")
    port = free_port()
    authorization_server.active["good-token"] = {"aud": f"http://127.0.0.1:{port}/mcp", "sub": "alice",
                                                 "exp": int(time.time()) + 600}
    with HttpServer(DEMO, "--port", str(port), "--resource", f"http://127.0.0.1:{port}/mcp",
                    "--authorization-server", authorization_server.issuer, "--introspection-client-id", "rs",
                    "--introspection-secret-file", str(secret)) as server:
        assert post(server, "good-token")[0] == 200  # now cached: it costs no introspection again
        before = authorization_server.introspections
        answered = []
        # 80 random tokens at once (the server has 64 connections), each to be introspected, slowly.
        attackers = threading.Thread(target=lambda: answered.extend(concurrently(60, *[
            lambda n=n: post(server, f"random-{n}", timeout=60)[0] for n in range(80)])), daemon=True)
        attackers.start()
        until(lambda: authorization_server.introspections > before)
        time.sleep(1)  # the 80 have all connected by now
        status, _, _ = post(server, "good-token", timeout=BOUND)
        attackers.join(BOUND)
    assert status == 200, f"a known token was refused ({status}) while random ones waited for introspection"
    assert answered == [("returned", 503)] * 80  # each within the deadline, or at once
    assert authorization_server.introspections - before <= 8  # DEFAULT_MAX_INTROSPECTIONS at a time
