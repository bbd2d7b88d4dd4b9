"""The package's own promises: standard library only, and a protocol core that does no I/O."""

import ast
import os
import re
import subprocess
import sys
import sysconfig

import mcpserver
import pytest

PACKAGE_DIR = os.path.dirname(mcpserver.__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IO_MODULES = {"socket", "select", "selectors", "subprocess", "asyncio", "http", "wsgiref", "socketserver", "ssl"}

LIST_NEW_MODULES = """
import json, pkgutil, sys
before = set(sys.modules)
import {target}
{walk}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def new_modules(target, walk=False):
    walk_code = ("for m in pkgutil.walk_packages(mcpserver.__path__, 'mcpserver.'):\n    __import__(m.name)"
                 if walk else "")
    done = subprocess.run([sys.executable, "-c", LIST_NEW_MODULES.format(target=target, walk=walk_code)],
                          capture_output=True, text=True, check=True)
    return __import__("json").loads(done.stdout)


def is_stdlib(name):
    """Listed as standard library, or living in the interpreter's own library directories.

    Location matters too: 3.9 has no stdlib_module_names, and 3.15's traceback imports
    _missing_stdlib_info, a generated stdlib file the list does not name.
    """
    top = name.split(".")[0]
    if top in getattr(sys, "stdlib_module_names", ()):
        return True
    module = sys.modules.get(top) or __import__(top)
    location = getattr(module, "__file__", None)
    paths = sysconfig.get_paths()
    return location is None or location.startswith((paths["stdlib"], paths["platstdlib"]))


def test_importing_every_module_loads_only_the_standard_library():
    outside = [m for m in new_modules("mcpserver", walk=True) if m.split(".")[0] != "mcpserver" and not is_stdlib(m)]
    assert outside == []


def test_importing_the_protocol_core_loads_no_io_module():
    loaded = {m.split(".")[0] for m in new_modules("mcpserver.protocol")}
    assert loaded & IO_MODULES == set()


def test_the_protocol_source_imports_no_io_and_never_prints():
    with open(os.path.join(PACKAGE_DIR, "protocol.py"), encoding="utf-8") as file:
        tree = ast.parse(file.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("print", "open", "input")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys":
            assert node.attr not in ("stdin", "stdout", "stderr")
    assert imported & (IO_MODULES | {"io", "os", "time", "threading"}) == set()


def test_the_package_ships_its_type_marker_and_a_version():
    assert os.path.isfile(os.path.join(PACKAGE_DIR, "py.typed"))
    assert mcpserver.__version__.count(".") == 2


def test_the_public_api_is_what_all_says():
    assert set(mcpserver._HOMES) == set(mcpserver.__all__)  # the lazy facade knows where each name lives
    for name in mcpserver.__all__:
        assert hasattr(mcpserver, name), name


# The package's layers, lowest first, by module (dotted below a folder: "store._store"; a folder's own name is
# its __init__). A module imports only from layers below its own, never from its own layer or above, so every
# arrow points down: command line -> transports -> protocol -> methods -> registry -> ground. Lazy imports
# inside functions count too, and so do imports for type checkers alone (they never run, but to read a module
# one reads what it names); importing a module of a folder imports the folder's __init__ first, so both must be
# below the importer. The root __init__ is the facade and may import anything.
LAYERS = (
    ("_wire",),  # the wire's names: everything may spell them, nothing is below them
    ("_forks",),  # the locks a fork re-makes in the child: every module that keeps a lock names it there
    ("errors", "_json", "_version", "content", "inputs", "_log", "_environment", "_malloc", "_latch", "_options"),
    ("schema._signature",), ("schema",),  # a function's parameters and docstring, without inspect
    # the generic HTTP/1.1 server, by role: it serves any WSGI app and knows no MCP (httpd._serve builds it)
    ("httpd._machine",),  # a connection's head and states, and every rule: events in, actions out; no socket,
    # thread or lock
    ("httpd._poller",),  # readiness: epoll, or poll() where there is none
    ("httpd._connection",),  # one client connection: its socket, what it still has to write, its machine
    ("httpd._unix",),  # a Unix socket's file: checked, made with its mode, removed
    ("httpd._accepting",),  # the door: the listening socket, newcomers, TLS
    ("httpd._workers", "httpd._loop"),  # the two drivers of the machines, which never import each other
    ("httpd._serve",),  # the door, the loop and the workers built; serve_app
    ("httpd",),
    ("_context", "schema._validate", "_state", "_completions", "_pypy", "_pid1", "_deadlines", "_ratelimit",
     "_scopes", "_semconv"),  # _scopes: an entry's OAuth scopes (auth/ checks the server's with it); _semconv:
    # OpenTelemetry's MCP conventions, which the spans and the metrics spell alike
    ("_tracing",),  # OpenTelemetry's spans, a middleware: the one module that imports opentelemetry, lazily
    ("_heartbeat",),  # a call's progress beats, on the deadline thread
    ("_middleware",),
    ("schema._derive", "_subscriptions"),
    # OAuth, the resource server's side: JOSE, the principal and refusals, fetching, validators, the entry point
    ("auth._jose",), ("auth._principal",), ("auth._fetch",), ("auth._validators",), ("auth._resource",), ("auth",),
    ("_tools", "_resources", "_prompts"),
    ("_command", "_apps"),
    # the Skills wing: a SKILL.md's frontmatter, the catalog of skills (whose files are resources), its methods
    ("skills._frontmatter",), ("skills._catalog",), ("skills._methods",), ("skills",),
    ("_server",),
    ("_loader",),
    # the shared store: a task as it is kept, legacy sessions' events, the sender, an SQL store's database; the bus
    # and the SQL session store over it; the stores and their backends, opening one, the server's own; the folder
    ("store._task", "store._events", "store._sender"), ("store._database",), ("store._bus", "store._sql_sessions"),
    ("store._store",),
    ("store._sql",),
    ("store._sqlite", "store._postgres"),
    ("store._open",), ("store._shared",), ("store",),
    # the Tasks wing, above the store: a record's rules, the operations over a store, the runner, its methods
    ("tasks._record",), ("tasks._operations",), ("tasks._runner",), ("tasks._methods",), ("tasks",),
    ("_methods",),  # what each method does, and the Reply
    # the legacy era: the revisions' shaping, the sessions, its dispatch; then the folder
    ("legacy._shaping",), ("legacy._sessions",), ("legacy._dispatch",), ("legacy",),
    ("protocol",),
    ("stdio", "testing"),  # testing: the in-process client, a transport of sorts; never imports the others
    # HTTP, the MCP part: answers (and the metrics and health routes), a legacy session's resumable channels,
    # streams, CORS and the Server Card, the legacy sessions, the app, serving it; then the folder
    ("http._options", "http._response", "http._metrics", "http._health"), ("http._channel",),
    ("http._stream", "http._cors", "http._card", "http._host"),
    ("http._sessions",), ("http._app",), ("http._serving",),
    ("http",),
    ("http.gunicorn_conf",),  # gunicorn's settings for the app, above the folder it names
    ("_run",),
    # the command line's other commands: client entries and bundles below the commands, dev beside them
    ("cli._clients", "cli._bundle"), ("cli._commands", "cli._dev"), ("cli",),
    ("__main__",),
)


def package_sources(root: str = PACKAGE_DIR) -> dict:
    """Every module of the package by dotted name ("protocol", "store._store", "store" for its __init__),
    the root __init__ left out."""
    sources = {}
    for folder, _, files in os.walk(root):
        inside = os.path.relpath(folder, root).replace(os.sep, ".").strip(".")
        for name in files:
            if not name.endswith(".py") or (name == "__init__.py" and not inside):
                continue
            dotted = inside if name == "__init__.py" else ".".join(filter(None, [inside, name[:-3]]))
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                sources[dotted] = file.read()
    return sources


def package_imports(source: str, module: str = "", folders: frozenset = frozenset()) -> set:
    """The package modules a module's source imports (dotted), wherever the import statement stands; with a
    folder's module, the folder's __init__ too. `folders`: the dotted names that are folders (packages), to
    resolve relative imports from a folder's __init__ and to know what `from . import x` names."""
    package = module if module in folders else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):  # imports for type checkers too: to read a module, one reads them
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package else []
            base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                found.add(target)
            for alias in node.names:  # `from . import x` and `from .folder import _module` name modules too
                candidate = ".".join(filter(None, [target, alias.name]))
                if not node.module or candidate in folders or target in folders:
                    found.add(candidate if (not node.module or target in folders) else target)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mcpserver."):
            found.add(node.module[len("mcpserver."):])
        elif isinstance(node, ast.Import):
            found |= {alias.name[len("mcpserver."):] for alias in node.names if alias.name.startswith("mcpserver.")}
    with_folders = set()
    for name in found - {""}:
        parts = name.split(".")
        with_folders |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    # A module inside a folder runs after the folder's __init__ started: its own folders are no import of its.
    return {name for name in with_folders if not (module + ".").startswith(name + ".") or name == module}


