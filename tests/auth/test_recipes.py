"""docs/guides/auth.md's recipes, run as written: each `<!-- recipe: NAME -->` block, after the setup block,
in bash, from a folder that looks like a clone of the repository. The comments under each command in
the recipe say what it prints; the test checks the same."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
from mcptest import ROOT

DOC = os.path.join(ROOT, "docs", "guides", "auth.md")
RECIPE = re.compile(r"<!-- recipe: (\w+) -->\n```sh\n(.*?)```", re.S)
PORTS = (3000, 8443, 9000)


def recipes():
    with open(DOC, encoding="utf-8") as file:
        return dict(RECIPE.findall(file.read()))


def run(name, folder):
    os.makedirs(os.path.join(ROOT, ".cache"), exist_ok=True)
    for link in ("server", "tests", ".cache"):  # .cache: the authorization server installed once, not per test
        os.symlink(os.path.join(ROOT, link), os.path.join(folder, link))
    blocks = recipes()
    script = "set -eu\n" + blocks["setup"] + blocks[name]
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               PYTHONPATH=os.path.join(ROOT, "server"))
    process = subprocess.Popen(["bash", "-c", script], cwd=folder, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        try:  # whatever the recipe left running (it kills its jobs itself when it gets to the end)
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert process.returncode == 0, output
    return output


@pytest.fixture
def free_ports():
    import socket

    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"port {port} is taken here, and the recipes use it")


def test_every_recipe_is_tested():
    assert set(recipes()) == {"setup", "static", "oauth", "proxy"}


def test_recipe_1_a_static_token_on_loopback(tmp_path, free_ports):
    output = run("static", str(tmp_path))
    assert '"structuredContent":{"authenticated":false}' in output
    assert 'WWW-Authenticate: Bearer realm="mcp", error="invalid_token"' in output


def test_recipe_2_oauth_with_jwt_access_tokens(tmp_path, free_ports):
    output = run("oauth", str(tmp_path))
    assert ('WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:3000/.well-known/oauth-protected-resource'
            '/mcp", scope="mcp:read"') in output
    assert '{"resource":"http://127.0.0.1:3000/mcp","authorization_servers":["http://127.0.0.1:9000"]' in output
    assert ('"structuredContent":{"authenticated":true,"subject":"mcp-client","client_id":"mcp-client",'
            '"scopes":["mcp:read"]}') in output
    assert '"isError":true' in output


@pytest.mark.skipif(shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"),
                    reason="nginx is not installed here (apt-get install nginx-light)")
def test_recipe_3_behind_a_tls_terminating_proxy(tmp_path, free_ports, monkeypatch):
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + "/usr/sbin")
    output = run("proxy", str(tmp_path))
    assert '"structuredContent":{"authenticated":true,"subject":"mcp-client"' in output
    assert "This server is behind a TLS-terminating proxy" in output
