"""MCP Apps in a real browser: server/examples/dice.py served over HTTP, its page loaded by a host made of the
official AppBridge (@modelcontextprotocol/ext-apps 2.x) into a sandboxed iframe of headless Chromium under the
spec's default Content Security Policy, where it calls its tools back through the host (apps_host.mjs says how).
Installs what it needs into .cache/extensions on first use (node_hosts.py)."""

import os
import re

import pytest
from mcptest import EXAMPLES, HttpServer
from node_hosts import chromium, run

DICE = os.path.join(EXAMPLES, "dice.py")
FACES = "\u2680\u2681\u2682\u2683\u2684\u2685"


@pytest.mark.parametrize(("mode", "protocol"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
def test_the_dice_app_shows_its_tools_result_and_rolls_again_through_the_host(tmp_path, mode, protocol):
    browser = chromium()
    with HttpServer(DICE) as server:
        seen = run("apps_host.mjs", server.url, mode, browser, str(tmp_path / "profile"), str(tmp_path / "dice.png"))
    assert seen["protocol"] == protocol
    assert seen["declared"] == ({} if protocol == "2026-07-28" else None)  # no legacy revision has extensions
    assert seen["tool"] == "roll_dice" and seen["meta"]["ui"] == {"resourceUri": "ui://dice/roller",
                                                                  "visibility": ["model", "app"]}
    assert seen["app"] == {"uri": "ui://dice/roller", "mimeType": "text/html;profile=mcp-app",
                           "meta": {"ui": {"prefersBorder": True}}}
    assert "connect-src 'none'" in seen["policy"] and seen["violations"] == []  # it needs no network at all
    rolled = seen["result"]
    assert seen["first"] == {"dice": " ".join(FACES[value - 1] for value in rolled["rolls"]),
                             "total": f"total {rolled['total']}"}  # the result the host handed the page
    again = re.fullmatch(r"total (\d+)", seen["again"]["total"])
    assert again and len(seen["again"]["dice"].split()) == 2  # the page's own call: two dice
    # The server counted both calls, the host's and the page's, in order: the page's went through to it.
    assert seen["again"]["history"] == f"2 rolls so far: {rolled['total']}, {again.group(1)}"
    assert seen["fromApp"][:2] == ["ui/initialize", "ui/notifications/initialized"]
    assert seen["fromApp"].count("tools/call") == 2
    assert (tmp_path / "dice.png").stat().st_size > 1000
