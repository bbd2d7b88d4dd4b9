"""mcpserver [options] TARGET: serve a server over stdio or Streamable HTTP (also `python -m mcpserver`).

The other commands (call, list, config, bundle) are _cli's; `dev` is _dev's, with this parser's options.
"""

from __future__ import annotations

import gc
import os
import sys
from types import SimpleNamespace

from . import _environment, _log
from ._version import __version__
from ._wire import LEGACY_VERSIONS, PROTOCOL_VERSION
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any, NoReturn, Optional
else:
    try:  # the C module: signal.py wraps every constant in an enum, which costs start-up
        import _signal as signal
    except ImportError:  # an interpreter without it (PyPy)
        import signal

HTTP_GROUP = "HTTP (Streamable HTTP transport)"
OAUTH_GROUP = "OAuth (HTTP: accept access tokens from an authorization server instead of a static token)"


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"not a whole number: {text!r}") from None


def _port(text: str) -> int:
    number = _whole(text)
    if not 0 <= number <= 65535:  # else bind() raises OverflowError, a traceback for a typo
        raise ValueError(f"a port is 0 to 65535 (0 picks a free one), not {text}")
    return number


def _positive(text: str) -> int:
    number = _whole(text)
    if number < 1:
        raise ValueError(f"must be at least 1, not {text}")
    return number


def _seconds(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"not a number of seconds: {text!r}") from None
    if not 0 <= number < float("inf"):  # also refuses nan, which compares false with everything
        raise ValueError(f"a number of seconds is finite and at least 0, not {text}")
    return number


def _timeout(text: str) -> float:
    number = _seconds(text)
    if number == 0:
        raise ValueError("a timeout of 0 seconds would drop every client; give a positive number")
    return number


def _lease(text: str) -> float:
    number = _seconds(text)
    if number < 1:  # renewed every third of it: a store written several times a second by every running task
        raise ValueError(f"a task lease is at least 1 second, not {text}")
    return number


def _rate(text: str) -> str:
    """A rate limit, checked here so a typo is refused with the others (mcpserver._ratelimit says what one is)."""
    from ._ratelimit import Rate

    Rate(text)
    return text


def _mode(text: str) -> int:
    """A file mode in octal, as chmod takes it (600, 0600, 0o660)."""
    try:
        mode = int(text[2:] if text.lower().startswith("0o") else text, 8)
    except ValueError:
        raise ValueError(f"not a mode in octal (600, 660): {text!r}") from None
    if not 0 <= mode <= 0o777:
        raise ValueError(f"a mode is 0 to 777 in octal, not {text}")
    return mode


def _host(text: str) -> str:
    """An address or a host name, refused here when it is neither: else the authentication check, which
    sees anything that is not loopback as a public address, is the one that complains, and about a token."""
    import socket  # the HTTP transport imports it anyway

    if not text:
        raise ValueError("'' is not an address (to listen on every interface, give 0.0.0.0 or ::)")
    if ":" in text or all(c.isdigit() or c == "." for c in text):
        family, kind = (socket.AF_INET6, "IPv6") if ":" in text else (socket.AF_INET, "IPv4")
        try:
            socket.inet_pton(family, text.split("%", 1)[0])  # an IPv6 scope (%eth0) is for getaddrinfo
        except OSError:
            hint = " (give it without brackets)" if text.startswith("[") else \
                " (four numbers of 0 to 255)" if kind == "IPv4" else ""
            raise ValueError(f"{text!r} is not an {kind} address{hint}") from None
        return text
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    if len(text) > 253 or not all(0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-" and
                                  all(c.isalnum() or c in "-_" for c in label) for label in labels):
        raise ValueError(f"{text!r} is not an address or a host name")
    return text


