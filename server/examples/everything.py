"""The official conformance suite's fixture: the tools, resources, templates and prompts its scenarios
call, written with the public SDK like any server (`make conformance` runs the suite against it).

    python -m mcpserver --http server/examples/everything.py

Each tool says which scenario it serves. They are fixtures: keep them out of servers you ship.
"""

import json
import logging
import os
from typing import Optional

from mcpserver import Context, ProtocolError, Server, ToolError, content, inputs

server = Server("everything", "1.0.0", instructions="Fixtures for the MCP conformance suite.")

RED_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
SILENT_WAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="


# -- tools: content of every kind ------------------------------------------------------------------

@server.tool()
def test_simple_text() -> str:
    """tools-call-simple-text: one text block."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> content.ContentBlock:
    """tools-call-image: a 1x1 red PNG."""
    return content.image(RED_PIXEL_PNG, "image/png")


@server.tool()
def test_audio_content() -> content.ContentBlock:
    """tools-call-audio: a short silent WAV."""
    return content.audio(SILENT_WAV, "audio/wav")


@server.tool()
def test_embedded_resource() -> content.ContentBlock:
    """tools-call-embedded-resource: an embedded text resource."""
    return content.embedded("test://embedded-resource", "This is an embedded resource content.",
                            mime_type="text/plain")


@server.tool()
def test_multiple_content_types() -> list:
    """tools-call-mixed-content: text, an image and an embedded resource."""
    return [content.text("Multiple content types test:"), content.image(RED_PIXEL_PNG, "image/png"),
            content.embedded("test://mixed-content-resource", json.dumps({"test": "data", "value": 123}),
                             mime_type="application/json")]


@server.tool()
def test_error_handling() -> str:
    """tools-call-error: always fails, as a result the model can read."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool()
def test_tool_with_progress(ctx: Context) -> str:
    """tools-call-with-progress: 0, 50 and 100 of 100, 50 ms apart (sent only when a token was given)."""
    for done in (0, 50, 100):
        ctx.progress(done, 100)
        if done < 100:
            ctx.sleep(0.05)
    return "progress reported"


# -- tools: the client's own features (the 2025-11-25 scenarios; each works in both eras: a real request
#    to a legacy client, input_required for a 2026-07-28 one) -------------------------------------------

@server.tool()
def test_tool_with_logging(ctx: Context) -> str:
    """tools-call-with-logging: three log records, 50 ms apart (notifications/message in a legacy session)."""
    for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        ctx.log("info", step, logger="test_tool_with_logging")
        if step != "Tool execution completed":
            ctx.sleep(0.05)
    return "logged three messages"


@server.tool()
def test_sampling(prompt: str, ctx: Context) -> str:
    """tools-call-sampling: asks the client's model (sampling/createMessage, maxTokens 100)."""
    answer = ctx.sample([{"role": "user", "content": {"type": "text", "text": prompt}}], 100, key="llm")
    text = answer.get("content", {}).get("text", "") if isinstance(answer.get("content"), dict) else ""
    return f"LLM response: {text}"


@server.tool()
def test_elicitation(message: str, ctx: Context) -> str:
    """tools-call-elicitation: a form asking for a username and an email, both required."""
    answer = ctx.elicit(message, {"type": "object", "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"}}, "required": ["username", "email"]},
        key="user_info")
    return f"User response: action={answer['action']}, content={json.dumps(answer.get('content', {}))}"


@server.tool()
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """elicitation-sep1034-defaults: a default for every primitive type (SEP-1034)."""
    answer = ctx.elicit("Please review and update the form fields with defaults", {"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True}}}, key="defaults")
    return f"Elicitation completed: action={answer['action']}, content={json.dumps(answer.get('content', {}))}"


@server.tool()
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """elicitation-sep1330-enums: the five enum shapes of SEP-1330."""
    titled = [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
              {"const": "value3", "title": "Third Option"}]
    answer = ctx.elicit("Please select options from the enum fields", {"type": "object", "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": titled},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1,
                          "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1,
                        "maxItems": 3, "items": {"anyOf": titled}}}}, key="enums")
    return f"Elicitation completed: action={answer['action']}, content={json.dumps(answer.get('content', {}))}"


# -- tools: the per-request capability rules (server-stateless) --------------------------------------

