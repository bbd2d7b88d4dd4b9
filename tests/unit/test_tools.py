"""Tool registration (refused at start-up when it cannot work) and command tools running real programs."""

import json
import os
import time

import pytest
from mcpserver import ConfigError, Server, load_target
from mcpserver.testing import Client
from mcptest import GIT, ROOT

TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def run(server, tool, **arguments):
    """The tool's result, called as a client calls it (mcpserver.testing: through the protocol, in process)."""
    with Client(server) as client:
        return client.call_tool(tool, arguments)


# --- registration refusals ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "comma,name", "x" * 129, "naïve", "slash/name"])
def test_invalid_tool_names_are_refused(name):
    with pytest.raises(ConfigError, match="invalid tool name"):
        Server("s").tool(lambda: "", name=name)


@pytest.mark.parametrize("name", ["getUser", "DATA_EXPORT_v2", "admin.tools.list", "a-b", "x" * 128])
def test_spec_style_tool_names_are_accepted(name):
    Server("s").tool(lambda: "", name=name)


def test_duplicate_names_are_refused():
    server = Server("s")
    server.tool(lambda: "", name="same")
    with pytest.raises(ConfigError, match="duplicate tool name 'same'"):
        server.tool(lambda: "", name="same")


def test_an_explicit_schema_must_fit_the_function():
    def f(text: str) -> str:
        return text

    with pytest.raises(ConfigError, match="'other' is not a parameter of f"):
        Server("s").tool(f, input_schema={"type": "object", "properties": {"other": {"type": "string"}}})
    with pytest.raises(ConfigError, match="'text' has no default"):
        Server("s").tool(f, input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
    Server("s").tool(f, input_schema=TEXT_SCHEMA)


def test_bad_annotations_and_x_mcp_header_are_refused():
    with pytest.raises(ConfigError, match="readOnlyHint must be true or false"):
        Server("s").tool(lambda: "", name="t", annotations={"readOnlyHint": "yes"})
    number_header = {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
    with pytest.raises(ConfigError, match="x-mcp-header 'N' may only annotate"):
        Server("s").tool(lambda n=0: "", name="t", input_schema=number_header)
    twice = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "R"},
                                              "b": {"type": "string", "x-mcp-header": "r"}}}
    with pytest.raises(ConfigError, match="used twice"):
        Server("s").tool(lambda a="", b="": "", name="t", input_schema=twice)


def test_async_tools_run():
    server = Server("s")

    @server.tool()
    async def later(text: str) -> str:
        return text.upper()

    assert run(server, "later", text="hi").text == "HI"


# --- command tools: arguments travel on stdin -----------------------------------------------


@pytest.fixture
def server():
    return Server("commands")


def test_arguments_arrive_as_one_json_line_on_stdin(server):
    server.command("cat", ["cat"], input_schema=TEXT_SCHEMA)
    result = run(server, "cat", text='quote " and\nnewline \u00e9')
    assert json.loads(result.text) == {"text": 'quote " and\nnewline \u00e9'}
    assert result.text.endswith("\n") and not result.is_error


def test_one_argument_can_be_stdin_raw(server):
    server.command("wc", ["wc", "-c"], input_schema=TEXT_SCHEMA, stdin={"argument": "text"})
    assert run(server, "wc", text="\u00e9" * 10).text.strip() == "20"


def test_stdout_can_be_structured_json(server):
    server.command("json", ["cat"], input_schema=TEXT_SCHEMA, output="json")
    result = run(server, "json", text="x")
    assert result.structured == {"text": "x"}


def test_output_that_is_not_json_is_an_is_error_result(server):
    server.command("notjson", ["echo", "plain"], stdin="none", output="json")
    assert "did not print valid JSON" in run(server, "notjson").text


@pytest.mark.parametrize("printed, why", [
    ('{"x": 1e999}', "did not print valid JSON"),  # infinity has no JSON form: it must not reach the encoder
    ("[" * 100_000 + "]" * 100_000, "did not print valid JSON"),  # nesting past the limit, in linear time
    ('{"n": ' + "9" * 5000 + "}", "did not print valid JSON"),  # an integer longer than the digit limit
], ids=["infinity", "deep", "long-integer"])  # short ids: pytest puts them in PYTEST_CURRENT_TEST (128 KiB cap)
def test_hostile_json_from_a_program_is_an_is_error_result(server, printed, why):
    server.command("prints", ["cat"], stdin={"argument": "text"}, input_schema=TEXT_SCHEMA, output="json")
    result = run(server, "prints", text=printed)
    assert result.is_error and why in result.text