class Option:
    """One command-line option, read by the quick parser and by argparse alike. An HTTP option sets the field of
    mcpserver.http.HttpOptions named `field` (its own name, unless said; None: no field of those)."""

    __slots__ = ("aliases", "choices", "default", "dest", "field", "flag", "group", "help", "kind", "metavar")

    def __init__(self, flag: str, kind: Any, help: str, *, default: Any = None, metavar: Optional[str] = None,
                 choices: Optional[tuple[str, ...]] = None, group: Optional[str] = None, aliases: tuple[str, ...] = (),
                 field: Optional[str] = ""):
        self.flag = flag
        self.aliases = aliases  # older spellings, still read
        self.dest = flag[2:].replace("-", "_")
        self.field = self.dest if field == "" and group == HTTP_GROUP else field
        # bool: a flag; list: repeatable; str, or a converter that raises ValueError saying why: one value
        self.kind = kind
        self.help = help
        self.default = [] if kind is list else False if kind is bool else default
        self.metavar = metavar
        self.choices = choices
        self.group = group


OPTIONS = (
    Option("--check", bool, "load TARGET, print what it advertises, exit 0 or 1"),
    Option("--log-level", str, "default: info (the HTTP access log is at info)", default="info",
           choices=("debug", "info", "warning", "error")),
    Option("--log-file", str, "append logs here instead of stderr", metavar="FILE"),
    Option("--log-format", str, "text (default), or json: one object per line, with the request id, trace id and "
           "principal of records made while a request is answered", default="text", choices=_log.FORMATS),
    Option("--max-concurrent", _positive, "stdio: calls that may run at once; the reader waits beyond it "
           "(default 16)", metavar="N"),
    Option("--generic-errors", bool, "tell clients only that a tool failed, with an id; the exception or the "
           "program's stderr goes to the log under that id (same as MCPSERVER_GENERIC_ERRORS=1)"),
    Option("--store", str, "what the processes serving this server share: where task tools keep their tasks, legacy "
           "HTTP sessions their streams' events, and notifications cross between processes: memory (default, this "
           "process alone), the path of an SQLite file (every process on the host, kept across restarts) or a "
           "postgresql:// URL (many hosts)", metavar="PATH", aliases=("--task-store",)),
    Option("--task-lease", _lease, "how long a task's process may go unheard before another process sharing the "
           "--store fails the task as orphaned (default 30; the process renews every third of it): shorter is a "
           "quicker verdict on a replica that died, longer rides out a longer stall", metavar="SECONDS"),
    Option("--skills", list, "serve the skills under DIR (repeatable): each directory below it holding a SKILL.md "
           "(the Skills extension)", metavar="DIR"),
    Option("--grace", _seconds, "on SIGTERM/SIGINT, how long calls in flight may take to finish (default 10); a "
           "second signal stops at once", metavar="SECONDS", field="grace_seconds"),
    Option("--max-listen-seconds", _timeout, "end each subscriptions/listen stream (and a legacy session's GET "
           "stream) after this long with its graceful result, so the client listens again (default: no bound)",
           metavar="SECONDS"),
    Option("--no-listen", bool, "serve no subscriptions/listen streams, and say so in server/discover and "
           "initialize (no listChanged, no subscribe): for a server whose lists never change"),
    Option("--http", bool, "serve over HTTP instead of stdio; --http unix:PATH serves it on a Unix socket",
           group=HTTP_GROUP, field=None),
    Option("--unix-socket", str, "serve HTTP on this Unix socket instead of a port (what --http unix:PATH says); "
           "its file is made with --unix-socket-mode, a stale one replaced, and removed on exit", metavar="PATH",
           group=HTTP_GROUP),
    Option("--unix-socket-mode", _mode, "who may connect to the Unix socket, as a mode in octal (default 600: "
           "this user alone; 660: this group too)", metavar="MODE", group=HTTP_GROUP),
    Option("--host", _host, "address to bind (default 127.0.0.1)", default="127.0.0.1", metavar="HOST",
           group=HTTP_GROUP),
    Option("--port", _port, "port (default 3000; 0 picks a free one)", default=3000, metavar="PORT",
           group=HTTP_GROUP),
    Option("--path", str, "endpoint path (default /mcp)", default="/mcp", group=HTTP_GROUP),
    Option("--token-file", str, "read the bearer token clients must send from FILE's first line (or set "
           "MCPSERVER_TOKEN)", metavar="FILE", group=HTTP_GROUP, field=None),
    Option("--token", str, "the bearer token itself; visible in ps, so prefer --token-file", group=HTTP_GROUP,
           field=None),
    Option("--insecure-no-auth", bool, "allow a non-loopback bind without a token (only behind your own auth)",
           group=HTTP_GROUP),
    Option("--allow-origin", list, "an Origin browsers may call from (repeatable); loopback origins are allowed by "
           "default", metavar="ORIGIN", group=HTTP_GROUP, field="allowed_origins"),
    Option("--allow-host", list, "an extra Host header name to accept when bound to loopback (repeatable)",
           metavar="HOST", group=HTTP_GROUP, field="allowed_hosts"),
    Option("--max-body-bytes", _positive, "largest request body (default 32 MiB)", metavar="N", group=HTTP_GROUP),
    Option("--max-connections", _positive, "open connections at once (default 1024; idle and slow ones cost no "
           "thread)", metavar="N", group=HTTP_GROUP),
    Option("--max-requests", _positive, "requests running at once (default 64)", metavar="N", group=HTTP_GROUP),
    Option("--worker-idle-seconds", _timeout, "a request worker idle this long exits, down to 2 kept "
           "(default 60); new ones start on demand", metavar="SECONDS", group=HTTP_GROUP),
    Option("--max-queued", _positive, "whole requests that may wait for one to finish (default 256); beyond, 503",
           metavar="N", group=HTTP_GROUP),
    Option("--max-listeners", _positive, "subscriptions/listen streams open at once (default: the server's, 512)",
           metavar="N", group=HTTP_GROUP),
    Option("--max-listeners-per-peer", _positive, "subscriptions/listen streams one client address may hold "
           "(default 32)", metavar="N", group=HTTP_GROUP),
    Option("--max-listeners-per-principal", _positive, "subscriptions/listen streams one OAuth subject, or the "
           "holders of the static token, may hold (default 128)", metavar="N", group=HTTP_GROUP),
    Option("--rate-limit", _rate, "requests each client may make: N/s, N/m or N/h, per OAuth subject or static token, "
           "else per address (behind --behind-proxy, the nearest proxy's X-Forwarded-For entry); beyond, 429 with "
           "Retry-After (default: no limit)", metavar="RATE", group=HTTP_GROUP),
    Option("--burst", _positive, "requests a client may make at once under --rate-limit (default: its N)",
           metavar="N", group=HTTP_GROUP),
    Option("--read-timeout", _timeout, "drop a client that idles this long on keep-alive or takes longer to send "
           "a body (default 30)", metavar="SECONDS", group=HTTP_GROUP),
    Option("--header-timeout", _timeout, "drop a client whose request head takes longer than this to arrive "
           "(default 10)", metavar="SECONDS", group=HTTP_GROUP),
    Option("--tls-cert", str, "serve HTTPS with this PEM certificate chain; SIGHUP reloads it", metavar="FILE",
           group=HTTP_GROUP),
    Option("--tls-key", str, "the certificate's private key (PEM), unless it is in --tls-cert's file",
           metavar="FILE", group=HTTP_GROUP),
    Option("--behind-proxy", bool, "a TLS-terminating proxy is in front: requests must carry "
           "X-Forwarded-Proto: https", group=HTTP_GROUP),
    Option("--metrics", bool, "serve Prometheus metrics on GET /metrics, authenticated as the endpoint is",
           group=HTTP_GROUP),
    Option("--public-metrics", bool, "serve /metrics without authentication (for a scraper that cannot send the "
           "token; the figures name no client or tool)", group=HTTP_GROUP),
    Option("--health", bool, "answer GET /healthz (the process serves) and /readyz (it can: the task store and "
           "the authorization server's keys), with no token and without a worker", group=HTTP_GROUP),
    Option("--log-health", bool, "put /healthz and /readyz in the access log (left out by default)",
           group=HTTP_GROUP),
    Option("--server-card", bool, "experimental (SEP-2127, a draft): serve the MCP Server Card at PATH/server-card "
           "to anyone, made from serverInfo (whose name must be namespace/name, with a description)",
           group=HTTP_GROUP),
    Option("--ai-catalog", bool, "experimental: serve /.well-known/ai-catalog.json, the AI Catalog that points to "
           "the Server Card (it implies --server-card)", group=HTTP_GROUP),
    Option("--resource", str, "this endpoint's public URL, the audience its OAuth access tokens must name",
           metavar="URL", group=OAUTH_GROUP),
    Option("--authorization-server", list, "the issuer URL of an authorization server whose tokens are accepted "
           "(repeatable; tokens are checked against the first)", metavar="URL", group=OAUTH_GROUP),
    Option("--scope", list, "a scope every request's token must carry (repeatable)", metavar="SCOPE",
           group=OAUTH_GROUP),
    Option("--introspection-client-id", str, "check tokens by RFC 7662 introspection, as this client, instead of "
           "as JWTs", metavar="ID", group=OAUTH_GROUP),
    Option("--introspection-secret-file", str, "that client's secret, on FILE's first line", metavar="FILE",
           group=OAUTH_GROUP),
)