def layering_problems(sources: dict) -> list:
    layer = {module: index for index, modules in enumerate(LAYERS) for module in modules}
    folders = frozenset(name.rpartition(".")[0] for name in layer if "." in name) | {
        name for name in sources if any(other.startswith(name + ".") for other in sources)}
    problems = [f"{module} is in no layer: place it in LAYERS" for module in sources if module not in layer]
    for module, source in sources.items():
        for imported in sorted(package_imports(source, module, folders)):
            if imported == module or (module in folders and imported.startswith(module + ".")):
                continue  # a folder's __init__ gathers its own modules
            if module in layer and imported in layer and layer[imported] >= layer[module]:
                problems.append(f"{module} (layer {layer[module]}) imports {imported} (layer {layer[imported]})")
    return problems


def test_imports_only_point_down_the_layers():
    assert layering_problems(package_sources()) == []


def import_rings(sources: dict) -> list:
    """Every group of modules that import one another round a ring (a folder's __init__ imports its modules),
    type-only imports included: to read one module of a ring, you must read the others."""
    folders = frozenset(name for name in sources if any(other.startswith(name + ".") for other in sources))
    graph = {module: sorted(name for name in package_imports(source, module, folders) if name in sources
                            and name != module) for module, source in sources.items()}
    order, low, stack, rings = {}, {}, [], []

    def visit(module):  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            ring = [stack.pop()]
            while ring[-1] != module:
                ring.append(stack.pop())
            if len(ring) > 1:
                rings.append(sorted(ring))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(rings)


