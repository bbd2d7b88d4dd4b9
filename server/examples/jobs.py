"""Jobs a client starts and then polls: long calls as tasks (the io.modelcontextprotocol/tasks extension).

    python -m mcpserver --store jobs.db server/examples/jobs.py                 # stdio, tasks in SQLite
    python -m mcpserver --http --store jobs.db server/examples/jobs.py          # HTTP; any process on the
                                                                                # host can poll them
    mcpserver call server/examples/jobs.py backup '{"seconds": 3}'              # follows the task to its end

`task="optional"` is the one change from a plain tool: a client that declared the extension gets a task
id at once and polls tasks/get (the tool's progress is the task's status message) or cancels it with
tasks/cancel, which stops the program (its process group is killed); a client that did not gets a
plain call. With `--store FILE` the tasks survive a restart, and a task whose server died reads
`failed`, saying so.
"""

from mcpserver import Context, Server

server = Server("jobs", "1.0.0", instructions="Long jobs run as tasks: start one, then poll it or cancel it.")

# A program that knows nothing of MCP: its "i/n" lines on stderr become the task's status.
server.command(
    "backup", ["sh", "-c", 'i=0; while [ "$i" -lt "$1" ]; do i=$((i + 1)); echo "$i/$1 copying" >&2; sleep 1; '
               'done; echo "backed up in $1 s"', "sh", "{seconds}"],
    description="Back up for `seconds` seconds (a slow shell loop, one step a second).",
    input_schema={"type": "object", "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": 3600}},
                  "required": ["seconds"], "additionalProperties": False},
    stdin="none", timeout=3700, progress=r"(?P<progress>\d+)/(?P<total>\d+) (?P<message>.*)", task="optional",
    annotations={"readOnlyHint": False, "openWorldHint": False})


@server.tool(task="optional")
def migrate(tables: int, ctx: Context) -> str:
    """Migrate `tables` tables, asking once before the destructive step.

    Args:
        tables: How many tables to migrate, 1 to 1000.
    """
    ctx.start_task()  # from here on this call is a task: the client polls it
    for table in range(1, tables + 1):
        ctx.progress(table, tables, f"table {table} copied")
        ctx.sleep(0.2)
    answer = ctx.elicit(f"Drop the {tables} old tables?", {
        "type": "object", "properties": {"drop": {"type": "boolean"}}, "required": ["drop"]}, key="drop-old")
    dropped = answer["action"] == "accept" and answer.get("content", {}).get("drop")
    return f"migrated {tables} tables" + ("; old tables dropped" if dropped else "; old tables kept")
