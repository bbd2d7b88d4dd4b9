"""Tools that know who is calling: the OAuth principal, and a scope checked by the tool itself.

    python -m mcpserver --http --resource http://127.0.0.1:3000/mcp \
        --authorization-server https://auth.example.com --scope mcp:read server/examples/accounts.py

Every request needs a token with `mcp:read` (--scope); `close_account` also wants `mcp:admin`, which
it checks itself. Over stdio, or with a static token, there is no principal: the tools say so.
docs/auth.md has the recipes.
"""

from mcpserver import Context, Server, ToolError

server = Server("accounts", "1.0.0", instructions="whoami says who the token speaks for; close_account needs "
                                                  "the mcp:admin scope.")


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def whoami(ctx: Context) -> dict:
    """Who this request's access token speaks for: subject, client and scopes."""
    principal = ctx.principal
    if principal is None:
        return {"authenticated": False}
    return {"authenticated": True, "subject": principal.subject, "client_id": principal.client_id,
            "scopes": sorted(principal.scopes)}


@server.tool(annotations={"destructiveHint": True, "idempotentHint": True, "openWorldHint": False})
def close_account(account: str, ctx: Context) -> str:
    """Close an account (pretend). Needs a token with the mcp:admin scope.

    Args:
        account: The account to close.
    """
    if ctx.principal is None or not ctx.principal.has_scopes("mcp:admin"):
        raise ToolError("closing an account needs the mcp:admin scope; ask for a token with it")
    return f"closed {account} for {ctx.principal.subject or ctx.principal.client_id}"
