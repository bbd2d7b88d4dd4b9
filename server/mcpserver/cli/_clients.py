"""`mcpserver config --client NAME`: the entry each MCP client reads, in its own shape and variable syntax.

The clients do not share one format. Each shape below is the one its client's own documentation
gives (docs/guides/clients.md names the pages):

- claude-desktop: claude_desktop_config.json, `mcpServers` of stdio entries only; a remote server is a
  custom connector, which Anthropic's cloud (not the desktop) connects to, so there is no HTTP entry.
- claude-code: .mcp.json, `mcpServers` with "type"; it expands ${VAR} in command, args, env, url, headers.
- vscode: .vscode/mcp.json, a top-level `servers` with "type"; secrets come from `inputs`
  (${input:ID}, asked once and kept in VS Code's secret storage) or ${env:NAME}.
- cursor: .cursor/mcp.json, `mcpServers`; a remote entry is a "url"; it expands ${env:NAME}.
- generic: an `mcpServers` entry for clients that read that shape (fastmcp's Client, and others) and
  take every value literally: a ${VAR} there is sent as is (and a bearer header so made gets 401).
"""

from __future__ import annotations

import os
import sys

from .._environment import TOKEN
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["CLIENTS", "NOT_SUPPORTED", "SOURCES", "WHERE", "client_entry", "stdio_launch"]

CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor", "generic")

WHERE = {
    "claude-desktop": "merge into claude_desktop_config.json (Claude: Settings > Developer > Edit Config), then "
                      "restart Claude",
    "claude-code": "merge into .mcp.json at the project's root (project scope; ${VAR} comes from Claude Code's "
                   "environment, and an unset one stops the file from loading)",
    "vscode": "merge into .vscode/mcp.json (or MCP: Open User Configuration)",
    "cursor": "merge into .cursor/mcp.json in the project, or ~/.cursor/mcp.json for every project",
    "generic": "an mcpServers entry for clients that read that shape; they take values literally (no ${VAR})",
}

# Where each shape is documented: the client's own page (the generic shape: fastmcp's, the common reader).
SOURCES = {
    "claude-desktop": "https://modelcontextprotocol.io/docs/develop/connect-local-servers",
    "claude-code": "https://code.claude.com/docs/en/mcp",
    "vscode": "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
    "cursor": "https://cursor.com/docs/mcp",
    "generic": "https://gofastmcp.com/integrations/mcp-json-configuration",
}

NOT_SUPPORTED = (
    "Claude Desktop's claude_desktop_config.json holds only servers it launches (stdio). A remote server is a "
    "custom connector (Settings > Connectors > Add custom connector), which Anthropic's cloud connects to, not "
    "the desktop: it needs a public HTTPS URL and OAuth (or no authentication), not a static token "
    "(https://support.claude.com/en/articles/11175166). Without --http this prints the stdio entry; "
    "`mcpserver bundle` makes a one-click install.")


def stdio_launch(target: str) -> dict[str, Any]:
    """How a client starts TARGET over stdio, from any directory: the interpreter and target as absolute paths."""
    location, colon, attribute = target.partition(":") if not os.path.exists(target) else (target, "", "")
    resolved = os.path.abspath(location) + colon + attribute if os.path.exists(location) else target
    launch: dict[str, Any] = {"command": os.path.abspath(sys.executable), "args": ["-m", "mcpserver", resolved]}
    server_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above mcpserver/
    if not _installed(server_dir):  # a source checkout: the interpreter must find the package too
        launch["env"] = {"PYTHONPATH": server_dir}
    return launch


def _installed(server_dir: str) -> bool:
    """Whether `python -I -m mcpserver` finds this package without help (installed, not a checkout)."""
    import subprocess

    done = subprocess.run([sys.executable, "-I", "-c", "import mcpserver, os; print(os.path.dirname("
                           "os.path.dirname(os.path.abspath(mcpserver.__file__))))"], capture_output=True, text=True,
                          cwd="/")
    return done.returncode == 0 and done.stdout.strip() == server_dir


def client_entry(client: str, key: str, *, launch: Optional[dict[str, Any]] = None, url: Optional[str] = None,
                 token_env: Optional[str] = None, token: Optional[str] = None,
                 no_token: bool = False) -> dict[str, Any]:
    """The document to merge into CLIENT's configuration: stdio when `launch` is given, else HTTP at `url`.

    The bearer token of an HTTP entry: where the client expands variables, a reference to `token_env`
    (default $MCPSERVER_TOKEN; VS Code's default is an input it asks for); for the generic shape, `token`
    itself, since nothing there is expanded, or no header. `no_token`: no header for any client.
    """
    if launch is not None:
        entry = dict(launch) if client in ("claude-desktop", "cursor", "generic") else {"type": "stdio", **launch}
        return {"servers" if client == "vscode" else "mcpServers": {key: entry}}
    if client == "claude-desktop":
        raise ConfigError(NOT_SUPPORTED)
    assert url is not None
    entry = {"url": url} if client == "cursor" else {"type": "http", "url": url}
    document: dict[str, Any] = {"servers" if client == "vscode" else "mcpServers": {key: entry}}
    if client == "vscode" and token_env is None and not no_token:
        # VS Code's own way for a secret: an input, asked once and then kept in its secret storage.
        document["inputs"] = [{"type": "promptString", "id": f"{key}-token", "password": True,
                               "description": f"The bearer token of the MCP server at {url}"}]
        token_env = f"input:{key}-token"
    variable = token_env or TOKEN
    bearer = {"claude-code": f"${{{variable}}}", "generic": token,
              "cursor": f"${{env:{variable}}}",
              "vscode": f"${{{variable}}}" if variable.startswith("input:") else f"${{env:{variable}}}"}[client]
    if bearer is not None and not no_token:
        entry["headers"] = {"Authorization": f"Bearer {bearer}"}
    return document
