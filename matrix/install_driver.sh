# The install suite's driver (matrix/install.py), run by `sh -c` in a cell's install image or on the host:
# install the built wheel as users do, then run tests/install with the installed copy.
#   $1     the wheel's file name; its bytes come on stdin
#   $2...  pytest's arguments (--junitxml=..., -v, ...)
#   MCP_PYTHON   the cell's interpreter      MCPLAB_WORK  an empty folder to install into
#   MCPLAB_PIP   pip's own wheel, for Pythons without ensurepip    PYTHONPATH  pytest's folder
# POSIX sh: it runs under dash, bash and busybox ash alike.
set -eu
wheel_name=$1
shift
mkdir -p "$MCPLAB_WORK"
wheel=$MCPLAB_WORK/$wheel_name
cat > "$wheel"
options="--no-index --no-cache-dir --disable-pip-version-check --no-warn-script-location --quiet"
if "$MCP_PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    # A virtual environment with pip in it, as `python -m venv` makes it (ensurepip's own wheel: offline).
    way=venv
    "$MCP_PYTHON" -m venv "$MCPLAB_WORK/venv"
    python=$MCPLAB_WORK/venv/bin/python
    scripts=$MCPLAB_WORK/venv/bin
    "$python" -m pip install $options "$wheel"
elif ! "$MCP_PYTHON" -c 'import zlib' 2>/dev/null; then
    # The lab reads this line (matrix/build.py: UNAVAILABLE_MARK): this cell cannot have the suite.
    echo "mcplab-unavailable: $MCP_PYTHON has no zlib and no ensurepip: pip cannot even read a wheel" \
        "(a zip archive compressed with deflate), its own included"
    exit 3
else
    # No ensurepip (Debian's python3.X without python3.X-venv, a trimmed build): pip run from its own wheel,
    # into the user site of a user base of our own. Every process of this interpreter sees that folder
    # without PYTHONPATH (tests start servers with PYTHONPATH replaced), ahead of the system's site-packages
    # and so of an image's embedded copy; --target also leaves PEP 668's externally-managed marker alone.
    way=pip-wheel
    export PYTHONUSERBASE="$MCPLAB_WORK/user"
    python=$MCP_PYTHON
    target=$("$python" -c 'import site; print(site.getusersitepackages())')
    scripts=$target/bin
    PYTHONPATH='' "$python" "$MCPLAB_PIP/pip" install $options --target "$target" "$wheel"
fi
installed=$("$python" -c 'import mcpserver; print(mcpserver.__file__)')
echo "mcplab-install: $way: mcpserver from $installed"
export MCPLAB_INSTALLED="$way" MCPLAB_SCRIPTS="$scripts" MCPLAB_WHEEL="$wheel"
exec "$python" -m pytest tests/install "$@"
