"""The other process of the multi-process task store tests: it opens a store and runs the operations it
reads, one JSON line `[operation, [arguments...], {keywords}]` each, answering one JSON line each.

    python task_store_worker.py SPEC [OPTIONS_JSON]

`StoreProcess` drives one from a test; `run` is also what tests/task_store's WSGI app calls.
"""

import dataclasses
import json
import os
import subprocess
import sys

HERE = os.path.abspath(__file__)


def plain(value):
    """A store's answer as JSON: records and sweeps as dicts, exceptions by class name and message."""
    if dataclasses.is_dataclass(value):
        shown = dataclasses.asdict(value)
        if hasattr(value, "detailed"):
            shown["detailed"] = value.detailed()
        return shown
    return value


def run(store, operation, arguments=(), keywords=None):
    try:
        return {"ok": plain(getattr(store, operation)(*arguments, **(keywords or {}))), "pid": os.getpid()}
    except Exception as error:
        code = getattr(error, "code", None)
        return {"error": type(error).__name__, "message": str(error), "code": code, "pid": os.getpid()}


class StoreProcess:
    """A child process holding a store; `call` runs one operation there and returns its answer."""

    def __init__(self, spec, **options):
        self.process = subprocess.Popen([sys.executable, HERE, spec, json.dumps(options)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.process.pid
        ready = self.process.stdout.readline()
        if not ready:
            raise RuntimeError(f"the store process ended at start (status {self.process.wait()})")
        self.opened = json.loads(ready)

    def call(self, operation, *arguments, **keywords):
        self.process.stdin.write(json.dumps([operation, list(arguments), keywords]) + "\n")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the store process ended (status {self.process.wait()})")
        return json.loads(line)

    def ok(self, operation, *arguments, **keywords):
        answer = self.call(operation, *arguments, **keywords)
        assert "ok" in answer, answer
        return answer["ok"]

    def close(self):
        try:
            self.process.stdin.close()  # end of input: the process closes its store and exits
        except BrokenPipeError:  # it was killed
            pass
        self.process.wait(30)
        self.process.stdout.close()


def _create_after(barrier, results, spec, count, limit):
    from mcpserver.store import TaskLimitReached
    from mcpserver.tasks import Tasks, open_task_store

    store = Tasks(open_task_store(spec, max_tasks_per_owner=limit))
    created = 0
    barrier.wait(60)  # every process opened its store: now all create at once
    for _ in range(count):
        try:
            store.create("the-same-client")
            created += 1
        except TaskLimitReached:
            pass
    store.close()
    results.put(created)


def race_creates(spec, processes=4, count=60, limit=100):
    """How many tasks `processes` processes, creating `count` each at the same moment for one owner
    with the given limit, managed to create in all."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    started = [context.Process(target=_create_after, args=(barrier, results, spec, count, limit))
               for _ in range(processes)]
    for process in started:
        process.start()
    created = [results.get(timeout=120) for _ in started]
    for process in started:
        process.join(30)
    return created


def main():
    from mcpserver.tasks import Tasks, open_task_store

    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    try:
        store = Tasks(open_task_store(sys.argv[1], **options))
    except Exception as error:
        print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
        return 1
    print(json.dumps({"ok": "opened", "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        operation, arguments, keywords = json.loads(line)
        print(json.dumps(run(store, operation, arguments, keywords)), flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
