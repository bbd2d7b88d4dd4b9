"""Content blocks a tool may return as they are (WIRE.md §13).

Return one block or a list of them from a tool to control `content` exactly; return a str or a
dict for the common cases. Each helper gives a `ContentBlock`, a dict in wire form.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Union

__all__ = ["ContentBlock", "audio", "embedded", "image", "resource_link", "text"]


class ContentBlock(dict):  # type: ignore[type-arg]
    """One content block in wire form. The type marks it as content, not structured data."""


def _block(fields: dict[str, Any], annotations: Optional[dict[str, Any]],
           meta: Optional[dict[str, Any]]) -> ContentBlock:
    block = ContentBlock(fields)
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


def _base64(data: Union[bytes, str]) -> str:
    if isinstance(data, str):
        return data
    import base64  # here, not at import: a server that never sends binary content never loads it

    return base64.b64encode(data).decode("ascii")


def text(value: str, *, annotations: Optional[dict[str, Any]] = None,
         meta: Optional[dict[str, Any]] = None) -> ContentBlock:
    """A text block."""
    return _block({"type": "text", "text": value}, annotations, meta)


def image(data: Union[bytes, str], mime_type: str, *, annotations: Optional[dict[str, Any]] = None,
          meta: Optional[dict[str, Any]] = None) -> ContentBlock:
    """An image; `data` is raw bytes, or a str already in base64."""
    return _block({"type": "image", "data": _base64(data), "mimeType": mime_type}, annotations, meta)


def audio(data: Union[bytes, str], mime_type: str, *, annotations: Optional[dict[str, Any]] = None,
          meta: Optional[dict[str, Any]] = None) -> ContentBlock:
    """Audio; `data` is raw bytes, or a str already in base64."""
    return _block({"type": "audio", "data": _base64(data), "mimeType": mime_type}, annotations, meta)


def resource_link(uri: str, name: str, *, title: Optional[str] = None, description: Optional[str] = None,
                  mime_type: Optional[str] = None, size: Optional[int] = None,
                  icons: Optional[list[dict[str, Any]]] = None, annotations: Optional[dict[str, Any]] = None,
                  meta: Optional[dict[str, Any]] = None) -> ContentBlock:
    """A link to a resource the client may read or subscribe to (resources/read), rather than its contents."""
    fields: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    for key, value in (("title", title), ("description", description), ("mimeType", mime_type), ("size", size),
                       ("icons", icons)):
        if value is not None:
            fields[key] = value
    return _block(fields, annotations, meta)


def embedded(uri: str, content: Union[str, bytes], *, mime_type: Optional[str] = None,
             annotations: Optional[dict[str, Any]] = None, meta: Optional[dict[str, Any]] = None) -> ContentBlock:
    """An embedded resource: text for str, base64 `blob` for bytes. Annotations go on the wrapper."""
    resource: dict[str, Any] = {"uri": uri}
    if mime_type:
        resource["mimeType"] = mime_type
    if isinstance(content, str):
        resource["text"] = content
    else:
        resource["blob"] = _base64(content)
    return _block({"type": "resource", "resource": resource}, annotations, meta)
