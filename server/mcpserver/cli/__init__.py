"""The command line's other commands: `call`, `list`, `config` and `bundle` (_commands, with the client entries
in _clients and the .mcpb bundle in _bundle), and `dev`, the HTTP server restarted on every edit (_dev).
Serving itself (`python -m mcpserver TARGET`) is __main__'s, which imports this wing only for these commands.
"""

from ._commands import EXIT_STATUS, main
from ._dev import main as dev

__all__ = ["EXIT_STATUS", "dev", "main"]
