"""The Skills extension (mcpserver.skills, SEP-2640): skill directories served as skill:// resources, with a
manifest of every file's digest and size, skills/list, skills/get and resources/directory/read.

Every test writes real files into its own directory and asks through the protocol core (mcpserver.testing).
The attacker's side (symlinks, devices, `..`) is tests/hostile/test_skills_abuse.py; the conformance suite's
own checks over stdio are tests/conformance/test_skills_checks.py.
"""

import hashlib
import json
import os
from urllib.parse import unquote

import pytest
from mcpserver import ConfigError, Server
from mcpserver.skills import MAX_SKILL_BYTES, MAX_SKILL_FILES
from mcpserver.testing import Client, ClientError


def skill_md(name, description="Does one thing well.", extra=""):
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n\nThe body.\n"


def tree(root, files):
    """Write `files` (relative path -> text or bytes) under `root`; return root as a str."""
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(root)


def served(root, prefix="", **options):
    server = Server("skills-test", **options)
    server.skills(root, prefix)
    return server


@pytest.fixture
def skills(tmp_path):
    return tree(tmp_path / "skills", {
        "pdf/SKILL.md": skill_md("pdf", extra="license: Apache-2.0\nmetadata:\n  version: '2.1'\n"),
        "pdf/templates/invoice.md": "# Invoice\n",
        "pdf/templates/regional/eu.md": "# EU\n",
        "pdf/scripts/extract.py": "print('extract')\n",
        "acme/billing/refunds/SKILL.md": skill_md("refunds"),
        "acme/billing/refunds/examples/email.md": "Dear customer,\n",
        "acme/billing/README.md": "not in any skill\n",
    })


def test_every_directory_holding_a_skill_md_is_a_skill_at_its_path_below_the_root(skills):
    with Client(served(skills)) as client:
        assert [entry["uri"] for entry in client.list_skills()] == [
            "skill://acme/billing/refunds/SKILL.md", "skill://pdf/SKILL.md"]
    with Client(served(skills, "team/docs")) as client:
        assert [entry["uri"] for entry in client.list_skills()] == [
            "skill://team/docs/acme/billing/refunds/SKILL.md", "skill://team/docs/pdf/SKILL.md"]


def test_a_root_that_is_itself_a_skill_is_named_by_its_directory(skills):
    with Client(served(os.path.join(skills, "pdf"))) as client:
        assert [entry["uri"] for entry in client.list_skills()] == ["skill://pdf/SKILL.md"]


