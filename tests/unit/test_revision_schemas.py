"""Every result the examples give, in both eras and in each of the five revisions, fits that revision's official
schema (spec/schema-<revision>.json) and carries no field the revision does not declare, at any depth
(tests/official_schemas.py): the lists and what they list, every tool's result and content blocks, resources
read, prompts got, completions, the errors, the notifications a call sends and the requests it makes of the
client. A strict client drops a whole tools/list for one field too many or too few.

The in-process client (mcpserver.testing) encodes every message through the same core the transports use, so
this runs in every lab cell in a few seconds; tests/conformance/test_legacy_schema.py and
test_official_schema.py send the same kind of traffic over real pipes and sockets. Each example is driven
generically: every tool called with arguments made from its inputSchema, every question answered with a form
filled from its requestedSchema; every_field.py adds what the examples leave out (icons, `_meta`,
`lastModified`, audio, resource links, progress messages).
"""

from __future__ import annotations

import glob
import os
import shutil

import pytest
from mcpserver.testing import Client, ClientError, accept, roots, sampled
from mcptest import EXAMPLES, ROOT
from official_schemas import REVISIONS, conforms, definitions, undeclared

EVERY_FIELD = os.path.join(ROOT, "tests", "every_field.py")
TARGETS = [*sorted(glob.glob(os.path.join(EXAMPLES, "*.py")) + glob.glob(os.path.join(EXAMPLES, "*.json"))),
           EVERY_FIELD]
MODERN = REVISIONS[0]

RESULT_OF = {"server/discover": "DiscoverResult", "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
             "resources/list": "ListResourcesResult", "resources/templates/list": "ListResourceTemplatesResult",
             "resources/read": "ReadResourceResult", "prompts/list": "ListPromptsResult",
             "prompts/get": "GetPromptResult", "completion/complete": "CompleteResult"}
NOTIFICATION_OF = {"notifications/progress": "ProgressNotification",
                   "notifications/message": "LoggingMessageNotification",
                   "notifications/tools/list_changed": "ToolListChangedNotification",
                   "notifications/prompts/list_changed": "PromptListChangedNotification",
                   "notifications/resources/list_changed": "ResourceListChangedNotification",
                   "notifications/resources/updated": "ResourceUpdatedNotification"}
REQUEST_OF = {"elicitation/create": "ElicitRequest", "sampling/createMessage": "CreateMessageRequest",
              "roots/list": "ListRootsRequest"}
# A URI of each template that names something (a made-up one is answered -32602, also checked)
URI_OF = {"movies://films/{movie_id}": "movies://films/m1", "test://template/{id}/data": "test://template/7/data"}


