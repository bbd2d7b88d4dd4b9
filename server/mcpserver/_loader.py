"""Turn a TARGET on the command line into a Server: `module:attribute`, a `.py` file, or a manifest.

A manifest (docs/guides/manifest.md) is a server of command tools described in JSON. Its tool keys are the
Python options' manifest names in _tools.TOOL_OPTIONS and _command.CommandSpec.OPTIONS: one table,
read here; unknown keys are refused so a typo never silently drops a setting.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from . import _json
from ._server import DEFAULT_TTL_MS, Server
from ._version import __version__
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["load_manifest", "load_target", "load_target_source"]

# userConfig: what `mcpserver bundle` asks the user for at install time (docs/guides/clients.md); serving ignores it.
_MANIFEST_KEYS = {"$schema", "name", "version", "title", "description", "websiteUrl", "instructions", "ttlMs",
                  "cacheScope", "heartbeat", "tools", "skills", "userConfig"}


def load_target(target: str) -> Server:
    """Load the server TARGET names, or raise ConfigError saying why not."""
    return load_target_source(target)[0]


def load_target_source(target: str) -> tuple[Server, Any]:
    """The server TARGET names and what defined it: its module, or the manifest's JSON object."""
    location, _, attribute = target.partition(":") if not os.path.exists(target) else (target, "", "")
    path = _existing_file(location)
    if path is not None and path.endswith(".json"):
        manifest = _read_manifest(path)
        return _manifest_server(manifest, path), manifest
    try:
        module = _load_file(path) if path is not None else importlib.import_module(location)
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and location.startswith(exc.name):
            raise ConfigError(f"cannot load {target!r}: no file or module of that name") from None
        raise ConfigError(f"cannot load {target!r}: {exc}") from None
    except Exception as exc:
        raise ConfigError(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from None
    return _server_in(module, attribute, target), module


def _existing_file(location: str) -> Optional[str]:
    for candidate in (location, location + ".py", location + ".json"):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _load_file(path: str) -> ModuleType:
    if not path.endswith(".py"):
        raise ConfigError(f"cannot load {path!r}: a target file is a .py module or a .json manifest")
    # importlib.machinery, not importlib.util: on Python 3.9 the latter imports typing (via importlib.abc),
    # a start-up cost every server loaded from a file would pay.
    from importlib.machinery import ModuleSpec, SourceFileLoader

    name = os.path.splitext(os.path.basename(path))[0]
    loader = SourceFileLoader(name, path)
    spec = ModuleSpec(name, loader, origin=path)
    spec.has_location = True  # so the module gets __file__ (and __cached__), as an import would give it
    module = ModuleType(name)
    module.__spec__, module.__loader__, module.__file__ = spec, loader, path
    sys.path.insert(0, os.path.dirname(path))  # so the file can import its neighbours
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def _server_in(module: ModuleType, attribute: str, target: str) -> Server:
    if attribute:
        value = getattr(module, attribute, None)
        if callable(value) and not isinstance(value, Server):
            value = value()
        if not isinstance(value, Server):
            raise ConfigError(f"{target!r}: {attribute!r} is not an mcpserver.Server")
        return value
    found = [v for v in vars(module).values() if isinstance(v, Server)]
    named = getattr(module, "server", None)
    if isinstance(named, Server):
        return named
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(f"{target!r} defines no mcpserver.Server; create one, or name it with MODULE:ATTRIBUTE")
    raise ConfigError(f"{target!r} defines several servers; pick one with {target}:NAME")


def load_manifest(path: str) -> Server:
    """A server of command tools described by a JSON manifest (see docs/guides/manifest.md)."""
    return _manifest_server(_read_manifest(path), path)


def _read_manifest(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return _json.loads(file.read())
    except OSError as exc:
        raise ConfigError(f"cannot read manifest {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"manifest {path} is not valid JSON: {exc}") from None


def _manifest_server(manifest: Any, path: str) -> Server:
    from ._command import CommandSpec, command_tool  # subprocess and selectors: only for servers that run programs
    from ._tools import TOOL_OPTIONS

    where = f"manifest {path}"
    _only_keys(manifest, _MANIFEST_KEYS, where)
    if not isinstance(manifest.get("tools", [] if "skills" in manifest else None), list):
        raise ConfigError(f"{where}: \"tools\" must be an array of command tools")
    server = Server(manifest.get("name") or os.path.splitext(os.path.basename(path))[0],
                    str(manifest.get("version", __version__)), title=manifest.get("title"),
                    instructions=manifest.get("instructions"), ttl_ms=manifest.get("ttlMs", DEFAULT_TTL_MS),
                    cache_scope=manifest.get("cacheScope", "public"), heartbeat=manifest.get("heartbeat"),
                    description=manifest.get("description"), website_url=manifest.get("websiteUrl"))
    base_dir = os.path.dirname(os.path.abspath(path))
    keywords = {key: keyword for keyword, key in TOOL_OPTIONS.items() if key is not None}
    keywords.update({key: keyword for keyword, (key, _) in CommandSpec.OPTIONS.items()})
    for index, entry in enumerate(manifest.get("tools", [])):
        _only_keys(entry, {"name", "command", *keywords}, f"{where}, tools[{index}]")
        if "name" not in entry or "command" not in entry:
            raise ConfigError(f"{where}, tools[{index}]: every tool needs \"name\" and \"command\"")
        options = {keywords[key]: value for key, value in entry.items() if key in keywords}
        if isinstance(options.get("cwd"), str):
            options["cwd"] = os.path.join(base_dir, options["cwd"])
        server.add_tool(command_tool(entry["name"], entry["command"], base_dir=base_dir, **options))
    _manifest_skills(server, manifest.get("skills", []), base_dir, where)
    return server


def _manifest_skills(server: Server, skills: Any, base_dir: str, where: str) -> None:
    """"skills": directories, relative to the manifest, each a string or {"path": DIR, "prefix": PREFIX}."""
    if not isinstance(skills, list):
        raise ConfigError(f"{where}: \"skills\" must be an array of directories")
    for index, entry in enumerate(skills):
        if isinstance(entry, str):
            entry = {"path": entry}
        _only_keys(entry, {"path", "prefix"}, f"{where}, skills[{index}]")
        if not isinstance(entry.get("path"), str) or not isinstance(entry.get("prefix", ""), str):
            raise ConfigError(f"{where}, skills[{index}]: \"path\" is a directory and \"prefix\" a string")
        server.skills(os.path.join(base_dir, entry["path"]), entry.get("prefix", ""))


def _only_keys(entry: Any, allowed: set[str], where: str) -> None:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a JSON object")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})")
