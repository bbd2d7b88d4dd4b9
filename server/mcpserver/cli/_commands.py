"""The command line's tools for trying a server before any client sees it: call, list, config, bundle.

    mcpserver call TARGET TOOL ['{"arg": ...}' | -]     run one tool through the protocol; print its result
    mcpserver list TARGET [--json]                      what the server offers, with schemas
    mcpserver config TARGET --client NAME [--http URL]  the entry that client reads (_clients)
    mcpserver bundle TARGET [-o FILE]                   an MCP Bundle for one-click installs (_bundle)

`call` goes through the same protocol core the transports use (a tools/call request with the
server's own validation), in this process. Exit statuses: EXIT_STATUS, the one table of every command.
"""

from __future__ import annotations

import json
import os
import sys

from .. import protocol
from .._context import Flight
from .._loader import load_target
from .._state import Sealer
from .._wire import (
    ALL_INPUT_CAPABILITIES,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, TextIO

    from .._server import Server

__all__ = ["EXIT_STATUS", "main"]

EXIT_STATUS = """exit status (every command):
  0  done: served until EOF or a signal, or checked, called, listed, printed, written
  1  TARGET cannot load or start, or the tool called failed (an isError result) or was refused
  2  usage: a wrong command line, arguments that are not a JSON object, an entry the client cannot take
  3  call: the tool asks the client for input (elicitation, sampling, roots), which a shell cannot give
  (dev stops with 0 on Ctrl-C, and keeps running while TARGET does not load)"""

# Declaring every capability lets a tool that asks for input say what it asks (exit 3) rather than -32021.
# The Tasks extension too: a task tool's call is then followed to its end (tasks/get), its progress shown.
META = {META_VERSION: PROTOCOL_VERSION,
        META_CAPABILITIES: {**ALL_INPUT_CAPABILITIES, "extensions": {TASKS_EXTENSION: {}}},
        META_CLIENT_INFO: {"name": "mcpserver-cli", "version": "1"}}
TASK_POLL_LIMITS = (0.05, 1.0)  # seconds between tasks/get: the task's pollIntervalMs, kept within these
TARGET_HELP = "a .py file, MODULE:ATTRIBUTE or a .json manifest"


def _parser() -> Any:
    import argparse

    from ._clients import CLIENTS

    parser = argparse.ArgumentParser(prog="mcpserver", description="Try a server from the command line.",
                                     epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    call = commands.add_parser("call", help="run one tool and print its result", epilog=EXIT_STATUS,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    call.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("arguments", metavar="JSON", nargs="?", default="{}",
                      help="the arguments as a JSON object, or - to read them from stdin (default {})")
    listing = commands.add_parser("list", help="print the tools, resources and prompts, with their schemas")
    listing.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    listing.add_argument("--json", action="store_true", help="print the lists as JSON")
    config = commands.add_parser("config", help="print the entry an MCP client's configuration takes",
                                 description="Print the entry CLIENT's configuration file takes, in that client's "
                                             "own shape and variable syntax (docs/guides/clients.md).")
    config.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    config.add_argument("--client", choices=CLIENTS, default="generic",
                        help="whose shape (default generic: an mcpServers entry taken literally)")
    config.add_argument("--name", help="the server's key in the file (default: the server's name)")
    config.add_argument("--http", metavar="URL", help="an entry for a server already serving over HTTP at URL")
    config.add_argument("--token-env", metavar="VARIABLE",
                        help="with --http: the variable the client reads the bearer token from (default "
                             "MCPSERVER_TOKEN; vscode: an input VS Code asks for)")
    config.add_argument("--token-file", metavar="FILE",
                        help="with --http and --client generic: write the token itself (that shape expands nothing)")
    config.add_argument("--no-token", action="store_true", help="with --http: no Authorization header")
    bundle = commands.add_parser("bundle", help="write an MCP Bundle (.mcpb) for one-click installs",
                                 description="Write an MCP Bundle: a zip of manifest.json, this package and TARGET, "
                                             "that desktop clients install with one click; it needs only a "
                                             "Python 3.9+ on the user's PATH.")
    bundle.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    bundle.add_argument("-o", "--output", metavar="FILE", help="where to write it (default NAME-VERSION.mcpb)")
    bundle.add_argument("--author", help="the manifest's author.name (default: your user name)")
    bundle.add_argument("--include", action="append", default=[], metavar="PATH",
                        help="a file or folder TARGET needs, beside it in the bundle (repeatable)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "config":
            return _config(args, sys.stdout, sys.stderr)
        if args.command == "bundle":
            from ._bundle import write_bundle

            missing = [path for path in args.include if not os.path.exists(path)]
            if missing:
                print(f"mcpserver: --include {missing[0]}: no such file or folder", file=sys.stderr)
                return 2
            return write_bundle(args.target, args.output, author=args.author, include=args.include)
        server = load_target(args.target)
        if args.command == "list":
            return _list(server, args.json, sys.stdout)
        return _call(server, args.tool, args.arguments, sys.stdout, sys.stderr)
    except ConfigError as exc:  # TARGET cannot load: 1, as when serving it
        print(f"mcpserver: {exc}", file=sys.stderr)
        return 1


def _call(server: Server, tool: str, given: str, out: TextIO, err: TextIO) -> int:
    text = sys.stdin.read() if given == "-" else given
    try:
        arguments = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        print(f"mcpserver: the arguments are not JSON: {exc}", file=err)
        return 2
    if not isinstance(arguments, dict):
        print("mcpserver: the arguments must be a JSON object, e.g. '{\"text\": \"hi\"}'", file=err)
        return 2

    def progress(note: dict[str, Any]) -> None:
        params = note.get("params", {})
        shown = f"{params.get('progress')}" + (f"/{params['total']}" if "total" in params else "")
        print(f"progress {shown} {params.get('message', '')}".rstrip(), file=err, flush=True)

    request = protocol.Request(1, "tools/call", {"_meta": dict(META, progressToken="cli"), "name": tool,
                                                 "arguments": arguments})
    # A one-shot call never resumes a requestState, so a key of this call only is the right one: the default
    # (a key of this process) warns about replicas, which mean nothing here.
    server.sealer = Sealer(os.urandom(32).hex(), server.sealer.ttl)
    reply = protocol.dispatch(request, server, flight=Flight(progress, transport="cli"))
    response = reply.response or {}
    if "error" in response:
        error = response["error"]
        print(f"mcpserver: {error['message']}" + (f" ({json.dumps(error['data'])})" if "data" in error else ""),
              file=err)
        if tool not in server.tools:
            print(f"mcpserver: {server.name}'s tools: {', '.join(server.tools) or '(none)'}"
                  + _did_you_mean(tool, list(server.tools)), file=err)
        return 1
    result = response["result"]
    if result.get("resultType") == "task":
        return _follow_task(server, tool, result, out, err)
    return _show(tool, result, out, err)


def _show(tool: str, result: dict[str, Any], out: TextIO, err: TextIO) -> int:
    if result.get("resultType") == "input_required" or "inputRequests" in result:
        print(f"mcpserver: {tool} asks the client for input, which the command line cannot give:", file=err)
        for key, asked in result.get("inputRequests", {}).items():
            print(f"  {key}: {asked.get('method')} {asked.get('params', {}).get('message', '')}".rstrip(), file=err)
        return 3
    if result.get("isError"):  # the tool's failure: its message on stderr, and a status the shell can test
        _print_result(result, err)
        return 1
    _print_result(result, out)
    return 0


def _follow_task(server: Server, tool: str, task: dict[str, Any], out: TextIO, err: TextIO) -> int:
    """A task tool's call: poll tasks/get, showing each new status message, to the task's end. Ctrl-C
    cancels the task (tasks/cancel) and exits 130."""
    import time

    task_id, shown = task["taskId"], None
    print(f"mcpserver: {tool} runs as task {task_id}", file=err, flush=True)
    try:
        while True:
            if task.get("statusMessage") != shown and task.get("statusMessage"):
                shown = task["statusMessage"]
                print(f"task {task['status']}: {shown}", file=err, flush=True)
            if task["status"] in ("completed", "failed", "cancelled", "input_required"):
                break
            low, high = TASK_POLL_LIMITS
            time.sleep(min(high, max(low, (task.get("pollIntervalMs") or 0) / 1000)))
            task = _task_call(server, "tasks/get", task_id)
    except KeyboardInterrupt:
        _task_call(server, "tasks/cancel", task_id)
        print(f"mcpserver: task {task_id} cancelled", file=err)
        return 130
    if task["status"] == "completed":
        return _show(tool, task["result"], out, err)
    if task["status"] == "input_required":
        return _show(tool, task, out, err)
    error = task.get("error") or {"message": task.get("statusMessage") or task["status"]}
    print(f"mcpserver: task {task['status']}: {error['message']}", file=err)
    return 1


def _task_call(server: Server, method: str, task_id: str) -> dict[str, Any]:
    reply = protocol.dispatch(protocol.Request(method, method, {"_meta": META, "taskId": task_id}), server)
    response = reply.response or {}
    if "error" in response:
        raise ConfigError(f"{method} for task {task_id}: {response['error']['message']}")
    return response["result"]  # type: ignore[no-any-return]


def _print_result(result: dict[str, Any], out: TextIO) -> None:
    """Text as text, structured content as JSON, other blocks as one line each."""
    if "structuredContent" in result:
        out.write(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False) + "\n")
        return
    for block in result.get("content", []):
        if block.get("type") == "text":
            out.write(block["text"] if block["text"].endswith("\n") else block["text"] + "\n")
        elif block.get("type") in ("image", "audio"):
            out.write(f"[{block['type']} {block.get('mimeType')}, {len(block.get('data', '')) * 3 // 4} bytes]\n")
        elif block.get("type") == "resource":
            resource = block.get("resource", {})
            out.write(resource["text"] + "\n" if "text" in resource else f"[resource {resource.get('uri')}]\n")
        else:
            out.write(json.dumps(block, ensure_ascii=False) + "\n")


def _list(server: Server, as_json: bool, out: TextIO) -> int:
    lists = {"tools": [t.definition for t in server.tools.values()],
             "resources": [r.definition for r in server.resources.values()],
             "resourceTemplates": [t.definition for t in server.resource_templates],
             "prompts": [p.definition for p in server.prompts.values()]}
    if as_json:
        out.write(json.dumps({"server": server.info, **lists}, indent=2, ensure_ascii=False) + "\n")
        return 0
    out.write(f"{server.name} {server.version}\n")
    for tool in lists["tools"]:
        out.write(f"\ntool {tool['name']}" + (f": {_first_line(tool.get('description'))}" if "description" in tool
                                              else "") + "\n")
        for name, schema in (tool["inputSchema"].get("properties") or {}).items():
            required = name in (tool["inputSchema"].get("required") or ())
            out.write(f"  {name}{'' if required else ' (optional)'}: {_type(schema)}"
                      + (f" - {schema['description']}" if "description" in schema else "") + "\n")
    for resource in lists["resources"]:
        out.write(f"\nresource {resource['uri']}" + (f" ({resource['mimeType']})" if "mimeType" in resource else "")
                  + (f": {_first_line(resource.get('description'))}" if "description" in resource else "") + "\n")
    for template in lists["resourceTemplates"]:
        out.write(f"\nresource template {template['uriTemplate']}\n")
    for prompt in lists["prompts"]:
        arguments = ", ".join(a["name"] + ("" if a.get("required") else "?") for a in prompt.get("arguments", []))
        out.write(f"\nprompt {prompt['name']}({arguments})" + (f": {_first_line(prompt.get('description'))}"
                                                               if "description" in prompt else "") + "\n")
    return 0


def _first_line(text: Optional[str]) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type(schema['items'])}"
    return str(kind) + (f" = {json.dumps(schema['default'])}" if "default" in schema else "")


def _did_you_mean(tool: str, names: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(tool, names, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _config(args: Any, out: TextIO, err: TextIO) -> int:
    from ._clients import NOT_SUPPORTED, SOURCES, WHERE, client_entry, stdio_launch

    if args.token_file and args.client != "generic":
        print(f"mcpserver: {args.client} expands variables: give --token-env VARIABLE, not the token itself "
              "(--token-file is for the generic shape, which expands nothing)", file=err)
        return 2
    if args.http and args.client == "claude-desktop":
        print(f"mcpserver: {NOT_SUPPORTED}", file=err)
        return 2
    server = load_target(args.target)
    key = args.name or server.name
    if not args.http:
        document = client_entry(args.client, key, launch=stdio_launch(args.target))
    else:
        from ..http import read_token_file

        token = read_token_file(args.token_file) if args.token_file else None
        document = client_entry(args.client, key, url=args.http, token_env=args.token_env, token=token,
                                no_token=args.no_token)
        if args.client == "generic" and not token and not args.no_token:
            print("mcpserver: no Authorization header: this shape's values are taken literally, so a ${VAR} would "
                  "be sent as is; --token-file FILE writes the token in (keep that file private)", file=err)
    out.write(json.dumps(document, indent=2) + "\n")
    print(f"mcpserver: {WHERE[args.client]} (shape: {SOURCES[args.client]})", file=err)
    return 0
