"""`mcpserver dev TARGET`: edits are served without a restart by hand, and a broken edit breaks nothing."""

import os
import re
import subprocess
import sys
import threading
import time

from mcptest import HttpServer, request

FIRST = '''from mcpserver import Server

server = Server("draft", "1.0.0")


@server.tool()
def first() -> str:
    return "one"
'''
SECOND = FIRST + '''

@server.tool()
def second() -> str:
    return "two"
'''


class Dev:
    """`mcpserver dev --port 0 TARGET`, its stderr collected line by line."""

    def __init__(self, target, *extra):
        self.process = subprocess.Popen([sys.executable, "-m", "mcpserver", "dev", "--port", "0", *extra, target],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for text in self.process.stderr:
            self.lines.append(text)

    def wait_for(self, pattern, after=0, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for text in self.lines[after:]:
                match = re.search(pattern, text)
                if match:
                    return match
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in:\n{''.join(self.lines)}")

    def stop(self):
        self.process.terminate()
        status = self.process.wait(15)
        self.reader.join(15)
        self.process.stderr.close()
        return status


def tools(port):
    status, _, body = HttpServer.attach(port).post(request("tools/list"))
    assert status == 200
    return [tool["name"] for tool in body["result"]["tools"]]


def rewrite(path, text):
    before = os.stat(path).st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a new mtime even on a coarse clock


def wait_for_tools(port, expected, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            listed = tools(port)
        except OSError:  # between the old server and the new one
            listed = None
        if listed == expected or time.monotonic() > deadline:
            return listed
        time.sleep(0.1)


def test_an_edit_is_served_and_a_broken_one_leaves_the_last_good_server_up(tmp_path):
    target = tmp_path / "draft.py"
    target.write_text(FIRST)
    dev = Dev(str(target))
    try:
        url = dev.wait_for(r"serving \S+ at (http://127\.0\.0\.1:(\d+)/mcp)")
        port = int(url.group(2))
        inspector = dev.wait_for(r"Inspector: (.*)").group(1)
        assert inspector == f"npx @modelcontextprotocol/inspector --transport http --server-url {url.group(1)}"
        assert wait_for_tools(port, ["first"]) == ["first"]

        rewrite(target, SECOND)
        assert wait_for_tools(port, ["first", "second"]) == ["first", "second"]

        seen = len(dev.lines)
        rewrite(target, SECOND + "\ndef broken(:\n")
        reason = dev.wait_for(r"does not load: (.*)", after=seen).group(1)
        assert "SyntaxError" in reason and "draft.py" in reason
        dev.wait_for(r"the last good server keeps serving", after=seen)
        assert tools(port) == ["first", "second"]

        rewrite(target, FIRST)
        assert wait_for_tools(port, ["first"]) == ["first"]
    finally:
        assert dev.stop() == 0
    assert "Traceback" not in "".join(dev.lines)


def test_a_target_that_does_not_load_yet_is_served_once_it_does(tmp_path):
    target = tmp_path / "draft.py"
    target.write_text("def broken(:\n")
    dev = Dev(str(target))
    try:
        port = int(dev.wait_for(r"serving \S+ at http://127\.0\.0\.1:(\d+)/mcp").group(1))
        dev.wait_for(r"does not load: .*SyntaxError")
        rewrite(target, FIRST)
        assert wait_for_tools(port, ["first"]) == ["first"]
    finally:
        assert dev.stop() == 0


def test_the_inspector_line_carries_the_token_header_when_the_server_needs_one(tmp_path):
    target = tmp_path / "draft.py"
    target.write_text(FIRST)
    token = tmp_path / "token"
    token.write_text("0123456789abcdef\n")
    dev = Dev(str(target), "--token-file", str(token))
    try:
        inspector = dev.wait_for(r"Inspector: (.*)").group(1)
        assert inspector.endswith(f'--header "Authorization: Bearer $(head -n1 {token})"')
        dev.wait_for(r"bearer token required")
    finally:
        assert dev.stop() == 0


def test_bad_options_are_the_server_s_usage_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mcpserver", "dev", "--port", "99999", "x.py"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "a port is 0 to 65535" in done.stderr and "mcpserver dev" in done.stderr


def test_a_skill_given_with_skills_is_watched_and_a_broken_one_leaves_the_last_good_server_up(tmp_path):
    target = tmp_path / "draft.py"
    target.write_text(FIRST)
    skill = tmp_path / "skills" / "notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: notes\ndescription: First notes.\n---\n")
    dev = Dev(str(target), "--skills", str(tmp_path / "skills"))
    try:
        port = int(dev.wait_for(r"serving \S+ at http://127\.0\.0\.1:(\d+)/mcp; watching 2 files").group(1))

        def description():
            try:
                status, _, body = HttpServer.attach(port).post(request("resources/list"))
            except OSError:  # between the old server and the new one
                return None
            return body["result"]["resources"][0].get("description") if status == 200 else None

        wait_for_tools(port, ["first"])
        assert description() == "First notes."
        seen = len(dev.lines)
        rewrite(skill, "---\nname: renamed\ndescription: Broken.\n---\n")  # Markdown: watched all the same
        assert "differs from its directory's" in dev.wait_for(r"does not load: (.*)", after=seen).group(1)
        assert description() == "First notes."
        rewrite(skill, "---\nname: notes\ndescription: Second notes.\n---\n")
        deadline = time.monotonic() + 30
        while description() != "Second notes." and time.monotonic() < deadline:
            time.sleep(0.1)
        assert description() == "Second notes."
    finally:
        assert dev.stop() == 0