def test_no_modules_import_one_another_round_a_ring():
    assert import_rings(package_sources()) == []


def test_the_ring_check_sees_a_ring_of_imports_for_type_checkers():
    # The ring issue 49 broke: the tracing middleware and the middleware chain, each naming the other.
    sources = {"_middleware": "def f():\n    from ._tracing import traced\n",
               "_tracing": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ._middleware import Call\n"}
    assert import_rings(sources) == [["_middleware", "_tracing"]]
    assert layering_problems(sources) == [
        f"_tracing (layer {layer_of('_tracing')}) imports _middleware (layer {layer_of('_middleware')})"]
    # A folder's __init__ gathers its modules: one of them importing the folder's face is a ring too.
    assert import_rings({"legacy": "from ._dispatch import dispatch\n", "legacy._dispatch": "",
                         "protocol": "from . import legacy\n",
                         "legacy._shaping": "from ..protocol import Request\n"}) == []
    assert import_rings({"legacy": "from ._dispatch import dispatch\n",
                         "legacy._dispatch": "from ..protocol import Request\n",
                         "protocol": "def f():\n    from . import legacy\n"}) == [
        ["legacy", "legacy._dispatch", "protocol"]]


def layer_of(module: str) -> int:
    return next(index for index, modules in enumerate(LAYERS) if module in modules)


def test_the_layer_rule_catches_an_upward_import():
    # The circle this rule broke: the registry once imported the transports to run itself.
    assert layering_problems({"_server": "def run(self):\n    from .stdio import serve_stdio\n"}) == [
        f"_server (layer {layer_of('_server')}) imports stdio (layer {layer_of('stdio')})"]
    assert layering_problems({"stdio": "from . import http\n"}) == [
        f"stdio (layer {layer_of('stdio')}) imports http (layer {layer_of('http')})"]
    # The generic HTTP server sits low: MCP (the app, the registry) is above it, never inside it.
    assert layering_problems({"httpd._serve": "from ..http._app import McpApp\n"}) == [
        f"httpd._serve (layer {layer_of('httpd._serve')}) imports http (layer {layer_of('http')})",
        f"httpd._serve (layer {layer_of('httpd._serve')}) imports http._app (layer {layer_of('http._app')})"]


def test_the_layer_rule_reads_a_folders_relative_imports_and_counts_its_init():
    # From inside a wing: `..` is the package above it; importing a wing's module runs the wing's __init__.
    record = layer_of("tasks._record")
    assert layering_problems({"tasks._record": "from ._runner import TaskManager\n"}) == [
        f"tasks._record (layer {record}) imports tasks._runner (layer {layer_of('tasks._runner')})"]
    assert layering_problems({"tasks._record": "from ..protocol import Reply\n"}) == [
        f"tasks._record (layer {record}) imports protocol (layer {layer_of('protocol')})"]
    # The store is below the Tasks wing: it never reaches up into it.
    store = layer_of("store._store")
    assert layering_problems({"store._store": "from ..tasks import Tasks\n"}) == [
        f"store._store (layer {store}) imports tasks (layer {layer_of('tasks')})"]
    methods = layer_of("_methods")
    assert layering_problems({"_methods": "def f():\n    from .legacy import _dispatch\n"}) == [
        f"_methods (layer {methods}) imports legacy (layer {layer_of('legacy')})",
        f"_methods (layer {methods}) imports legacy._dispatch (layer {layer_of('legacy._dispatch')})"]
    assert layering_problems({"tasks": "from ._record import TaskNotFound\n"}) == []  # a folder gathers its own


def _outside_classes(node):
    """The node and what it holds, but not what a class defines (a Protocol's members are no module names)."""
    yield node
    if not isinstance(node, ast.ClassDef):
        for child in ast.iter_child_nodes(node):
            yield from _outside_classes(child)


def defined_names(statements) -> set:
    """The names statements import, assign or define (a def in the run-time branch stands in for typing's)."""
    names = set()
    for sub in (sub for statement in statements for sub in _outside_classes(statement)):
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
        elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, ast.Assign):
            names |= {target.id for target in sub.targets if isinstance(target, ast.Name)}
    return names


