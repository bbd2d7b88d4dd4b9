"""The server the payload suite talks to: Python tools and command tools that move large texts.

The command tools use only programs every minimal image has (cat, wc, sha256sum; busybox's too),
and take the payload on stdin, never in argv or the environment.
"""

import os
import sys
from typing import Literal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mcpserver import Server
from payloads import payload as make_payload

server = Server("payload", "1.0.0")
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
        "additionalProperties": False}


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def produce(shape: Literal["ascii", "utf8", "escapes"], size: int) -> str:
    """Return the payload of that shape and size in bytes, generated here."""
    return make_payload(shape, size)


server.command("cat_text", ["cat"], input_schema=TEXT, stdin={"argument": "text"},
               description="The text, through cat.")
server.command("cat_json", ["cat"], input_schema=TEXT, description="The arguments as cat saw them on stdin.")
server.command("count_bytes", ["wc", "-c"], input_schema=TEXT, stdin={"argument": "text"},
               description="How many bytes the text is.")
server.command("hash_text", ["sha256sum"], input_schema=TEXT, stdin={"argument": "text"},
               description="The sha256 of the text.")
