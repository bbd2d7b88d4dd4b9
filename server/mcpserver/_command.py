"""Command tools: an existing program exposed as a tool.

Rules of this module:
- The argv is fixed at start-up. By default the program gets the arguments object as one line of
  JSON on stdin, whatever its size, and nothing else. Linux refuses a single argv or environment
  string over 128 KiB (MAX_ARG_STRLEN) with E2BIG, so large data must never travel that way.
- A request value may be placed into argv or the environment only through a `{placeholder}` whose
  schema bounds its size (a string with maxLength <= MAX_PLACEHOLDER_CHARS or an enum; integers,
  numbers and booleans). Anything unbounded is refused at start-up, and every value is checked
  again at run time. A string value that starts with "-" is refused so it cannot become an option.
- No shell unless asked for (`shell: true`), and then the script text has no placeholders.
- A run ends at its timeout or when stdout passes its cap; the whole process group is killed.
- The HTTP bearer token is never passed on to programs.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import string
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _json
from ._tools import Tool, ToolError, ToolResult
from .errors import ConfigError

__all__ = ["CommandSpec", "command_tool"]

MAX_PLACEHOLDER_CHARS = 4096  # x 4 bytes of UTF-8 = 16 KiB, far below MAX_ARG_STRLEN (128 KiB)
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024
STDERR_TAIL_BYTES = 2000
TOKEN_ENVIRONMENT = "MCPSERVER_TOKEN"
_CHUNK = 65536

ArgvItem = Union[str, dict[str, Any]]  # "text {placeholder}" or {"if": "prop", "args": [...]}


@dataclass(frozen=True)
class CommandSpec:
    """How to run one command tool; built once, checked at start-up."""

    command: Union[tuple[ArgvItem, ...], str]
    stdin: Union[str, dict[str, str]] = "json"  # "json", "none" or {"argument": "name"}
    timeout: float = DEFAULT_TIMEOUT
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    cwd: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    shell: bool = False
    output: str = "text"  # "text", or "json" for structured content


def _placeholders(template: str, where: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"{where}: bad placeholder in {template!r}: {exc}") from None


class _Placeholders:
    """Renders a value only when a template uses it, so stdin-only arguments are never checked as argv."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    def __getitem__(self, name: str) -> str:
        return _render(self.values[name], name)


def _fill(template: str, values: _Placeholders) -> str:
    return template.format_map(values)


def _check_bounded(name: str, schema: dict[str, Any], where: str) -> None:
    properties = schema.get("properties") or {}
    if name not in properties:
        raise ConfigError(f"{where}: placeholder {{{name}}} is not a property of the inputSchema")
    prop = properties[name]
    if not isinstance(prop, dict):
        raise ConfigError(f"{where}: placeholder {{{name}}} needs a schema with a type")
    if "enum" in prop or "const" in prop:
        return
    kind = prop.get("type")
    if kind in ("integer", "number", "boolean"):
        return
    if kind == "string" and isinstance(prop.get("maxLength"), int) and prop["maxLength"] <= MAX_PLACEHOLDER_CHARS:
        return
    raise ConfigError(
        f"{where}: argument {name!r} would go into argv or the environment unbounded; Linux refuses a "
        f"single argv/env string over 128 KiB. Give it \"maxLength\" <= {MAX_PLACEHOLDER_CHARS} or an enum, "
        "or let the program read it from stdin (the default)")


