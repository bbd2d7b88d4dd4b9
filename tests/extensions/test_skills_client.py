"""Skills as a real host loads them: the TypeScript SDK's SkillsClient (@modelcontextprotocol/client 2.x, SEP-2640's
host side) against `python -m mcpserver --http --skills DIR` (skills_host.mjs says what it does). It checks every
file's size and digest against the entry, and SKILL.md's frontmatter parsed as YAML 1.2 against the entry's, so
a server that got any of them wrong fails here. Installs what it needs into .cache/extensions on first use."""

import os
import shutil

from mcptest import DEMO, EXAMPLES, HttpServer
from node_hosts import run

SKILLS = os.path.join(EXAMPLES, "skills")


def test_every_file_of_every_skill_verifies_in_the_sdks_host_and_a_changed_one_does_not(tmp_path):
    skills = shutil.copytree(SKILLS, tmp_path / "skills")
    changed = skills / "tool-review" / "references" / "naming guide — tools.md"
    uri = "skill://tool-review/references/naming%20guide%20%E2%80%94%20tools.md"
    with HttpServer(DEMO, "--skills", str(skills)) as server:
        seen = run("skills_host.mjs", server.url, uri, str(changed))
    assert seen["protocol"] == "2026-07-28" and seen["supported"] and seen["directoryRead"]
    assert seen["ttlMs"] == 300_000 and seen["cacheScope"] == "public"
    assert [skill["uri"] for skill in seen["skills"]] == ["skill://build-a-server/SKILL.md", "skill://release-notes/SKILL.md",
                                                       "skill://tool-review/SKILL.md"]
    for skill in seen["skills"]:
        assert skill["same"] and all(file["verified"] for file in skill["files"])
        assert skill["files"][0]["frontmatter"] == skill["frontmatter"]  # SKILL.md, read back, is the entry's
        assert len(skill["files"]) == len({file["uri"] for file in skill["files"]}) >= 3
    assert ["skill://tool-review/references", "inode/directory"] in seen["skills"][2]["directory"]
    assert seen["stale"] == "size" and seen["fresh"] is True  # the held entry refused, the refreshed one good