def test_the_manifest_lists_every_file_once_with_the_sha256_and_size_of_its_bytes(skills):
    with Client(served(skills)) as client:
        entry = client.get_skill("skill://pdf/SKILL.md")
        assert [r["uri"] for r in entry["resources"]] == [
            "skill://pdf/SKILL.md", "skill://pdf/scripts/extract.py", "skill://pdf/templates/invoice.md",
            "skill://pdf/templates/regional/eu.md"]
        for resource in entry["resources"]:
            data = client.read_resource(resource["uri"]).text.encode()
            assert resource["size"] == len(data)
            assert resource["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert "skill://acme/billing/README.md" not in {r["uri"] for r in client.list_resources()}


def test_the_frontmatter_is_every_field_as_written_and_skill_md_is_markdown_named_by_it(skills):
    with Client(served(skills)) as client:
        assert client.get_skill("skill://pdf/SKILL.md")["frontmatter"] == {
            "name": "pdf", "description": "Does one thing well.", "license": "Apache-2.0",
            "metadata": {"version": "2.1"}}
        listed = {r["uri"]: r for r in client.list_resources()}
        assert listed["skill://pdf/SKILL.md"] == {"uri": "skill://pdf/SKILL.md", "name": "pdf",
                                                  "description": "Does one thing well.", "mimeType": "text/markdown"}
        assert listed["skill://pdf/scripts/extract.py"] == {"uri": "skill://pdf/scripts/extract.py",
                                                            "name": "extract.py", "mimeType": "text/x-python"}


def test_a_file_name_with_a_space_or_a_non_ascii_letter_is_percent_encoded_and_read_back(tmp_path):
    root = tree(tmp_path, {"notes/SKILL.md": skill_md("notes"), "notes/my notes é.md": "été\n",
                           "notes/a+b (1)@x:y.txt": "kept\n", "notes/50%.txt": "half\n"})
    with Client(served(root)) as client:
        uris = [r["uri"] for r in client.get_skill("skill://notes/SKILL.md")["resources"]]
        assert uris == ["skill://notes/SKILL.md", "skill://notes/50%25.txt", "skill://notes/a+b%20(1)@x:y.txt",
                        "skill://notes/my%20notes%20%C3%A9.md"]
        assert [unquote(uri.rsplit("/", 1)[1]) for uri in uris[1:]] == ["50%.txt", "a+b (1)@x:y.txt", "my notes é.md"]
        assert client.read_resource("skill://notes/my%20notes%20%C3%A9.md").text == "été\n"
        with pytest.raises(ClientError) as raw:
            client.read_resource("skill://notes/my notes é.md")  # only the URI as published names the file
        assert raw.value.code == -32602


def test_a_binary_file_is_a_blob_whose_digest_covers_its_bytes(tmp_path):
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    root = tree(tmp_path, {"logo/SKILL.md": skill_md("logo"), "logo/logo.png": png})
    with Client(served(root)) as client:
        entry = client.get_skill("skill://logo/SKILL.md")
        read = client.read_resource("skill://logo/logo.png")
        assert read.blob == png and read.contents[0]["mimeType"] == "image/png"
        assert entry["resources"][1] == {"uri": "skill://logo/logo.png", "size": len(png),
                                         "digest": "sha256:" + hashlib.sha256(png).hexdigest()}


def test_a_nested_skill_is_listed_on_its_own_and_its_files_are_the_enclosing_skills_too(tmp_path):
    root = tree(tmp_path, {"outer/SKILL.md": skill_md("outer"), "outer/guide.md": "g\n",
                           "outer/inner/SKILL.md": skill_md("inner"), "outer/inner/steps.md": "s\n"})
    with Client(served(root)) as client:
        entries = {entry["uri"]: entry for entry in client.list_skills()}
        assert list(entries) == ["skill://outer/SKILL.md", "skill://outer/inner/SKILL.md"]  # flat
        assert [r["uri"] for r in entries["skill://outer/SKILL.md"]["resources"]] == [
            "skill://outer/SKILL.md", "skill://outer/guide.md", "skill://outer/inner/SKILL.md",
            "skill://outer/inner/steps.md"]
        assert [r["uri"] for r in entries["skill://outer/inner/SKILL.md"]["resources"]] == [
            "skill://outer/inner/SKILL.md", "skill://outer/inner/steps.md"]


@pytest.mark.parametrize(("text", "says"), [
    (skill_md("other"), "the name 'other' differs from its directory's, 'demo'"),
    ("---\ndescription: x\n---\n", "the frontmatter needs a 'name', a non-empty string"),
    ("---\nname: demo\n---\n", "the frontmatter needs a 'description', a non-empty string"),
    ("---\nname: demo\ndescription: ''\n---\n", "needs a 'description'"),
    ("---\nname: 7\ndescription: x\n---\n", "needs a 'name'"),
    ("# no frontmatter\n", "no frontmatter"),
    ("---\nname: [demo\n---\n", "SKILL.md:2:"),
    (skill_md("demo", "x" * 1025), "the description has 1025 characters; at most 1024"),
    (b"---\nname: demo\ndescription: \xff\n---\n", "not UTF-8"),
])
def test_a_skill_that_cannot_be_served_is_refused_at_start_up_naming_its_file(tmp_path, text, says):
    root = tree(tmp_path, {"demo/SKILL.md": text})
    with pytest.raises(ConfigError) as refused:
        served(root)
    assert os.path.join(root, "demo", "SKILL.md") in str(refused.value) and says in str(refused.value)


@pytest.mark.parametrize("name", ["Demo", "-demo", "demo-", "de--mo", "dé", "a" * 65, "de_mo", "de.mo"])
def test_a_name_outside_the_agent_skills_naming_rules_is_refused(tmp_path, name):
    root = tree(tmp_path, {f"{name}/SKILL.md": skill_md(name)})
    with pytest.raises(ConfigError, match="breaks the Agent Skills naming rules"):
        served(root)


def test_a_name_of_64_characters_with_single_hyphens_is_a_good_one(tmp_path):
    name = "a-" * 31 + "bc"
    with Client(served(tree(tmp_path, {f"{name}/SKILL.md": skill_md(name)}))) as client:
        assert client.list_skills()[0]["frontmatter"]["name"] == name


def test_a_skill_over_the_extensions_limits_is_refused_naming_them(tmp_path):
    many = {"many/SKILL.md": skill_md("many"), **{f"many/f{n}.txt": "x" for n in range(MAX_SKILL_FILES)}}
    with pytest.raises(ConfigError, match=r"many/SKILL.md: the skill has 513 files .*MAX_SKILL_FILES"):
        served(tree(tmp_path / "a", many))
    root = tree(tmp_path / "b", {"big/SKILL.md": skill_md("big")})
    with open(os.path.join(root, "big", "data.bin"), "wb") as sparse:
        sparse.truncate(MAX_SKILL_BYTES)  # with SKILL.md, one byte over the limit... and more
    with pytest.raises(ConfigError, match="MAX_SKILL_BYTES"):
        served(root)
    just = tree(tmp_path / "c", {"just/SKILL.md": skill_md("just"),
                                 **{f"just/f{n}.txt": "x" for n in range(MAX_SKILL_FILES - 1)}})
    with Client(served(just)) as client:
        assert len(client.get_skill("skill://just/SKILL.md")["resources"]) == MAX_SKILL_FILES


def test_a_root_or_prefix_that_cannot_be_one_is_refused(tmp_path, skills):
    with pytest.raises(ConfigError, match="is not a directory"):
        served(str(tmp_path / "missing"))
    for prefix in ("a//b", "/a", "a/", "..", "a/./b"):
        with pytest.raises(ConfigError, match="the prefix"):
            served(skills, prefix)


def test_two_skills_at_one_uri_are_refused(tmp_path, skills):
    other = tree(tmp_path / "other", {"pdf/SKILL.md": skill_md("pdf")})
    server = served(skills)
    with pytest.raises(ConfigError, match=r"skill://pdf/SKILL.md is served twice"):
        server.skills(other)
    server.skills(other, "other")  # under a prefix of its own it is a skill of its own


def test_skills_list_pages_without_splitting_an_entry_and_refuses_a_foreign_cursor(skills):
    with Client(served(skills, page_size=1)) as client:
        first = client.request("skills/list")
        assert len(first["skills"]) == 1 and first["nextCursor"]
        assert first["ttlMs"] == 300_000 and first["cacheScope"] == "public" and first["resultType"] == "complete"
        second = client.request("skills/list", {"cursor": first["nextCursor"]})
        assert [e["uri"] for e in first["skills"] + second["skills"]] == [e["uri"] for e in client.list_skills()]
        assert "nextCursor" not in second
        tools_cursor = client.request("resources/list")["nextCursor"]
        for cursor in (tools_cursor, "not a cursor", 7):
            with pytest.raises(ClientError) as refused:
                client.request("skills/list", {"cursor": cursor})
            assert refused.value.code == -32602


def test_skills_get_answers_a_served_skill_and_refuses_anything_else(skills):
    with Client(served(skills)) as client:
        result = client.request("skills/get", {"uri": "skill://pdf/SKILL.md"})
        assert result["skill"] == next(e for e in client.list_skills() if e["uri"] == "skill://pdf/SKILL.md")
        assert result["ttlMs"] == 300_000 and result["cacheScope"] == "public" and "nextCursor" not in result
        for uri in ("skill://pdf", "skill://pdf/templates/invoice.md", "skill://nope/SKILL.md", 5, None):
            with pytest.raises(ClientError) as refused:
                client.request("skills/get", {} if uri is None else {"uri": uri})
            assert refused.value.code == -32602


def test_a_directory_lists_its_direct_children_and_a_file_is_no_directory(tmp_path, skills):
    os.makedirs(os.path.join(skills, "pdf", "empty"))
    with Client(served(skills)) as client:
        children = client.request("resources/directory/read", {"uri": "skill://pdf/templates"})["resources"]
        assert children == [{"uri": "skill://pdf/templates/invoice.md", "name": "invoice.md",
                             "mimeType": "text/markdown"},
                            {"uri": "skill://pdf/templates/regional", "name": "regional",
                             "mimeType": "inode/directory"}]
        root = client.request("resources/directory/read", {"uri": "skill://pdf"})["resources"]
        assert [child["uri"] for child in root] == ["skill://pdf/SKILL.md", "skill://pdf/empty",
                                                    "skill://pdf/scripts", "skill://pdf/templates"]
        assert client.request("resources/directory/read", {"uri": "skill://pdf/empty"})["resources"] == []
        for uri, says in (("skill://pdf/SKILL.md", "is not a directory resource"),
                          ("skill://pdf/nope", "names no directory resource"),
                          ("skill://acme/billing", "names no directory resource")):  # a prefix, not a skill's
            with pytest.raises(ClientError) as refused:
                client.request("resources/directory/read", {"uri": uri})
            assert refused.value.code == -32602 and says in refused.value.message


def test_a_directory_pages_with_a_cursor_of_its_own(skills):
    with Client(served(skills, page_size=2)) as client:
        first = client.request("resources/directory/read", {"uri": "skill://pdf"})
        rest = client.request("resources/directory/read", {"uri": "skill://pdf", "cursor": first["nextCursor"]})
        assert len(first["resources"]) == 2 and len(rest["resources"]) == 1 and "nextCursor" not in rest
        with pytest.raises(ClientError):
            client.request("resources/directory/read", {"uri": "skill://pdf/templates", "cursor": first["nextCursor"]})


def test_a_changed_file_gets_its_new_digest_and_added_and_removed_files_are_seen(skills):
    path = os.path.join(skills, "pdf", "templates", "invoice.md")
    with Client(served(skills)) as client:
        before = client.get_skill("skill://pdf/SKILL.md")["resources"][2]
        with open(path, "w") as file:
            file.write("# Factura\n")  # the same size: the digest must still change
        after = client.get_skill("skill://pdf/SKILL.md")["resources"][2]
        assert after["size"] == before["size"] and after["digest"] == "sha256:" + hashlib.sha256(
            b"# Factura\n").hexdigest() != before["digest"]
        with open(os.path.join(skills, "pdf", "templates", "credit-note.md"), "w") as file:
            file.write("# Credit\n")
        os.remove(os.path.join(skills, "pdf", "scripts", "extract.py"))
        uris = [r["uri"] for r in client.get_skill("skill://pdf/SKILL.md")["resources"]]
        assert "skill://pdf/templates/credit-note.md" in uris and "skill://pdf/scripts/extract.py" not in uris
        listed = {r["uri"] for r in client.list_resources()}
        assert "skill://pdf/templates/credit-note.md" in listed and "skill://pdf/scripts/extract.py" not in listed


def test_a_read_that_finds_its_file_changed_brings_the_listing_up_to_date(skills):
    # A legacy client never calls skills/*: a read is what tells the server to look again.
    with Client(served(skills), era="legacy") as client:
        with open(os.path.join(skills, "pdf", "templates", "invoice.md"), "w") as file:
            file.write("# Changed, and longer\n")
        with open(os.path.join(skills, "pdf", "templates", "credit-note.md"), "w") as file:
            file.write("# Credit\n")
        assert "skill://pdf/templates/credit-note.md" not in {r["uri"] for r in client.list_resources()}
        assert client.read_resource("skill://pdf/templates/invoice.md").text == "# Changed, and longer\n"
        assert "skill://pdf/templates/credit-note.md" in {r["uri"] for r in client.list_resources()}


def test_a_skill_broken_while_serving_is_withheld_until_it_is_fixed(skills, caplog):
    path = os.path.join(skills, "pdf", "SKILL.md")
    with Client(served(skills)) as client:
        with open(path, "w") as file:
            file.write(skill_md("renamed"))
        assert [e["uri"] for e in client.list_skills()] == ["skill://acme/billing/refunds/SKILL.md"]
        assert not any(r["uri"].startswith("skill://pdf/") for r in client.list_resources())
        assert f"{path}: the name 'renamed' differs from its directory's, 'pdf'; the skill is withheld" in caplog.text
        with open(path, "w") as file:
            file.write(skill_md("pdf"))
        assert len(client.list_skills()) == 2


def test_the_extension_is_declared_with_directory_read_and_resources_even_with_no_skill_yet(tmp_path):
    with Client(served(str(tmp_path))) as client:
        capabilities = client.discover().capabilities
        assert capabilities["extensions"] == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
        assert "resources" in capabilities and client.list_skills() == []


def test_a_server_without_skills_has_no_such_methods_and_declares_nothing(tmp_path):
    with Client(Server("plain")) as client:
        assert "extensions" not in client.discover().capabilities
        for method in ("skills/list", "skills/get", "resources/directory/read"):
            with pytest.raises(ClientError) as refused:
                client.request(method, {"uri": "skill://x/SKILL.md"})
            assert refused.value.code == -32601


@pytest.mark.parametrize("revision", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_a_legacy_session_gets_the_files_as_plain_resources_and_nothing_of_the_extension(skills, revision):
    with Client(served(skills), era="legacy", revision=revision) as client:
        assert "extensions" not in client.initialize_result["capabilities"]
        assert "skill://pdf/templates/invoice.md" in {r["uri"] for r in client.list_resources()}
        assert client.read_resource("skill://pdf/templates/invoice.md").text == "# Invoice\n"
        for method in ("skills/list", "skills/get", "resources/directory/read"):
            with pytest.raises(ClientError) as refused:
                client.request(method, {"uri": "skill://pdf/SKILL.md"})
            assert refused.value.code == -32601


def test_a_manifest_serves_skills_relative_to_itself_with_or_without_a_prefix(tmp_path, skills):
    manifest = tmp_path / "server.json"
    manifest.write_text(json.dumps({"name": "docs", "skills": [os.path.relpath(skills, tmp_path),
                                                                {"path": "skills", "prefix": "again"}]}))
    with Client(str(manifest)) as client:
        assert [e["uri"] for e in client.list_skills()] == [
            "skill://acme/billing/refunds/SKILL.md", "skill://again/acme/billing/refunds/SKILL.md",
            "skill://again/pdf/SKILL.md", "skill://pdf/SKILL.md"]
    for skills_value, says in ((["nowhere"], "is not a directory"), ("skills", "must be an array"),
                               ([{"path": "skills", "prefix": 1}], '"prefix" a string'),
                               ([{"path": "skills", "prefx": "a"}], "unknown key 'prefx'")):
        manifest.write_text(json.dumps({"name": "docs", "skills": skills_value}))
        with pytest.raises(ConfigError, match=says):
            Client(str(manifest))
