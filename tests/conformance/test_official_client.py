"""The official Python SDK client (mcp==2.3.0, which speaks 2026-07-28) drives every example.

Its default mode probes with server/discover and silently falls back to the old initialize
handshake on any error, so each test asserts that 2026-07-28 was really negotiated.
"""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from mcptest import DEMO, GIT, GUNICORN_MISSING, HAS_GUNICORN, MOVIES, ROOT, SLOW_TOOLS, HttpServer, gunicorn_server

mcp = pytest.importorskip("mcp", reason="the official client needs Python 3.10+ and the dev extras")

EXPECTED = {
    DEMO: ("echo", {"text": "héllo wörld"}, "héllo wörld"),
    MOVIES: ("book_tickets", {"movie_id": "m2", "showtime": "14:00", "adults": 2, "children": 1}, '"total_cents":2250'),
    GIT: ("git_log", {"max_count": 1}, None),
}


async def drive(target, example):
    async with mcp.Client(target) as client:
        assert client.protocol_version == "2026-07-28"
        tools = await client.list_tools()
        name, arguments, expected = EXPECTED[example]
        assert name in [tool.name for tool in tools.tools]
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result
        text = result.content[0].text
        if expected is not None:
            assert expected in text
        return client.server_info.name if client.server_info else None, text


@pytest.mark.parametrize("example", [DEMO, MOVIES, GIT], ids=["demo", "movies", "git"])
def test_the_official_client_drives_each_example_over_stdio(example):
    parameters = mcp.StdioServerParameters(command=sys.executable, args=["-m", "mcpserver", example], cwd=ROOT,
                                           env={**os.environ})
    name, _ = asyncio.run(drive(parameters, example))
    assert name in ("demo", "movies", "git")


@pytest.mark.parametrize("example", [DEMO, MOVIES, GIT], ids=["demo", "movies", "git"])
def test_the_official_client_drives_each_example_over_http(example):
    with HttpServer(example) as server:
        name, _ = asyncio.run(drive(f"http://127.0.0.1:{server.port}/mcp", example))
        assert name in ("demo", "movies", "git")
        assert server.stop() == 0


def test_the_official_client_reads_resources_and_prompts():
    async def session():
        parameters = mcp.StdioServerParameters(command=sys.executable, args=["-m", "mcpserver", MOVIES],
                                               env={**os.environ})
        async with mcp.Client(parameters) as client:
            assert client.protocol_version == "2026-07-28"
            resources = await client.list_resources()
            assert [r.uri for r in resources.resources] == ["movies://catalogue"]
            templates = await client.list_resource_templates()
            assert templates.resource_templates[0].uri_template == "movies://films/{movie_id}"
            film = await client.read_resource("movies://films/m3")
            assert "Amélie" in film.contents[0].text
            prompt = await client.get_prompt("recommend", {"mood": "happy", "company": "friends"})
            assert "I feel happy" in prompt.messages[0].content.text

    asyncio.run(session())


def stdio_target(example):
    return mcp.StdioServerParameters(command=sys.executable, args=["-m", "mcpserver", example], cwd=ROOT,
                                     env={**os.environ})


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_official_client_receives_strictly_increasing_progress(transport):
    async def session(target):
        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        async with mcp.Client(target) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("steps", {"count": 10}, progress_callback=on_progress)
        return seen, result

    if transport == "stdio":
        seen, result = asyncio.run(session(stdio_target(SLOW_TOOLS)))
    else:
        with HttpServer(SLOW_TOOLS) as server:
            seen, result = asyncio.run(session(f"http://127.0.0.1:{server.port}/mcp"))
    assert result.content[0].text == "10 steps"
    assert [p for p, _, _ in seen] == list(range(1, 11))
    assert all(total == 10 for _, total, _ in seen) and seen[-1][2] == "step 10"


def ticks(path):
    try:
        with open(path) as file:
            return file.read().count("tick")
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_cancelling_a_call_from_the_official_client_stops_the_tool(transport, tmp_path):
    path = str(tmp_path / "ticks")

    async def session(target):
        async with mcp.Client(target) as client:
            assert client.protocol_version == "2026-07-28"
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.call_tool("ticker", {"seconds": 30, "path": path}), 0.5)
            await asyncio.sleep(0.5)  # the cancel reaches the server (notifications/cancelled, or a closed stream)
            stopped = ticks(path)
            await asyncio.sleep(1)
            assert stopped > 0 and ticks(path) <= stopped + 1, "the tool kept running after the client cancelled"
            result = await client.call_tool("pid", {})  # and the connection still serves
            assert result.content[0].text.isdigit()

    if transport == "stdio":
        asyncio.run(session(stdio_target(SLOW_TOOLS)))
    else:
        with HttpServer(SLOW_TOOLS) as server:
            asyncio.run(session(f"http://127.0.0.1:{server.port}/mcp"))


