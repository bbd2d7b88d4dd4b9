"""The conformance suite's three Skills scenarios (sep-2640-skills-enumeration, -manifest, -directory), their checks
asked again over stdio, which the suite cannot reach (it speaks HTTP only; `make conformance` runs it there):
a real `python -m mcpserver` on real pipes serving the example skills, every check applied to every entry (the
suite looks at the first), the digests checked against the bytes read back, and every message the server sends
validated against the official 2026-07-28 schema, as the suite's wire-schema check does."""

import hashlib
import os
import re

import pytest
from mcptest import DEMO, EXAMPLES, StdioServer, request

jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml", reason="PyYAML reads each SKILL.md as a host would, independently of our parser")
from test_official_schema import conforms  # noqa: E402  (after the importorskip that it needs too)

SKILLS = os.path.join(EXAMPLES, "skills")
EXTENSION = "io.modelcontextprotocol/skills"
NAME = re.compile(r"(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?")  # the suite's naming-rules pattern
REG_NAME = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
# RFC 3986 (`"format": "uri"` in the base schema): a scheme, then only unreserved, reserved and %XX.
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
FRONTMATTER = re.compile(r"^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)")  # the suite's block pattern


class Checked:
    """A stdio server whose every answer is validated against the schema as it arrives."""

    def __init__(self, server):
        self.server = server
        self.ids = 0

    def ask(self, method, **params):
        self.ids += 1
        response = self.server.ask(request(method, id=self.ids, **params))
        conforms(response, "JSONRPCMessage")
        conforms(response, "JSONRPCResultResponse" if "result" in response else "JSONRPCErrorResponse")
        for uri in re.findall(r"'uri': '([^']*)'", str(response)):
            assert URI.fullmatch(uri), f"{uri} is not an RFC 3986 URI"
        return response

    def result(self, method, **params):
        response = self.ask(method, **params)
        assert "result" in response, response
        return response["result"]

    def pages(self, method, key, **params):
        items, cursors = [], set()
        result = self.result(method, **params)
        while True:
            items += result[key]
            cursor = result.get("nextCursor")
            if not cursor:
                return items
            assert cursor not in cursors, "a cursor came back twice: the pages never end"
            cursors.add(cursor)
            result = self.result(method, cursor=cursor, **params)


@pytest.fixture(params=[[os.path.join(EXAMPLES, "everything.py")], [DEMO, "--skills", SKILLS]],
                ids=["everything.py", "demo.py --skills"])
def server(request):
    """The conformance fixture, and a server given the same skills on the command line."""
    with StdioServer(*request.param) as running:
        yield Checked(running)


def declared(server):
    capabilities = server.result("server/discover")["capabilities"]
    return capabilities, capabilities["extensions"][EXTENSION]


def test_enumeration(server):
    capabilities, settings = declared(server)
    assert isinstance(settings, dict) and not {"config", "specVersion", "stability", "id"} & set(settings)
    assert isinstance(capabilities.get("resources"), dict)  # capability-requires-resources
    first = server.result("skills/list")
    assert first["ttlMs"] >= 0 and first["cacheScope"] in ("public", "private") and first["resultType"] == "complete"
    entries = server.pages("skills/list", "skills")
    assert [e["uri"] for e in entries] == sorted({e["uri"] for e in entries})  # atomic: never on two pages
    assert len(entries) >= 2
    for entry in entries:
        uri, frontmatter, resources = entry["uri"], entry["frontmatter"], entry["resources"]
        segments = uri[len("skill://"):].split("/")
        assert uri.startswith("skill://") and segments[-1] == "SKILL.md" and segments[-2] == frontmatter["name"]
        assert NAME.fullmatch(frontmatter["name"]) and REG_NAME.fullmatch(segments[0])
        assert isinstance(frontmatter["description"], str) and frontmatter["description"]
        assert not any(key.startswith("io.modelcontextprotocol/") for key in frontmatter.get("metadata", {}))
        listed = [r["uri"] for r in resources]
        assert listed[0] == uri and len(listed) == len(set(listed)) <= 512
        assert all(r == uri or r.startswith(uri[:-len("SKILL.md")]) for r in listed)
        assert sum(r["size"] for r in resources) <= 16 * 1024 * 1024
        for resource in resources:  # what a host verifies on every read
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", resource["digest"]) and isinstance(resource["size"], int)
            contents = server.result("resources/read", uri=resource["uri"])["contents"][0]
            data = contents["text"].encode() if "text" in contents else __import__("base64").b64decode(contents["blob"])
            assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (resource["size"], resource["digest"])
        text = server.result("resources/read", uri=uri)["contents"][0]["text"]
        assert yaml.safe_load(FRONTMATTER.match(text).group(1)) == frontmatter  # entry-frontmatter-identical
        got = server.result("skills/get", uri=uri)
        assert got["skill"] == entry and "nextCursor" not in got and "ttlMs" in got and "cacheScope" in got
    assert len({e["frontmatter"]["name"] for e in entries}) == len(entries)  # names-should-be-unique
    unknown = server.ask("skills/get", uri="skill://mcp-conformance-nonexistent-skill-9f3a2b/SKILL.md")
    assert unknown["error"]["code"] == -32602


def test_manifest(server):
    listed = {r["uri"]: r for r in server.pages("resources/list", "resources")}
    skill_mds = [uri for uri in listed if uri.startswith("skill://") and uri.endswith("/SKILL.md")]
    assert skill_mds
    for uri in skill_mds:
        contents = server.result("resources/read", uri=uri)["contents"][0]
        frontmatter = yaml.safe_load(FRONTMATTER.match(contents["text"]).group(1))
        assert contents["mimeType"] == listed[uri]["mimeType"] == "text/markdown"
        assert listed[uri]["name"] == frontmatter["name"] == uri.split("/")[-2]
        assert listed[uri]["description"] == frontmatter["description"]
        assert all(re.match(r"[a-z0-9-]+(\.[a-z0-9-]+)+/", key, re.I) for key in {
            *contents.get("_meta", {}), *listed[uri].get("_meta", {})})


def test_directory(server):
    _, settings = declared(server)
    assert settings["directoryRead"] is True
    for entry in server.pages("skills/list", "skills"):
        root = entry["uri"][:-len("/SKILL.md")]
        children = server.pages("resources/directory/read", "resources", uri=root)
        assert all(isinstance(child["uri"], str) for child in children)
        files = {r["uri"] for r in entry["resources"]}
        seen, directories = set(), [child for child in children if child["mimeType"] == "inode/directory"]
        assert directories, f"{root} has no subdirectory to descend into"
        while directories:  # every level, down to the files: together exactly the manifest
            directory = directories.pop()
            for child in server.pages("resources/directory/read", "resources", uri=directory["uri"]):
                (directories.append if child["mimeType"] == "inode/directory" else seen.add)(
                    child if child["mimeType"] == "inode/directory" else child["uri"])
        seen |= {child["uri"] for child in children if child["mimeType"] != "inode/directory"}
        assert seen == files
        for not_a_directory in (entry["uri"], root + "/no-such-directory"):
            assert server.ask("resources/directory/read", uri=not_a_directory)["error"]["code"] == -32602
