"""`mcpserver dev [options] TARGET`: serve over HTTP, and serve again whenever TARGET's files change.

The server runs as a child process (`python -m mcpserver --http ...`, with the same options), so a
restart is a fresh interpreter: no module of the old code survives. The files are polled (the
standard library has no file-change notification): the folder of TARGET's file, and its packages,
for .py and .json files; a module target is looked for in the current folder. Before a change is
served, `--check` loads it in its own process: if it does not load (a syntax error, a bad tool), the
reason is printed and the last good server keeps serving. The directories given with --skills are watched
too, every file in them (a skill is Markdown, scripts, anything). The port is chosen once (0 picks a free
one now), so the URL, and the Inspector command line printed with it, stay the same across restarts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from .._environment import TOKEN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["main"]

POLL_SECONDS = 0.3
WATCHED = (".py", ".json")
SKIPPED = ("__pycache__", ".git", ".venv", "node_modules")
MAX_FILES = 5000  # a TARGET at the top of a large tree: polling more would cost more than it saves
SAY = "mcpserver dev:"


def main(args: Any, argv: list[str]) -> int:
    """Serve until Ctrl-C or SIGTERM; 0."""
    import signal

    if args.unix_socket:
        print(f"{SAY} it serves a port, which the Inspector reaches; serve a Unix socket with mcpserver --http "
              "unix:PATH", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as on Ctrl-C: the child is stopped too
    port = args.port or _free_port(args.host)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}{args.path}"
    # --grace 1 before the user's options, which win: a restart should not wait 10 s for calls in flight.
    command = [sys.executable, "-m", "mcpserver", "--http", "--grace", "1", *argv, "--port", str(port)]
    folder = _folder(args.target)
    watched = (folder, *args.skills)
    seen = _snapshot(*watched)
    _say(f"serving {args.target} at {url}; watching {len(seen)} files in {', '.join(watched)}")
    _say(f"Inspector: {_inspector(url, args)}")
    check = [*(word for directory in args.skills for word in ("--skills", directory)), args.target]
    child = _start(command) if _loads(check) else None
    try:
        while True:
            time.sleep(POLL_SECONDS)
            now = _snapshot(*watched)
            if now != seen:
                changed = sorted(set(now.items()) ^ set(seen.items()))
                seen = now
                child = _reload(command, check, child, os.path.relpath(changed[0][0], folder))
            elif child is not None and child.poll() is not None:
                _say(f"the server exited ({child.returncode}); waiting for a change")
                child = None
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(child)


def _reload(command: list[str], check: list[str], child: Optional[subprocess.Popen[bytes]],
            changed: str) -> Optional[subprocess.Popen[bytes]]:
    if not _loads(check):
        if child is not None:
            _say(f"{changed} changed; the last good server keeps serving")
        return child
    _say(f"{changed} changed: restarting")
    _stop(child)
    return _start(command)


def _loads(check: list[str]) -> bool:
    """Whether TARGET (the last of `check`, after its --skills) loads now, asked of a fresh interpreter; if not,
    why, in its own words."""
    done = subprocess.run([sys.executable, "-m", "mcpserver", "--check", *check], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or [f"--check exited {done.returncode}"]
        _say(f"does not load: {reason[0].removeprefix('mcpserver: ')}")
    return done.returncode == 0


def _start(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)  # its log and banner go to our stderr


def _stop(child: Optional[subprocess.Popen[bytes]]) -> None:
    if child is None or child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _folder(target: str) -> str:
    location = target if os.path.exists(target) else target.partition(":")[0]
    for candidate in (location, location + ".py", location + ".json"):
        if os.path.isfile(candidate):
            return os.path.dirname(os.path.abspath(candidate))
    return os.getcwd()


def _snapshot(folder: str, *skills: str) -> dict[str, tuple[int, int]]:
    """(mtime, size) of the watched files: the folder's own and those of its packages (with __init__.py), and
    every file of the skills directories."""
    found: dict[str, tuple[int, int]] = {}
    for top in (folder, *skills):
        every = top != folder
        for here, subfolders, files in os.walk(top):
            subfolders[:] = [d for d in subfolders if d not in SKIPPED and not d.startswith(".")
                             and (every or os.path.isfile(os.path.join(here, d, "__init__.py")))]
            for name in files:
                if (every or name.endswith(WATCHED)) and len(found) < MAX_FILES:
                    path = os.path.join(here, name)
                    try:
                        status = os.stat(path)
                    except OSError:  # removed between the listing and the stat: the next poll sees it gone
                        continue
                    found[path] = (status.st_mtime_ns, status.st_size)
    return found


def _free_port(host: str) -> int:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _inspector(url: str, args: Any) -> str:
    """The MCP Inspector's command line for this server (its --header carries the token, if one is needed)."""
    line = f"npx @modelcontextprotocol/inspector --transport http --server-url {url}"
    if args.token_file:
        return line + f' --header "Authorization: Bearer $(head -n1 {args.token_file})"'
    if args.token or os.environ.get(TOKEN):
        return line + ' --header "Authorization: Bearer $' + TOKEN + '"'
    return line


def _say(text: str) -> None:
    print(f"{SAY} {text}", file=sys.stderr, flush=True)