INTERACTIVE = os.path.join(ROOT, "server", "examples", "interactive.py")
NOTES = os.path.join(ROOT, "server", "examples", "notes.py")


async def answer_everything(target):
    """Drive every kind of input request with the official client's own callbacks."""
    types = mcp.types
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        if "Where to" in params.message:
            return types.ElicitResult(action="accept", content={"city": "Kyoto"})
        if "How many days" in params.message:
            return types.ElicitResult(action="accept", content={"days": 5})
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def on_sample(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="old pond / frog jumps"))

    async def on_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp", name="tmp")])

    async with mcp.Client(target, elicitation_callback=on_elicit, sampling_callback=on_sample,
                          list_roots_callback=on_roots) as client:
        assert client.protocol_version == "2026-07-28"
        trip = await client.call_tool("trip_plan", {})
        deleted = await client.call_tool("delete_file", {"path": "/tmp/nothing"})
        haiku = await client.call_tool("haiku", {"topic": "frogs"})
        where = await client.call_tool("where_am_i", {})
    return asked, trip.content[0].text, deleted.content[0].text, haiku.content[0].text, where.structured_content


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_official_client_answers_elicitation_sampling_and_roots(transport):
    if transport == "stdio":
        asked, trip, deleted, haiku, where = asyncio.run(answer_everything(stdio_target(INTERACTIVE)))
    else:
        with HttpServer(INTERACTIVE) as server:
            asked, trip, deleted, haiku, where = asyncio.run(answer_everything(f"http://127.0.0.1:{server.port}/mcp"))
    assert trip == "5 days in Kyoto: book the train, pack light."
    assert deleted == "Deleted /tmp/nothing."
    assert haiku == "old pond / frog jumps"
    assert where == {"roots": ["file:///tmp"], "here": ["/tmp"]}
    assert asked[:2] == ["Where to?", "How many days in Kyoto?"] and "Write a haiku about frogs." in asked


@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
def test_rounds_on_different_gunicorn_workers_share_the_state_key(tmp_path):
    log = tmp_path / "access.log"
    with gunicorn_server(f"mcpserver.http:create_app({INTERACTIVE!r})", "-w", "2", "--access-logfile", str(log),
                         "--access-logformat", "%(p)s %(r)s",
                         env={"MCPSERVER_STATE_KEY": "shared by both workers"}) as server:
        for _ in range(6):  # each trip takes three rounds; connections are new per round, so workers vary
            _, trip, *_ = asyncio.run(answer_everything(server.url))
            assert trip == "5 days in Kyoto: book the train, pack light."
    workers = {line.split()[0] for line in log.read_text().splitlines() if "POST" in line}
    assert len(workers) == 2, f"every round landed on one worker: {workers}"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_official_client_listens_for_changes(transport):
    async def session(target):
        async with mcp.Client(target) as client:
            assert client.protocol_version == "2026-07-28"
            await client.call_tool("write_note", {"name": "plan", "text": "v1"})
            async with client.listen(tools_list_changed=True, resource_subscriptions=["notes://plan"]) as sub:
                await client.call_tool("write_note", {"name": "plan", "text": "v2"})
                await client.call_tool("enable_shouting", {})
                events = []
                async for event in sub:
                    events.append(event)
                    if len(events) == 2:
                        break
            tools = await client.list_tools()
        return events, [tool.name for tool in tools.tools]

    if transport == "stdio":
        events, tools = asyncio.run(session(stdio_target(NOTES)))
    else:
        with HttpServer(NOTES) as server:
            events, tools = asyncio.run(session(f"http://127.0.0.1:{server.port}/mcp"))
    assert "shout" in tools
    assert len(events) == 2, events


def test_the_printed_config_entry_connects_the_official_client(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mcpserver", "config", DEMO], capture_output=True, text=True,
                          check=True, cwd=str(tmp_path))
    entry = json.loads(done.stdout)["mcpServers"]["demo"]

    async def session():
        parameters = mcp.StdioServerParameters(command=entry["command"], args=entry["args"], cwd="/",
                                               env={**os.environ, **entry.get("env", {})})
        async with mcp.Client(parameters) as client:
            assert client.protocol_version == "2026-07-28"
            return (await client.call_tool("echo", {"text": "configured"})).content[0].text

    assert asyncio.run(session()) == "configured"
