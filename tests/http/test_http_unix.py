"""HTTP on a Unix socket (`--http unix:PATH`, httpd._unix): the same app as on a port, with the same limits and
authentication; the socket file made 0600 (never wider, whatever the umask), a stale one replaced, removed on exit;
and what is already at the path (a live server, another user's socket, a symbolic link, a file) never touched.

Over a Unix socket every peer is on this host, admitted by the file's mode: it is served as loopback is, with no
token needed, and with the Host and Origin checks of loopback still on (DNS rebinding reaches a Unix socket only
through a proxy that forwards a browser's requests to it, with the browser's Host and Origin).
"""

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile

import pytest
from legacy_http import LegacySession
from mcptest import (
    DEMO,
    GUNICORN,
    GUNICORN_CONF,
    GUNICORN_MISSING,
    HAS_GUNICORN,
    SLOW_TOOLS,
    HttpServer,
    UnixConnection,
    call,
    mcp_headers,
    request,
    server_command,
    start_slow_calls,
)

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def short_dir():
    """A directory of this user with a short path (AF_UNIX allows 107 bytes; pytest's tmp_path can be long)."""
    directory = tempfile.mkdtemp(prefix="mcpu")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def refused_start(path, *extra, env=None):
    """What `--http unix:PATH` says when it refuses to start (it must exit 1)."""
    done = subprocess.run(server_command(DEMO, "--http", f"unix:{path}", *extra), capture_output=True, text=True,
                          timeout=30, env=env)
    assert done.returncode == 1, done.stderr
    return done.stderr


