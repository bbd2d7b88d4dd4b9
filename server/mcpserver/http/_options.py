"""HttpOptions: every option of Streamable HTTP, named once, as a field with its type and default, from the
command line (`python -m mcpserver --http`) through mcpserver.run and create_app to the app and the server.

Rules of this module:
- The server's own options (where it listens, its bounds, TLS) are mcpserver.httpd.ServeOptions's, which this
  extends with the app's: the HTTP server is given these options and reads only its own.
- Options are checked when made (ConfigError saying which and why), and never change: replace() makes a copy.
- Some imply others: public_metrics serves metrics, log_health serves health, ai_catalog the server card; loopback,
  when not given, is whether `host` is a loopback address.
"""

from __future__ import annotations

from .._options import frozen_options, replace
from ..errors import ConfigError
from ..httpd import DEFAULT_MAX_BODY_BYTES, ServeOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Sequence

    from ..auth import ResourceServer

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_LISTENERS_PER_PEER", "DEFAULT_MAX_LISTENERS_PER_PRINCIPAL",
           "HttpOptions", "given"]

# One client's share of the server's subscriptions/listen streams (its Server's max_listeners, 512 by
# default): a few streams is what a client needs; the rest stays for everyone else.
DEFAULT_MAX_LISTENERS_PER_PEER = 32
DEFAULT_MAX_LISTENERS_PER_PRINCIPAL = 128  # one OAuth subject's or static token's share, over all its addresses


@frozen_options(frozen=True, kw_only=True)
class HttpOptions(ServeOptions):
    """How MCP is served over HTTP: the server's options (ServeOptions) and the app's."""

    path: str = "/mcp"  # the endpoint; nothing else answers (404)
    token: Optional[str] = None  # the static bearer token clients must send (mcpserver.http.resolve_token)
    token_file: Optional[str] = None  # or the file whose first line it is
    insecure_no_auth: bool = False  # off loopback without a token: something in front authenticates
    allowed_origins: Sequence[str] = ()  # Origins browsers may call from (CORS); loopback ones are allowed
    allowed_hosts: Sequence[str] = ()  # Host names accepted besides loopback's when bound to loopback
    loopback: Optional[bool] = None  # served on loopback only (None: whether `host` is a loopback address)
    oauth: Optional[ResourceServer] = None  # OAuth access tokens instead of a static token (docs/guides/auth.md)
    behind_proxy: bool = False  # a TLS-terminating proxy is in front: X-Forwarded-Proto must say https
    max_listeners: Optional[int] = None  # subscriptions/listen streams of the process (None: the Server's)
    max_listeners_per_peer: int = DEFAULT_MAX_LISTENERS_PER_PEER
    max_listeners_per_principal: int = DEFAULT_MAX_LISTENERS_PER_PRINCIPAL
    metrics: bool = False  # GET /metrics, authenticated as the endpoint is
    metrics_dir: Optional[str] = None  # where several processes (gunicorn's workers) combine their figures
    public_metrics: bool = False  # /metrics without authentication (it implies metrics)
    health: bool = False  # /healthz and /readyz, to anyone
    log_health: bool = False  # the probes in the access log (it implies health)
    rate_limit: Optional[str] = None  # "N/s", "N/m" or "N/h" per principal, or per peer when anonymous
    burst: Optional[int] = None  # requests a client may make at once under rate_limit (default: its N)
    server_card: bool = False  # GET <path>/server-card, to anyone: the Server Card draft (experimental; http._card)
    ai_catalog: bool = False  # GET /.well-known/ai-catalog.json, pointing to the card (it implies server_card)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.path.startswith("/"):
            raise ConfigError(f"the endpoint path must start with '/', not {self.path!r}")
        if self.oauth is not None and (self.token or self.token_file):
            raise ConfigError("give a static token or OAuth, not both (a ResourceServer can take "
                              "validator=StaticTokens(...) for tokens of your own)")
        for name in ("max_listeners_per_peer", "max_listeners_per_principal"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)!r}")
        if self.rate_limit is not None:
            from .._ratelimit import Rate

            try:
                Rate(self.rate_limit, self.burst)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        elif self.burst is not None:
            raise ConfigError("a burst needs a rate limit (--rate-limit N/s, N/m or N/h)")
        implied = {"allowed_origins": tuple(self.allowed_origins), "allowed_hosts": tuple(self.allowed_hosts),
                   "metrics": self.metrics or self.public_metrics, "health": self.health or self.log_health,
                   "server_card": self.server_card or self.ai_catalog}
        for name, value in implied.items():
            object.__setattr__(self, name, value)


def given(options: Optional[HttpOptions], keywords: dict[str, Any]) -> HttpOptions:
    """`options`, with the keywords given beside them (or made from the keywords alone): mcpserver.run, serve,
    create_app and McpApp take either."""
    if options is None:
        return HttpOptions(**keywords)
    return replace(options, **keywords) if keywords else options
