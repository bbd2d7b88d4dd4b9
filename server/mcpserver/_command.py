"""Command tools: an existing program exposed as a tool.

Rules of this module:
- The argv is fixed at start-up. By default the program gets the arguments object as one line of
  JSON on stdin, whatever its size, and nothing else. Linux refuses a single argv or environment
  string over 128 KiB (MAX_ARG_STRLEN) with E2BIG, so large data must never travel that way.
- A request value may be placed into argv or the environment only through a `{placeholder}` whose
  schema bounds its size (a string with maxLength <= MAX_PLACEHOLDER_CHARS or an enum; integers,
  numbers and booleans). Anything unbounded is refused at start-up, and every value is checked
  again at run time. A value that would start an argv item with "-" is refused, so it cannot
  become an option of the program (whatever its type: -5 is an option to `head`).
- No shell unless asked for (`shell: true`), and then the script text has no placeholders.
- A run is over when its program exits: output already written is read, and whatever the program
  left running is killed (its process group). At the timeout, the output cap or a cancel, the
  group is killed, and so is every process still carrying the run's mark in its environment,
  which finds descendants that left the group with setsid. At exit the server kills whatever
  any of its runs left behind the same way.
- The server's secrets (the HTTP bearer token, the requestState key) are never passed on to programs:
  a program that prints or logs its environment, or fails with it in a message, cannot give them away.
- `CommandSpec.OPTIONS` is the one table of a command tool's options: Python keyword, manifest
  key, default. `Server.command`, `command_tool` and the manifest loader all read it.
"""

from __future__ import annotations

import atexit
import os
import re
import selectors
import subprocess
import threading
import time

from . import _environment, _json
from ._context import Cancelled, Context
from ._forks import renew_at_fork
from ._tools import TOOL_OPTIONS, Tool, ToolError, ToolResult, unexpected_failure
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, ClassVar, Optional, Union
    ArgvItem = Union[str, dict[str, Any]]  # "text {placeholder}" or {"if": "prop", "args": [...]}
if TYPE_CHECKING:
    import signal
    from string import Formatter

    _formatter_parser = Formatter().parse
else:
    try:  # the C modules: signal.py and string.py cost start-up (enums; Template's metaclass)
        import _signal as signal
        from _string import formatter_parser as _formatter_parser
    except ImportError:  # an interpreter without them
        import signal
        from string import Formatter

        _formatter_parser = Formatter().parse

__all__ = ["CommandSpec", "command_tool", "run_program"]

MAX_PLACEHOLDER_CHARS = 4096  # x 4 bytes of UTF-8 = 16 KiB, far below MAX_ARG_STRLEN (128 KiB)
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024
STDERR_TAIL_BYTES = 2000
# Every program a run starts carries MARK_VARIABLE=<server mark>-<run id>, and so do its descendants
# unless they clear their environment: how leftovers are found, even outside the process group.
MARK_VARIABLE = _environment.RUN_MARK
LINGER_AFTER_EXIT = 0.2  # seconds to read what is still in the pipes once the program has exited
CANCEL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL when a run is cancelled
_LINE_END = re.compile(rb"[\r\n]")
_CHUNK = 65536
_SERVER_MARK = os.urandom(6).hex()
# from every program's environment: the secrets, and where the state keys' file is
_WITHHELD = (_environment.TOKEN, _environment.STATE_KEY, _environment.STATE_KEYS, _environment.STATE_KEYS_FILE)


class CommandSpec:
    """How to run one command tool; built once, checked at start-up."""

    # Python keyword: (manifest key, default). The tool's own fields (title, inputSchema, ...) are
    # _tools.TOOL_OPTIONS.
    OPTIONS: ClassVar[dict[str, tuple[str, Any]]] = {
        "stdin": ("stdin", "json"),  # "json", "none" or {"argument": "name"}
        "output": ("output", "text"),  # "text", or "json" for structured content
        "timeout": ("timeout", DEFAULT_TIMEOUT),
        "max_output_bytes": ("maxOutputBytes", DEFAULT_MAX_OUTPUT_BYTES),
        "cwd": ("cwd", None),
        "env": ("env", None),
        "shell": ("shell", False),
        "progress": ("progress", None),  # a regex over stderr lines: see _progress_reader
        "confirm": ("confirm", None),  # a question the user must accept before the program runs
    }
    __slots__ = ("command", *OPTIONS)

    command: Union[tuple[ArgvItem, ...], str]
    stdin: Union[str, dict[str, str]]
    output: str
    timeout: float
    max_output_bytes: int
    cwd: Optional[str]
    env: dict[str, str]
    shell: bool
    progress: Optional[str]
    confirm: Optional[str]

    def __init__(self, command: Union[list[ArgvItem], tuple[ArgvItem, ...], str], **options: Any):
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise ConfigError(f"unknown command tool option {unknown[0]!r} (known: {', '.join(self.OPTIONS)})")
        self.command = command if isinstance(command, str) else tuple(command)
        for name, (_, default) in self.OPTIONS.items():
            value = options.get(name)
            setattr(self, name, default if value is None else value)
        self.env = dict(self.env or {})


