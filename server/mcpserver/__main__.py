"""python -m mcpserver [options] TARGET: check or serve a server over stdio or Streamable HTTP."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from ._init import init_if_pid1
from ._loader import load_target
from ._version import __version__
from .errors import ConfigError
from .protocol import PROTOCOL_VERSION

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcpserver",
        description=f"Serve an MCP server (protocol {PROTOCOL_VERSION}) over stdio, or over HTTP with --http.",
        epilog="TARGET is MODULE:ATTRIBUTE, a .py file that defines a Server, or a .json manifest of command tools.")
    parser.add_argument("target", metavar="TARGET", nargs="?")
    parser.add_argument("--version", action="version", version=f"mcpserver {__version__} (protocol {PROTOCOL_VERSION})")
    parser.add_argument("--check", action="store_true", help="load TARGET, print what it advertises, exit 0 or 1")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                        help="default: info (the HTTP access log is at info)")
    parser.add_argument("--log-file", metavar="FILE", help="append logs here instead of stderr")
    http = parser.add_argument_group("HTTP (Streamable HTTP transport)")
    http.add_argument("--http", action="store_true", help="serve over HTTP instead of stdio")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=3000, help="port (default 3000; 0 picks a free one)")
    http.add_argument("--path", default="/mcp", help="endpoint path (default /mcp)")
    http.add_argument("--token", help="bearer token clients must send (or set MCPSERVER_TOKEN)")
    http.add_argument("--insecure-no-auth", action="store_true",
                      help="allow a non-loopback bind without a token (only behind your own auth)")
    http.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                      help="an Origin browsers may call from (repeatable); loopback origins are allowed by default")
    http.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                      help="an extra Host header name to accept when bound to loopback (repeatable)")
    http.add_argument("--max-body-bytes", type=int, metavar="N", help="largest request body (default 32 MiB)")
    http.add_argument("--max-connections", type=int, metavar="N", help="open connections at once (default 64)")
    http.add_argument("--read-timeout", type=float, metavar="SECONDS",
                      help="drop a client that stalls this long while sending or idles on keep-alive (default 30)")
    http.add_argument("--grace", type=float, metavar="SECONDS",
                      help="on SIGTERM/SIGINT, how long in-flight requests may take to finish (default 10)")
    return parser


def configure_logging(level: str, log_file: Optional[str]) -> None:
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _print_check(target: str) -> int:
    server = load_target(target)
    print(f"{server.name} {server.version}: {len(server.tools)} tools, {len(server.resources)} resources, "
          f"{len(server.resource_templates)} resource templates, {len(server.prompts)} prompts")
    for tool in server.tools.values():
        summary = (tool.description or "").strip().splitlines()
        print(f"  tool {tool.name}: {summary[0] if summary else '(no description)'}")
    for resource in server.resources.values():
        print(f"  resource {resource.uri}")
    for template in server.resource_templates:
        print(f"  resource template {template.uri_template}")
    for prompt in server.prompts.values():
        print(f"  prompt {prompt.name}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    init_if_pid1()
    parser = _parser()
    args = parser.parse_args(argv)
    if args.target is None:
        parser.error("TARGET is required (e.g. server/examples/demo.py)")
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        parser.error(f"cannot open the log file: {exc}")
    try:
        if args.check:
            return _print_check(args.target)
        server = load_target(args.target)
        if args.http:
            from .http import serve

            options = {key: value for key, value in (("max_body_bytes", args.max_body_bytes),
                                                     ("max_connections", args.max_connections),
                                                     ("read_timeout", args.read_timeout),
                                                     ("grace_seconds", args.grace)) if value is not None}
            return serve(server, host=args.host, port=args.port, path=args.path, token=args.token,
                         insecure_no_auth=args.insecure_no_auth, allowed_origins=args.allow_origin,
                         allowed_hosts=args.allow_host, **options)
        from .stdio import serve_stdio

        return serve_stdio(server)
    except ConfigError as exc:
        print(f"mcpserver: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
