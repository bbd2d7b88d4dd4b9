"""Notes that change while the server runs: resources and tools added and removed at run time.

    python -m mcpserver server/examples/notes.py

A client that opens `subscriptions/listen` hears `notifications/resources/list_changed` when a note is
created or deleted, `notifications/resources/updated` for the notes it subscribed to when they are
rewritten, and `notifications/tools/list_changed` when `shout` appears. Everything here uses the public
registry API (add_resource, remove_resource, resource_updated, tool), which is safe to call while serving.
"""

import threading
from typing import Annotated

from mcpserver import Resource, ResourceNotFound, Server, ToolError

server = Server("notes", "1.0.0", offers=["resources"],  # no notes yet, but resources come and go
                instructions="Keep short notes: write_note, delete_note. Each note is the resource notes://NAME. "
                             "enable_shouting adds a tool.")
_notes: dict[str, str] = {}
_lock = threading.Lock()
Name = Annotated[str, "A name of 1 to 40 lower-case letters, digits and dashes."]


def _checked(name: str) -> str:
    if not (0 < len(name) <= 40 and all(c.islower() or c.isdigit() or c == "-" for c in name)):
        raise ToolError("a note's name is 1 to 40 of a-z, 0-9 and -")
    return name


def _reader(name: str):
    def read() -> str:
        with _lock:
            if name not in _notes:
                raise ResourceNotFound(f"notes://{name}")
            return _notes[name]

    return read


@server.tool(annotations={"idempotentHint": True, "openWorldHint": False})
def write_note(name: Name, text: str) -> str:
    """Write a note, creating it or replacing its text."""
    uri = f"notes://{_checked(name)}"
    with _lock:
        created = name not in _notes
        _notes[name] = text
    if created:
        server.add_resource(Resource(uri, _reader(name), name=name, mime_type="text/plain",
                                     description=f"The note {name}"))
        return f"Created {uri}"
    server.resource_updated(uri)
    return f"Updated {uri}"


@server.tool(annotations={"destructiveHint": True, "openWorldHint": False})
def delete_note(name: Name) -> str:
    """Delete a note."""
    with _lock:
        if _notes.pop(_checked(name), None) is None:
            raise ToolError(f"there is no note {name}")
    server.remove_resource(f"notes://{name}")
    return f"Deleted notes://{name}"


@server.tool(annotations={"openWorldHint": False})
def enable_shouting() -> str:
    """Add the tool `shout` to this server (once)."""
    if "shout" in server.tools:
        return "shout is already there"

    def shout(text: str) -> str:
        """Return the text in capitals."""
        return text.upper()

    server.tool(shout)
    return "Added the tool shout"
