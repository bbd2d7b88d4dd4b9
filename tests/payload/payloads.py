"""Deterministic payloads of an exact size in UTF-8 bytes, in three shapes, and their fingerprints.

Shared by the tests and by payload_server.py, so the server can produce a payload the test knows
without the payload ever travelling to it.
"""

import hashlib

SIZES = {"500KB": 500_000, "5MB": 5_000_000}
_UNITS = {
    # plain ASCII: byte count equals character count
    "ascii": "The quick brown fox jumps over the lazy dog 0123456789. ",
    # accents, CJK and emoji: 1, 2, 3 and 4 bytes per character
    "utf8": "naïve café Ærø 東京都 中文字符 😀🚀🎉 ",
    # everything JSON must escape: newline, tab, quote, backslash, control characters, DEL
    "escapes": 'line\nbreak\ttab "quoted" back\\slash \x00\x01\x02\x1b\x1f\x7f\r\n/slash\b\f ',
}
SHAPES = tuple(_UNITS)


def payload(shape: str, size: int) -> str:
    """A text whose UTF-8 encoding is exactly `size` bytes."""
    unit = _UNITS[shape]
    unit_bytes = len(unit.encode("utf-8"))
    text = unit * (size // unit_bytes + 1)
    cut = text.encode("utf-8")[:size].decode("utf-8", "ignore")  # drop a character split by the cut
    return cut + "." * (size - len(cut.encode("utf-8")))


def fingerprint(text: str) -> tuple[int, int, str]:
    """(characters, UTF-8 bytes, sha256 of the UTF-8 bytes)."""
    data = text.encode("utf-8")
    return len(text), len(data), hashlib.sha256(data).hexdigest()
