"""python -m mcpserver [options] TARGET: check or serve a server over stdio or Streamable HTTP."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Optional

from ._init import init_if_pid1
from ._loader import load_target
from ._run import run
from ._version import __version__
from .errors import ConfigError
from .protocol import PROTOCOL_VERSION

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TOKEN_ENVIRONMENT = "MCPSERVER_TOKEN"
TOKEN_FD_ENVIRONMENT = "MCPSERVER_TOKEN_FD"  # set only for the process that replaces this one


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
    parser.add_argument("--max-concurrent", type=int, metavar="N",
                        help="stdio: calls that may run at once; the reader waits beyond it (default 16)")
    parser.add_argument("--grace", type=float, metavar="SECONDS",
                        help="on SIGTERM/SIGINT, how long calls in flight may take to finish (default 10); "
                             "a second signal stops at once")
    http = parser.add_argument_group("HTTP (Streamable HTTP transport)")
    http.add_argument("--http", action="store_true", help="serve over HTTP instead of stdio")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=3000, help="port (default 3000; 0 picks a free one)")
    http.add_argument("--path", default="/mcp", help="endpoint path (default /mcp)")
    http.add_argument("--token-file", metavar="FILE",
                      help="read the bearer token clients must send from FILE's first line (or set MCPSERVER_TOKEN)")
    http.add_argument("--token", help="the bearer token itself; visible in ps, so prefer --token-file")
    http.add_argument("--insecure-no-auth", action="store_true",
                      help="allow a non-loopback bind without a token (only behind your own auth)")
    http.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                      help="an Origin browsers may call from (repeatable); loopback origins are allowed by default")
    http.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                      help="an extra Host header name to accept when bound to loopback (repeatable)")
    http.add_argument("--max-body-bytes", type=int, metavar="N", help="largest request body (default 32 MiB)")
    http.add_argument("--max-connections", type=int, metavar="N", help="open connections at once (default 64)")
    http.add_argument("--read-timeout", type=float, metavar="SECONDS",
                      help="drop a client that idles this long on keep-alive or takes longer to send a body "
                           "(default 30)")
    http.add_argument("--header-timeout", type=float, metavar="SECONDS",
                      help="drop a client whose request head takes longer than this to arrive (default 10)")
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


def _token_out_of_environment() -> Optional[str]:
    """$MCPSERVER_TOKEN, taken out of this process's environment.

    /proc/PID/environ shows the environment a process started with, whatever os.environ says later,
    and any process of the same user (a tool's child) may read it. So the process starts again
    without the variable (exec keeps the PID), and the token crosses on a pipe.
    """
    handed_over = os.environ.pop(TOKEN_FD_ENVIRONMENT, None)
    if handed_over is not None:
        with os.fdopen(int(handed_over), "rb") as pipe:
            return pipe.read().decode() or None
    token = os.environ.pop(TOKEN_ENVIRONMENT, None)
    if not token or not os.path.exists("/proc/self/environ") or len(token) > 60_000:  # the pipe holds 64 KiB
        return token
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())
    os.close(write_end)
    os.set_inheritable(read_end, True)
    environment = dict(os.environ, **{TOKEN_FD_ENVIRONMENT: str(read_end)})
    argv = getattr(sys, "orig_argv", None) or [sys.executable, "-m", "mcpserver", *sys.argv[1:]]
    sys.stderr.flush()
    os.execve(sys.executable, argv, environment)
    raise AssertionError("unreachable")  # pragma: no cover


def main(argv: Optional[list[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.target is None:
        parser.error("TARGET is required (e.g. server/examples/demo.py)")
    token = args.token
    if args.http and not token and not args.token_file:
        token = _token_out_of_environment()
    init_if_pid1()
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        parser.error(f"cannot open the log file: {exc}")
    try:
        if args.check:
            return _print_check(args.target)
        server = load_target(args.target)
        if not args.http:
            stdio_options = {key: value for key, value in (("max_concurrent", args.max_concurrent),
                                                           ("grace_seconds", args.grace)) if value is not None}
            return run(server, "stdio", **stdio_options)
        limits = {key: value for key, value in (("max_body_bytes", args.max_body_bytes),
                                                ("max_connections", args.max_connections),
                                                ("read_timeout", args.read_timeout),
                                                ("header_timeout", args.header_timeout),
                                                ("grace_seconds", args.grace)) if value is not None}
        return run(server, "http", host=args.host, port=args.port, path=args.path, token=token,
                   token_file=args.token_file, insecure_no_auth=args.insecure_no_auth,
                   allowed_origins=args.allow_origin, allowed_hosts=args.allow_host, **limits)
    except ConfigError as exc:
        print(f"mcpserver: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
