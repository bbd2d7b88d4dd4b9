"""No class in the package has more than MAX_METHODS methods (issue 33, "One clear house"): a class past
that does several things, and its roles should be classes of their own, each with its own state. And no function
is longer than MAX_FUNCTION_LINES (issue 49), as the lab's are held (tests/lab/test_layers.py).

Neither bound decouples anything by itself: a class split into parts that hold one another keeps its coupling
(the layering test, which counts imports for type checkers too, is the guard for that)."""

import ast
import os

import mcpserver

PACKAGE_DIR = os.path.dirname(os.path.abspath(mcpserver.__file__))
MAX_METHODS = 25
MAX_FUNCTION_LINES = 50  # from the def to the last line, docstring included
# The test client: one method per kind of request a test may send, so tests read like the protocol. The
# frontmatter parser: one method per production of the YAML subset it reads, all over the same cursor.
EXCEPTIONS = frozenset({"mcpserver.testing.Client", "mcpserver.skills._frontmatter._Parser"})
# Temporary, each with the reason; the last test fails once an entry is no longer needed.
BEING_SPLIT: dict = {}


def sources(root: str = PACKAGE_DIR) -> dict:
    """Every module's source by dotted name ("mcpserver.store._store"; a folder's __init__ is the folder)."""
    found = {}
    for folder, _, files in os.walk(root):
        inside = os.path.relpath(folder, root)
        package = "mcpserver" if inside == "." else "mcpserver." + inside.replace(os.sep, ".")
        for name in files:
            if name.endswith(".py"):
                module = package if name == "__init__.py" else f"{package}.{name[:-3]}"
                with open(os.path.join(folder, name), encoding="utf-8") as file:
                    found[module] = file.read()
    return found


def method_counts(modules: dict) -> dict:
    """{"module.Class": how many def and async def its body holds} for every class, wherever it stands."""
    counts = {}
    for module, source in modules.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                methods = [item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
                counts[f"{module}.{node.name}"] = len(methods)
    return counts


def oversized(modules: dict, allowed=frozenset()) -> list:
    return sorted(f"{name} has {count} methods" for name, count in method_counts(modules).items()
                  if count > MAX_METHODS and name not in allowed)


def test_no_class_has_more_than_25_methods():
    assert oversized(sources(), EXCEPTIONS | set(BEING_SPLIT)) == []


def test_the_method_count_catches_a_class_of_26():
    methods = "".join(f"    def method_{index}(self):\n        pass\n" for index in range(25))
    wide = f"class Wide:\n{methods}    async def one_more(self):\n        pass\n"
    assert oversized({"mcpserver._wide": wide}) == ["mcpserver._wide.Wide has 26 methods"]
    assert oversized({"mcpserver._wide": f"class Wide:\n{methods}"}) == []  # 25 is the most, not too many
    inside = "def build():\n    " + wide.replace("\n", "\n    ")  # a class defined inside a function counts too
    assert oversized({"mcpserver._wide": inside}) == ["mcpserver._wide.Wide has 26 methods"]
    assert oversized({"mcpserver._wide": wide}, {"mcpserver._wide.Wide"}) == []


def test_every_listed_class_still_needs_its_place():
    counts = method_counts(sources())
    for name in EXCEPTIONS | set(BEING_SPLIT):
        assert counts.get(name, 0) > MAX_METHODS, f"{name} is within {MAX_METHODS} methods (or gone): unlist it"


def long_functions(modules: dict, limit: int = MAX_FUNCTION_LINES) -> list:
    """Every function or method (nested ones included) longer than `limit` lines."""
    found = []
    for module, source in modules.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{module}:{node.lineno} {node.name} is {lines} lines")
    return sorted(found)


def test_no_function_is_over_50_lines():
    assert long_functions(sources()) == []


def test_the_length_check_sees_a_function_of_51_lines():
    body = "".join(f"    x{index} = {index}\n" for index in range(49))
    assert long_functions({"mcpserver._long": f"def f():\n{body}    return x0\n"}) == [
        "mcpserver._long:1 f is 51 lines"]
    assert long_functions({"mcpserver._long": f"def f():\n{body}"}) == []  # 50 is the most, not too many
    nested = "class C:\n    def m(self):\n" + body.replace("    ", "        ") + "        return 1\n        return 2\n"
    assert long_functions({"mcpserver._long": nested}) == ["mcpserver._long:2 m is 52 lines"]