def _quick_parse(argv: list[str]) -> Any:
    """The common command lines, parsed without importing argparse; None for anything else (--help,
    --version, a mistake), which argparse then parses and explains."""
    by_flag = {flag: option for option in OPTIONS for flag in (option.flag, *option.aliases)}
    values: dict[str, Any] = {o.dest: [] if o.kind is list else o.default for o in OPTIONS}
    values["target"] = None
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("-") and values["target"] is None:
            values["target"] = word
            continue
        flag, equals, value = word.partition("=")
        option = by_flag.get(flag)
        if option is None:
            return None
        if option.kind is bool:
            if equals:
                return None
            values[option.dest] = True
            continue
        if not equals:
            if index >= len(argv) or argv[index].startswith("-"):
                return None  # argparse reads "-x" here as an option, and refuses the line: so must we
            value = argv[index]
            index += 1
        try:
            typed = value if option.kind in (str, list) else option.kind(value)
        except ValueError:
            return None
        if option.choices is not None and typed not in option.choices:
            return None
        if option.kind is list:
            values[option.dest].append(typed)
        else:
            values[option.dest] = typed
    return SimpleNamespace(**values) if values["target"] is not None else None


USAGE = """mcpserver call|list|config|bundle|dev ...     (each has --help)
       mcpserver [options] TARGET                (python -m mcpserver is the same)"""