def _check_spec(name: str, spec: CommandSpec, schema: dict[str, Any], base_dir: Optional[str]) -> None:
    where = f"command tool {name!r}"
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}

    def check_template(template: Any, conditional: frozenset[str]) -> None:
        if not isinstance(template, str):
            raise ConfigError(f"{where}: argv items must be strings or {{\"if\": ..., \"args\": [...]}} groups")
        for placeholder in _placeholders(template, where):
            _check_bounded(placeholder, schema, where)
            prop = properties[placeholder]
            if placeholder not in required and "default" not in prop and placeholder not in conditional:
                raise ConfigError(f"{where}: {template!r} uses optional argument {placeholder!r}, which has no "
                                  f"default; wrap it in {{\"if\": \"{placeholder}\", \"args\": [...]}}")

    if spec.shell:
        if not isinstance(spec.command, str):
            raise ConfigError(f"{where}: with \"shell\": true the command is one string of shell script")
        program = "sh"
    else:
        if isinstance(spec.command, str) or not spec.command:
            raise ConfigError(f"{where}: the command must be a non-empty array (argv); "
                              "set \"shell\": true to run a shell script")
        for item in spec.command:
            if isinstance(item, dict):
                condition = item.get("if")
                if set(item) != {"if", "args"} or not isinstance(condition, str) or not isinstance(item["args"], list):
                    raise ConfigError(f"{where}: a conditional argv group is {{\"if\": \"property\", \"args\": [...]}}")
                if condition not in properties:
                    raise ConfigError(f"{where}: \"if\": {condition!r} is not a property of the inputSchema")
                for sub in item["args"]:
                    check_template(sub, frozenset({condition}))
            else:
                check_template(item, frozenset())
        first = spec.command[0]
        if not isinstance(first, str) or _placeholders(first, where):
            raise ConfigError(f"{where}: the program (argv[0]) must be fixed text")
        program = first
    for variable, template in spec.env.items():
        check_template(template, frozenset())
        if variable == TOKEN_ENVIRONMENT:
            raise ConfigError(f"{where}: {TOKEN_ENVIRONMENT} is never passed to programs")

    if isinstance(spec.stdin, dict):
        argument = spec.stdin.get("argument")
        if set(spec.stdin) != {"argument"} or argument not in properties:
            raise ConfigError(f"{where}: \"stdin\": {{\"argument\": NAME}} must name a property of the inputSchema")
        if argument not in required:
            raise ConfigError(f"{where}: the stdin argument {argument!r} must be required")
    elif spec.stdin not in ("json", "none"):
        raise ConfigError(f"{where}: \"stdin\" must be \"json\", \"none\" or {{\"argument\": NAME}}")
    if spec.output not in ("text", "json"):
        raise ConfigError(f"{where}: \"output\" must be \"text\" or \"json\"")
    if not (isinstance(spec.timeout, (int, float)) and spec.timeout > 0):
        raise ConfigError(f"{where}: \"timeout\" must be a positive number of seconds")
    if not (isinstance(spec.max_output_bytes, int) and spec.max_output_bytes > 0):
        raise ConfigError(f"{where}: \"maxOutputBytes\" must be a positive integer")
    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise ConfigError(f"{where}: working directory {spec.cwd!r} does not exist")
    if not _find_program(program, base_dir):
        raise ConfigError(f"{where}: program {program!r} is not on PATH")


def _find_program(program: str, base_dir: Optional[str]) -> Optional[str]:
    if os.sep in program:
        path = os.path.join(base_dir or os.getcwd(), program)
        return path if os.access(path, os.X_OK) else None
    return shutil.which(program)


