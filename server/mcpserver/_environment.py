"""Every environment variable the SDK reads, in one place (the modules that use them say how)."""

TOKEN = "MCPSERVER_TOKEN"  # the HTTP bearer token; scrubbed from the server's environment and its tools'
TOKEN_FILE = "MCPSERVER_TOKEN_FILE"  # create_app: the file whose first line is the token
TOKEN_FD = "MCPSERVER_TOKEN_FD"  # set only for the process that replaces this one, carrying the token on a pipe
STATE_KEY = "MCPSERVER_STATE_KEY"  # the requestState sealing key, shared by replicas; never passed to programs
STATE_KEYS = "MCPSERVER_STATE_KEYS"  # or several, comma-separated: the first seals, all open (key rotation)
STATE_KEYS_FILE = "MCPSERVER_STATE_KEYS_FILE"  # or a file of them, one a line: the first seals, all open
RUN_MARK = "MCPSERVER_RUN"  # carried by every program a command tool starts, to find its leftovers
NO_INIT = "MCPSERVER_NO_INIT"  # as PID 1, do not act as init
GENERIC_ERRORS = "MCPSERVER_GENERIC_ERRORS"  # 1: unexpected failures reach the client as an id, their detail the log
METRICS_DIR = "MCPSERVER_METRICS_DIR"  # create_app(metrics=True): the directory gunicorn's workers combine figures in