def _placeholders(template: str, where: str) -> list[str]:
    try:
        return [name for _, name, _, _ in _formatter_parser(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"{where}: bad placeholder in {template!r}: {exc}") from None


class _Placeholders:
    """Renders a value only when a template uses it, so stdin-only arguments are never checked as argv."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    def __getitem__(self, name: str) -> str:
        return _render(self.values[name], name)


def _fill(template: str, values: _Placeholders, *, argv: bool) -> str:
    text = template.format_map(values)
    if argv and text.startswith("-") and not template.startswith("-"):
        name = _placeholders(template, "")[0]
        raise ToolError(f"Argument {name!r} must not start with '-' (it would be read as an option)")
    _check_utf8(text, _placeholders(template, ""))
    return text


def _check_utf8(text: str, names: list[str]) -> None:
    """ToolError unless `text` can be UTF-8: a lone surrogate (JSON's \\ud800) cannot reach a program."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(f"Argument {', '.join(map(repr, names)) or 'value'} holds "
                            f"{text[exc.start:exc.end]!r}, a lone surrogate that no program can be given as "
                            "UTF-8") from None


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
    check_template = _template_checker(schema, where)
    program = _check_command(spec, schema, check_template, where)
    if not isinstance(spec.env, dict):
        raise ConfigError(f"{where}: \"env\" must map variable names to strings")
    for variable, template in spec.env.items():
        check_template(template, frozenset())
        if variable in (*_WITHHELD, MARK_VARIABLE):
            raise ConfigError(f"{where}: {variable} is never passed to programs")
    _check_options(spec, schema, where)
    if spec.cwd is not None and not os.path.isdir(spec.cwd):
        raise ConfigError(f"{where}: working directory {spec.cwd!r} does not exist")
    if not _find_program(program, base_dir):
        raise ConfigError(f"{where}: program {program!r} is not on PATH")


def _template_checker(schema: dict[str, Any], where: str) -> Callable[[Any, frozenset[str]], None]:
    """A check for one argv/env template: bounded placeholders, and optional ones only where it may be absent."""
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

    return check_template


def _check_command(spec: CommandSpec, schema: dict[str, Any], check_template: Callable[[Any, frozenset[str]], None],
                   where: str) -> str:
    """Check the argv (or the shell script); return the program to look for on PATH."""
    if spec.shell:
        if not isinstance(spec.command, str):
            raise ConfigError(f"{where}: with \"shell\": true the command is one string of shell script")
        return "sh"
    if isinstance(spec.command, str) or not spec.command:
        raise ConfigError(f"{where}: the command must be a non-empty array (argv); "
                          "set \"shell\": true to run a shell script")
    properties = schema.get("properties") or {}
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
    return first


def _check_options(spec: CommandSpec, schema: dict[str, Any], where: str) -> None:
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
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
    if not isinstance(spec.shell, bool):
        raise ConfigError(f"{where}: \"shell\" must be true or false")
    if spec.progress is not None:
        _progress_pattern(spec.progress, where)
    if spec.confirm is not None:
        if not isinstance(spec.confirm, str):
            raise ConfigError(f"{where}: \"confirm\" must be the question to ask, a string")
        for placeholder in _placeholders(spec.confirm, where):
            if placeholder not in properties:
                raise ConfigError(f"{where}: \"confirm\" uses {{{placeholder}}}, which is not a property of the "
                                  "inputSchema")


def _find_program(program: str, base_dir: Optional[str], env: Optional[dict[str, str]] = None) -> Optional[str]:
    """Where `program` is (an executable file), searched as exec does: in PATH (the run's `env`'s, when given)."""
    if os.sep in program:
        path = os.path.join(base_dir or os.getcwd(), program)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    for directory in (os.environ if env is None else env).get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or os.curdir, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


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
    return text


class _Command:
    """The handler of one command tool."""

    def __init__(self, name: str, spec: CommandSpec, schema: dict[str, Any], base_dir: Optional[str]):
        self.name = name
        self.spec = spec
        self.defaults = {k: v["default"] for k, v in (schema.get("properties") or {}).items()
                         if isinstance(v, dict) and "default" in v}
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
                    argv.extend(_fill(sub, rendered, argv=True) for sub in item["args"])
            else:
                argv.append(_fill(item, rendered, argv=True))
        program = argv[0]
        if os.sep in program and self.base_dir and not os.path.isabs(program):
            argv[0] = os.path.join(self.base_dir, program)
        return argv

    def environment(self, arguments: dict[str, Any]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD}
        if self.spec.env:
            rendered = _Placeholders({**self.defaults, **arguments})
            env.update({k: _fill(t, rendered, argv=False) for k, t in self.spec.env.items()})
        return env

    def stdin_bytes(self, arguments: dict[str, Any]) -> Optional[bytes]:
        mode = self.spec.stdin
        if mode == "none":
            return None
        if isinstance(mode, dict):
            text = str(arguments[mode["argument"]])
            _check_utf8(text, [mode["argument"]])
            return text.encode("utf-8")
        return _json.dumps_bytes(arguments) + b"\n"  # a lone surrogate goes as its \u escape

    def _stderr_reader(self, context: Optional[Context]) -> Optional[Callable[[str], None]]:
        """What reads the program's stderr lines as they come: progress, when the client asked for it and
        the tool has a pattern; and, in a legacy session, each line as an "info" log record to the client."""
        if context is None:
            return None
        progress = None
        if self.spec.progress is not None and context.progress_token is not None:
            progress = _progress_reader(_progress_pattern(self.spec.progress, self.name), context)
        if context.peer is None:
            return progress

        def read(line: str) -> None:
            if progress is not None:
                progress(line)
            if line.strip():
                context.log("info", line.rstrip(), logger=self.name)

        return read

    def _startable(self, argv: list[str], env: dict[str, str]) -> None:
        """ToolError unless the kernel can start the program: it is there, and the arguments and environment fit.
        Checked before spawning because where the program is started by a child that shares the parent's memory
        (glibc's posix_spawn, and so Python 3.13's subprocess), qemu-user loses the child's report of a failed exec,
        and a missing program or E2BIG reads as a program that ran and exited 127."""
        if not _find_program(argv[0], self.base_dir, env):
            where = "is no longer there, or not executable" if os.sep in argv[0] else "is no longer on PATH"
            raise ToolError(f"Command tool {self.name!r}: the program {argv[0]!r} {where} (it was when the server "
                            "started); nothing was run")
        mark = f"{MARK_VARIABLE}={_SERVER_MARK}-{'0' * 8}"  # run_program adds it
        size = sum(len(item.encode()) + 1 + _POINTER for item in [*argv, mark, *(f"{k}={v}" for k, v in env.items())])
        limit = _arg_max()
        if limit and size > limit:
            raise ToolError(f"Command tool {self.name!r}: its arguments and environment come to {size} bytes, more "
                            f"than this system starts a program with (ARG_MAX, {limit} bytes); nothing was run")

    def __call__(self, arguments: dict[str, Any], context: Optional[Context]) -> Any:
        argv = self.argv(arguments)
        env = self.environment(arguments)
        self._startable(argv, env)
        if self.spec.confirm is not None:
            self._confirmed(arguments, context or Context())
        shown = " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")
        try:
            run = run_program(argv, self.stdin_bytes(arguments), timeout=self.spec.timeout,
                              max_output_bytes=self.spec.max_output_bytes, cwd=self.spec.cwd, env=env,
                              on_cancel=context.on_cancel if context else None,
                              on_stderr_line=self._stderr_reader(context))
        except OSError as exc:  # the exec failed after the checks above (a program removed meanwhile, ...)
            raise ToolError(f"Command `{shown}` could not be started: {exc.strerror or exc}") from None
        if run.cancelled:
            raise Cancelled(f"Command `{shown}` was cancelled and stopped")
        if run.timed_out:
            raise ToolError(f"Command `{shown}` timed out after {self.spec.timeout:g} s and was stopped")
        if run.overflowed:
            raise ToolError(f"Command `{shown}` wrote more than {self.spec.max_output_bytes} bytes and was stopped")
        stderr = run.stderr_tail.decode("utf-8", "replace").strip()
        if run.returncode != 0:
            how = (f"was killed by signal {-run.returncode}" if run.returncode < 0
                   else f"exited with status {run.returncode}")
            detail = f"Command `{shown}` {how}" + (f": {stderr}" if stderr else "")
            raise ToolError(unexpected_failure(self.name, detail))
        output = run.stdout.decode("utf-8", "replace")
        if self.spec.output == "json":
            try:
                structured = _json.loads(output)
            except ValueError as exc:
                raise ToolError(f"Command `{shown}` did not print valid JSON: {exc}") from None
            return ToolResult(content=[{"type": "text", "text": output}], structured=structured)
        return output


    def _confirmed(self, arguments: dict[str, Any], context: Context) -> None:
        """Ask the user (elicitation) before running; the run goes ahead only if they accept."""
        assert self.spec.confirm is not None
        values = {**self.defaults, **arguments}
        question = self.spec.confirm.format_map({k: values.get(k, "") for k in _placeholders(self.spec.confirm, "")})
        answer = context.elicit(question, {"type": "object", "properties": {}}, key="confirm")
        if answer.get("action") != "accept":
            raise ToolError(f"Not run: the user did not confirm ({answer.get('action')}): {question}")


