"""The initialize-based revisions (2025-11-25 down to 2024-11-05), served beside 2026-07-28 (spec/LEGACY.md).

Rules of this module (pure: no I/O, no state; the transport holds a session's state):
- The era is chosen by how the client opens (LEGACY.md §1): `initialize` whose params carry a
  `protocolVersion` starts a legacy session, scoped to the stdio process or the HTTP session; a
  request with the modern `_meta` is served statelessly, in a legacy session too.
- Negotiation (§2.3): the client's revision when it is one served here, else the newest legacy one.
  The answer never names 2026-07-28, which has no handshake.
- What a revision lacks is never sent to its client (§11.2): `shape` strips it from every result
  and notification, from one internal model. Legacy results carry no resultType, ttlMs, cacheScope
  or serverInfo `_meta`.
- The session is a frozen value: the negotiated revision, the client's capabilities and its info.
  What changes over a session (log level, subscriptions, the server's own requests) is the
  transport's, kept in a LegacyPeer (mcpserver.legacy._sessions).
"""

from __future__ import annotations

from .._wire import LEGACY_VERSIONS
from ..errors import InvalidParams

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._context import Negotiated

__all__ = ["LEGACY_VERSIONS", "LOG_LEVELS", "LegacySession", "initialize", "opens_legacy", "shape",
           "shape_notification", "shape_request"]

# RFC 5424's severities, in order (LEGACY.md §6).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_V2025_03 = "2025-03-26"
_V2025_06 = "2025-06-18"
_V2025_11 = "2025-11-25"


class LegacySession:
    """What an `initialize` negotiated: fixed for the session's life."""

    __slots__ = ("client_capabilities", "client_info", "revision")
    revision: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]

    def __init__(self, revision: str, client_capabilities: dict[str, Any], client_info: dict[str, Any]):
        object.__setattr__(self, "revision", revision)
        object.__setattr__(self, "client_capabilities", client_capabilities)
        object.__setattr__(self, "client_info", client_info)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LegacySession is immutable")

    def __repr__(self) -> str:
        return f"LegacySession({self.revision!r}, {self.client_capabilities!r}, {self.client_info!r})"

    def at_least(self, revision: str) -> bool:
        """Whether the negotiated revision is `revision` or newer (dates compare as strings)."""
        return self.revision >= revision


def opens_legacy(method: str, params: dict[str, Any]) -> bool:
    """Whether a request is a legacy client's `initialize`: its version is a param, not modern `_meta`."""
    return method == "initialize" and "protocolVersion" in params


def negotiate(requested: Any) -> str:
    if not isinstance(requested, str):
        raise InvalidParams('Invalid params: initialize needs "protocolVersion", a string',
                            data={"supported": list(LEGACY_VERSIONS), "requested": requested})
    return requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]


def initialize(params: dict[str, Any], info: dict[str, Any], capabilities: dict[str, Any],
               instructions: Any) -> tuple[dict[str, Any], LegacySession]:
    """The InitializeResult for `params` and the session it opens. `info` is the server's Implementation,
    `capabilities` what it offers in 2026-07-28 terms."""
    revision = negotiate(params.get("protocolVersion"))
    client_capabilities = params.get("capabilities")
    client_info = params.get("clientInfo")
    session = LegacySession(revision, _client_capabilities(client_capabilities, revision),
                            client_info if isinstance(client_info, dict) else {})
    result: dict[str, Any] = {"protocolVersion": revision, "capabilities": _capabilities(capabilities, session),
                              "serverInfo": _implementation(info, session)}
    if instructions:
        result["instructions"] = instructions
    return result, session


# Client capabilities that came with a later revision (LEGACY.md §3). A client may declare one in an older
# session (the SDKs' 1.x clients declare elicitation whatever revision they ask for); it is not negotiated
# there, so the server never sends that revision a request it lacks (elicitation/create before 2025-06-18).
_CLIENT_CAPABILITY_SINCE = {"elicitation": _V2025_06, "tasks": _V2025_11}


def _client_capabilities(declared: Any, revision: str) -> dict[str, Any]:
    if not isinstance(declared, dict):
        return {}
    return {key: value for key, value in declared.items() if revision >= _CLIENT_CAPABILITY_SINCE.get(key, "")}