def test_the_same_app_is_served_on_the_socket_in_both_eras(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    with HttpServer(DEMO, unix=path) as server:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        assert server.post(call("echo", text="over unix"))[2]["result"]["content"][0]["text"] == "over unix"
        session = LegacySession(server, "2025-06-18")
        assert session.call("echo", text="legacy")["content"][0]["text"] == "legacy"
        assert session.delete() == 204
        connection = server.connection()
        for number in range(20):  # keep-alive on one connection
            assert server.post(call("echo", id=number, text=str(number)), connection=connection)[0] == 200
        connection.close()
        assert '- "POST /mcp" 200 tools/call' in server.stderr  # the access log names no address: there is none
        assert server.stop() == 0
    assert not os.path.exists(path)  # removed on exit


def test_the_mode_is_the_sockets_whatever_the_umask_and_can_be_widened_on_purpose(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    wide_open = dict(os.environ)
    with HttpServer(DEMO, "--unix-socket-mode", "660", unix=path, env=wide_open) as server:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o660
        assert server.post(request("tools/list"))[0] == 200
    previous = os.umask(0)  # the server inherits a umask that hides nothing: the file must still be 0600
    try:
        with HttpServer(DEMO, unix=path):
            assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    finally:
        os.umask(previous)
    assert "a mode is 0 to 777" in subprocess.run(
        server_command(DEMO, "--http", f"unix:{path}", "--unix-socket-mode", "1777"), capture_output=True,
        text=True, timeout=30).stderr


def test_the_token_holds_on_the_socket(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    token = os.path.join(short_dir, "token")
    with open(token, "w") as file:
        file.write("s3cret\n")
    with HttpServer(DEMO, "--token-file", token, unix=path) as server:
        message = call("echo", text="x")
        assert server.post(message)[0] == 401  # a token, once given, is asked of local peers too
        assert server.post(message, headers=dict(mcp_headers(message), Authorization="Bearer s3cret"))[0] == 200


def test_the_limits_hold_on_the_socket(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    with HttpServer(SLOW_TOOLS, "--max-body-bytes", "10000", "--max-connections", "2", unix=path) as server:
        answers = []
        callers = start_slow_calls(server, 2, 2, answers)
        extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        extra.settimeout(10)
        extra.connect(path)
        extra.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
        assert extra.recv(1024).startswith(b"HTTP/1.1 503")  # --max-connections, as on a port
        extra.close()
        for caller in callers:
            caller.join(15)
        assert answers == [200, 200]
        assert server.post(call("echo", text="x" * 20_000))[0] == 413  # --max-body-bytes


def test_host_and_origin_are_checked_as_on_loopback(short_dir):
    """A proxy that forwards a browser's requests to the socket forwards its Host and Origin: a rebound name and
    a foreign page are refused as on loopback; localhost's are served."""
    path = os.path.join(short_dir, "mcp.sock")
    with HttpServer(DEMO, unix=path) as server:
        message = request("tools/list")
        assert server.post(message, headers=dict(mcp_headers(message), Host="attacker.example"))[0] == 403
        assert server.post(message, headers=dict(mcp_headers(message), Origin="https://attacker.example"))[0] == 403
        assert server.post(message, headers=dict(mcp_headers(message), Origin="http://localhost:5173"))[0] == 200
    with HttpServer(DEMO, "--allow-host", "mcp.internal", unix=path) as server:
        assert server.post(message, headers=dict(mcp_headers(message), Host="mcp.internal"))[0] == 200


def test_a_stale_socket_is_replaced_a_live_one_is_not(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)  # a socket file no server listens on: what a killed server leaves
    left.close()
    with HttpServer(DEMO, unix=path) as first:
        assert first.post(request("tools/list"))[0] == 200
        said = refused_start(path)
        assert f"cannot listen on unix:{path}: a server is listening there already" in said
        assert first.post(request("tools/list"))[0] == 200  # the first server's socket is untouched
        first.process.kill()  # SIGKILL: no clean-up, the file stays
        first.process.wait()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    with HttpServer(DEMO, unix=path) as second:  # and the next start replaces it
        assert second.post(request("tools/list"))[0] == 200


def test_a_file_or_a_planted_symbolic_link_at_the_path_is_never_touched(short_dir):
    path = os.path.join(short_dir, "mcp.sock")
    with open(path, "w") as file:
        file.write("precious")
    assert "a file that is not a socket is there" in refused_start(path)
    with open(path) as file:
        assert file.read() == "precious"
    os.unlink(path)
    target = os.path.join(short_dir, "elsewhere")
    os.symlink(target, path)  # dangling: a bind() that followed it would create the attacker's file
    assert "it is a symbolic link" in refused_start(path)
    assert os.readlink(path) == target and not os.path.exists(target)


def test_a_directory_others_may_write_is_refused_unless_sticky(short_dir):
    shared = os.path.join(short_dir, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)  # anyone could remove the socket and put theirs in its place
    said = refused_start(os.path.join(shared, "mcp.sock"))
    assert "others may write to its directory" in said and "not sticky" in said
    os.chmod(shared, 0o1777)  # as /tmp: others may write, but not remove what is ours
    path = os.path.join(shared, "mcp.sock")
    with HttpServer(DEMO, unix=path) as server:
        assert server.post(request("tools/list"))[0] == 200


@pytest.mark.skipif(not AS_ROOT, reason="only root can make a directory or a socket that belongs to another user")
def test_another_users_directory_or_socket_is_refused(short_dir):
    theirs = os.path.join(short_dir, "theirs")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, 65534, 65534)
    assert "belongs to another user (uid 65534)" in refused_start(os.path.join(theirs, "mcp.sock"))
    path = os.path.join(short_dir, "mcp.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)
    left.close()
    os.lchown(path, 65534, 65534)  # stale, but another user's: not ours to remove
    assert "the socket there belongs to another user (uid 65534)" in refused_start(path)
    assert os.lstat(path).st_uid == 65534


def test_what_belongs_to_someone_else_is_refused_whoever_runs_the_test(short_dir, monkeypatch):
    """The same refusals as above without root: this process is told it is another user, so what it owns is
    someone else's (the checks read os.geteuid(); the files, the socket and bind() are real)."""
    from mcpserver import ConfigError
    from mcpserver.httpd._unix import UnixSocketFile

    sticky = tempfile.gettempdir()  # /tmp: root's and sticky, so its directory passes for any user
    path = os.path.join(sticky, f"mcpx-{os.getpid()}.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)  # a stale socket of this user, which would be replaced...
    left.close()
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)  # ...were it ours
    try:
        with pytest.raises(ConfigError, match=f"belongs to another user \\(uid {os.getuid()}\\)") as refused:
            UnixSocketFile(path).listen()
        if os.stat(sticky).st_uid == 0:
            assert "the socket there belongs to another user" in str(refused.value)
        assert stat.S_ISSOCK(os.lstat(path).st_mode)  # left where it was
    finally:
        os.unlink(path)
    if os.getuid() != 0:  # root's directories are allowed to anyone: only then is the directory's owner refused
        with pytest.raises(ConfigError, match=r"its directory .* belongs to another user"):
            UnixSocketFile(os.path.join(short_dir, "other.sock")).listen()


def test_a_path_af_unix_cannot_take_gets_a_clear_error(short_dir):
    fits = os.path.join(short_dir, "s" * (107 - len(short_dir) - 1))
    assert len(os.fsencode(fits)) == 107
    with HttpServer(DEMO, unix=fits) as server:
        assert server.post(request("tools/list"))[0] == 200
        assert server.stop() == 0
    too_long = fits + "x"
    said = refused_start(too_long)
    assert "is 108 bytes: AF_UNIX allows 1 to 107" in said
    assert not os.path.exists(too_long) and not os.path.exists(too_long[:107])  # nothing truncated was made


def test_the_python_options_refuse_a_path_af_unix_cannot_take_and_dev_serves_ports_only(short_dir):
    from mcpserver import ConfigError
    from mcpserver.http import HttpOptions

    with pytest.raises(ConfigError, match="AF_UNIX allows"):
        HttpOptions(unix_socket="/" + "x" * 200)
    with pytest.raises(ConfigError, match="no NUL"):
        HttpOptions(unix_socket="\0abstract")
    assert HttpOptions(unix_socket=os.path.join(short_dir, "m.sock")).unix_socket_mode == 0o600
    python_m_mcpserver = server_command(DEMO)[:3]
    dev = subprocess.run([*python_m_mcpserver, "dev", "--http", "unix:/tmp/x.sock", DEMO], capture_output=True,
                         text=True, timeout=30)
    assert dev.returncode == 2 and "serve a Unix socket with mcpserver --http unix:PATH" in dev.stderr


@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
def test_gunicorn_bound_to_a_unix_socket_serves_its_local_peers_without_a_token(short_dir):
    path = os.path.join(short_dir, "g.sock")
    process = subprocess.Popen([*GUNICORN, *GUNICORN_CONF, "-b", f"unix:{path}", "--log-level", "warning",
                                f'mcpserver.http:create_app("{DEMO}")'], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        import time

        deadline = time.monotonic() + 20
        while not os.path.exists(path):
            assert process.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.1)
        connection = UnixConnection(path, 10)
        message = call("echo", text="via gunicorn")
        connection.request("POST", "/mcp", body=json.dumps(message), headers=mcp_headers(message))
        response = connection.getresponse()
        assert response.status == 200, response.read()
        assert json.loads(response.read())["result"]["content"][0]["text"] == "via gunicorn"
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