_LEGACY = f"{LEGACY_VERSIONS[0]} down to {LEGACY_VERSIONS[-1]}"
COMMANDS = f"""Serve and try MCP servers (protocol {PROTOCOL_VERSION}, and {_LEGACY} for clients that open with
initialize), pure standard library.

commands:
  mcpserver call TARGET TOOL [JSON|-]     run one tool through the protocol and print its result
  mcpserver list TARGET [--json]          the tools, resources and prompts, with their schemas
  mcpserver config TARGET --client NAME   the entry for claude-desktop, claude-code, vscode, cursor or a
                                          generic mcpServers file, stdio or (--http URL) HTTP
  mcpserver bundle TARGET [-o FILE]       an MCP Bundle (.mcpb) that desktop clients install in one click
  mcpserver dev [options] TARGET          serve over HTTP and restart when TARGET's files change
  mcpserver [options] TARGET              serve over stdio (what MCP clients launch), or HTTP with --http

TARGET is MODULE:ATTRIBUTE, a .py file that defines a Server, or a .json manifest of command tools."""


def _argparse_type(convert: Any) -> Any:
    """A converter for argparse: its ValueError's message, as argparse's own error for the option."""
    import argparse

    def converted(text: str) -> Any:
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return converted


def _parser(prog: str = "mcpserver") -> Any:
    import argparse

    from .cli._commands import EXIT_STATUS

    dev = prog.endswith(" dev")
    parser = argparse.ArgumentParser(
        prog=prog, usage=f"{prog} [options] TARGET" if dev else USAGE, epilog=EXIT_STATUS,
        description="Serve TARGET over HTTP, restarting it when its files change; a change that does not\n"
                    "load leaves the last good server running." if dev else COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", metavar="TARGET", nargs="?")
    parser.add_argument("--version", action="version",
                        version=f"mcpserver {__version__} (protocol {PROTOCOL_VERSION}; {_LEGACY} by initialize)")
    groups: dict[Optional[str], Any] = {None: parser}
    for option in OPTIONS:
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        target = groups[option.group]
        flags = (option.flag, *option.aliases)
        if option.kind is bool:
            target.add_argument(*flags, dest=option.dest, action="store_true", help=option.help)
        elif option.kind is list:
            target.add_argument(*flags, dest=option.dest, action="append", default=[], metavar=option.metavar,
                                help=option.help)
        else:
            target.add_argument(*flags, dest=option.dest, default=option.default, metavar=option.metavar,
                                type=option.kind if option.kind is str else _argparse_type(option.kind),
                                choices=option.choices, help=option.help)
    return parser


def _unix_spelled(argv: list[str]) -> list[str]:
    """`--http unix:PATH` (and `--http=unix:PATH`, gunicorn's spelling of a Unix socket) as `--http --unix-socket
    PATH`: for both parsers, which read --http as a flag."""
    spelled: list[str] = []
    words = iter(argv)
    for word in words:
        if word.startswith("--http=unix:"):
            spelled += ["--http", "--unix-socket", word[len("--http=unix:"):]]
            continue
        spelled.append(word)
        if word == "--http":
            following = next(words, None)
            if following is not None and following.startswith("unix:"):
                spelled += ["--unix-socket", following[len("unix:"):]]
            elif following is not None:
                spelled.append(following)
    return spelled


def _parse(argv: list[str], prog: str = "mcpserver") -> Any:
    """The command line: quickly when it is a common one, else through argparse (which exits on errors)."""
    argv = _unix_spelled(argv)
    args = _quick_parse(argv)
    if args is None:
        parser = _parser(prog)
        args = parser.parse_args(argv)
        if args.target is None:
            parser.error("TARGET is required (e.g. server/examples/demo.py)")
    args.http = args.http or bool(args.unix_socket)  # a Unix socket is served over HTTP
    return args


def _loaded(args: Any) -> Any:
    """The server TARGET names, with the skills the command line adds."""
    from ._loader import load_target

    server = load_target(args.target)
    for directory in args.skills:
        server.skills(directory)
    return server


def _print_check(args: Any) -> int:
    server = _loaded(args)
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
    handed_over = os.environ.pop(_environment.TOKEN_FD, None)
    if handed_over is not None:
        with os.fdopen(int(handed_over), "rb") as pipe:
            return pipe.read().decode() or None
    token = os.environ.pop(_environment.TOKEN, None)
    if not token or not os.path.exists("/proc/self/environ") or len(token) > 60_000:  # the pipe holds 64 KiB
        return token
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())
    os.close(write_end)
    os.set_inheritable(read_end, True)
    _start_again(dict(os.environ, **{_environment.TOKEN_FD: str(read_end)}))