def _progress_pattern(source: Any, where: str) -> re.Pattern[str]:
    """The `progress` option: a regex searched in each stderr line. Its group `progress` (or its first
    group) is the progress, `total` (or the second group) the total, `message` a message; a group
    `percent` is progress out of 100."""
    try:
        pattern = re.compile(source)
    except (re.error, TypeError) as exc:
        raise ConfigError(f"{where}: \"progress\" must be a regular expression: {exc}") from None
    if pattern.groups == 0:
        raise ConfigError(f"{where}: \"progress\" needs a group that captures the progress, e.g. (\\d+)/(\\d+)")
    return pattern


def _progress_reader(pattern: re.Pattern[str], context: Context) -> Callable[[str], None]:
    named = pattern.groupindex

    def number(text: Optional[str]) -> Optional[float]:
        try:
            value = float(text) if text is not None else None
        except ValueError:
            return None
        return int(value) if value is not None and value.is_integer() else value

    def read(line: str) -> None:
        found = pattern.search(line)
        if found is None:
            return
        done: Optional[float]
        total: Optional[float]
        if "percent" in named:
            done, total = number(found.group("percent")), 100
        else:
            done = number(found.group("progress" if "progress" in named else 1))
            total = number(found.group("total")) if "total" in named else (
                number(found.group(2)) if pattern.groups >= 2 and not named else None)
        message = found.group("message") if "message" in named else None
        if done is not None:
            try:
                context.progress(done, total, message)
            except Cancelled:  # the run is being stopped already
                pass

    return read