def test_a_nonzero_exit_is_an_is_error_result_with_the_stderr_tail(server):
    server.command("fails", "echo first >&2; echo 'last words' >&2; exit 3", shell=True)
    result = run(server, "fails")
    assert result.is_error
    assert "exited with status 3" in result.text and "last words" in result.text


def test_a_timeout_kills_the_whole_process_group(server, tmp_path):
    marker = tmp_path / "child-survived"
    server.command("slow", f"(sleep 2; touch {marker}) & sleep 30", shell=True, timeout=0.5)
    result = run(server, "slow")  # "timed out after 0.5 s", not the 30 s sleep's end, proves the kill
    assert result.is_error and "timed out after 0.5 s" in result.text
    time.sleep(2.5)
    assert not marker.exists(), "the shell's child outlived the timeout"


def test_output_beyond_the_cap_stops_the_program(server):
    server.command("flood", ["yes"], stdin="none", max_output_bytes=100_000, timeout=10)
    result = run(server, "flood")  # the cap's message, not the 10 s timeout's, proves it stopped there
    assert result.is_error and "more than 100000 bytes" in result.text


def test_a_program_that_does_not_read_stdin_is_not_an_error(server):
    server.command("ignore", ["true"], input_schema=TEXT_SCHEMA)
    result = run(server, "ignore", text="x" * 1_000_000)
    assert not result.is_error


def test_the_http_token_never_reaches_programs(server, monkeypatch):
    monkeypatch.setenv("MCPSERVER_TOKEN", "s3cret")
    monkeypatch.setenv("VISIBLE", "yes")
    server.command("env", ["env"], stdin="none")
    output = run(server, "env").text
    assert "VISIBLE=yes" in output and "s3cret" not in output


def test_no_shell_unless_asked(server):
    server.command("literal", ["echo", "$HOME;", "{word}"], stdin="none",
                   input_schema={"type": "object", "properties": {"word": {"type": "string", "maxLength": 20}},
                                 "required": ["word"]})
    assert run(server, "literal", word="$(id)").text == "$HOME; $(id)\n"


# --- placeholders: bounded values only ------------------------------------------------------


PLACEHOLDER_SCHEMA = {"type": "object", "properties": {
    "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
    "name": {"type": "string", "maxLength": 50},
    "loud": {"type": "boolean"},
    "mode": {"enum": ["a", "b"]}}, "required": ["name"]}


def test_bounded_placeholders_and_conditional_groups(server):
    server.command("args", ["printf", "%s|", "n={count}", "{name}", {"if": "loud", "args": ["--loud"]},
                            {"if": "mode", "args": ["mode", "{mode}"]}],
                   input_schema=PLACEHOLDER_SCHEMA, stdin="none")
    assert run(server, "args", name="x").text == "n=2|x|"
    assert run(server, "args", name="y", count=3, loud=True, mode="b").text == "n=3|y|--loud|mode|b|"
    assert run(server, "args", name="z", loud=False).text == "n=2|z|"


def test_a_value_that_looks_like_an_option_is_refused(server):
    server.command("args", ["echo", "{name}"], input_schema=PLACEHOLDER_SCHEMA, stdin="none")
    result = run(server, "args", name="--upload-pack=evil")
    assert result.is_error and "must not start with '-'" in result.text


