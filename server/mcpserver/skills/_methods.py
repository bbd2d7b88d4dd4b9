"""The Skills extension's methods (SEP-2640): skills/list, skills/get and resources/directory/read.

mcpserver._methods reaches them, on first use, for a server that serves skills; each takes the server's Catalog
and answers from it after a refresh (the files may have changed). skills/list and skills/get are cacheable
results (ttlMs, cacheScope); so is a directory listing here, which the spec leaves a plain paginated result but
the TypeScript SDK's SkillsClient refuses without them (a result may carry more). A URI that names no skill,
or no directory, is -32602.
"""

from __future__ import annotations

import base64

from ..errors import InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._catalog import Catalog

__all__ = ["get_skill", "list_skills", "read_directory"]


def list_skills(catalog: Catalog, server: Any, params: dict[str, Any], context: Any) -> dict[str, Any]:
    return _cacheable(server, _page(server, params, "skills", [skill.entry for skill in catalog.skills()]))


def get_skill(catalog: Catalog, server: Any, params: dict[str, Any], context: Any) -> dict[str, Any]:
    uri = _uri(params)
    skill = catalog.skill(uri)
    if skill is None:
        raise InvalidParams(f"No skill is served at {uri}", data={"uri": uri})
    return _cacheable(server, {"skill": skill.entry})


def read_directory(catalog: Catalog, server: Any, params: dict[str, Any], context: Any) -> dict[str, Any]:
    uri = _uri(params)
    children = catalog.directory(uri)
    if children is None:
        reason = "is not a directory resource" if catalog.serves(uri) else "names no directory resource"
        raise InvalidParams(f"{uri} {reason}", data={"uri": uri})
    return _cacheable(server, _page(server, params, "resources", children, within=uri))


def _uri(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams('Invalid params: "uri" must be a string')
    return uri


def _cacheable(server: Any, result: dict[str, Any]) -> dict[str, Any]:
    result["ttlMs"] = server.ttl_ms
    result["cacheScope"] = server.cache_scope
    return result


def _page(server: Any, params: dict[str, Any], key: str, items: list[Any], within: str = "") -> dict[str, Any]:
    """One page of `items`, as the base list methods page (an opaque cursor, server.page_size a page); an entry
    is never split. `within` ties a directory's cursor to that directory."""
    kind = f"{key}:{within}"
    start = 0
    cursor = params.get("cursor")
    if cursor is not None:
        if not isinstance(cursor, str):
            raise InvalidParams("Invalid params: cursor must be a string")
        try:
            named, _, offset = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8").rpartition("@")
            start = int(offset) if named == kind else -1
        except ValueError:  # UnicodeError and binascii.Error are ValueErrors
            start = -1
        if not 0 < start < len(items):
            raise InvalidParams("Invalid cursor")
    end = start + server.page_size
    result: dict[str, Any] = {key: items[start:end]}
    if end < len(items):
        result["nextCursor"] = base64.urlsafe_b64encode(f"{kind}@{end}".encode()).decode("ascii")
    return result