def _render(value: Any, name: str) -> str:
    """A request value as one argv/env string, refusing what could not be passed safely."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float, str)):
        text = value if isinstance(value, str) else _json.dumps(value)
    else:
        raise ToolError(f"Argument {name!r} must be a string, number or boolean to be passed to the program")
    if len(text) > MAX_PLACEHOLDER_CHARS:
        raise ToolError(f"Argument {name!r} is too long ({len(text)} characters; the limit is {MAX_PLACEHOLDER_CHARS})")
    if "\0" in text:
        raise ToolError(f"Argument {name!r} contains a NUL character, which a program argument cannot hold")
    if isinstance(value, str) and text.startswith("-"):
        raise ToolError(f"Argument {name!r} must not start with '-' (it would be read as an option)")
    return text


class _Command:
    """The handler of one command tool."""

    def __init__(self, name: str, spec: CommandSpec, schema: dict[str, Any], base_dir: Optional[str]):
        self.name = name
        self.spec = spec
        self.defaults = {k: v["default"] for k, v in (schema.get("properties") or {}).items()
                         if isinstance(v, dict) and "default" in v}
        self.cwd = spec.cwd
        self.base_dir = base_dir

    def argv(self, arguments: dict[str, Any]) -> list[str]:
        if self.spec.shell:
            assert isinstance(self.spec.command, str)
            return ["/bin/sh", "-c", self.spec.command]
        values = {**self.defaults, **arguments}
        rendered = _Placeholders(values)
        argv: list[str] = []
        for item in self.spec.command:
            if isinstance(item, dict):
                condition = values.get(item["if"])
                if condition is not None and condition is not False and condition != "":
                    argv.extend(_fill(sub, rendered) for sub in item["args"])
            else:
                argv.append(_fill(item, rendered))
        program = argv[0]
        if os.sep in program and self.base_dir and not os.path.isabs(program):
            argv[0] = os.path.join(self.base_dir, program)
        return argv

    def environment(self, arguments: dict[str, Any]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENVIRONMENT}
        if self.spec.env:
            rendered = _Placeholders({**self.defaults, **arguments})
            env.update({k: _fill(t, rendered) for k, t in self.spec.env.items()})
        return env

    def stdin_bytes(self, arguments: dict[str, Any]) -> Optional[bytes]:
        mode = self.spec.stdin
        if mode == "none":
            return None
        if isinstance(mode, dict):
            return str(arguments[mode["argument"]]).encode("utf-8")
        return (_json.dumps(arguments) + "\n").encode("utf-8")

    def __call__(self, arguments: dict[str, Any]) -> Any:
        argv = self.argv(arguments)
        run = run_program(argv, self.stdin_bytes(arguments), timeout=self.spec.timeout,
                          max_output_bytes=self.spec.max_output_bytes, cwd=self.cwd,
                          env=self.environment(arguments))
        shown = " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")
        if run.timed_out:
            raise ToolError(f"Command `{shown}` timed out after {self.spec.timeout:g} s and was stopped")
        if run.overflowed:
            raise ToolError(f"Command `{shown}` wrote more than {self.spec.max_output_bytes} bytes and was stopped")
        stderr = run.stderr_tail.decode("utf-8", "replace").strip()
        if run.returncode != 0:
            how = (f"was killed by signal {-run.returncode}" if run.returncode < 0
                   else f"exited with status {run.returncode}")
            raise ToolError(f"Command `{shown}` {how}" + (f": {stderr}" if stderr else ""))
        output = run.stdout.decode("utf-8", "replace")
        if self.spec.output == "json":
            try:
                structured = _json.loads(output)
            except ValueError as exc:
                raise ToolError(f"Command `{shown}` did not print valid JSON: {exc}") from None
            return ToolResult(content=[{"type": "text", "text": output}], structured=structured)
        return output


@dataclass
class ProgramRun:
    returncode: int
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool = False
    overflowed: bool = False


def run_program(argv: list[str], stdin: Optional[bytes], *, timeout: float, max_output_bytes: int,
                cwd: Optional[str] = None, env: Optional[dict[str, str]] = None) -> ProgramRun:
    """Run a program in its own process group: feed stdin, collect stdout up to a cap, and a tail of stderr.

    The process group is killed at the deadline or when stdout passes the cap, so children it
    started (a shell's pipeline) do not linger.
    """
    process = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                               start_new_session=True, close_fds=True)
    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + timeout
    stdout, stderr = bytearray(), bytearray()
    timed_out = overflowed = False
    offset = 0
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        if process.stdin is not None:
            if stdin:
                os.set_blocking(process.stdin.fileno(), False)
                selector.register(process.stdin, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                stream = key.fileobj
                if stream is process.stdin:
                    assert stdin is not None
                    try:
                        offset += os.write(key.fd, stdin[offset:offset + _CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program stopped reading; not an error by itself
                        offset = len(stdin)
                    if offset >= len(stdin):
                        selector.unregister(stream)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(stream)
                    continue
                if stream is process.stdout:
                    stdout += chunk
                    if len(stdout) > max_output_bytes:
                        overflowed = True
                        break
                else:
                    stderr += chunk
                    del stderr[:-STDERR_TAIL_BYTES]
            if overflowed:
                break
    if not (timed_out or overflowed):
        try:  # the program may close its output and linger
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out or overflowed:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None and not pipe.closed:
            try:
                pipe.close()
            except OSError:
                pass
    returncode = process.wait()
    return ProgramRun(returncode, bytes(stdout), bytes(stderr), timed_out, overflowed)


def command_tool(name: str, command: Union[list[ArgvItem], str], *, input_schema: Optional[dict[str, Any]] = None,
                 description: Optional[str] = None, title: Optional[str] = None,
                 output_schema: Optional[dict[str, Any]] = None, annotations: Optional[dict[str, Any]] = None,
                 stdin: Union[str, dict[str, str]] = "json", timeout: Optional[float] = None,
                 max_output_bytes: Optional[int] = None, cwd: Optional[str] = None,
                 env: Optional[dict[str, str]] = None, shell: bool = False, output: str = "text",
                 base_dir: Optional[str] = None) -> Tool:
    """A Tool that runs a program. See the module docstring for the rules it enforces."""
    schema = input_schema if input_schema is not None else {"type": "object", "additionalProperties": False}
    spec = CommandSpec(command=command if isinstance(command, str) else tuple(command), stdin=stdin,
                       timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                       max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES if max_output_bytes is None else max_output_bytes,
                       cwd=cwd, env=dict(env or {}), shell=shell, output=output)
    if not isinstance(schema, dict):
        raise ConfigError(f"command tool {name!r}: inputSchema must be an object")
    _check_spec(name, spec, schema, base_dir)
    return Tool(name=name, input_schema=schema, handler=_Command(name, spec, schema, base_dir), title=title,
                description=description, output_schema=output_schema, annotations=annotations)
