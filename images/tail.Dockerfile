# Shared by every family: matrix/build.py appends this file to the family's recipe (images/<recipe>/Dockerfile),
# whose last stage is `python` (the base plus its Python, with ENV MCP_PYTHON naming the interpreter).

# --- user: the user the server runs as, written into /etc/passwd and /etc/group directly: the same on glibc
# and on busybox, with or without useradd.
FROM python AS user
RUN set -eu; \
    grep -q '^mcp:' /etc/group || echo 'mcp:x:10001:' >> /etc/group; \
    grep -q '^mcp:' /etc/passwd || echo 'mcp:x:10001:10001::/home/mcp:/usr/sbin/nologin' >> /etc/passwd; \
    mkdir -p /home/mcp; chown 10001:10001 /home/mcp; chmod 755 /home/mcp

# --- runtime: what a user ships ------------------------------------------------------------------------
FROM user AS runtime
# The .pth line puts /opt/mcpserver on the interpreter's default sys.path (also under `python -I`). It
# comes before the code, so a code change does not rebuild it.
RUN set -eu; \
    site="$("$MCP_PYTHON" -I -c 'import site; print(site.getsitepackages()[0])')"; \
    mkdir -p "$site"; echo /opt/mcpserver > "$site/mcpserver.pth"
COPY server/mcpserver /opt/mcpserver/mcpserver
COPY server/examples /opt/mcpserver/examples
# Compiled here: the server runs as a user who cannot write __pycache__, and every start would
# otherwise compile it again (measured: 68 -> 53 ms to the first answer on bookworm, 110 -> 84 on musl).
RUN "$MCP_PYTHON" -m compileall -q /opt/mcpserver
# PID 1 is the cell's Python in the end, so `docker stop`'s SIGTERM reaches the server itself. The kernel throws
# away a signal sent to PID 1 while it has no handler for it, and the interpreter takes some 20 ms (more under
# load) to reach the server's first line, which holds SIGTERM and SIGINT for its init (mcpserver._pid1). So the
# first program of the container is GNU env (coreutils 8.31 and later), which blocks them before anything else
# runs, as docs/guides/embedding.md's recipe does; a shell in front of it would be PID 1 for a moment with no
# handler, and a stop then was lost (137 after docker's grace, seen under load). mcpserver-hold is that env,
# checked by name here (a multi-call coreutils picks its program by name); where env cannot block signals
# (busybox's), a script that drops the option and execs the rest, and the window stays (docs/platforms/musl.md).
RUN set -eu; mkdir -p /usr/local/bin; hold=/usr/local/bin/mcpserver-hold; \
    ln -s "$(command -v env)" "$hold"; \
    if ! "$hold" --block-signal=TERM true 2>/dev/null; then \
        rm "$hold"; printf '#!/bin/sh\nshift\nexec "$@"\n' > "$hold"; chmod 755 "$hold"; \
    fi; ls -l "$hold"
USER mcp
WORKDIR /home/mcp
ENTRYPOINT ["/usr/local/bin/mcpserver-hold", "--block-signal=TERM,INT", \
            "/bin/sh", "-c", "exec \"$MCP_PYTHON\" -m mcpserver \"$@\"", "mcpserver"]
CMD ["/opt/mcpserver/examples/demo.py"]

# --- test: the runtime plus the suites; pytest is mounted read-only at /opt/pytest ---------------------
FROM runtime AS test
ENV PYTHONPATH=/opt/pytest PYTHONDONTWRITEBYTECODE=1
COPY lab /lab
WORKDIR /lab
ENTRYPOINT ["/bin/sh", "-c", "exec \"$MCP_PYTHON\" -m pytest \"$@\"", "pytest"]
CMD ["tests", "-p", "no:cacheprovider"]

# --- install: the user and the suites without the embedded server, for the install suite, which installs the
# built wheel into it with pip as users do (matrix/install.py) and tests that copy.
FROM user AS install
# pip below Python 3.10 needs distutils, which Debian and Ubuntu ship apart (python3-distutils, which their
# own python3-pip depends on): installed here where the interpreter lacks it and apt is there to install it.
RUN set -eu; \
    if "$MCP_PYTHON" -c 'import sys; sys.exit(sys.version_info >= (3, 10))' \
            && ! "$MCP_PYTHON" -c 'import distutils.cmd' 2>/dev/null && command -v apt-get >/dev/null; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-distutils; \
        apt-get clean; rm -rf /var/lib/apt/lists/*; \
    fi
ENV PYTHONPATH=/opt/pytest PYTHONDONTWRITEBYTECODE=1
COPY lab /lab
WORKDIR /lab
USER mcp
