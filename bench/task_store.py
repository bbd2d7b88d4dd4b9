"""What one task costs in each task store: a round (create, finish with a small result, get), each
operation alone, the memory a live task holds in MemoryTaskStore, and the bytes it takes on disk.

Backends: memory; SQLite with synchronous=NORMAL (the default: survives the process being killed) and
FULL (an fsync per commit: survives a power cut too); PostgreSQL on a throwaway local server started
here from Debian's postgresql package, with its durable defaults (fsync, synchronous_commit on), reached
over a Unix socket. One process, one thread: the cost per call, not throughput under contention.

    .venv/bin/python bench/task_store.py                # psycopg from the test extra, for PostgreSQL
    .venv/bin/python bench/task_store.py --no-postgres --tasks 2000 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "server"), os.path.join(ROOT, "tests", "task_store")]

from mcpserver.tasks import MemoryTaskStore, Tasks, TaskStore  # noqa: E402

RESULT = {"content": [{"type": "text", "text": "The answer is 42."}]}


def timed(work: Callable[[], Any], count: int) -> float:
    """Microseconds per call of `work`, over `count` calls."""
    started = time.perf_counter()
    for _ in range(count):
        work()
    return (time.perf_counter() - started) / count * 1e6


def per_operation(store: Tasks, tasks: int) -> dict[str, float]:
    """Microseconds per create, finish, get and round (all three) on `store`."""
    owners = [f"owner-{n % 50}" for n in range(tasks)]  # 50 clients: below the per-owner limit
    ids: list[str] = []
    created = timed(lambda: ids.append(store.create(owners[len(ids)]).task_id), tasks)
    pending = iter(ids)
    finished = timed(lambda: store.finish(next(pending), result=RESULT), tasks)
    pairs = iter(zip(ids, owners))
    read = timed(lambda: store.get(*next(pairs)), tasks)
    counter = iter(range(tasks))

    def round_trip() -> None:
        owner = f"round-{next(counter) % 50}"
        task_id = store.create(owner).task_id
        store.finish(task_id, result=RESULT)
        store.get(task_id, owner)

    return {"create_us": created, "finish_us": finished, "get_us": read, "round_us": timed(round_trip, tasks)}


def memory_per_task(tasks: int) -> dict[str, float]:
    """Bytes MemoryTaskStore holds per live task, working and completed (tracemalloc)."""
    store = Tasks(MemoryTaskStore(max_tasks_per_owner=tasks))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        ids = [store.create("one").task_id for _ in range(tasks)]
        working = tracemalloc.get_traced_memory()[0] - base
        for task_id in ids:
            store.finish(task_id, result=RESULT)
        completed = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return {"working_bytes": working / tasks, "completed_bytes": completed / tasks}


def measure(name: str, open_store: Callable[[], TaskStore], tasks: int, rounds: int,
            size: Callable[[], int] | None = None) -> dict[str, Any]:
    runs = []
    for _ in range(rounds):
        store = Tasks(open_store())
        try:
            runs.append(per_operation(store, tasks))
            if size is not None:
                runs[-1]["disk_bytes_per_task"] = size() / (2 * tasks)  # each run stores 2 x tasks tasks
        finally:
            store.close()
    figures = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    figures["round_ops_per_s"] = 1e6 / figures["round_us"]
    return {"backend": name, **figures}


def sqlite_rows(tasks: int, rounds: int, synchronous: str, disk: bool = True) -> dict[str, Any]:
    from mcpserver.store import SqliteTaskStore

    folder = tempfile.mkdtemp(prefix="mcpserver-bench-")
    paths = []

    def open_store() -> TaskStore:
        paths.append(os.path.join(folder, f"tasks-{len(paths)}.db"))
        return SqliteTaskStore(paths[-1], synchronous=synchronous)

    def size() -> int:
        return sum(os.path.getsize(p) for p in (paths[-1], paths[-1] + "-wal") if os.path.exists(p))

    try:
        return measure(f"sqlite ({synchronous})", open_store, tasks, rounds, size if disk else None)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def postgres_rows(tasks: int, rounds: int) -> dict[str, Any]:
    import psycopg
    from mcpserver.store import PostgresTaskStore
    from pgserver import PostgresServer

    server = PostgresServer(durable=True).start()
    names: list[str] = []

    def open_store() -> TaskStore:
        names.append(f"bench_{len(names)}")
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {names[-1]}")
        return PostgresTaskStore(server.dsn.replace("/postgres?", f"/{names[-1]}?"))

    def size() -> int:
        with psycopg.connect(server.dsn.replace("/postgres?", f"/{names[-1]}?")) as connection:
            return int(connection.execute("SELECT pg_total_relation_size('mcpserver_tasks')").fetchone()[0])

    try:
        return measure("postgresql", open_store, tasks, rounds, size)
    finally:
        server.stop()


def table(rows: list[dict[str, Any]], memory: dict[str, float]) -> str:
    lines = ["| backend | round (create+finish+get) | rounds/s | create | finish | get | disk per task |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        disk = f"{row['disk_bytes_per_task']:.0f} B" if "disk_bytes_per_task" in row else "-"
        lines.append(f"| {row['backend']} | {row['round_us']:.0f} µs | {row['round_ops_per_s']:.0f} | "
                     f"{row['create_us']:.0f} µs | {row['finish_us']:.0f} µs | {row['get_us']:.0f} µs | {disk} |")
    lines.append("")
    lines.append(f"MemoryTaskStore holds {memory['working_bytes']:.0f} B per working task and "
                 f"{memory['completed_bytes']:.0f} B per completed one (a {len(json.dumps(RESULT))}-byte result).")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks per operation and run (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="runs per backend; the median is shown (default 5)")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    rows = [measure("memory", MemoryTaskStore, options.tasks, options.rounds),
            sqlite_rows(options.tasks, options.rounds, "NORMAL"),
            # An fsync per commit: fewer tasks, and no disk figure (the same rows; fixed costs would dominate).
            sqlite_rows(max(options.tasks // 10, 50), options.rounds, "FULL", disk=False)]
    if not options.no_postgres:
        rows.append(postgres_rows(options.tasks // 4, options.rounds))
    memory = memory_per_task(options.tasks * 5)
    print(json.dumps({"rows": rows, "memory": memory}, indent=2) if options.json else table(rows, memory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