def _start_again(environment: dict[str, str]) -> NoReturn:
    """Replace this process by the same command line in `environment` (exec keeps the PID and the pipes).

    A stop signal sent meanwhile waits (exec keeps the signal mask and what is pending) for the new process's
    start-up handler: with the handler it would be lost to exec, which puts back the default action."""
    argv = getattr(sys, "orig_argv", None) or [sys.executable, "-m", "mcpserver", *sys.argv[1:]]
    sys.stderr.flush()
    if hasattr(signal, "pthread_sigmask"):  # POSIX: a stop sent during the exec waits for the new image
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    os.execve(sys.executable, argv, environment)
    raise AssertionError("unreachable")  # pragma: no cover


def _resource_server(args: Any) -> Any:
    """The OAuth resource server the command line asks for; None without --resource."""
    if not args.resource and not args.authorization_server:
        return None
    if not args.resource or not args.authorization_server:
        raise ConfigError("OAuth needs both --resource (this endpoint's public URL) and --authorization-server")
    if args.token or args.token_file:
        raise ConfigError("give a static token or OAuth (--resource), not both")
    from .auth import ResourceServer
    from .http import read_token_file

    secret = read_token_file(args.introspection_secret_file) if args.introspection_secret_file else None
    if secret and not args.introspection_client_id:
        raise ConfigError("--introspection-secret-file needs --introspection-client-id")
    try:
        return ResourceServer(args.resource, args.authorization_server, scopes=args.scope,
                              introspection_client_id=args.introspection_client_id,
                              introspection_client_secret=secret)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


