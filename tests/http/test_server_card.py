"""Server Cards, experimental (`--server-card`, `--ai-catalog`; mcpserver.http._card): the card made from what
server/discover says, valid against the draft's schema vendored in spec/server-card/, with the draft's CORS and
caching headers, an ETag that If-None-Match revalidates (304), and the AI Catalog that points to it.
"""

import json
import os
import subprocess

import pytest
from jose_keys import KeyServer
from legacy_http import LEGACY_HEADERS
from mcpserver.schema._validate import validate
from mcptest import DEMO, ROOT, HttpServer, free_port, mcp_headers, request, server_command

CARDED = os.path.join(ROOT, "tests", "card_tools.py")
SPEC = os.path.join(ROOT, "spec", "server-card")
CORS = {"access-control-allow-origin": "*", "access-control-allow-methods": "GET",
        "access-control-allow-headers": "Content-Type, If-None-Match", "access-control-expose-headers": "ETag"}

try:
    import jsonschema
except ImportError:  # lab cells have only pytest: the SDK's validator alone decides there
    jsonschema = None


def card_schema():
    with open(os.path.join(SPEC, "schema.json"), encoding="utf-8") as file:
        schema = json.load(file)
    return {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/ServerCard"}


def card_errors(card):
    """What the draft's schema says of `card`: by the SDK's validator and, on the host, by jsonschema as well."""
    schema = card_schema()
    problems = list(validate(card, schema))
    if jsonschema is not None:
        problems += [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(card)]
    return problems


def undeclared(card):
    """Keys of the card, its remotes and their headers that the schema does not declare (it leaves objects open)."""
    defs = card_schema()["$defs"]
    found = [f"card.{key}" for key in card if key not in defs["ServerCard"]["properties"]]
    for remote in card.get("remotes", []):
        found += [f"remote.{key}" for key in remote if key not in defs["Remote"]["properties"]]
        for header in remote.get("headers", []):
            found += [f"header.{key}" for key in header if key not in defs["KeyValueInput"]["properties"]]
    return found


def get(server, path, **headers):
    return server.post(method="GET", path=path, headers=headers)


@pytest.fixture(scope="module")
def carded():
    with HttpServer(CARDED, "--ai-catalog") as server:
        yield server


def test_the_vendored_schema_tells_valid_examples_from_invalid_ones():
    """So that a card passing it means something: each of the draft's own examples is judged as the draft says."""
    for verdict in ("valid", "invalid"):
        folder = os.path.join(SPEC, "examples", "ServerCard", verdict)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                assert bool(card_errors(json.load(file))) == (verdict == "invalid"), name


def test_the_card_is_what_server_discover_and_initialize_say(carded):
    status, headers, raw = get(carded, "/mcp/server-card", Accept="application/mcp-server-card+json")
    assert status == 200 and headers["content-type"] == "application/mcp-server-card+json"
    card = json.loads(raw)
    assert card_errors(card) == [] and undeclared(card) == []
    discovered = carded.post(request("server/discover"))[2]["result"]
    info = discovered["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert {key: card[key] for key in info} == info  # name, version, title, description, websiteUrl: all of it
    assert set(card) - set(info) == {"$schema", "remotes"}
    remote, = card["remotes"]
    assert remote["type"] == "streamable-http" and remote["url"] == carded.url
    assert remote["supportedProtocolVersions"][:len(discovered["supportedVersions"])] == discovered["supportedVersions"]
    for legacy in remote["supportedProtocolVersions"][len(discovered["supportedVersions"]):]:  # by initialize
        opened = carded.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": legacy, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
            headers=LEGACY_HEADERS)[2]["result"]
        assert opened["protocolVersion"] == legacy
        assert {key: card[key] for key in opened["serverInfo"]} == opened["serverInfo"]


def test_the_draft_headers_and_an_etag_that_revalidates(carded):
    status, headers, body = get(carded, "/mcp/server-card")
    etag = headers["etag"]
    assert headers["cache-control"] == "public, max-age=3600" and CORS.items() <= headers.items()
    for asked in (etag, f"W/{etag}", "*", f'"elsewhere", {etag}'):
        status, again, rest = get(carded, "/mcp/server-card", **{"If-None-Match": asked})
        assert (status, rest) == (304, b""), asked
        assert again["etag"] == etag and again["cache-control"] == "public, max-age=3600"
        assert CORS.items() <= again.items()
    stale = '"' + "0" * 32 + '"'  # a card the client kept from before a deployment: the new one, with its tag
    status, fresh, raw = get(carded, "/mcp/server-card", **{"If-None-Match": stale})
    assert (status, fresh["etag"], raw) == (200, etag, body)
    status, _, raw = get(carded, "/mcp/server-card", **{"If-None-Match": ", ".join(['"x"'] * 3000)})
    assert (status, raw) == (200, body)  # a header of thousands of tags is read once, not matched against itself
    connection = carded.connection()  # a 304 has no body: the connection carries the next answer cleanly
    assert carded.post(method="GET", path="/mcp/server-card", headers={"If-None-Match": etag},
                       connection=connection)[0] == 304
    assert carded.post(request("tools/list"), connection=connection)[0] == 200
    connection.close()
    status, head, raw = carded.post(method="HEAD", path="/mcp/server-card", headers={})
    assert (status, raw, head["etag"], head["content-length"]) == (200, b"", etag, str(len(body)))


def test_browsers_may_read_it_from_any_origin_and_only_read_it(carded):
    status, headers, _ = carded.post(method="OPTIONS", path="/mcp/server-card", body=b"", headers={
        "Origin": "https://directory.example", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "if-none-match"})
    assert status == 204 and CORS.items() <= headers.items()
    status, headers, _ = get(carded, "/mcp/server-card", Origin="https://directory.example")
    assert status == 200 and headers["access-control-allow-origin"] == "*"  # the endpoint itself would say 403
    status, headers, _ = carded.post(method="POST", path="/mcp/server-card", body=b"{}", headers={})
    assert status == 405 and headers["allow"] == "GET, HEAD, OPTIONS"


def test_the_host_is_checked_first_and_never_written_into_a_card_unless_it_is_a_host(carded):
    assert get(carded, "/mcp/server-card", Host="attacker.example")[0] == 403  # a rebound name: no card
    status, _, raw = get(carded, "/mcp/server-card", Host='localhost:1/"><x')  # a name allowed, a port that is not
    card = json.loads(raw)
    assert status == 200 and "remotes" not in card and card_errors(card) == []
    assert b"<x" not in raw


def test_the_ai_catalog_points_to_the_card(carded):
    status, headers, raw = get(carded, "/.well-known/ai-catalog.json")
    assert status == 200 and headers["content-type"] == "application/ai-catalog+json"
    assert headers["cache-control"] == "public, max-age=3600" and "etag" in headers
    catalog = json.loads(raw)
    assert catalog == {"specVersion": "1.0", "entries": [{
        "identifier": "urn:air:127.0.0.1:mcp:weather", "type": "application/mcp-server-card+json",
        "url": carded.url + "/server-card"}]}
    assert get(carded, "/mcp/server-card")[0] == 200


def test_a_static_token_is_a_secret_input_of_the_card_never_its_value(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-do-not-leak\n")
    with HttpServer(CARDED, "--server-card", "--token-file", str(token)) as server:
        status, _, raw = get(server, "/mcp/server-card")  # public: no token asked
        assert status == 200 and b"s3cret" not in raw
        header, = json.loads(raw)["remotes"][0]["headers"]
        assert (header["name"], header["isRequired"], header["isSecret"]) == ("Authorization", True, True)
        assert card_errors(json.loads(raw)) == []
        assert get(server, "/.well-known/ai-catalog.json")[0] == 404  # not asked for
        message = request("tools/list")
        assert server.post(message)[0] == 401  # the endpoint still wants its token


def test_with_oauth_the_card_gives_the_resource_url():
    issuer = KeyServer()
    try:
        port = free_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        with HttpServer(CARDED, "--port", str(port), "--server-card", "--resource", resource,
                        "--authorization-server", issuer.issuer) as server:
            card = json.loads(get(server, "/mcp/server-card", Host=f"localhost:{port}")[2])
            assert card["remotes"][0]["url"] == resource  # not the Host the request came with
    finally:
        issuer.stop()


def test_on_a_unix_socket_the_card_has_no_url_and_the_catalog_carries_it_inline():
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="mcpc")  # short: AF_UNIX paths are 107 bytes at most
    with HttpServer(CARDED, "--ai-catalog", unix=os.path.join(directory, "c.sock")) as server:
        card = json.loads(get(server, "/mcp/server-card")[2])
        assert "remotes" not in card and card_errors(card) == []
        entry, = json.loads(get(server, "/.well-known/ai-catalog.json")[2])["entries"]
        assert entry["data"] == card and "url" not in entry
    shutil.rmtree(directory)


def test_off_unless_asked_and_refused_at_start_up_when_server_info_cannot_make_one():
    with HttpServer(DEMO) as server:
        assert get(server, "/mcp/server-card")[0] == 404
    said = subprocess.run(server_command(DEMO, "--http", "--port", "0", "--server-card"), capture_output=True,
                          text=True, timeout=30)
    assert said.returncode == 1 and "reverse-DNS form, namespace/name" in said.stderr and "'demo'" in said.stderr


def test_a_server_without_a_description_is_told_what_to_add(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "io.example/tools", "tools": [{"name": "t", "command": ["true"]}]}))
    said = subprocess.run(server_command(str(manifest), "--http", "--port", "0", "--server-card"),
                          capture_output=True, text=True, timeout=30)
    assert said.returncode == 1 and "needs the server's description" in said.stderr
    manifest.write_text(json.dumps({"name": "io.example/tools", "description": "Runs true.",
                                    "tools": [{"name": "t", "command": ["true"]}]}))
    with HttpServer(str(manifest), "--server-card") as server:
        card = json.loads(get(server, "/mcp/server-card")[2])
        assert card["description"] == "Runs true." and card_errors(card) == []
        assert mcp_headers(request("tools/list"))  # the endpoint serves on beside it
