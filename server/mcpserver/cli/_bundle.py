"""`mcpserver bundle TARGET`: an MCP Bundle (.mcpb), the zip that desktop clients install with one click.

The format is anthropics/mcpb's (its MANIFEST.md; tests/bundle checks every example's bundle with the
official `mcpb validate` and `mcpb info`):

- manifest.json at the root, in MANIFEST_VERSION, with server.type "python";
- server/lib/mcpserver/: this package, so the bundle needs nothing but a Python 3.9+ on the user's PATH
  (a server of standard library only is the one kind of Python server that bundles portably: the
  format cannot carry compiled dependencies);
- server/TARGET (its file, or its top-level package) and whatever --include names, beside it, and the
  directories of the skills it serves, where they are beside it (so the same relative path finds them);
- server/LAUNCHER, the entry point: it puts lib/ first on sys.path and serves TARGET over stdio;
- user_config: what TARGET declares it needs from the user (USER_CONFIG_ATTRIBUTE in a .py module,
  "userConfig" in a manifest), keyed by environment variable: the client asks at install time and
  starts the server with each answer in its variable.
"""

from __future__ import annotations

import json
import os
import sys

from .. import _environment
from .._loader import load_target_source
from .._wire import SKILLS_EXTENSION
from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType
    from typing import Any, Optional

    from .._server import Server

__all__ = ["LAUNCHER", "MANIFEST_VERSION", "USER_CONFIG_ATTRIBUTE", "bundle_manifest", "write_bundle"]

MANIFEST_VERSION = "0.3"  # MANIFEST.md's "current version"; 0.4 adds only the experimental "uv" server type
LAUNCHER = "mcpb_launch.py"
USER_CONFIG_ATTRIBUTE = "MCPB_USER_CONFIG"
# darwin: POSIX as Linux is (the lab tests Linux only); not win32: command tools need process groups.
PLATFORMS = ["darwin", "linux"]
# The SDK's own variables: a user's answer must not become the token, its file or the run mark.
RESERVED = {_environment.TOKEN, _environment.TOKEN_FILE, _environment.TOKEN_FD, _environment.RUN_MARK}
FIELDS = {"type", "title", "description", "required", "default", "multiple", "sensitive", "min", "max"}
TYPES = ("string", "number", "boolean", "directory", "file")
SKIPPED = ("__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache")

LAUNCHER_SOURCE = '''"""Serve this bundle's MCP server over stdio, with the mcpserver package bundled in lib/."""
import os
import sys

if sys.version_info < (3, 9):
    sys.exit("this MCP server needs Python 3.9 or newer; python3 here is " + sys.version.split()[0])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))  # before site-packages: the bundled copy, whatever is installed

from mcpserver.__main__ import main  # noqa: E402

sys.exit(main([{target}]))
'''


def write_bundle(target: str, output: Optional[str], *, author: Optional[str] = None,
                 include: Iterable[str] = ()) -> int:
    """Write TARGET's bundle to `output` (default NAME-VERSION.mcpb), with the existing files or folders
    `include` names beside TARGET; say what went in."""
    server, source = load_target_source(target)
    files, launched = _target_files(target, source)
    files += _skill_files(server, target, files[0])
    for path in include:
        files += _tree(path, "server/" + os.path.basename(os.path.normpath(path)))
    manifest = bundle_manifest(server, source, author=author)
    output = output or f"{server.name}-{server.version}.mcpb"
    count = _write_zip(output, manifest, files, LAUNCHER_SOURCE.format(target=launched))
    print(f"mcpserver: wrote {output}: {server.name} {server.version}, {len(manifest.get('tools', []))} tools, "
          f"{count} files; a desktop client (Claude for macOS) installs it when it is opened")
    return 0


def bundle_manifest(server: Server, source: Any, *, author: Optional[str] = None) -> dict[str, Any]:
    """manifest.json for SERVER, defined by SOURCE (its module, or its manifest's JSON object)."""
    user_config = _user_config(source)
    command: dict[str, Any] = {"command": "python3", "args": [f"${{__dirname}}/server/{LAUNCHER}"]}
    if user_config:
        command["env"] = {name: f"${{user_config.{name}}}" for name in user_config}
    manifest: dict[str, Any] = {"manifest_version": MANIFEST_VERSION, "name": server.name}
    if server.title:
        manifest["display_name"] = server.title
    manifest.update({"version": server.version, "description": _description(server, source),
                     "author": {"name": author or _user_name()},
                     "server": {"type": "python", "entry_point": f"server/{LAUNCHER}", "mcp_config": command}})
    if server.instructions:
        manifest["long_description"] = server.instructions
    tools = [{"name": tool.name, **({"description": _first_paragraph(tool.description)} if tool.description
                                    else {})} for tool in server.tools.values()]
    if tools:
        manifest["tools"] = tools
    manifest["compatibility"] = {"platforms": PLATFORMS, "runtimes": {"python": ">=3.9"}}
    if user_config:
        manifest["user_config"] = user_config
    return manifest


def _description(server: Server, source: Any) -> str:
    doc = getattr(source, "__doc__", None) if not isinstance(source, dict) else None
    for text in (server.description, doc, server.instructions):
        if text and text.strip():
            return text.strip().splitlines()[0]
    return f"The {server.name} MCP server"


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _user_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "unknown"


