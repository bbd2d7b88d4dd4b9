"""Helpers of the image checks: containers through the lab's engine (matrix/engine.py), HTTP requests,
server start-up.

The checks reach a container wherever its engine is: HTTP requests are made from inside the server's own
container (`docker exec` of the image's Python), so no port is published and no address of the engine's
host is guessed; a remote engine (DOCKER_HOST=tcp://..., ssh://..., or a docker context) works the same."""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from matrix.engine import LABEL, RUN_LABEL, ContainerSpec, Engine
from matrix.processes import Completed

ENGINE = Engine()
DEMO = "/opt/mcpserver/examples/demo.py"
PROTOCOL = "2026-07-28"
PORT = 3000
READY_DEADLINE = 30.0  # seconds for a server to answer after `docker run`
DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}
# Runs inside the server's container: POST stdin to the server on the container's own loopback, print
# status, headers and body as JSON. The image's Python is the only client every image has.
CLIENT = """
import base64, json, sys, urllib.error, urllib.request
url, token, version = sys.argv[1:4]
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": version, "Mcp-Method": "server/discover"}
if token:
    headers["Authorization"] = "Bearer " + token
request = urllib.request.Request(url, data=sys.stdin.buffer.read(), headers=headers, method="POST")
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        status, got, body = answer.status, dict(answer.headers), answer.read()
except urllib.error.HTTPError as exc:
    status, got, body = exc.code, dict(exc.headers), exc.read()
print(json.dumps({"status": status, "headers": got, "body": base64.b64encode(body).decode()}))
"""


@dataclass(frozen=True)
class Cell:
    image: str
    python_image: str
    python: str
    python_from: str
    family: str = ""
    interpreter: str = ""  # the command: python3.11, pypy3.11, python3.14t
    implementation: str = "cpython"  # sys.implementation.name
    flavour: str = ""  # "free-threaded"


def elf_interpreter(data: bytes) -> str:
    """The PT_INTERP of an ELF file, 32- or 64-bit, either byte order (the lab's i386 and armhf cells are 32-bit,
    s390x big-endian): the loader the kernel starts it with ('' if static)."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ValueError("not an ELF file")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    (phoff,) = struct.unpack_from(order + ("Q" if wide else "I"), data, 0x20 if wide else 0x1C)
    phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36 if wide else 0x2A)
    for index in range(phnum):
        at = phoff + index * phentsize
        if wide:  # Elf64_Phdr: p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, ...
            p_type, _, offset, _, _, size = struct.unpack_from(order + "IIQQQQ", data, at)
        else:  # Elf32_Phdr: p_type, p_offset, p_vaddr, p_paddr, p_filesz, ...
            p_type, offset, _, _, size = struct.unpack_from(order + "IIIII", data, at)
        if p_type == 3:  # PT_INTERP
            return data[offset : offset + size].rstrip(b"\0").decode()
    return ""


def labels() -> dict[str, str]:
    return {LABEL: "1", RUN_LABEL: os.environ.get("LAB_RUN_ID", "checks")}


def unique(prefix: str) -> str:
    return f"mcplab-check-{prefix}-{uuid.uuid4().hex[:8]}"


def run(cell: Cell, *args: str, image: str = "", entrypoint: str | None = None, input: bytes | None = None,
        env: dict[str, str] | None = None, timeout: float = 60) -> Completed:  # fmt: skip
    """A one-off container of the cell's image (or another), removed afterwards."""
    spec = ContainerSpec(image=image or cell.image, args=args, labels=labels(), entrypoint=entrypoint, remove=True,
                         interactive=input is not None, env=env or {})  # fmt: skip
    return ENGINE.run(spec, timeout=timeout, input=input)


def output_of(done: Completed) -> str:
    assert done.ok, done.output
    return done.output


def post(server: HttpServer, body: bytes, token: str | None) -> tuple[int, dict[str, str], bytes]:
    """POST to the server from inside its container; (status, headers, body)."""
    done = ENGINE.exec(server.name, [server.interpreter, "-c", CLIENT, server.url, token or "", PROTOCOL], input=body)
    if not done.ok:
        raise OSError(f"the request did not get through: {done.output.strip()[-300:]}")
    answer = json.loads(done.output.strip().splitlines()[-1])
    return answer["status"], answer["headers"], base64.b64decode(answer["body"])


def json_messages(content_type: str, body: bytes) -> list[dict[str, object]]:
    """The JSON-RPC messages of a response, whether sent as JSON or as an SSE stream."""
    text = body.decode("utf-8")
    if content_type.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    return [json.loads(text)]


def guest_argv(cmdline: bytes) -> list[bytes]:
    """A process's argv from its /proc/PID/cmdline as the kernel keeps it, without the emulator's part: a process of
    another architecture run by qemu-user through binfmt_misc is, to the kernel, [qemu's binfmt handler, the program's
    path, its argv...] with the P flag (Debian's qemu-user-static registers it so: "...-binfmt-P"), else [handler,
    the program's path, argv[1:]...]."""
    argv = cmdline.split(b"\0")
    if argv and b"qemu" in argv[0]:
        return argv[2:] if argv[0].endswith(b"-P") else argv[1:]
    return argv


def start_stdio(cell: Cell) -> str:
    """A detached stdio server (the image's default command) with stdin held open; returns its name
    once PID 1 is the cell's Python (the entrypoint's `exec` has happened)."""
    name = unique("stdio")
    output_of(ENGINE.start(ContainerSpec(image=cell.image, name=name, labels=labels(), interactive=True)))
    deadline = time.monotonic() + READY_DEADLINE
    while time.monotonic() < deadline:
        done = ENGINE.exec(name, ["cat", "/proc/1/cmdline"])
        argv = guest_argv(done.output.encode()) if done.ok else []
        if argv and argv[0] == cell.interpreter.encode():
            return name
        time.sleep(0.1)
    logs = ENGINE.logs(name)
    ENGINE.remove_containers(name)
    pytest.fail(f"{cell.image}'s PID 1 never became {cell.interpreter}; its log:\n{logs}")


def serving(name: str) -> float:
    """Wait until the server says in its log that it serves (its transport's handlers set: from there a stop is
    answered by its graceful shutdown, before it by its start-up's); the seconds that took, from the call."""
    started = time.monotonic()
    deadline = started + READY_DEADLINE
    while time.monotonic() < deadline:
        if "serving " in ENGINE.logs(name):
            return time.monotonic() - started
        time.sleep(0.02)
    pytest.fail(f"{name} never said it serves; its log:\n{ENGINE.logs(name)}")


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str  # as seen from inside the container
    token: str
    interpreter: str


def start_http(cell: Cell, token: str) -> HttpServer:
    """An HTTP server bound to all addresses in its container (no port published), answering once up."""
    name = unique("http")
    spec = ContainerSpec(image=cell.image, name=name, labels=labels(),
                         args=("--http", "--host", "0.0.0.0", "--port", str(PORT), "--token", token, DEMO))  # fmt: skip
    output_of(ENGINE.start(spec))
    server = HttpServer(name=name, url=f"http://127.0.0.1:{PORT}/mcp", token=token, interpreter=cell.interpreter)
    deadline = time.monotonic() + READY_DEADLINE
    body = json.dumps(DISCOVER).encode()
    while True:
        try:
            status, _, _ = post(server, body, token)
            if status == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = ENGINE.logs(name)
            ENGINE.remove_containers(name)
            pytest.fail(f"{cell.image} did not answer over HTTP within {READY_DEADLINE:.0f}s; its log:\n{logs}")
        time.sleep(0.2)
