"""MCP Apps (io.modelcontextprotocol/ui, SEP-1865, stable 2026-01-26): an HTML page a host shows in a sandboxed
iframe, and the tools linked to it.

Rules of this module:
- An app is a resource `ui://...` of mimeType text/html;profile=mcp-app whose contents are a whole HTML5
  document (it must open with <!DOCTYPE html>), given as text or read from a file at every read (so an edit
  shows without a restart). Its `_meta.ui` (csp, permissions, domain, prefersBorder) is on the listing and on
  the contents alike; omitted, a host applies its restrictive default (no network at all).
- A tool links to an app with `_meta.ui = {resourceUri, visibility}`; visibility is written out, ["model",
  "app"] unless said otherwise, and ["app"] hides the tool from the model (the host filters, the server lists).
  The app must be registered before the tool that links to it: a link to no app is refused at registration,
  as everything that could disagree in the registry is.
"""

from __future__ import annotations

import os

from ._resources import Resource
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Optional

__all__ = ["APP_MIME_TYPE", "app_resource", "tool_meta"]

APP_MIME_TYPE = "text/html;profile=mcp-app"
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
VISIBILITY = ("model", "app")


def app_resource(uri: str, html: Optional[str], path: Optional[str], *, name: Optional[str], title: Optional[str],
                 description: Optional[str], csp: Optional[dict[str, Any]], permissions: Optional[Iterable[str]],
                 domain: Optional[str], prefers_border: Optional[bool]) -> Resource:
    """The Resource of an app; ConfigError saying what is wrong with its arguments."""
    where = f"app {uri!r}"
    if not isinstance(uri, str) or not uri.startswith("ui://") or len(uri) == len("ui://"):
        raise ConfigError(f"{where}: an app's URI starts with ui:// (ui://weather/dashboard)")
    if (html is None) == (path is None):
        raise ConfigError(f"{where}: give its page as html=TEXT or path=FILE, one of them")
    if path is not None:
        path = os.path.abspath(os.fspath(path))
        try:
            with open(path, encoding="utf-8") as file:
                _check_document(file.read(), f"{where}: {path}")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}: cannot read {path}: {exc}") from None
    elif isinstance(html, str):
        _check_document(html, where)
    else:
        raise ConfigError(f"{where}: html is the page's text, not {type(html).__name__}")
    ui = _ui(where, csp, permissions, domain, prefers_border)
    meta = {"ui": ui} if ui else None

    def read() -> list[dict[str, Any]]:
        page = html
        if path is not None:
            with open(path, encoding="utf-8") as file:
                page = file.read()
        item: dict[str, Any] = {"uri": uri, "mimeType": APP_MIME_TYPE, "text": page}
        if meta is not None:
            item["_meta"] = meta
        return [item]

    return Resource(uri, read, name=name or uri[len("ui://"):], title=title, description=description,
                    mime_type=APP_MIME_TYPE, meta=meta)


def _ui(where: str, csp: Optional[dict[str, Any]], permissions: Optional[Iterable[str]], domain: Optional[str],
        prefers_border: Optional[bool]) -> dict[str, Any]:
    """The app's `_meta.ui` (csp, permissions, domain, prefersBorder), each checked; ConfigError saying which."""
    ui: dict[str, Any] = {}
    if csp is not None:
        ui["csp"] = _csp(csp, where)
    if permissions is not None:
        names = [permissions] if isinstance(permissions, str) else list(permissions)
        unknown = [p for p in names if p not in PERMISSIONS]
        if unknown:
            raise ConfigError(f"{where}: unknown permission {unknown[0]!r} (known: {', '.join(PERMISSIONS)})")
        ui["permissions"] = {permission: {} for permission in names}
    if domain is not None:
        if not isinstance(domain, str) or not domain:
            raise ConfigError(f"{where}: domain is a host name, as the host documents it")
        ui["domain"] = domain
    if prefers_border is not None:
        if not isinstance(prefers_border, bool):
            raise ConfigError(f"{where}: prefers_border is True or False")
        ui["prefersBorder"] = prefers_border
    return ui


def _check_document(text: str, where: str) -> None:
    if not text.lstrip("\ufeff \t\r\n").lower().startswith("<!doctype html"):
        raise ConfigError(f"{where}: an app is a whole HTML5 document: it opens with <!DOCTYPE html>")


def _csp(csp: Any, where: str) -> dict[str, list[str]]:
    if not isinstance(csp, dict):
        raise ConfigError(f"{where}: csp maps {', '.join(CSP_KEYS)} to lists of origins")
    for key, origins in csp.items():
        if key not in CSP_KEYS:
            raise ConfigError(f"{where}: unknown csp key {key!r} (known: {', '.join(CSP_KEYS)})")
        if not isinstance(origins, (list, tuple)) or not all(isinstance(o, str) and o for o in origins):
            raise ConfigError(f"{where}: csp[{key!r}] is a list of origins (https://api.example.com)")
    return {key: list(origins) for key, origins in csp.items()}


def tool_meta(meta: Optional[dict[str, Any]], ui: Optional[str], visibility: Optional[Iterable[str]],
              resources: dict[str, Resource], tool: str) -> Optional[dict[str, Any]]:
    """A tool's _meta with its link to an app (`ui`) and who may call it (`visibility`); ConfigError for a link
    to no registered app or a visibility that is not one."""
    if ui is None and visibility is None:
        return meta
    where = f"tool {tool!r}"
    linked: dict[str, Any] = {}
    if ui is not None:
        resource = resources.get(ui) if isinstance(ui, str) else None
        if resource is None or resource.mime_type != APP_MIME_TYPE:
            raise ConfigError(f"{where}: ui={ui!r} is no app of this server; register it first with "
                              f"server.app({ui!r}, html=...)")
        linked["resourceUri"] = ui
    seen = list(VISIBILITY) if visibility is None else [visibility] if isinstance(visibility, str) \
        else list(visibility)
    if not seen or any(v not in VISIBILITY for v in seen) or len(set(seen)) != len(seen):
        raise ConfigError(f"{where}: visibility lists who may call it, \"model\" and/or \"app\", not {visibility!r}")
    linked["visibility"] = seen
    return {**(meta or {}), "ui": linked}