def _capabilities(offered: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    capabilities = {key: value for key, value in offered.items() if key in ("tools", "resources", "prompts")}
    capabilities["logging"] = {}  # a tool's log records reach the client (notifications/message)
    if "completions" in offered and session.at_least(_V2025_03):
        capabilities["completions"] = {}
    return capabilities


def _implementation(info: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    kept = ("name", "version") + (("title",) if session.at_least(_V2025_06) else ()) + \
        (("description", "icons", "websiteUrl") if session.at_least(_V2025_11) else ())
    return {key: value for key, value in info.items() if key in kept}


# -- what each revision lacks (LEGACY.md §11.2) ----------------------------------------------------

_MODERN_ONLY = ("resultType", "ttlMs", "cacheScope")


def _drop_definition_fields(definition: dict[str, Any], session: Negotiated, *, tool: bool) -> dict[str, Any]:
    dropped = set()
    if not session.at_least(_V2025_11):
        dropped |= {"icons", "execution"}
    if not session.at_least(_V2025_06):
        dropped |= {"title", "outputSchema", "_meta"}
    if tool and not session.at_least(_V2025_03):
        dropped.add("annotations")  # ToolAnnotations came with 2025-03-26; resources had annotations before
    dated = not tool and not session.at_least(_V2025_06) and "lastModified" in definition.get("annotations", ())
    if not dated and not dropped.intersection(definition):
        return definition
    shaped = {key: value for key, value in definition.items() if key not in dropped}
    if "arguments" in shaped and not session.at_least(_V2025_06):  # a prompt's arguments had no title either
        shaped["arguments"] = [{k: v for k, v in argument.items() if k != "title"} for argument in shaped["arguments"]]
    if dated:  # a resource's own annotations, as a content block's
        shaped["annotations"] = _undated(shaped["annotations"])
    return shaped


def _undated(annotations: dict[str, Any]) -> dict[str, Any]:
    """Annotations without lastModified, which came with 2025-06-18."""
    return {key: value for key, value in annotations.items() if key != "lastModified"}


def shape_content(blocks: list[Any], session: Negotiated) -> list[Any]:
    """Content blocks as the revision knows them: a resource link becomes a text naming its URI before
    2025-06-18, audio a text saying what it was before 2025-03-26; what came later goes (_block_fields)."""
    if session.at_least(_V2025_11):
        return blocks
    shaped = []
    for block in blocks:
        if not isinstance(block, dict):
            shaped.append(block)
            continue
        kind = block.get("type")
        if kind == "resource_link" and not session.at_least(_V2025_06):
            block = {"type": "text", "text": f"Resource: {block.get('name', '')} <{block.get('uri', '')}>"}
        elif kind == "audio" and not session.at_least(_V2025_03):
            block = {"type": "text", "text": f"[audio, {block.get('mimeType', 'unknown type')}: not shown in "
                                             f"protocol {session.revision}]"}
        else:
            block = _block_fields(block, session)
        shaped.append(block)
    return shaped


def _block_fields(block: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    """A block without the fields its revision lacks: a resource link's icons (2025-11-25); `_meta` and
    lastModified (2025-06-18), an embedded resource's contents' `_meta` too. A new dict when one goes: the
    author's block may be a constant, used again."""
    resource = block.get("resource")
    older = not session.at_least(_V2025_06)
    if "icons" not in block and not (older and ("_meta" in block or "lastModified" in block.get("annotations", ())
                                                or (isinstance(resource, dict) and "_meta" in resource))):
        return block
    block = {key: value for key, value in block.items() if key != "icons" and not (older and key == "_meta")}
    if older and isinstance(block.get("annotations"), dict):
        block["annotations"] = _undated(block["annotations"])
    if older and isinstance(resource, dict) and "_meta" in resource:
        block["resource"] = {key: value for key, value in resource.items() if key != "_meta"}
    return block


def _shape_tool_result(result: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    if "content" in result:
        result["content"] = shape_content(result["content"], session)
    structured = result.get("structuredContent")
    if "structuredContent" in result and (not session.at_least(_V2025_06) or not isinstance(structured, dict)):
        del result["structuredContent"]  # its JSON is in content as text already
    return result


def shape(method: str, result: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    """A modern result as `session`'s revision has it (the result is the core's own: changed in place)."""
    for key in _MODERN_ONLY:
        result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        result["_meta"] = {key: value for key, value in meta.items() if not key.startswith("io.modelcontextprotocol/")}
        if not result["_meta"] or not session.at_least(_V2025_06):
            del result["_meta"]
    if method == "tools/call":
        return _shape_tool_result(result, session)
    listed = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resourceTemplates",
              "prompts/list": "prompts"}.get(method)
    if listed is not None:
        result[listed] = [_drop_definition_fields(d, session, tool=method == "tools/list") for d in result[listed]]
    elif method == "resources/read" and not session.at_least(_V2025_06):  # contents had no _meta (an app's ui)
        result["contents"] = [{k: v for k, v in item.items() if k != "_meta"} for item in result.get("contents", ())]
    elif method == "prompts/get":
        for message in result.get("messages", ()):
            if isinstance(message, dict) and isinstance(message.get("content"), dict):
                message["content"] = shape_content([message["content"]], session)[0]
    return result


def shape_notification(message: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    """A notification the server sends, as the revision has it: progress `message` came with 2025-03-26."""
    params = message.get("params")
    if message.get("method") == "notifications/progress" and isinstance(params, dict) and "message" in params \
            and not session.at_least(_V2025_03):
        message = {**message, "params": {k: v for k, v in params.items() if k != "message"}}
    return message


def shape_request(method: str, params: dict[str, Any], session: Negotiated) -> dict[str, Any]:
    """A request the server sends the client, as the revision has it: elicitation `mode` (form or URL),
    defaults on fields other than booleans (SEP-1034) and sampling `tools` came with 2025-11-25.
    ValueError for a form the revision cannot express (multi-select and titled enums, SEP-1330)."""
    if session.at_least(_V2025_11):
        return params
    dropped = {"elicitation/create": ("mode",), "sampling/createMessage": ("tools", "toolChoice")}.get(method, ())
    shaped = {key: value for key, value in params.items() if key not in dropped}
    schema = shaped.get("requestedSchema")
    if method == "elicitation/create" and isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        shaped["requestedSchema"] = {**schema, "properties": {
            name: _form_field(name, field, session) for name, field in schema["properties"].items()}}
    return shaped


def _form_field(name: str, field: Any, session: Negotiated) -> Any:
    if not isinstance(field, dict):
        return field
    if field.get("type") not in ("string", "number", "integer", "boolean") or {"oneOf", "anyOf"} & set(field):
        raise ValueError(f"the form's field {name!r} is a multi-select or titled choice, which protocol "
                         f"{session.revision} cannot ask for (it came with 2025-11-25)")
    if "default" in field and field.get("type") != "boolean":
        return {key: value for key, value in field.items() if key != "default"}
    return field
