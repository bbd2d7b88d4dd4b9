"""A throwaway PostgreSQL server: Debian's `postgresql` package, a cluster in a temporary directory.

initdb and pg_ctl run as the `postgres` user when this runs as root (PostgreSQL refuses root), the
server listens only on a Unix socket inside that directory (no port to collide, nothing on the
network), and stop() removes everything. Used by tests/task_store and bench/task_store.py.
"""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

BINDIR_GLOB = "/usr/lib/postgresql/*/bin"


def bindir():
    """The newest installed PostgreSQL's bin directory, or None."""
    versions = [path for path in glob.glob(BINDIR_GLOB) if path.split("/")[-2].isdigit()]
    return max(versions, key=lambda path: int(path.split("/")[-2]), default=None)


class PostgresServer:
    """start() then dsn; stop() in a finally. durable=False turns fsync off (tests), True keeps the defaults (bench)."""

    def __init__(self, durable=False):
        self.durable = durable
        self.root = None
        self.dsn = None

    def _run(self, argv, **options):
        user = "postgres" if os.geteuid() == 0 else None
        return subprocess.run(argv, user=user, check=True, capture_output=True, text=True, timeout=120, **options)

    def start(self):
        where = bindir()
        if where is None:
            raise RuntimeError(f"no PostgreSQL in {BINDIR_GLOB}: install Debian's postgresql package "
                               "(make test does: apt-get install postgresql)")
        self.root = tempfile.mkdtemp(prefix="mcpserver-pg-")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        data = os.path.join(self.root, "data")
        self._run([f"{where}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        settings = f"-k {self.root} -c listen_addresses='' -c unix_socket_permissions=0777"
        if not self.durable:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self.settings = settings
        self._run([f"{where}/pg_ctl", "-D", data, "-l", os.path.join(self.root, "log"), "-o", settings, "-w",
                   "-t", "60", "start"])
        self.dsn = f"postgresql://postgres@/postgres?host={self.root}&port=5432"
        return self

    def restart(self, down_seconds=0.0):
        """Stop the server as an operator or a failover does (ending every connection), and start it again."""
        where, data = bindir(), os.path.join(self.root, "data")
        self._run([f"{where}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
        time.sleep(down_seconds)
        self._run([f"{where}/pg_ctl", "-D", data, "-l", os.path.join(self.root, "log"), "-o", self.settings, "-w",
                   "-t", "60", "start"])

    def _postmaster(self):
        with open(os.path.join(self.root, "data", "postmaster.pid")) as pid_file:
            return int(pid_file.readline())

    def _processes(self):
        postmaster = self._postmaster()
        with open(f"/proc/{postmaster}/task/{postmaster}/children") as children:
            return [postmaster, *(int(child) for child in children.read().split())]

    def pause(self):
        """Freeze the server and its backends (SIGSTOP), as a host that stops answering does: connections and
        queries neither go through nor fail."""
        for pid in self._processes():
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in reversed(self._processes()):
            os.kill(pid, signal.SIGCONT)

    def log(self):
        try:
            with open(os.path.join(self.root, "log"), encoding="utf-8", errors="replace") as file:
                return file.read()[-4000:]
        except (OSError, TypeError):
            return ""

    def stop(self):
        if self.root is None:
            return
        where = bindir()
        try:
            self._run([f"{where}/pg_ctl", "-D", os.path.join(self.root, "data"), "-m", "immediate", "-w", "stop"])
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
