"""`python -m mcpserver`'s two parsers: the quick one (no argparse import, for start-up time) must never
read a command line differently from argparse, which reads every line the quick one declines."""

import contextlib
import io
import random

from mcpserver import __main__ as cli
from mcptest import DEMO

# Values that argparse treats specially (option-like words, negative numbers, '=' inside, empty) and values
# that the options' converters refuse (out of range, not numbers), next to ordinary ones.
VALUES = ["x", "", "a=b", "-x", "-1", "--http", "-", "0", "7", "2.5", "99999", "nan", "inf", "debug", "warning", "json",
          "127.0.0.1", "300.1.1.1", "::1", "[::1]", "example.test", "server/x.py", "7/s", "7/d"]


def argparse_reading(argv):
    """What argparse makes of argv, or None where it refuses the line."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return vars(cli._parser().parse_args(argv))
        except SystemExit:
            return None


def lines_for(option, flag):
    if option.kind is bool:
        yield [flag, DEMO]
        yield [DEMO, flag]
        yield [f"{flag}=x", DEMO]
        return
    for value in VALUES:
        yield [flag, value, DEMO]
        yield [f"{flag}={value}", DEMO]
        yield [DEMO, flag, value]
        yield [flag, value]
        yield [flag, value, flag, "7", DEMO]
    yield [DEMO, flag]


def random_lines(count, seed=27):
    words = [flag for o in cli.OPTIONS for flag in (o.flag, *o.aliases)] + VALUES
    words += [DEMO, "--version", "--", "--por", "--http=1", "-h"]
    chooser = random.Random(seed)
    for _ in range(count):
        yield [chooser.choice(words) for _ in range(chooser.randint(1, 6))]


def every_line():
    for option in cli.OPTIONS:
        for flag in (option.flag, *option.aliases):  # an older spelling is read as the option's own
            yield from lines_for(option, flag)
    yield from random_lines(3000)


def test_the_quick_parser_reads_every_line_it_takes_as_argparse_does():
    differ, taken = [], set()
    for argv in every_line():
        quick = cli._quick_parse(argv)
        if quick is None:
            continue  # argparse reads it, and explains what is wrong with it
        taken.update(word.partition("=")[0] for word in argv if word.startswith("--"))
        full = argparse_reading(argv)
        if full != vars(quick):
            differ.append((argv, vars(quick), full))
    assert differ == []
    # Not vacuous: every option the quick parser claims was taken, in some line, by the quick parser itself.
    assert taken >= {flag for option in cli.OPTIONS for flag in (option.flag, *option.aliases)}


def test_the_quick_parser_takes_the_command_lines_clients_use():
    assert cli._quick_parse([DEMO]).target == DEMO
    http = cli._quick_parse(["--http", "--port", "0", "--log-level", "warning", DEMO])
    assert (http.http, http.port, http.log_level) == (True, 0, "warning")
    assert cli._quick_parse(["--allow-origin", "https://a.test", "--allow-origin=https://b.test", DEMO]).allow_origin \
        == ["https://a.test", "https://b.test"]


def test_a_value_that_looks_like_an_option_is_left_to_argparse():
    # argparse refuses `--token -x` (an option where a value belongs); reading it as the token -x would start
    # a server with a token its user did not mean.
    assert cli._quick_parse(["--token", "-x", DEMO]) is None
    assert argparse_reading(["--token", "-x", DEMO]) is None


def test_store_is_the_switch_and_task_store_its_older_spelling():
    for flag in ("--store", "--task-store"):
        assert cli._quick_parse([flag, "tasks.db", DEMO]).store == "tasks.db"
        assert argparse_reading([flag, "tasks.db", DEMO])["store"] == "tasks.db"
    assert "--task-store" in cli._parser().format_help()


def test_every_http_option_names_a_field_of_http_options():
    # Named where defined (HttpOptions), where parsed (this table), where used: an HTTP option that names no field
    # would be parsed and then dropped on the way to the server.
    from mcpserver.http import HttpOptions

    fields = set(HttpOptions.__dataclass_fields__)
    named = {option.field for option in cli.OPTIONS if option.field}
    assert named <= fields, named - fields
    assert {"grace_seconds", "allowed_origins", "rate_limit", "max_connections", "tls_cert"} <= named


def test_http_unix_path_is_the_unix_socket_in_both_parsers_and_means_http():
    for argv in (["--http", "unix:/run/mcp.sock", DEMO], ["--http=unix:/run/mcp.sock", DEMO],
                 ["--unix-socket", "/run/mcp.sock", DEMO], [DEMO, "--http", "unix:/run/mcp.sock"]):
        args = cli._parse(argv)
        assert (args.http, args.unix_socket, args.target) == (True, "/run/mcp.sock", DEMO), argv
        assert argparse_reading(cli._unix_spelled(argv))["unix_socket"] == "/run/mcp.sock"  # the slow path agrees
    assert cli._parse(["--http", DEMO]).unix_socket is None  # a TARGET after --http stays the TARGET
    assert cli._parse(["--http", "--unix-socket-mode", "660", "--unix-socket", "/s", DEMO]).unix_socket_mode == 0o660