def type_only_names_used_at_run_time(source: str) -> list:
    """Names imported or defined only under `if TYPE_CHECKING:` but used outside annotations."""
    tree = ast.parse(source)
    type_only = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            type_only |= defined_names(node.body) - defined_names(node.orelse)
    annotations = set()
    for node in ast.walk(tree):
        for field in ("annotation", "returns"):
            value = getattr(node, field, None)
            if value is not None:
                annotations |= {id(sub) for sub in ast.walk(value)}
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            annotations |= {id(sub) for statement in node.body for sub in ast.walk(statement)}
    return sorted({node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in type_only
                   and id(node) not in annotations})


def test_names_kept_for_type_checkers_are_never_needed_at_run_time():
    # typing is not imported at run time (it costs start-up): a runtime use of one of its names would be a
    # NameError only on the code path that reaches it.
    for name, source in package_sources().items():
        assert type_only_names_used_at_run_time(source) == [], name


def test_the_type_only_check_finds_a_runtime_use():
    source = ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Any\n"
              "def f(x: Any) -> Any:\n    return x is Any\n")
    assert type_only_names_used_at_run_time(source) == ["Any"]
    # A Protocol's members are its own, not the module's: a local variable may share a member's name.
    protocol = ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Protocol\n"
                "    class Asked(Protocol):\n        def method(self) -> str: ...\n"
                "def f(asked: Asked) -> str:\n    method = asked.method()\n    return Asked.__name__ + method\n")
    assert type_only_names_used_at_run_time(protocol) == ["Asked"]


