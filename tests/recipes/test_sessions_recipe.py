"""docs/guides/sessions.md's recipe, run as written: two replicas behind nginx routed by Mcp-Session-Id serve
legacy sessions whose tools ask the client for input; without the routing, answers go astray."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from mcptest import ROOT

DOC = os.path.join(ROOT, "docs", "guides", "sessions.md")
RECIPE = re.compile(r"<!-- recipe: (\w+) -->\n```sh\n(.*?)```", re.S)
HELPERS = "wait_for() { until curl -sk -o /dev/null \"$@\"; do sleep 0.2; done; }\n"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed here (apt-get install nginx-light)")


def recipe():
    with open(DOC, encoding="utf-8") as file:
        return dict(RECIPE.findall(file.read()))["replicas"]


def run(script, folder):
    for link in ("server", "tests"):
        os.symlink(os.path.join(ROOT, link), os.path.join(folder, link))
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"], "/usr/sbin"]),
               PYTHONPATH=os.path.join(ROOT, "server"))
    process = subprocess.Popen(["bash", "-c", "set -eu\n" + HELPERS + script], cwd=folder, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return process.returncode, output


@pytest.fixture
def free_ports():
    for port in (3000, 3001, 3002):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"port {port} is taken here, and the recipe uses it")


def test_the_recipe_routes_every_session_to_one_replica(tmp_path, free_ports):
    code, output = run(recipe(), str(tmp_path))
    assert code == 0 and "20 of 20 sessions: the elicitation's answer reached the waiting tool" in output, output


def test_without_the_hash_answers_reach_the_wrong_replica(tmp_path, free_ports):
    """The control: the same recipe round-robin loses answers, so the routing is what makes it work."""
    code, output = run(recipe().replace("hash $http_mcp_session_id consistent;", ""), str(tmp_path))
    assert code != 0 and re.search(r"(\d+) of 20 sessions", output) and "20 of 20" not in output, output
