"""Real parts standing for other machines in the engine tests: Debian's docker-registry on 127.0.0.1, and a
second dockerd (its own data root, exec root, pidfile, socket and bridge) listening on tcp at 127.0.0.2,
so that whatever reaches it by the wrong address fails as it would on a remote host. Both are started
by the test and stopped, with everything they made, when it ends."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REMOTE_ADDRESS = "127.0.0.2"


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def need(command: str, package: str) -> str:
    found = shutil.which(command)
    if found is None:  # CI's machine is fresh: install it as `make lab-engine` installs docker.io
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package], env=env,
                       capture_output=True, check=False, timeout=600)  # fmt: skip
        found = shutil.which(command)
    if found is None:
        pytest.fail(f"{command} is needed: apt-get install {package}")
    return found


def wait_for(check: object, what: str, log: Path, deadline: float = 60.0) -> None:
    until = time.monotonic() + deadline
    while time.monotonic() < until:
        with contextlib.suppress(OSError):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.3)
    pytest.fail(f"{what} did not come up within {deadline:.0f}s; its log:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def registry(folder: Path) -> Iterator[str]:
    """A registry on 127.0.0.1; yields HOST:PORT."""
    binary = need("docker-registry", "docker-registry")
    port = free_port("127.0.0.1")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = folder / "registry.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).status == 200,
                 "docker-registry", log)  # fmt: skip
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.contextmanager
def second_engine() -> Iterator[str]:
    """A second dockerd with nothing in it, on tcp://127.0.0.2:PORT (yielded) and its own socket."""
    dockerd = need("dockerd", "docker.io")
    root = Path(tempfile.mkdtemp(prefix="mcplab-d2-", dir="/var/tmp"))  # short: socket paths are limited
    bridge = f"mcplab-{secrets.token_hex(3)}"
    port = free_port(REMOTE_ADDRESS)
    (root / "daemon.json").write_text("{}")
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}.1/24"
    subprocess.run(["ip", "addr", "add", subnet, "dev", bridge], check=True)
    subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
    log = root / "dockerd.log"
    argv = [
        dockerd, "--config-file", str(root / "daemon.json"), "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"), "-H", f"unix://{root / 'sock'}",
        "-H", f"tcp://{REMOTE_ADDRESS}:{port}", "--bridge", bridge, "--iptables=false", "--ip-masq=false",
    ]  # fmt: skip
    with open(log, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    host = f"tcp://{REMOTE_ADDRESS}:{port}"
    try:
        wait_for(lambda: subprocess.run(["docker", "-H", host, "version"], capture_output=True,
                                        timeout=10).returncode == 0, "the second dockerd", log)  # fmt: skip
        yield host
    finally:
        stop(proc)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(root) in line]
        for point in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