@server.tool(requires_client_capabilities={"sampling": {}})
def test_missing_capability() -> str:
    """Needs the client's sampling capability: without it the server answers -32021."""
    return "the client declared sampling"


@server.tool(requires_client_capabilities={"elicitation": {}})
def test_streaming_elicitation() -> str:
    """Needs elicitation; answers on its own response and never sends the client a request."""
    return "the client declared elicitation"


@server.tool()
def test_logging_tool() -> str:
    """Logs to the server's stderr only: no notifications/message without _meta logLevel."""
    logging.getLogger("mcpserver.examples").info("test_logging_tool ran")
    return "logged to stderr"


@server.tool()
def test_trigger_tool_change() -> str:
    """server-stateless (SEP-2575): adds a tool, or takes it away again, so listen streams hear tools/list_changed."""
    if "test_added_tool" in server.tools:
        server.remove_tool("test_added_tool")
        return "test_added_tool removed"
    server.tool(name="test_added_tool", description="Added by test_trigger_tool_change.")(lambda: "added")
    return "test_added_tool added"


@server.tool()
def test_trigger_prompt_change() -> str:
    """server-stateless (SEP-2575): adds a prompt, or takes it away again, so listen streams hear
    prompts/list_changed."""
    if "test_added_prompt" in server.prompts:
        server.remove_prompt("test_added_prompt")
        return "test_added_prompt removed"
    server.prompt(name="test_added_prompt", description="Added by test_trigger_prompt_change.")(lambda: "added")
    return "test_added_prompt added"


# -- tools: input from the client (the input-required-result-* scenarios) ---------------------------

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for a name, then greets."""
    answer = ctx.elicit("What is your name?", NAME, key="user_name")
    return f"Hello, {answer.get('content', {}).get('name', 'stranger')}!"


@server.tool()
def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question, then returns its answer."""
    reply = ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return str(reply.get("content", {}).get("text", ""))


@server.tool()
def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks for the client's roots, then names them."""
    roots = ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(str(root.get("uri")) for root in roots)


@server.tool()
def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the answer comes back with the sealed requestState, checked first."""
    answer = ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                           "required": ["ok"]}, key="confirm")
    return f"state-ok: the requestState verified, and the answer was {answer.get('action')}"


@server.tool()
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three things in one round: a name, a greeting from the model, and the roots."""
    answers = ctx.ask({"user_name": inputs.elicit("What is your name?", NAME),
                       "greeting": inputs.sample("Generate a greeting", 50),
                       "client_roots": inputs.roots()})
    name = answers["user_name"].get("content", {}).get("name")
    greeting = answers["greeting"].get("content", {}).get("text")
    return f"{greeting} {name}; roots: {len(answers['client_roots'].get('roots', []))}"


@server.tool()
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds: a name, then a colour (the first answer travels in the state)."""
    name = ctx.elicit("Step 1: What is your name?", NAME, key="step1")
    colour = ctx.elicit("Step 2: What is your favorite color?", {
        "type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}, key="step2")
    return f"{name.get('content', {}).get('name')} likes {colour.get('content', {}).get('color')}"


@server.tool()
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks once; a tampered requestState on the retry is refused before this runs."""
    answer = ctx.elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                        key="confirm")
    return f"confirmed: {answer.get('action')}"


