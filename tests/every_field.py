"""A server that puts every optional field the SDK can send on the wire: titles, icons, `_meta`, output schemas,
tool annotations, content of every kind with annotations (`lastModified` too), resource links, audio, progress
with messages, log records, input with defaults. tests/unit/test_revision_schemas.py (in process) and
tests/conformance/test_legacy_schema.py (over pipes and sockets) check that each revision gets what its schema
declares and nothing more; the examples use few of these fields.
"""

from mcpserver import Context, Resource, Server, ToolError, ToolResult, content

server = Server("every-field", "1.0.0", title="Every field", instructions="Every optional field, for the tests.",
                description="A server with every optional field.", website_url="https://example.com/every-field")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
ICONS = [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "light"}]
META = {"example.com/owner": "tests"}
NOTED = {"audience": ["user", "assistant"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}
POINT = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}


def every_block(uri: str) -> list:
    """One content block of each kind, each with every field it may have."""
    return [content.text("text", annotations=NOTED, meta=META),
            content.image(PNG, "image/png", annotations=NOTED, meta=META),
            content.audio(WAV, "audio/wav", annotations=NOTED, meta=META),
            content.resource_link(uri, "notes", title="Notes", description="The notes", mime_type="text/plain",
                                  size=5, icons=ICONS, annotations=NOTED, meta=META),
            content.embedded(uri, "notes", mime_type="text/plain", annotations=NOTED, meta=META),
            content.embedded("every://blob", b"\x00\x01", mime_type="application/octet-stream", annotations=NOTED),
            content.ContentBlock(type="resource", resource={"uri": uri, "text": "notes", "_meta": META})]


@server.tool(title="Every block", annotations={"title": "Every block", "readOnlyHint": True, "destructiveHint": False,
                                                "idempotentHint": True, "openWorldHint": False},
             icons=ICONS, meta=META)
def every_block_tool() -> list:
    """Returns one content block of each kind."""
    return every_block("every://notes")


@server.tool(title="Point", output_schema=POINT, icons=ICONS, meta=META)
def point(x: float, y: float) -> dict:
    """Structured content that fits its output schema.

    Args:
        x: Across.
        y: Down.
    """
    return {"x": x, "y": y}


@server.tool(title="A list")
def a_list() -> ToolResult:
    """Structured content that is not an object (allowed in 2026-07-28 only)."""
    return ToolResult([content.text("[1, 2]")], structured=[1, 2])


@server.tool(title="Fails")
def fails() -> str:
    """An isError result."""
    raise ToolError("it failed, as it always does")


@server.tool(title="Reports")
def reports(ctx: Context) -> str:
    """Progress with totals and messages, and log records."""
    ctx.progress(0, 2, "starting")
    ctx.log("info", {"step": 1}, logger="reports")
    ctx.progress(1, 2, "halfway")
    ctx.log("warning", "almost done")
    ctx.progress(2, 2, "done")
    return "reported"


@server.tool(title="Asks")
def asks(ctx: Context) -> str:
    """A form with a default on each field the newest revision allows one on."""
    answer = ctx.elicit("Tell me about you", {"type": "object", "properties": {
        "name": {"type": "string", "title": "Name", "description": "Yours", "default": "Ada", "minLength": 1},
        "age": {"type": "integer", "minimum": 0, "default": 36},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "red"},
        "agree": {"type": "boolean", "default": True}}, "required": ["name"]})
    return f"answered {answer['action']}"


@server.tool(title="Samples")
def samples(ctx: Context) -> str:
    """Asks the client's model, with a system prompt."""
    answer = ctx.sample([{"role": "user", "content": {"type": "text", "text": "Hello?"}}], 20,
                        system_prompt="Be brief.")
    return str(answer.get("content", {}).get("text", ""))


@server.tool(title="A task", task="optional")
def a_task(ctx: Context) -> str:
    """A task when the client declared the Tasks extension; a plain call otherwise."""
    ctx.start_task()
    return "done"


@server.resource("every://notes", name="notes", title="Notes", description="Some notes", mime_type="text/plain",
                 annotations=NOTED)
def notes() -> str:
    return "notes"


@server.resource("every://blob", name="blob", title="A blob", mime_type="application/octet-stream",
                 annotations={"audience": ["assistant"], "priority": 1, "lastModified": "2025-06-01T12:00:00Z"})
def blob() -> bytes:
    return b"\x00\x01"


def with_meta() -> list:
    return [{"uri": "every://with-meta", "mimeType": "text/plain", "text": "hi", "_meta": META},
            {"uri": "every://with-meta", "mimeType": "application/octet-stream", "blob": "AAE=", "_meta": META}]


server.add_resource(Resource("every://with-meta", with_meta, title="With _meta", mime_type="text/plain",
                             annotations={"priority": 0.1}, meta=META))


@server.resource_template("every://items/{item}", name="item", title="An item", description="One item",
                          mime_type="application/json", completions={"item": ["apple", "apricot"]})
def item(item: str) -> str:
    return f'{{"item": "{item}"}}'


@server.prompt(title="Every message", completions={"topic": ["space", "sea"]})
def every_message(topic: str, tone: str = "plain") -> list:
    """A message with each kind of content.

    Args:
        topic: What to talk about.
        tone: How.
    """
    return [{"role": "user", "content": block} for block in every_block("every://notes")] + \
        [{"role": "assistant", "content": f"About {topic}, {tone}ly."}]
