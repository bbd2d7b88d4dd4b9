"""Tools, a prompt and a resource that ask the client for input mid-call (MRTR, WIRE.md §14.2).

    python -m mcpserver server/examples/interactive.py

The code reads straight through: `ctx.elicit(...)` returns the user's answer. Under the hood the
first call ends with an input_required result; the client asks its user (or model) and calls again
with the answers, and the tool runs again from the start, this time getting them. Earlier answers
travel in a requestState sealed with HMAC ($MCPSERVER_STATE_KEY), so any replica can resume.
"""

import os

from mcpserver import Context, Server, ToolError, inputs

server = Server("interactive", "1.0.0", instructions="Tools that ask before they act: delete_file asks for "
                                                      "confirmation, trip_plan asks two questions, haiku asks "
                                                      "the client's model, where_am_i lists the client's roots.")
DELETED = []  # what delete_file "deleted": a demo keeps its hands off real files


@server.tool(annotations={"destructiveHint": True, "openWorldHint": False})
def delete_file(path: str, ctx: Context) -> str:
    """Delete a file, after the user confirms.

    Args:
        path: The file to delete.
    """
    answer = ctx.elicit(f"Really delete {path}?", {
        "type": "object", "properties": {"confirm": {"type": "boolean", "title": "Yes, delete it"}},
        "required": ["confirm"]})
    if answer["action"] != "accept" or not answer.get("content", {}).get("confirm"):
        return f"Kept {path}."
    DELETED.append(path)
    return f"Deleted {path}."


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def trip_plan(ctx: Context) -> str:
    """Plan a trip: asks where, then how long (two rounds, each answer kept for the next)."""
    where = ctx.elicit("Where to?", {"type": "object", "properties": {"city": {"type": "string"}},
                                     "required": ["city"]}, key="where")
    if where["action"] != "accept":
        return "No trip, then."
    city = where["content"]["city"]
    days = ctx.elicit(f"How many days in {city}?", {
        "type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 60}},
        "required": ["days"]}, key="days")
    count = days.get("content", {}).get("days", 3) if days["action"] == "accept" else 3
    return f"{count} days in {city}: book the train, pack light."


@server.tool(annotations={"readOnlyHint": True})
def haiku(topic: str, ctx: Context) -> str:
    """Ask the client's model for a haiku about `topic`.

    Args:
        topic: What the haiku is about.
    """
    reply = ctx.sample(f"Write a haiku about {topic}.", max_tokens=60,
                       system_prompt="You write haiku: three lines, 5-7-5 syllables.")
    content = reply.get("content", {})
    return content.get("text", "") if isinstance(content, dict) else str(content)


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def where_am_i(ctx: Context) -> dict:
    """The client's roots, and which of them exist on this machine."""
    roots = ctx.roots(default=[])  # a client without the roots capability: no roots, rather than an error
    paths = [r["uri"][len("file://"):] for r in roots if r.get("uri", "").startswith("file://")]
    return {"roots": [r.get("uri") for r in roots], "here": [p for p in paths if os.path.isdir(p)]}


@server.tool(annotations={"readOnlyHint": True})
def profile(ctx: Context) -> str:
    """Ask for a name and the client's roots at once (one round, two questions)."""
    if not ctx.supports("roots"):
        raise ToolError("this tool needs a client that shares its roots")
    answers = ctx.ask({"name": inputs.elicit("Your name?", {"type": "object", "properties": {
        "name": {"type": "string"}}, "required": ["name"]}), "roots": inputs.roots()})
    name = answers["name"].get("content", {}).get("name", "someone")
    return f"{name} works in {len(answers['roots'].get('roots', []))} root(s)."


@server.prompt()
def review(ctx: Context) -> str:
    """A code-review prompt that first asks which language the code is in."""
    answer = ctx.elicit("Which language is the code in?", {
        "type": "object", "properties": {"language": {"type": "string"}}, "required": ["language"]})
    language = answer.get("content", {}).get("language", "an unknown language")
    return f"Review this {language} code for bugs, then for style."


@server.resource("secrets://vault", mime_type="text/plain")
def vault(ctx: Context) -> str:
    """A resource that asks for a passphrase before it can be read."""
    answer = ctx.elicit("The vault's passphrase?", {"type": "object", "properties": {
        "passphrase": {"type": "string"}}, "required": ["passphrase"]})
    if answer.get("content", {}).get("passphrase") != "open sesame":
        return "The vault stays shut."
    return "The treasure is under the old oak."
