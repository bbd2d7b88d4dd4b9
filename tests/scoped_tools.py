"""A server whose entries need OAuth scopes of their own, for tests/http/test_http_scopes.py and
tests/unit/test_scopes.py: a tool of each kind (plain, given its scopes as one string, a task tool), a resource, a
template and a prompt, and an entry of each kind that needs no scope of its own.
"""

from mcpserver import Context, Server

server = Server("scoped", "1.0.0")


@server.tool()
def whoami(ctx: Context) -> dict:
    """The scopes of the token the call came with (none over stdio)."""
    return {"scopes": sorted(ctx.principal.scopes) if ctx.principal is not None else None}


@server.tool(scopes=["files:write"])
def write_file(path: str) -> str:
    """Pretends to write `path`."""
    return f"wrote {path}"


@server.tool(scopes="files:write admin:all")  # one string, as OAuth writes a scope parameter: two scopes
def wipe() -> str:
    """Pretends to wipe everything."""
    return "wiped"


@server.tool(task="required", scopes=["files:read"])
def export(name: str) -> str:
    """Exports `name`, as a task."""
    return f"exported {name}"


@server.resource("notes://public")
def public_note() -> str:
    return "anyone may read this"


@server.resource("notes://secret", scopes=["notes:read"])
def secret_note() -> str:
    return "the secret"


@server.resource_template("notes://by/{author}", scopes=["notes:read"])
def note_by(author: str) -> str:
    return f"a note by {author}"


@server.prompt(scopes=["prompts:use"])
def review(code: str) -> str:
    """Review some code."""
    return f"Review this: {code}"


@server.prompt()
def hello() -> str:
    """Say hello."""
    return "Hello"
