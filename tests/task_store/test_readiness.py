"""/readyz with the task store in PostgreSQL (a real server): ready while it answers, 503 saying so within seconds
once it stops or hangs, ready again when it is back; /healthz says the process serves throughout."""

import os
import signal
import subprocess
import time

from mcptest import EXAMPLES, HttpServer
from pgserver import PostgresServer, bindir

JOBS = os.path.join(EXAMPLES, "jobs.py")


def readiness(server):
    status, _, body = server.post(method="GET", path="/readyz", headers={})
    return status, body.decode()


def until(server, status, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        answer = readiness(server)
        if answer[0] == status:
            return answer
        assert time.monotonic() < deadline, f"/readyz never became {status}: {answer}"
        time.sleep(0.2)


def children(parent):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if name.isdigit() and int(fields[1]) == parent:
            found.append(int(name))
    return found


def test_readiness_follows_the_database_down_hung_and_back():
    database = PostgresServer(durable=True).start()
    data = f"{database.root}/data"
    try:
        with HttpServer(JOBS, "--health", "--task-store", database.dsn) as server:
            assert until(server, 200) == (200, "ready\n")
            database._run([f"{bindir()}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
            _, why = until(server, 503)
            assert why.startswith("not ready: the task store does not answer")
            assert server.post(method="GET", path="/healthz", headers={})[0] == 200  # alive all the same
            database._run([f"{bindir()}/pg_ctl", "-D", data, "-l", f"{database.root}/log", "-o",
                           f"-k {database.root} -c listen_addresses=''", "-w", "start"])
            until(server, 200)
            with open(f"{data}/postmaster.pid", encoding="utf-8") as file:
                postmaster = int(file.readline())
            cluster = [postmaster, *children(postmaster)]  # the backends answer queries, not the postmaster
            for pid in cluster:  # a database that hangs: the check waits, /readyz does not
                os.kill(pid, signal.SIGSTOP)
            try:
                _, why = until(server, 503, timeout=40)
                assert "the readiness check has not finished for" in why
            finally:
                for pid in cluster:
                    os.kill(pid, signal.SIGCONT)
            until(server, 200, timeout=40)
    except subprocess.CalledProcessError as error:
        raise AssertionError(f"pg_ctl failed: {error.stderr}") from error
    finally:
        database.stop()
