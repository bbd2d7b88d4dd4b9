"""Input requests a tool (or a prompt, or a resource reader) can ask the client to answer (WIRE.md §14.2).

Each function builds one request as it goes on the wire. Ask with `ctx.ask({"key": inputs.elicit(...), ...})`
for several at once, or with the one-request shortcuts `ctx.elicit`, `ctx.sample` and `ctx.roots`.
"""

from __future__ import annotations

from ._wire import CAPABILITY_OF_INPUT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Union

__all__ = ["CAPABILITY", "elicit", "roots", "sample"]

# The client capability each input method needs: a request is only sent to a client that declared it.
CAPABILITY = CAPABILITY_OF_INPUT


def elicit(message: str, schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Ask the user, through the client, to fill a form: `schema` is a flat object schema of primitives."""
    requested = schema if schema is not None else {"type": "object", "properties": {}}
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message,
                                                       "requestedSchema": requested}}


def sample(messages: Union[str, list[dict[str, Any]]], max_tokens: int, *, system_prompt: Optional[str] = None,
           **params: Any) -> dict[str, Any]:
    """Ask the client's model for a completion; a str is one user message. Other sampling params pass through."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
    request: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens, **params}
    if system_prompt is not None:
        request["systemPrompt"] = system_prompt
    return {"method": "sampling/createMessage", "params": request}


def roots() -> dict[str, Any]:
    """Ask the client for its roots (the directories or URIs it lets the server work in)."""
    return {"method": "roots/list", "params": {}}