@pytest.mark.skipif(not os.path.isfile(os.path.join(ROOT, "pyproject.toml")), reason="no pyproject.toml beside tests/")
def test_every_folder_of_the_package_is_in_the_distribution():
    # setuptools takes only the packages pyproject names: a new wing left out would be missing from every wheel.
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as file:
        named = re.search(r'^packages = \[(.*?)\]', file.read(), re.M | re.S)
    assert named is not None
    folders = {"mcpserver." + name for name in package_sources() if "." not in name
               and os.path.isdir(os.path.join(PACKAGE_DIR, name))}
    assert set(re.findall(r'"([^"]+)"', named.group(1))) == {"mcpserver"} | folders


# What prose may name that is no module of ours: the wire's _meta field, PyPy's own JSON module.
NOT_OURS = ("_meta", "_pypyjson")
_NAMED = re.compile(r"(?<![\w.\"'/-])((?:mcpserver\.)?_?[a-z][a-z0-9_]*(?:\.(?:_?[a-z][a-z0-9_]*))*\.[A-Za-z_]\w*)"
                    r"(?![\w(])")


def _prose(source: str) -> list:
    """(line, text) of every docstring and comment of a module."""
    import io
    import tokenize

    found = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                found.append((node.body[0].lineno, docstring))
    return found


def _names_something(dotted: str) -> bool:
    """Whether mcpserver.<dotted> is a module of the package, or an attribute of one."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module("mcpserver." + ".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return hasattr(mcpserver, parts[0])


def _module_reference(named: str, modules: set) -> str:
    """What a dotted name in prose names below mcpserver, if it names a module of ours at all ("" if not)."""
    if named.startswith("mcpserver."):
        return named[len("mcpserver."):]
    first, last = named.split(".")[0], named.rsplit(".", 1)[1]
    if first in NOT_OURS or last in ("py", "md", "db", "json") or not (first.startswith("_") or first in modules):
        return ""
    return named


def stale_references(root: str = PACKAGE_DIR) -> list:
    """Modules (and their names) that docstrings and comments name and that do not exist: `mcpserver.x.y`,
    `module.name` of a module of the package (from the folder the text is in, or the top), `_module.name`."""
    stale = []
    modules = {name.split(".")[-1] for name in package_sources()} | set(package_sources())
    for folder, _, files in os.walk(root):
        inside = os.path.relpath(folder, root).replace(os.sep, ".").strip(".")
        for file_name in (name for name in files if name.endswith(".py")):
            with open(os.path.join(folder, file_name), encoding="utf-8") as file:
                texts = _prose(file.read())
            for line, text in texts:
                for match in _NAMED.finditer(text):
                    dotted = _module_reference(match.group(1), modules)
                    if dotted and not (inside and _names_something(f"{inside}.{dotted}")) \
                            and not _names_something(dotted):
                        stale.append(f"{os.path.join(inside, file_name)}:{line}: {match.group(1)}")
    return sorted(stale)


def test_docstrings_and_comments_name_only_modules_that_exist():
    # Nine such references outlived moves (issue 49), the registry's own docstring among them:
    # "`protocol.handle` answers for it", years after handle was gone.
    assert stale_references() == []


def test_the_stale_reference_check_sees_a_moved_module(tmp_path):
    (tmp_path / "mod.py").write_text('"""Answered by `protocol.handle`, kept in mcpserver._tasks; see _httpd.serve.\n\n'
                                     'Fine: `protocol.dispatch`, mcpserver.tasks.Tasks, the `_meta.ui` field."""\n')
    assert [entry.split(": ")[1] for entry in stale_references(str(tmp_path))] == [
        "_httpd.serve", "mcpserver._tasks", "protocol.handle"]