@pytest.mark.parametrize("command, env, schema, message", [
    (["echo", "{text}"], None, TEXT_SCHEMA, "would go into argv or the environment unbounded"),
    (["echo"], {"DATA": "{text}"}, TEXT_SCHEMA, "would go into argv or the environment unbounded"),
    (["echo", "{blob}"], None, {"type": "object", "properties": {"blob": {"type": "string", "maxLength": 1_000_000}},
                                "required": ["blob"]}, "maxLength\" <= 4096"),
    (["echo", "{items}"], None, {"type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]},
     "unbounded"),
    (["echo", "{nothing}"], None, TEXT_SCHEMA, "not a property of the inputSchema"),
    (["echo", "{name}"], None, {"type": "object", "properties": {"name": {"type": "string", "maxLength": 9}}},
     "optional argument 'name'"),
    (["{name}"], None, {"type": "object", "properties": {"name": {"type": "string", "maxLength": 9}},
                        "required": ["name"]}, "argv[0]) must be fixed"),
    (["no-such-program-anywhere"], None, None, "is not on PATH"),
    ([], None, None, "non-empty array"),
    ("echo hi", None, None, "set \"shell\": true"),
])
def test_unsafe_or_broken_command_tools_refuse_to_start(server, command, env, schema, message):
    with pytest.raises(ConfigError, match="command tool 't'") as caught:
        server.command("t", command, env=env, input_schema=schema)
    assert message in str(caught.value)


def test_the_runtime_check_catches_what_the_schema_allowed(server):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.command("big_int", ["echo", "{n}"], input_schema=schema, stdin="none")
    result = run(server, "big_int", n=10**4200)
    assert result.is_error and "too long" in result.text


def test_a_program_gone_since_start_up_is_a_clear_error_and_nothing_runs(tmp_path, monkeypatch):
    """Checked before spawning, on every platform: under qemu-user a failed exec of glibc's posix_spawn reads as a
    program that ran and exited 127 (tests/payload: test_what_posix_spawn_reports_depends_on_the_emulator)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "vanishing"
    program.write_text("#!/bin/sh\necho ran\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    server = Server("s")
    server.command("by_name", ["vanishing"], stdin="none")
    server.command("by_path", [str(program)], stdin="none")
    assert run(server, "by_name").text == "ran\n"
    program.unlink()
    by_name, by_path = run(server, "by_name"), run(server, "by_path")
    assert by_name.is_error and by_name.text == ("Command tool 'by_name': the program 'vanishing' is no longer on PATH "
                                                 "(it was when the server started); nothing was run")
    assert by_path.is_error and by_path.text == (f"Command tool 'by_path': the program '{program}' is no longer there, "
                                                 "or not executable (it was when the server started); nothing was run")


def test_arguments_past_what_the_system_starts_a_program_with_are_a_clear_error(server):
    """Each placeholder is bounded (4096 characters), but many of them together can pass ARG_MAX: E2BIG, which
    qemu-user's posix_spawn would lose too. The server refuses the call before spawning, saying so."""
    limit = os.sysconf("SC_ARG_MAX")
    count = limit // 4096 + 8
    properties = {f"p{i}": {"type": "string", "maxLength": 4096} for i in range(count)}
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    server.command("many", ["true", *(f"{{p{i}}}" for i in range(count))], input_schema=schema, stdin="none")
    result = run(server, "many", **{name: "x" * 4096 for name in properties})
    assert result.is_error and result.text.startswith("Command tool 'many': its arguments and environment come to ")
    assert f"more than this system starts a program with (ARG_MAX, {limit} bytes); nothing was run" in result.text
    fits = run(server, "many", **{name: "x" for name in properties})
    assert not fits.is_error, fits.text


# --- manifests ------------------------------------------------------------------------------


def write_manifest(tmp_path, **manifest):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(manifest))
    return str(path)


@pytest.mark.host_only("runs git in a git checkout, which the lab's images are not")
def test_the_git_example_manifest_runs_against_this_repository(monkeypatch):
    if not os.path.exists(os.path.join(ROOT, ".git")) or not __import__("shutil").which("git"):  # a worktree: a file
        pytest.fail("needs git and a git checkout: the host's tree is one")
    monkeypatch.chdir(ROOT)
    server = load_target(GIT)
    assert list(server.tools) == ["git_status", "git_log", "git_diff"]
    log = run(server, "git_log", max_count=1)
    assert not log.is_error and len(log.text.splitlines()) == 1
    assert not run(server, "git_diff", staged=True).is_error


def test_manifest_paths_are_relative_to_the_manifest(tmp_path):
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from $(basename $PWD)\n")
    script.chmod(0o755)
    (tmp_path / "work").mkdir()
    path = write_manifest(tmp_path, name="m", tools=[{"name": "hello", "command": ["./hello.sh"], "cwd": "work",
                                                      "stdin": "none"}])
    assert run(load_target(path), "hello").text == "hello from work\n"


@pytest.mark.parametrize("manifest, message", [
    ({"name": "m", "tools": [{"name": "t", "comand": ["ls"]}]}, "unknown key 'comand'"),
    ({"name": "m", "tool": []}, "unknown key 'tool'"),
    ({"name": "m", "tools": {}}, "\"tools\" must be an array"),
    ({"name": "m", "tools": [{"name": "t"}]}, "needs \"name\" and \"command\""),
    ({"name": "m", "tools": [{"name": "t", "command": ["ls"], "stdin": "file"}]}, "\"stdin\" must be"),
])
def test_manifest_mistakes_name_the_problem(tmp_path, manifest, message):
    with pytest.raises(ConfigError) as caught:
        load_target(write_manifest(tmp_path, **manifest))
    assert message in str(caught.value)


def test_a_manifest_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"name": ')
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_target(str(path))