def example(schema):
    """A value `schema` accepts, as small as it allows (the defaults where there are some)."""
    if not isinstance(schema, dict):
        return "x"
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example(schema[key][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [example(schema.get("items"))] * schema.get("minItems", 0)
    if kind == "object":
        return {name: example(schema.get("properties", {}).get(name)) for name in schema.get("required", ())}
    return "x" * max(1, schema.get("minLength", 1))


def filled(params):
    """A client's answer to a form: each field filled."""
    schema = params.get("requestedSchema", {})
    return accept(**{name: example(field) for name, field in schema.get("properties", {}).items()})


class Checked:
    """A client of one revision whose every result, error, notification and request from the server is checked."""

    def __init__(self, target, revision):
        self.revision = revision
        self.client = Client(target, era="modern" if revision == MODERN else "legacy", revision=revision,
                             on_elicit=filled, on_sample=lambda params: sampled("ok"),
                             on_roots=lambda params: roots("file:///tmp"), timeout=60)
        self.checked = 0
        self.seen = set()  # (definition, field) of every field met

    def conforms(self, instance, definition):
        conforms(self.revision, instance, definition, self.seen)
        self.checked += 1

    def ask(self, method, params=None, **how):
        """A request and all it brought: its result, or its error, checked."""
        call = method == "tools/call"
        try:
            if call:
                result = self.client.call_tool(params["name"], params.get("arguments"), progress=True, **how)
            elif method == "resources/read":
                result = self.client.read_resource(params["uri"], progress=True)
            elif method == "prompts/get":
                result = self.client.get_prompt(params["name"], params.get("arguments"), progress=True)
            else:
                result = None
                raw = self.client.request(method, params)
        except ClientError as refused:
            kind = "JSONRPCError" if "JSONRPCError" in definitions(self.revision) else "JSONRPCErrorResponse"
            self.conforms(refused.response, kind)
            return None
        if result is not None:
            raw = result.raw
            for note in result.notifications:
                self.conforms(note, NOTIFICATION_OF[note["method"]])
            for asked in result.asked:
                self.check_asked(asked)
        self.conforms(raw, RESULT_OF[method])
        return raw

    def check_asked(self, asked):
        if self.revision == MODERN:  # an input request inside an input_required result
            self.conforms(asked, "InputRequest")
        else:  # a request of the server's own, sent to the client while the call waits
            self.conforms({"jsonrpc": "2.0", "id": "mcpserver-1", **asked}, REQUEST_OF[asked["method"]])


def drive(target, revision):
    """Everything `target` offers, asked of it in `revision`: the Checked session, once closed."""
    session = Checked(target, revision)
    with session.client as client:
        if revision == MODERN:
            capabilities = session.ask("server/discover")["capabilities"]
        else:
            session.conforms(client.initialize_result, "InitializeResult")
            capabilities = client.initialize_result["capabilities"]
        for tool in session.ask("tools/list")["tools"] if "tools" in capabilities else ():
            arguments = example(tool["inputSchema"])
            session.ask("tools/call", {"name": tool["name"], "arguments": arguments})
        if "resources" in capabilities:
            for resource in session.ask("resources/list")["resources"]:
                session.ask("resources/read", {"uri": resource["uri"]})
            for template in session.ask("resources/templates/list")["resourceTemplates"]:
                uri = URI_OF.get(template["uriTemplate"], template["uriTemplate"].replace("{", "").replace("}", ""))
                session.ask("resources/read", {"uri": uri})
        if "prompts" in capabilities:
            for prompt in session.ask("prompts/list")["prompts"]:
                arguments = {a["name"]: "x" for a in prompt.get("arguments", ()) if a.get("required")}
                session.ask("prompts/get", {"name": prompt["name"], "arguments": arguments})
                for argument in prompt.get("arguments", ()) if "completions" in capabilities else ():
                    session.ask("completion/complete", {"ref": {"type": "ref/prompt", "name": prompt["name"]},
                                                        "argument": {"name": argument["name"], "value": "a"}})
        session.ask("tools/call", {"name": "no such tool"})  # an error, checked too
        for note in client.notifications:  # a legacy session's own: list changes
            session.conforms(note, NOTIFICATION_OF[note["method"]])
    return session


@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("target", [
    pytest.param(t, id=os.path.basename(t), marks=pytest.mark.skipif(
        t.endswith("git.json") and shutil.which("git") is None, reason="git.json's tools run git, not on PATH here"))
    for t in TARGETS])
def test_every_result_of_every_example_fits_the_revision_and_carries_nothing_it_lacks(target, revision):
    assert drive(target, revision).checked >= 4


# Optional fields the SDK has no way to send yet (so no revision can be sent one it lacks), and 2025-11-25's
# Tool.execution, of the v1 tasks, which legacy sessions are not offered (LEGACY.md §4)
NOT_SENT = {("Tool", "execution"), ("Resource", "icons"), ("Resource", "size"), ("ResourceTemplate", "icons"),
            ("ResourceTemplate", "annotations"), ("ResourceTemplate", "_meta"), ("Prompt", "icons"),
            ("Prompt", "_meta"), ("PromptArgument", "title"), ("Implementation", "icons"),
            ("Implementation", "description"), ("Implementation", "websiteUrl"),
            ("ProgressNotificationParams", "_meta")}
FIXTURE_COVERS = ("Tool", "ToolAnnotations", "Resource", "ResourceTemplate", "Prompt", "PromptArgument",
                  "Implementation", "Annotations", "TextContent", "ImageContent", "AudioContent", "ResourceLink",
                  "EmbeddedResource", "TextResourceContents", "BlobResourceContents", "CallToolResult",
                  "GetPromptResult", "ProgressNotificationParams", "Icon")


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_the_fixture_sends_every_optional_field_the_sdk_can_send(revision):
    """So the test above shapes them all: a field the fixture left out could go to an older revision unseen."""
    seen = drive(EVERY_FIELD, revision).seen
    if revision != MODERN:
        seen |= drive(EVERY_FIELD, MODERN).seen  # serverInfo's fields are in 2026-07-28's _meta
    unseen = {(name, field) for name in FIXTURE_COVERS for field in definitions(revision)[name].get("properties", ())
              if (name, field) not in seen} - NOT_SENT
    assert unseen == set()


def test_a_field_of_a_newer_revision_is_found_at_any_depth_and_a_missing_one_too():
    """The check itself: what 2025-06-18 added is named in a 2025-03-26 answer wherever it sits."""
    listed = {"resources": [{"uri": "a://b", "name": "b", "title": "B", "annotations": {"lastModified": "2025"}}]}
    assert undeclared("2025-03-26", listed, "ListResourcesResult") == [
        "ListResourcesResult.resources[0].title: not in 2025-03-26",
        "ListResourcesResult.resources[0].annotations.lastModified: not in 2025-03-26"]
    assert undeclared("2025-06-18", listed, "ListResourcesResult") == []
    called = {"content": [{"type": "resource", "resource": {"uri": "a://b", "text": "t", "_meta": {}}}],
              "structuredContent": {"a": 1}}
    assert undeclared("2025-03-26", called, "CallToolResult") == [
        "CallToolResult.content[0].resource._meta: not in 2025-03-26",
        "CallToolResult.structuredContent: not in 2025-03-26"]
    tool = {"tools": [{"name": "t", "inputSchema": {"type": "object", "additionalProperties": False},
                       "annotations": {"readOnlyHint": True}, "_meta": {"any.key/x": 1}}]}
    assert undeclared("2025-06-18", tool, "ListToolsResult") == []  # an author's schema and _meta: any key
    assert undeclared("2024-11-05", tool, "ListToolsResult") == ["ListToolsResult.tools[0].annotations: not in "
                                                                 "2024-11-05", "ListToolsResult.tools[0]._meta: "
                                                                 "not in 2024-11-05"]
    with pytest.raises(AssertionError, match="required property 'name'"):
        conforms("2025-11-25", {"tools": [{"inputSchema": {"type": "object"}}]}, "ListToolsResult")