_POINTER = 8  # bytes of each argv and environ pointer the kernel counts against ARG_MAX (4 on 32-bit: erring long)


def _arg_max() -> int:
    """The bytes of arguments and environment this system starts a program with (0 when it does not say)."""
    try:
        return max(0, os.sysconf("SC_ARG_MAX"))
    except (AttributeError, ValueError, OSError):
        return 0


class ProgramRun:
    __slots__ = ("cancelled", "overflowed", "returncode", "stderr_tail", "stdout", "timed_out")

    def __init__(self, returncode: int, stdout: bytes, stderr_tail: bytes, outcome: str = "done"):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr_tail = stderr_tail
        self.timed_out = outcome == "timeout"
        self.overflowed = outcome == "overflow"
        self.cancelled = outcome == "cancelled"


def run_program(argv: list[str], stdin: Optional[bytes], *, timeout: float, max_output_bytes: int,
                cwd: Optional[str] = None, env: Optional[dict[str, str]] = None,
                on_cancel: Optional[Callable[[Callable[[], None]], None]] = None,
                on_stderr_line: Optional[Callable[[str], None]] = None) -> ProgramRun:
    """Run a program in its own process group: feed stdin, collect stdout up to a cap, and a tail of stderr.

    `on_cancel(callback)` registers how a cancel reaches the run: the group gets SIGTERM, then
    SIGKILL after CANCEL_GRACE. `on_stderr_line` sees each line of stderr as it arrives (lines end
    at \\n or \\r, as progress bars draw them). See the module docstring for when the run ends.
    """
    mark = f"{_SERVER_MARK}-{os.urandom(4).hex()}"
    _leftovers.started()
    cancel_read, cancel_write = os.pipe() if on_cancel is not None else (-1, -1)
    try:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                   env={**(os.environ if env is None else env), MARK_VARIABLE: mark},
                                   start_new_session=True, close_fds=True)
    except OSError:
        for fd in (cancel_read, cancel_write):
            if fd >= 0:
                os.close(fd)
        raise
    try:
        if on_cancel is not None:
            on_cancel(lambda: _wake(cancel_write))
        pipes = _Pipes(process, stdin, max_output_bytes, on_stderr_line)
        outcome = pipes.collect(time.monotonic() + timeout, cancel_read)
    finally:
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except OSError:
                    pass
        _signal_group(process.pid, signal.SIGKILL)  # whatever the program left running in its group
        if on_cancel is not None:
            os.close(cancel_read)
            os.close(cancel_write)
    if outcome != "done":
        kill_marked(f"{MARK_VARIABLE}={mark}")
    returncode = process.wait()
    return ProgramRun(returncode, bytes(pipes.stdout), bytes(pipes.stderr), outcome)


