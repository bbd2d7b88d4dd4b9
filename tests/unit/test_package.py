"""The package's own promises: standard library only, and a protocol core that does no I/O."""

import ast
import os
import subprocess
import sys
import sysconfig

import mcpserver

PACKAGE_DIR = os.path.dirname(mcpserver.__file__)
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


# The package's layers, lowest first. A module imports only from layers below its own, never from
# its own layer or above, so every arrow points down: transports -> protocol -> registry. Lazy
# imports inside functions count too. __init__ is the facade and may import anything.
LAYERS = (
    ("_wire",),  # the wire's names: everything may spell them, nothing is below them
    ("errors", "_json", "_version", "content", "_signature", "inputs", "_log", "_environment",
     "_malloc", "_frontmatter"),
    ("_httpd",),  # the generic HTTP/1.1 server: serves any WSGI app, knows no MCP
    ("_context", "_validate", "_jose", "_state", "_completions", "_task", "_legacy"),
    ("_schema", "auth", "_subscriptions", "_task_store"),
    ("_tools", "_resources", "_prompts", "_task_sql"),
    ("_command", "_task_sqlite", "_task_postgres"),
    ("_server", "_task_open"),
    ("_loader", "_tasks"),
    ("protocol", "_session"),
    ("stdio", "http", "testing"),  # testing: the in-process client, a transport of sorts; never imports the others
    ("_serving",),  # the MCP serving policy: the app (http) on the generic server, with auth, TLS and limits
    ("_clients", "_bundle", "_dev"),  # the command line's config shapes, bundles and dev loop, below _cli
    ("_init", "_run", "_cli"),
    ("__main__",),
)


def package_imports(source: str) -> set:
    """The package modules a module's source imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mcpserver."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("mcpserver.")}
    return {name.split(".")[0] for name in found}


def layering_problems(sources: dict) -> list:
    layer = {module: index for index, modules in enumerate(LAYERS) for module in modules}
    problems = [f"{module} is in no layer: place it in LAYERS" for module in sources if module not in layer]
    for module, source in sources.items():
        for imported in sorted(package_imports(source)):
            if module in layer and imported in layer and layer[imported] >= layer[module]:
                problems.append(f"{module} (layer {layer[module]}) imports {imported} (layer {layer[imported]})")
    return problems


def test_imports_only_point_down_the_layers():
    sources = {}
    for name in os.listdir(PACKAGE_DIR):
        if name.endswith(".py") and name != "__init__.py":
            with open(os.path.join(PACKAGE_DIR, name), encoding="utf-8") as file:
                sources[name[:-3]] = file.read()
    assert layering_problems(sources) == []


def test_the_layer_rule_catches_an_upward_import():
    # The circle this rule broke: the registry once imported the transports to run itself.
    assert layering_problems({"_server": "def run(self):\n    from .stdio import serve_stdio\n"}) == [
        "_server (layer 7) imports stdio (layer 10)"]
    assert layering_problems({"stdio": "from . import http\n"}) == ["stdio (layer 10) imports http (layer 10)"]
    # The generic HTTP server sits low: MCP (the app, the registry) is above it, never inside it.
    assert layering_problems({"_httpd": "from .http import McpApp\n"}) == ["_httpd (layer 2) imports http (layer 10)"]


def defined_names(statements) -> set:
    """The names statements import, assign or define (a def in the run-time branch stands in for typing's)."""
    names = set()
    for sub in (sub for statement in statements for sub in ast.walk(statement)):
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
    for name in os.listdir(PACKAGE_DIR):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE_DIR, name), encoding="utf-8") as file:
                assert type_only_names_used_at_run_time(file.read()) == [], name


def test_the_type_only_check_finds_a_runtime_use():
    source = ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from typing import Any\n"
              "def f(x: Any) -> Any:\n    return x is Any\n")
    assert type_only_names_used_at_run_time(source) == ["Any"]
