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
    for name in mcpserver.__all__:
        assert hasattr(mcpserver, name), name
