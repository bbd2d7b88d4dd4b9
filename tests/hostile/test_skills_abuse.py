"""Skills from the attacker's side: a real `python -m mcpserver --skills DIR` over stdio, asked for what it must
never give (files outside the skills, devices, FIFOs) by every spelling of `..`, and a skill directory changed
under the running server (a served file swapped for a symlink, a FIFO or something huge)."""

import os
import socket
import stat

import pytest
from mcptest import DEMO, StdioServer, request

SECRET = "the secret outside every skill\n"
SKILL_MD = "---\nname: {name}\ndescription: A skill.\n---\nBody.\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        file.write(text)


@pytest.fixture
def layout(tmp_path):
    """skills/docs and skills/other, and a secret next to (not inside) the skills directory."""
    skills = tmp_path / "skills"
    write(str(tmp_path / "secret.txt"), SECRET)
    for name in ("docs", "other"):
        write(str(skills / name / "SKILL.md"), SKILL_MD.format(name=name))
    write(str(skills / "docs" / "guide.md"), "the guide\n")
    write(str(skills / "other" / "private.md"), "other's own\n")
    return tmp_path


def ask(server, method, **params):
    return server.ask(request(method, **params))


def served_uris(server):
    entries = ask(server, "skills/list")["result"]["skills"]
    return {resource["uri"] for entry in entries for resource in entry["resources"]}


def test_every_spelling_of_dot_dot_names_nothing(layout):
    with StdioServer(DEMO, "--skills", str(layout / "skills")) as server:
        assert ask(server, "resources/read", uri="skill://docs/guide.md")["result"]["contents"][0]["text"] == \
            "the guide\n"
        for uri in ("skill://docs/../../secret.txt", "skill://docs/..%2f..%2fsecret.txt",
                    "skill://docs/%2e%2e/%2e%2e/secret.txt", "skill://docs/%2E%2E%2F%2E%2E%2Fsecret.txt",
                    "skill://docs/..%5c..%5csecret.txt", "skill://docs/%252e%252e/%252e%252e/secret.txt",
                    "skill://docs/guide.md/../../../secret.txt", "skill://docs/./../other/private.md",
                    "skill://docs/\u2025/secret.txt", "skill://docs/%c0%ae%c0%ae/secret.txt",
                    "skill://docs/guide.md%00.txt", "skill://%2e%2e/secret.txt", "skill://../secret.txt",
                    f"file://{layout}/secret.txt", "skill://docs//guide.md", "skill://DOCS/guide.md"):
            for method in ("resources/read", "skills/get", "resources/directory/read"):
                answer = ask(server, method, uri=uri)
                assert answer["error"]["code"] == -32602, (method, uri, answer)
                assert SECRET.strip() not in str(answer)


def test_a_symlink_out_of_its_skill_is_never_served_one_within_it_is(layout):
    docs = layout / "skills" / "docs"
    os.symlink(layout / "secret.txt", docs / "secret.txt")
    os.symlink("/etc/passwd", docs / "passwd")
    os.symlink(layout / "skills" / "other" / "private.md", docs / "borrowed.md")  # another skill's file
    os.symlink(docs / "guide.md", docs / "alias.md")  # within the skill: served, with the target's bytes
    os.symlink(layout, docs / "up")  # a directory: never followed
    os.symlink(docs / "missing", docs / "dangling.md")
    with StdioServer(DEMO, "--skills", str(layout / "skills")) as server:
        uris = served_uris(server)
        assert "skill://docs/alias.md" in uris
        for name in ("secret.txt", "passwd", "borrowed.md", "up/secret.txt", "dangling.md"):
            assert f"skill://docs/{name}" not in uris
            assert ask(server, "resources/read", uri=f"skill://docs/{name}")["error"]["code"] == -32602
        assert ask(server, "resources/read", uri="skill://docs/alias.md")["result"]["contents"][0]["text"] == \
            "the guide\n"
        server.wait_for_stderr("dangling.md")
        for said in ("secret.txt: not served: a symlink to", "passwd: not served: a symlink to /etc/passwd",
                     "up: not served: a symlink to a directory"):
            assert said in server.stderr


def test_fifos_sockets_and_devices_are_never_served_nor_wait_for(layout):
    docs = layout / "skills" / "docs"
    os.mkfifo(docs / "pipe.md")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(docs / "socket.md"))
    device = docs / "zero.md"
    try:
        os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:  # not root (the lab's images): a symlink to it is refused for leaving the skill
        os.symlink("/dev/zero", device)
    try:
        with StdioServer(DEMO, "--skills", str(layout / "skills")) as server:
            uris = served_uris(server)  # answered at all: nothing blocked on the FIFO
            for name in ("pipe.md", "socket.md", "zero.md"):
                assert f"skill://docs/{name}" not in uris
                assert ask(server, "resources/read", uri=f"skill://docs/{name}")["error"]["code"] == -32602
    finally:
        listener.close()


def test_hidden_files_and_caches_are_not_part_of_a_skill(layout):
    docs = layout / "skills" / "docs"
    write(str(docs / ".env"), "TOKEN=hunter2\n")
    write(str(docs / ".git" / "config"), "[core]\n")
    write(str(docs / "scripts" / "__pycache__" / "x.pyc"), "compiled\n")
    with StdioServer(DEMO, "--skills", str(layout / "skills")) as server:
        assert served_uris(server) == {"skill://docs/SKILL.md", "skill://docs/guide.md", "skill://other/SKILL.md",
                                       "skill://other/private.md"}
        assert "hunter2" not in str(ask(server, "resources/directory/read", uri="skill://docs"))


@pytest.mark.parametrize("swap", ["symlink", "fifo", "huge"])
def test_a_served_file_swapped_under_the_running_server_is_refused_at_once(layout, swap):
    guide = layout / "skills" / "docs" / "guide.md"
    with StdioServer(DEMO, "--skills", str(layout / "skills")) as server:
        assert "skill://docs/guide.md" in served_uris(server)
        os.remove(guide)
        if swap == "symlink":
            os.symlink(layout / "secret.txt", guide)
        elif swap == "fifo":
            os.mkfifo(guide)
        else:
            with open(guide, "wb") as file:
                file.truncate(16 * 1024 * 1024 + 1)  # more than a whole skill may hold
        answer = ask(server, "resources/read", uri="skill://docs/guide.md")
        assert answer["error"]["code"] == -32602 and SECRET.strip() not in str(answer)
        assert "skill://docs/guide.md" not in served_uris(server) or swap == "huge"
        if swap == "huge":  # a file that grew past the limit takes its skill down with it, until it shrinks
            assert "skill://docs/SKILL.md" not in served_uris(server)
            os.truncate(guide, 3)
            assert "skill://docs/guide.md" in served_uris(server)
