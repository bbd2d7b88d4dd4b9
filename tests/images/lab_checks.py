"""Helpers of the image checks: docker calls, labels, HTTP requests, server start-up."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

import pytest

LABEL = "org.mcpserver.lab"
RUN_LABEL = "org.mcpserver.lab.run"
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


@dataclass(frozen=True)
class Cell:
    image: str
    python_image: str
    python: str
    python_from: str
    family: str = ""

    @property
    def interpreter(self) -> str:
        return f"python{self.python}"


def elf_interpreter(data: bytes) -> str:
    """The PT_INTERP of a 64-bit little-endian ELF file: the loader the kernel starts it with ('' if static)."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for index in range(phnum):
        # Elf64_Phdr: p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, ...
        p_type, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", data, phoff + index * phentsize)
        if p_type == 3:  # PT_INTERP
            return data[offset : offset + size].rstrip(b"\0").decode()
    return ""


def docker(
    *args: str, timeout: float = 120, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["docker", *args], capture_output=True, timeout=timeout, check=check, input=input)


def labels() -> list[str]:
    return ["--label", f"{LABEL}=1", "--label", f"{RUN_LABEL}={os.environ.get('LAB_RUN_ID', 'checks')}"]


def unique(prefix: str) -> str:
    return f"mcplab-check-{prefix}-{uuid.uuid4().hex[:8]}"


def engine_host() -> str:
    """Where published ports are: this machine, or the remote engine DOCKER_HOST names."""
    url = urlparse(os.environ.get("DOCKER_HOST", ""))
    return url.hostname if url.scheme in ("tcp", "ssh") and url.hostname else "127.0.0.1"


def post(url: str, body: bytes, token: str | None) -> tuple[int, dict[str, str], bytes]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "server/discover",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def json_messages(content_type: str, body: bytes) -> list[dict[str, object]]:
    """The JSON-RPC messages of a response, whether sent as JSON or as an SSE stream."""
    text = body.decode("utf-8")
    if content_type.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    return [json.loads(text)]


def container_log(name: str) -> str:
    done = docker("logs", name, check=False)
    return (done.stdout + done.stderr).decode(errors="replace")


def start_stdio(cell: Cell) -> str:
    """A detached stdio server (the image's default command) with stdin held open; returns its name
    once PID 1 is the cell's Python (the entrypoint's `exec` has happened)."""
    name = unique("stdio")
    docker("run", "-d", "-i", "--name", name, *labels(), "--network", "none", cell.image)
    deadline = time.monotonic() + READY_DEADLINE
    while time.monotonic() < deadline:
        argv = docker("exec", name, "cat", "/proc/1/cmdline", check=False).stdout.split(b"\0")
        if argv and argv[0] == cell.interpreter.encode():
            return name
        time.sleep(0.1)
    logs = container_log(name)
    docker("rm", "-f", name, check=False)
    pytest.fail(f"{cell.image}'s PID 1 never became {cell.interpreter}; its log:\n{logs}")


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    token: str


def start_http(cell: Cell, token: str) -> HttpServer:
    name = unique("http")
    docker(
        "run", "-d", "--name", name, *labels(), "-p", f"127.0.0.1::{PORT}", cell.image,
        "--http", "--host", "0.0.0.0", "--port", str(PORT), "--token", token, DEMO,
    )  # fmt: skip
    port = docker("port", name, f"{PORT}/tcp").stdout.decode().split()[0].rsplit(":", 1)[1]
    server = HttpServer(name=name, url=f"http://{engine_host()}:{port}/mcp", token=token)
    deadline = time.monotonic() + READY_DEADLINE
    body = json.dumps(DISCOVER).encode()
    while True:
        try:
            status, _, _ = post(server.url, body, token)
            if status == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = container_log(name)
            docker("rm", "-f", name, check=False)
            pytest.fail(
                f"{cell.image} did not answer over HTTP within {READY_DEADLINE:.0f}s; its log:\n{logs}"
            )
        time.sleep(0.2)
