"""The initialize-based revisions (2025-11-25 down to 2024-11-05, LEGACY.md), which most clients in the field
still open with. Nothing imports this wing until a legacy client shows up (protocol.dispatch, the transports).

  _shaping    the revisions: negotiating one, and shaping every message for it (what it lacks is never sent)
  _sessions   a session's peer state (LegacyPeer) and, over HTTP, the table of sessions by id
  _dispatch   a legacy request answered: protocol.dispatch's one seam into this wing
The HTTP binding of sessions (Mcp-Session-Id, the GET stream, DELETE) is the HTTP wing's: mcpserver.http._sessions.
"""

from ._dispatch import dispatch
from ._sessions import LegacyPeer, SessionTable
from ._shaping import LEGACY_VERSIONS, LOG_LEVELS, LegacySession, opens_legacy, shape_notification, shape_request

__all__ = ["LEGACY_VERSIONS", "LOG_LEVELS", "LegacyPeer", "LegacySession", "SessionTable", "dispatch", "opens_legacy",
           "shape_notification", "shape_request"]
