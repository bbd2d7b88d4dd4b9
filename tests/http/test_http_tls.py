"""HTTPS from the built-in server (--tls-cert/--tls-key), over real sockets, with real certificates.

The certificates in tests/http/certs/ are made by tests/http/certs/make.sh (a test CA and two server
certificates it signs, for localhost, 127.0.0.1 and ::1), committed so that no cell needs openssl.
A Python built without the ssl module skips this file, saying so.
"""

import os
import shutil
import signal
import socket
import threading
import time
import warnings

import pytest
from mcptest import SLOW_TOOLS, HttpServer, call, free_port, request

ssl = pytest.importorskip("ssl", reason="this Python has no ssl module (built without OpenSSL), so it cannot "
                                        "serve HTTPS")

CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "certs")


def client_context(**versions):
    context = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
    for name, version in versions.items():
        setattr(context, name, version)
    return context


def install(name, folder):
    """Copy a certificate and its key to where the server reads them (as a deployment tool would)."""
    for suffix in ("pem", "key"):
        shutil.copyfile(os.path.join(CERTS, f"{name}.{suffix}"), os.path.join(folder, f"server.{suffix}"))
    return os.path.join(folder, "server.pem"), os.path.join(folder, "server.key")


def tls_server(folder, *extra, target=SLOW_TOOLS):
    cert, key = install("first", folder)
    return HttpServer(target, "--tls-cert", cert, "--tls-key", key, *extra, tls=client_context())


def served_name(server):
    """The common name of the certificate a new connection is served."""
    connection = server.connection()
    try:
        try:
            connection.connect()
        except ConnectionRefusedError:  # say what the server did (a lab run found a SIGHUP handler's crash so)
            raise AssertionError(f"refused; the server's exit status {server.process.poll()}, its stderr:\n"
                                 f"{server.stderr}") from None
        subject = connection.sock.getpeercert()["subject"]
        return dict(pair[0] for pair in subject)["commonName"]
    finally:
        connection.close()


@pytest.fixture
def served(tmp_path):
    with tls_server(str(tmp_path)) as server:
        yield server


def test_https_is_served_with_tls_1_2_or_newer(served):
    assert served.scheme == "https"
    connection = served.connection()
    try:
        status, _, body = served.post(call("pid"), connection=connection)
        assert status == 200 and body["result"]["content"][0]["text"].isdigit()
        assert connection.sock.version() in ("TLSv1.2", "TLSv1.3")
        for number in range(3):  # keep-alive over TLS
            assert served.post(request("tools/list", id=number), connection=connection)[2]["id"] == number
    finally:
        connection.close()
    assert served_name(served) == "mcpserver test first"


def test_tls_1_2_is_accepted_and_older_versions_refused(served):
    served.tls = client_context(maximum_version=ssl.TLSVersion.TLSv1_2)
    assert served.post(request("tools/list"))[0] == 200
    with warnings.catch_warnings():  # TLS 1.1 is deprecated: this client offers it on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        old = client_context(minimum_version=ssl.TLSVersion.TLSv1_1, maximum_version=ssl.TLSVersion.TLSv1_1)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # so it is the server, not this client's OpenSSL, that says no
    served.tls = old
    with pytest.raises(ssl.SSLError, match=r"(?i)alert protocol version|no protocols available"):
        served.post(request("tools/list"))


def test_a_plain_http_request_gets_a_plain_400_that_says_https(served):
    with socket.create_connection((served.host, served.port), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
        answer = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 ") and b"This port speaks HTTPS" in answer


def test_a_client_that_never_starts_its_handshake_is_dropped_and_blocks_no_one(tmp_path):
    with tls_server(str(tmp_path), "--header-timeout", "1") as server:
        silent = socket.create_connection((server.host, server.port), timeout=10)
        try:
            assert server.post(request("tools/list"))[0] == 200  # served meanwhile
            assert silent.recv(1) == b""  # closed by the server within the socket's 10 s (the deadline is 1 s)
        finally:
            silent.close()


def test_sighup_serves_a_rotated_certificate_and_keeps_requests_in_flight(tmp_path):
    with tls_server(str(tmp_path)) as server:
        kept = server.connection()
        kept.connect()
        answers = []
        slow = threading.Thread(target=lambda: answers.append(server.post(call("slow", seconds=1.5))))
        slow.start()
        time.sleep(0.3)
        install("second", str(tmp_path))
        server.process.send_signal(signal.SIGHUP)
        server.wait_for_stderr("TLS certificate reloaded")
        assert served_name(server) == "mcpserver test second"
        slow.join(30)
        assert answers and answers[0][0] == 200 and answers[0][2]["result"]["content"][0]["text"] == "slept"
        try:  # a connection opened before the reload goes on with the certificate it was given
            assert server.post(request("tools/list"), connection=kept)[0] == 200
            assert dict(pair[0] for pair in kept.sock.getpeercert()["subject"])["commonName"] == "mcpserver test first"
        finally:
            kept.close()
        assert server.process.poll() is None


def test_a_broken_certificate_on_sighup_keeps_the_current_one(tmp_path):
    with tls_server(str(tmp_path)) as server:
        with open(os.path.join(str(tmp_path), "server.pem"), "w") as broken:
            broken.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        server.process.send_signal(signal.SIGHUP)
        server.wait_for_stderr("keeping the current TLS certificate")
        assert served_name(server) == "mcpserver test first"
        assert server.post(request("tools/list"))[0] == 200


def test_oauth_may_bind_beyond_loopback_once_tls_is_on(tmp_path):
    port = free_port()
    resource = f"https://localhost:{port}/mcp"
    with tls_server(str(tmp_path), "--host", "0.0.0.0", "--port", str(port), "--resource", resource,
                    "--authorization-server", "https://auth.example.com") as server:
        assert server.url == f"https://0.0.0.0:{port}/mcp"
        server.host = "localhost"  # the name in the certificate
        status, headers, _ = server.post(call("pid"))
        assert status == 401
        assert f'resource_metadata="https://localhost:{port}/.well-known/oauth-protected-resource/mcp"' in \
            headers["www-authenticate"]
        status, _, body = server.post(method="GET", path="/.well-known/oauth-protected-resource/mcp", headers={})
        assert status == 200 and body["resource"] == resource