@server.tool()
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared it can answer."""
    wanted = {}
    if ctx.supports("elicitation"):
        wanted["user_name"] = inputs.elicit("What is your name?", NAME)
    if ctx.supports("sampling"):
        wanted["greeting"] = inputs.sample("Generate a greeting", 50)
    if ctx.supports("roots"):
        wanted["client_roots"] = inputs.roots()
    answers = ctx.ask(wanted) if wanted else {}
    return "answered: " + (", ".join(sorted(answers)) or "nothing asked")


# -- tools: the Tasks extension (the tasks-* scenarios; TASKS.md §15.1) -----------------------------------

@server.tool()
def greet(name: str) -> str:
    """Never a task: a plain greeting."""
    return f"Hello, {name}!"


@server.tool(task="optional")
def slow_compute(seconds: float, ctx: Context, label: str = "compute") -> str:
    """A task when the client declared the extension: sleeps `seconds` (a cancel ends it at once)."""
    if seconds > 0:
        ctx.start_task()
        ctx.sleep(seconds)
    return f"{label} finished after {seconds:g} s"


@server.tool(task="required")
def failing_job(ctx: Context) -> str:
    """Only as a task; fails as a tool does after about a second (completed, isError)."""
    ctx.start_task()
    ctx.sleep(1)
    raise ToolError("The job failed, as it always does")


@server.tool(task="optional")
def protocol_error_job(ctx: Context) -> str:
    """Ends in a JSON-RPC error (the task fails with it)."""
    ctx.start_task()
    raise ProtocolError("The job hit an internal fault")


@server.tool(task="optional")
def confirm_delete(filename: str, ctx: Context) -> str:
    """A task that asks the user to confirm first (input_required, answered by tasks/update)."""
    ctx.start_task()
    answer = ctx.elicit(f"Delete {filename}?", {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                                               "required": ["confirm"]}, key="confirm")
    confirmed = answer["action"] == "accept" and answer.get("content", {}).get("confirm")
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@server.tool(task="optional")
def multi_input(ctx: Context) -> str:
    """A task that asks two questions at once; it goes on when both are answered."""
    ctx.start_task()
    answers = ctx.ask({"first": inputs.elicit("Your first name?", NAME), "second": inputs.elicit("Your city?", NAME)})
    return ", ".join(str(a.get("content", {}).get("name")) for a in answers.values())


@server.tool(task="required")
def test_tool_with_task(ctx: Context) -> str:
    """MRTR first (the name, asked before the task starts), then a task that greets by that name."""
    answer = ctx.elicit("What is your name?", NAME, key="user_name")
    ctx.start_task()
    ctx.sleep(0.2)
    return f"Hello, {answer.get('content', {}).get('name', 'stranger')}, from a task"


# -- resources ---------------------------------------------------------------------------------------

@server.resource("test://watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """resources-subscribe, resources-unsubscribe: a resource a client may subscribe to."""
    return "A resource to watch."


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """resources-read-text: a static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """resources-read-binary: a 1x1 red PNG."""
    import base64

    return base64.b64decode(RED_PIXEL_PNG)


@server.resource_template("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """resources-templates-read: data for one id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


# -- prompts -----------------------------------------------------------------------------------------

@server.prompt()
def test_simple_prompt() -> str:
    """prompts-get-simple: a prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt(completions={"arg1": ["paris", "park", "party", "pasta", "pear"], "arg2": ["world", "word"]})
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """prompts-get-with-args: two required arguments.

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """prompts-get-embedded-resource: embeds the resource it is given.

    Args:
        resourceUri: URI of the resource to embed.
    """
    return [{"role": "user", "content": content.embedded(resourceUri, "Embedded resource content for testing.",
                                                         mime_type="text/plain")},
            {"role": "user", "content": "Please process the embedded resource above."}]


@server.prompt()
def test_prompt_with_image() -> list:
    """prompts-get-with-image: an image, then a question about it."""
    return [{"role": "user", "content": content.image(RED_PIXEL_PNG, "image/png")},
            {"role": "user", "content": "Please analyze the image above."}]


@server.prompt()
def test_input_required_result_prompt(ctx: Context) -> str:
    """input-required-result-non-tool-request: asks what context to use, then builds the prompt."""
    answer = ctx.elicit("What context should the prompt use?", {
        "type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}, key="user_context")
    return f"Use this context: {answer.get('content', {}).get('context', 'none')}"


# -- pending scenarios (run, not yet scored) ----------------------------------------------------------

CONTACT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]}, "phone": {"type": "string"},
                   "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]}, "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features",
             input_schema=CONTACT_SCHEMA)
def contact(name: str = "", address: Optional[dict] = None, contactMethod: str = "", phone: str = "",
            email: str = "") -> dict:
    """json-schema-2020-12: the schema's 2020-12 keywords are listed as written, and enforced."""
    return {"name": name, "reach": phone if contactMethod == "phone" else email}


@server.tool(input_schema={"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "priority": {"type": "integer", "x-mcp-header": "Priority"},
    "query": {"type": "string"}}, "required": ["region", "query"]})
def test_header_params(region: str, query: str, priority: int = 0) -> str:
    """http-custom-header-server-validation: region and priority are mirrored into Mcp-Param headers."""
    return f"{query} in {region} (priority {priority})"


# -- skills: the Skills extension's scenarios (sep-2640-*) list, read and walk the example skills -------------

server.skills(os.path.join(os.path.dirname(os.path.abspath(__file__)), "skills"))