SUBCOMMANDS = ("call", "list", "config", "bundle")


class Starting:
    """SIGTERM and SIGINT while the server starts: a clean stop. Nothing has been served, so nothing is owed: the
    start ends where it is, at once (os._exit(0)). An exception raised from the handler could land anywhere (in a
    weakref callback of importlib's, which prints it and goes on) and be lost; an exit cannot. What the start had
    opened, the kernel closes, and a database it was writing rolls back what it had not committed (SQLite's
    journal, PostgreSQL's end of session): nothing is half-written. Set by main()'s first line when the process
    is its own (argv is None); before that line a signal is the interpreter's (its default action: status 143 or
    130; as PID 1, lost). The transport replaces it with its own handlers and calls served() on it, which tells
    the init, when this process is PID 1's server child (mcpserver._pid1), that it serves."""

    def __init__(self) -> None:
        self.report_fd: Optional[int] = None  # the pipe to the init, in PID 1's server child
        self.over = False  # the transport took over: a later signal that reaches this handler is not start-up's
        self.previous: dict[int, Any] = {}
        self.held = False  # as PID 1: the signals blocked for the init (mcpserver._pid1), not handled here

    @classmethod
    def now(cls, own_process: bool) -> Starting:
        starting = cls()
        if os.getpid() == 1:  # a container's entrypoint; any other start does without the module
            from ._pid1 import hold

            hold()  # a signal sent to PID 1 with no handler is thrown away: it waits for the init's
            starting.held = True
        elif own_process:
            starting.install()
        return starting

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[signum] = signal.signal(signum, self)
            except ValueError:  # not the main thread: the embedding application owns signals
                return
        if hasattr(signal, "pthread_sigmask"):  # blocked across a re-execution (_start_again): delivered now, here
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    def __call__(self, signum: int, frame: Any) -> None:
        if not self.over:
            os._exit(0)

    def served(self) -> None:
        self.over = True
        if self.report_fd is not None:
            from ._pid1 import SERVING

            os.write(self.report_fd, SERVING)
            os.close(self.report_fd)
            self.report_fd = None

    def release(self) -> None:
        """Signals as they were before now(): for what is not a server's start, and once it is over."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()
        if self.held:
            from ._pid1 import release

            release()
            self.held = False


def main(argv: Optional[list[str]] = None) -> int:
    # What start-up allocates (the package, the server's module and registry) lives as long as the process,
    # so the collector's passes over it are wasted work: about 4 % of a stdio server's start-up, and its
    # exit's last pass. It stays off while they are made; what exists then is frozen out of every later pass.
    starting = Starting.now(argv is None)  # first of all: from here on a stop signal stops the start cleanly
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(sys.argv[1:] if argv is None else argv, collecting, argv is None, starting)
    finally:
        starting.over = True  # a stop from here on finds the process exiting already
        if argv is not None:  # called, not run: the caller's handlers back
            starting.release()
        if collecting:
            gc.enable()


def _started(collecting: bool, freeze: bool = True) -> None:
    """Start-up is over: what it made is kept out of the collector's way, and collecting resumes."""
    if freeze and hasattr(gc, "freeze"):  # CPython 3.7+; PyPy has none
        gc.freeze()
    if collecting:
        gc.enable()


