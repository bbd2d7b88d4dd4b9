"""The public API's options are spelled out, so a mypy --strict user is told of a misspelt one (issue 24)."""

import os

import pytest

SNIPPET = '''
from mcpserver import Server

server = Server("typed")

@server.tool(descripton="misspelt")
def echo(text: str) -> str:
    return text

server.command("count", ["wc", "-c"], stdin={"argument": "text"}, timout=3)
server.resource("docs://x", mimetype="text/plain")
'''


@pytest.mark.host_only("runs mypy, a dev tool: the host has it (the dev extra), the lab's images do not")
def test_misspelt_options_are_type_errors(tmp_path):
    from mypy import api
    path = tmp_path / "typed.py"
    path.write_text(SNIPPET)
    out, err, _ = api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                           "--config-file", os.devnull, str(path)])
    for misspelt in ("descripton", "timout", "mimetype"):
        assert f'Unexpected keyword argument "{misspelt}"' in out, (misspelt, out, err)
