"""A stdio tap: run a server, pass its stdin and stdout through unchanged, and log every line both ways.

    python tap.py LOG COMMAND [ARGS...]

A client that is given `python tap.py LOG python -m mcpserver demo.py` as its server command sees
the server exactly as it is, and LOG gets one JSON line per message, {"to": "server" | "client",
"message": ...}, so a test can read what a client that reports little (the Inspector's CLI) really
negotiated. The server's stderr is the tap's own. The tap exits with the server's status, and closes
the server's stdin when its own closes (a client's way to end a stdio session).
"""

import json
import signal
import subprocess
import sys
import threading


def main(argv):
    log_path, *command = argv  # no "--": a client's own option parser may take it (the Inspector's does)
    assert command, __doc__
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 (open until both directions are done)

    def note(to, raw):
        try:
            message = json.loads(raw)
        except ValueError:
            message = {"unparsed": raw.decode("utf-8", "replace")}
        with lock:
            log.write(json.dumps({"to": to, "message": message}) + "\n")
            log.flush()

    def to_server():
        for raw in sys.stdin.buffer:
            note("server", raw)
            try:
                server.stdin.write(raw)
                server.stdin.flush()
            except BrokenPipeError:
                break
        try:
            server.stdin.close()
        except BrokenPipeError:
            pass

    # A client that stops a server by signal stops the server, not only the tap in front of it.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, frame: server.send_signal(number))
    threading.Thread(target=to_server, daemon=True).start()
    for raw in server.stdout:
        note("client", raw)
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
    code = server.wait()
    log.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
