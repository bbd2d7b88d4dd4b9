"""Tools that know who is calling: the OAuth principal, and a scope checked by the tool itself.

    python -m mcpserver --http --resource http://127.0.0.1:3000/mcp \
        --authorization-server https://auth.example.com --scope mcp:read server/examples/accounts.py

Every request needs a token with `mcp:read` (--scope); `rename_account` also needs `mcp:write`, which the server
checks before the call (403 insufficient_scope: the client asks for the scope and calls again); `close_account` wants
`mcp:admin`, which it checks itself. Over stdio, or with a static token, there is no principal, and no scopes: the
tools say so. docs/guides/auth.md has the recipes.
"""

from mcpserver import Context, Server, ToolError

server = Server("accounts", "1.0.0", instructions="whoami says who the token speaks for; rename_account needs the "
                                                  "mcp:write scope, close_account the mcp:admin scope.")


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def whoami(ctx: Context) -> dict:
    """Who this request's access token speaks for: subject, client and scopes."""
    principal = ctx.principal
    if principal is None:
        return {"authenticated": False}
    return {"authenticated": True, "subject": principal.subject, "client_id": principal.client_id,
            "scopes": sorted(principal.scopes)}


@server.tool(scopes=["mcp:write"], annotations={"idempotentHint": True, "openWorldHint": False})
def rename_account(account: str, name: str) -> str:
    """Rename an account (pretend). The server lets only a token with the mcp:write scope call it.

    Args:
        account: The account to rename.
        name: Its new name.
    """
    return f"renamed {account} to {name}"


@server.tool(annotations={"destructiveHint": True, "idempotentHint": True, "openWorldHint": False})
def close_account(account: str, ctx: Context) -> str:
    """Close an account (pretend). Needs a token with the mcp:admin scope.

    Args:
        account: The account to close.
    """
    if ctx.principal is None or not ctx.principal.has_scopes("mcp:admin"):
        raise ToolError("closing an account needs the mcp:admin scope; ask for a token with it")
    return f"closed {account} for {ctx.principal.subject or ctx.principal.client_id}"