def _wake(fd: int) -> None:
    try:
        os.write(fd, b"!")
    except OSError:  # the run is over and closed it
        pass


class _Pipes:
    """The program's stdin, stdout and stderr, served by one selector until the run ends."""

    def __init__(self, process: subprocess.Popen[bytes], data: Optional[bytes], max_output_bytes: int,
                 on_stderr_line: Optional[Callable[[str], None]]):
        self.process = process
        self.data = data or b""
        self.offset = 0
        self.max_output_bytes = max_output_bytes
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.on_stderr_line = on_stderr_line
        self.partial = b""  # the stderr line being written, for on_stderr_line

    def collect(self, deadline: float, cancel_fd: int = -1) -> str:
        """Serve the pipes until the run ends: "done" when the program exited and its output was read,
        else "timeout", "overflow", "cancelled", or "leftover" (it exited, but something it started
        still holds a pipe open)."""
        self.exit_signal, self.cancel_fd = _exit_signal(self.process.pid), cancel_fd
        self.exited_at: Optional[float] = None
        self.cancelled_at: Optional[float] = None
        with selectors.DefaultSelector() as selector:
            self.pipes = self._register(selector)
            try:
                while True:
                    outcome, until = self._verdict(time.monotonic(), deadline)
                    if outcome is not None:
                        return outcome
                    for key, _ in selector.select(max(0.0, until - time.monotonic())):
                        if self._handle(key, selector):
                            return "overflow"
            finally:
                if self.exit_signal is not None:
                    os.close(self.exit_signal)

    def _register(self, selector: selectors.BaseSelector) -> int:
        """Register the pipes (and the exit and cancel signals); return how many pipes there are."""
        process = self.process
        assert process.stdout is not None and process.stderr is not None
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        if process.stdin is not None:
            if self.data:
                os.set_blocking(process.stdin.fileno(), False)
                selector.register(process.stdin, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        pipes = len(selector.get_map())
        for extra in (self.exit_signal, self.cancel_fd):
            if extra is not None and extra >= 0:
                selector.register(extra, selectors.EVENT_READ)
        return pipes

    def _verdict(self, now: float, deadline: float) -> tuple[Optional[str], float]:
        """How the run ended, if it has; else until when to wait for the pipes."""
        if self.exited_at is None and self.process.poll() is not None:
            self.exited_at = now
        if self.cancelled_at is not None:
            over = (self.exited_at is not None and not self.pipes) or now >= self.cancelled_at + CANCEL_GRACE
            return ("cancelled" if over else None), self.cancelled_at + CANCEL_GRACE
        if self.exited_at is None:
            if now >= deadline:
                return "timeout", now
            return None, deadline if self.exit_signal is not None else min(deadline, now + 0.05)  # else: poll
        if not self.pipes:
            return "done", now
        if now >= self.exited_at + LINGER_AFTER_EXIT:
            return "leftover", now
        return None, self.exited_at + LINGER_AFTER_EXIT

    def _handle(self, key: selectors.SelectorKey, selector: selectors.BaseSelector) -> bool:
        """Act on one ready file; True when stdout passed its cap."""
        if key.fd == self.exit_signal:
            selector.unregister(key.fileobj)  # _verdict's poll() records the time
        elif key.fd == self.cancel_fd:
            selector.unregister(key.fileobj)
            self.cancelled_at = time.monotonic()
            _signal_group(self.process.pid, signal.SIGTERM)
        else:
            moved = self._transfer(key)
            if moved is None:
                selector.unregister(key.fileobj)
                self.pipes -= 1
                if key.fileobj is self.process.stdin:
                    self.process.stdin.close()
            return bool(moved)
        return False

    def _transfer(self, key: selectors.SelectorKey) -> Optional[bool]:
        """Move one chunk: None when the pipe is finished, True when stdout passed its cap."""
        process = self.process
        if key.fileobj is process.stdin:
            assert process.stdin is not None
            try:
                self.offset += os.write(key.fd, self.data[self.offset:self.offset + _CHUNK])
            except BlockingIOError:
                return False
            except BrokenPipeError:  # the program stopped reading; not an error by itself
                self.offset = len(self.data)
            return False if self.offset < len(self.data) else None
        chunk = os.read(key.fd, _CHUNK)
        if not chunk:
            return None
        if key.fileobj is process.stdout:
            self.stdout += chunk
            return len(self.stdout) > self.max_output_bytes
        self.stderr += chunk
        del self.stderr[:-STDERR_TAIL_BYTES]
        if self.on_stderr_line is not None:
            self._lines(chunk)
        return False

    def _lines(self, chunk: bytes) -> None:
        assert self.on_stderr_line is not None
        *lines, rest = _LINE_END.split(self.partial + chunk)
        self.partial = rest[-STDERR_TAIL_BYTES:]  # a partial line is bounded, however long it grows
        for line in lines:
            if line:
                self.on_stderr_line(line.decode("utf-8", "replace"))


def _exit_signal(pid: int) -> Optional[int]:
    """A file descriptor that becomes readable when `pid` exits (a pidfd), or None where there is none."""
    try:
        return os.pidfd_open(pid)  # Linux 5.3+
    except (AttributeError, OSError):
        return None


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_marked(prefix: str) -> int:
    """SIGKILL every process of ours whose environment holds a variable starting with `prefix`.

    Reads /proc/*/environ: a process that left the run's process group (setsid) or lost its
    parent is still found, as long as it kept its environment. Returns how many were killed.
    """
    needle = b"\0" + prefix.encode()
    killed = 0
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no /proc: nothing more can be found
        return 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environment = b"\0" + file.read()
        except OSError:  # gone, or not ours
            continue
        if needle in environment:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


class _Leftovers:
    """At exit, kill whatever any run of this server left behind (registered on the first run)."""

    def __init__(self) -> None:
        self._registered = False
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")

    def started(self) -> None:
        with self._lock:
            if not self._registered:
                self._registered = True
                atexit.register(kill_marked, f"{MARK_VARIABLE}={_SERVER_MARK}-")


_leftovers = _Leftovers()


def command_tool(name: str, command: Union[list[ArgvItem], str], *, base_dir: Optional[str] = None,
                 **options: Any) -> Tool:
    """A Tool that runs a program. `options` are CommandSpec.OPTIONS and the tool fields of
    _tools.TOOL_OPTIONS, by their Python names. See the module docstring for the rules it enforces."""
    tool_fields = {key: options.pop(key) for key in list(options) if key in TOOL_OPTIONS}
    spec = CommandSpec(command, **options)
    schema = tool_fields.pop("input_schema", None)
    if schema is None:
        schema = {"type": "object", "additionalProperties": False}
    if not isinstance(schema, dict):
        raise ConfigError(f"command tool {name!r}: inputSchema must be an object")
    _check_spec(name, spec, schema, base_dir)
    return Tool(name, schema, _Command(name, spec, schema, base_dir), takes_context=True, **tool_fields)
