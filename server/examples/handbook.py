"""A team handbook served over MCP: three skills (the Skills extension) and the tool one of them calls.

    python -m mcpserver server/examples/handbook.py
    mcpserver list server/examples/handbook.py

The skills are the folders of skills/ next to this file, each a SKILL.md and the files it refers to:
release-notes (write a version's notes from the commits since the last tag), tool-review (review an MCP
server's tools as a model meets them, with review_tool below) and build-a-server (this project's own guide to
building a server with mcpserver, with a template server and its test). A client with the extension finds them with
skills/list; to any other client every file is a plain resource, skill://release-notes/SKILL.md and so on.
The same folder can be served with no Python: `python -m mcpserver --skills server/examples/skills ...`.
"""

import os
from typing import Any

from mcpserver import Server

server = Server("handbook", "1.0.0", instructions="The team's skills: skill://release-notes/SKILL.md writes "
                "release notes, skill://tool-review/SKILL.md reviews an MCP server's tools (with review_tool), "
                "skill://build-a-server/SKILL.md builds one with mcpserver.")
server.skills(os.path.join(os.path.dirname(os.path.abspath(__file__)), "skills"))

NAME_CHARACTERS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")


@server.tool()
def review_tool(definition: dict[str, Any]) -> dict[str, Any]:
    """Check one MCP tool definition for what a model stumbles on: its name, its description, and each
    parameter's description and bounds. Returns the findings, worst first; none means nothing mechanical
    to fix (judge the rest with the tool-review skill's checklist).

    Args:
        definition: The tool as tools/list gives it: name, description, inputSchema.
    """
    findings = []
    name = definition.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not set(name) <= NAME_CHARACTERS:
        findings.append({"severity": "error", "where": "name",
                         "finding": "a tool name is 1-128 of A-Z a-z 0-9 _ - ."})
    elif "_" not in name and "-" not in name:
        findings.append({"severity": "warning", "where": "name",
                         "finding": "one word: a verb and an object (search_movies) tells a model more"})
    description = definition.get("description") or ""
    if len(description.split()) < 5:
        findings.append({"severity": "error", "where": "description",
                         "finding": "missing or a few words: say what the tool does and when to use it"})
    schema = definition.get("inputSchema") or {}
    for parameter, property_schema in (schema.get("properties") or {}).items():
        if not property_schema.get("description"):
            findings.append({"severity": "warning", "where": f"inputSchema.properties.{parameter}",
                             "finding": "no description: the model guesses what to put here"})
        if property_schema.get("type") in ("integer", "number") and "maximum" not in property_schema:
            findings.append({"severity": "info", "where": f"inputSchema.properties.{parameter}",
                             "finding": "no maximum: say how large a value the tool takes"})
    order = {"error": 0, "warning": 1, "info": 2}
    return {"tool": name, "findings": sorted(findings, key=lambda finding: order[finding["severity"]])}