def _main(argv: list[str], collecting: bool, own_process: bool, starting: Starting) -> int:
    if argv[:1] and argv[0] in SUBCOMMANDS:
        from .cli import main as subcommand

        starting.release()  # not a server's start
        _started(collecting, freeze=False)  # a short command: nothing to keep out of the way
        return subcommand(argv)
    if argv[:1] == ["dev"]:  # the options are the server's own, read by the same parsers
        from .cli import dev

        starting.release()
        _started(collecting, freeze=False)
        return dev(_parse(argv[1:], "mcpserver dev"), argv[1:])
    args = _parse(argv)
    environ = _set_up_process(args, own_process, starting)
    try:
        _log.configure(args.log_level, args.log_file, args.log_format)
    except OSError as exc:
        print(f"mcpserver: cannot open the log file: {exc}", file=sys.stderr)
        return 2
    try:
        if args.check:
            return _print_check(args)
        server = _loaded(args)
        if args.store is not None or args.task_lease is not None:
            _open_task_store(server, args.store, args.task_lease)
        _log.adopt_logging()  # the server's code imported logging: route it where the command line says
        if args.log_format == "json":  # records made while a request is answered say which
            server.middleware(_log.in_request, outermost=True)
        _started(collecting)
        return _serve(server, args, args.token, environ)
    except ConfigError as exc:
        print(f"mcpserver: {exc}", file=sys.stderr)
        return 1


def _set_up_process(args: Any, own_process: bool, starting: Starting) -> dict[str, str]:
    """What the process needs before it loads the server: PyPy's nursery bounded (a start again), the token out
    of the environment, generic errors, PID 1's duties. Returns the environment the token is resolved from."""
    bounded = None
    if own_process and sys.implementation.name == "pypy":  # CPython starts without importing what only PyPy needs
        from ._pypy import bounded_environment

        bounded = bounded_environment()
    if bounded is not None:  # PyPy sized its nursery from a large CPU cache: start again with it bounded
        _start_again(bounded)
    environ: dict[str, str] = {}
    if args.http and not args.resource:  # $MCPSERVER_TOKEN leaves the environment before any tool can read it
        environ = dict(os.environ)
        scrubbed = _token_out_of_environment()
        if scrubbed:
            environ[_environment.TOKEN] = scrubbed
    if args.generic_errors:
        os.environ[_environment.GENERIC_ERRORS] = "1"
    if os.getpid() == 1:
        from ._pid1 import init_if_pid1

        init_if_pid1(starting)
    return environ


def _open_task_store(server: Any, spec: Optional[str], lease_seconds: Optional[float]) -> None:
    """The store --store names (else the server's own), with --task-lease's lease; opened now, so that one that
    cannot serve is refused at start-up (ConfigError), not at a first task."""
    from .store import TaskStore, open_task_store
    from .tasks import task_manager

    store = server.task_store if spec is None else spec
    if lease_seconds is not None:
        if not isinstance(store, TaskStore):
            store = open_task_store(store)
        store.lease_ms = round(lease_seconds * 1000)
    server.task_store = store
    task_manager(server)


def _serve(server: Any, args: Any, token: Optional[str], environ: dict[str, str]) -> int:
    from ._run import run

    if args.max_listen_seconds is not None:
        server.subscriptions.max_seconds = args.max_listen_seconds
    if args.no_listen:
        server.subscriptions.enabled = False
    if not args.http:
        stdio_options = {key: value for key, value in (("max_concurrent", args.max_concurrent),
                                                       ("grace_seconds", args.grace)) if value is not None}
        return run(server, "stdio", **stdio_options)
    from .http import HttpOptions, resolve_token  # only for HTTP: a stdio server's start-up does without it

    if not args.resource:
        token = resolve_token(args.token, args.token_file, environ)
    given = {option.field: getattr(args, option.dest) for option in OPTIONS
             if option.field and getattr(args, option.dest) not in (None, [])}
    return run(server, "http", HttpOptions(token=token, oauth=_resource_server(args), **given))


if __name__ == "__main__":
    sys.exit(main())