def _user_config(source: Any) -> dict[str, Any]:
    """What TARGET declares it needs from the user, checked here: a typo would otherwise reach the user."""
    where = "the manifest's \"userConfig\"" if isinstance(source, dict) else USER_CONFIG_ATTRIBUTE
    declared = source.get("userConfig") if isinstance(source, dict) else getattr(source, USER_CONFIG_ATTRIBUTE,
                                                                                   None)
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise ConfigError(f"{where} must map environment variable names to what the user is asked")
    for name, asked in declared.items():
        if not (isinstance(name, str) and name and not name[0].isdigit() and
                all(c.isascii() and (c.isalnum() or c == "_") for c in name)):
            raise ConfigError(f"{where}: {name!r} is not an environment variable name")
        if name in RESERVED:
            raise ConfigError(f"{where}: {name} is mcpserver's own variable")
        if not isinstance(asked, dict) or not {"type", "title", "description"} <= set(asked):
            raise ConfigError(f"{where}[{name!r}] needs \"type\", \"title\" and \"description\"")
        unknown = sorted(set(asked) - FIELDS)
        if unknown:
            raise ConfigError(f"{where}[{name!r}]: unknown key {unknown[0]!r} (known: {', '.join(sorted(FIELDS))})")
        if asked["type"] not in TYPES:
            raise ConfigError(f"{where}[{name!r}]: type must be one of {', '.join(TYPES)}")
    return {name: dict(asked) for name, asked in declared.items()}


def _target_files(target: str, source: Any) -> tuple[list[tuple[str, str]], str]:
    """The files TARGET is made of, as (name in the bundle, path), and the launcher's TARGET expression."""
    location, colon, attribute = target.partition(":") if not os.path.exists(target) else (target, "", "")
    path = _existing(location)
    if path is not None:
        name = os.path.basename(path)
        if name == LAUNCHER:
            raise ConfigError(f"{target!r}: rename it; {LAUNCHER} is the bundle's own entry point")
        return [(f"server/{name}", path)], f"os.path.join(HERE, {name!r})" + (f" + {colon + attribute!r}"
                                                                            if attribute else "")
    return _module_files(location, source), repr(target)  # the launcher's folder is first on sys.path


def _skill_files(server: Server, target: str, first: tuple[str, str]) -> list[tuple[str, str]]:
    """The skills directories SERVER serves, at the place beside TARGET that they have in the source tree."""
    if SKILLS_EXTENSION not in server.capabilities().get("extensions", {}):
        return []
    name, source = first
    for _ in range(name.count("/")):  # from server/x/y.py back up to the folder server/ stands for
        source = os.path.dirname(source)
    files = []
    for root in server.component(SKILLS_EXTENSION, lambda: None).roots:
        relative = os.path.relpath(root, source)
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            raise ConfigError(f"{target!r} serves the skills in {root}, which is not beside it: a bundle carries "
                              "only what is in TARGET's folder (move them there)")
        files += _tree(root, "server" + ("" if relative == "." else "/" + relative.replace(os.sep, "/")))
    return files


def _existing(location: str) -> Optional[str]:
    for candidate in (location, location + ".py", location + ".json"):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _module_files(location: str, module: ModuleType) -> list[tuple[str, str]]:
    top = sys.modules.get(location.split(".")[0]) or module
    origin = getattr(top, "__file__", None)
    if origin is None:
        raise ConfigError(f"{location!r} has no file to bundle (a namespace package?); give its .py file")
    if hasattr(top, "__path__"):  # a package: all of it, as its modules import each other
        return _tree(os.path.dirname(origin), f"server/{top.__name__}")
    return [(f"server/{os.path.basename(origin)}", origin)]


def _tree(path: str, name: str) -> list[tuple[str, str]]:
    if os.path.isfile(path):
        return [(name, path)]
    found = []
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED)
        for file in sorted(files):
            if not file.endswith((".pyc", ".pyo")):
                found.append((name + "/" + os.path.relpath(os.path.join(folder, file), path).replace(os.sep, "/"),
                              os.path.join(folder, file)))
    return found


def _package_files() -> list[tuple[str, str]]:
    """(path inside the package with / separators, path on disk) of every module of mcpserver, its wings' too,
    and its type marker; compiled files and anything else left out."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for folder, subfolders, names in os.walk(package):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        inside = os.path.relpath(folder, package).replace(os.sep, "/")
        for name in sorted(names):
            if name.endswith(".py") or name == "py.typed":
                found.append((name if inside == "." else f"{inside}/{name}", os.path.join(folder, name)))
    return found


def _write_zip(output: str, manifest: dict[str, Any], files: list[tuple[str, str]], launcher: str) -> int:
    import zipfile

    entries = [("server/lib/mcpserver/" + name, path) for name, path in _package_files()]
    try:
        with zipfile.ZipFile(output, "w", _compression()) as bundle:
            bundle.writestr(_info("manifest.json"), json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
            bundle.writestr(_info(f"server/{LAUNCHER}"), launcher)
            for name, path in entries + files:
                with open(path, "rb") as file:
                    bundle.writestr(_info(name), file.read())
    except OSError as exc:
        raise ConfigError(f"cannot write {output}: {exc.strerror or exc}") from None
    return len(entries) + len(files) + 2


def _compression() -> int:
    """Deflate where this Python has zlib; stored otherwise (a Python built without it, musl's in the lab):
    a bundle that is only larger, never one that cannot be written."""
    import zipfile

    try:
        import zlib  # noqa: F401
    except ImportError:
        return zipfile.ZIP_STORED
    return zipfile.ZIP_DEFLATED


def _info(name: str) -> Any:
    """A member with a fixed date and plain permissions: the same inputs make the same bundle."""
    import zipfile

    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = _compression()
    info.external_attr = 0o644 << 16
    return info
