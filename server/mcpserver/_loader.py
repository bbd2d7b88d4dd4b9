"""Turn a TARGET on the command line into a Server: `module:attribute`, a `.py` file, or a manifest."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Optional

from ._server import Server
from .errors import ConfigError

__all__ = ["load_target"]


def load_target(target: str) -> Server:
    """Load the server TARGET names, or raise ConfigError saying why not."""
    location, _, attribute = target.partition(":") if not os.path.exists(target) else (target, "", "")
    path = _existing_file(location)
    if path is not None and path.endswith(".json"):
        return Server.from_manifest(path)
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
    return _server_in(module, attribute, target)


def _existing_file(location: str) -> Optional[str]:
    for candidate in (location, location + ".py", location + ".json"):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _load_file(path: str) -> ModuleType:
    if not path.endswith(".py"):
        raise ConfigError(f"cannot load {path!r}: a target file is a .py module or a .json manifest")
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # so the file can import its neighbours
    sys.modules[name] = module
    spec.loader.exec_module(module)
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
