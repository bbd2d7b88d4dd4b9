"""SKILL.md frontmatter: the strict YAML subset that Agent Skills write, parsed without a YAML library.

A SKILL.md opens with a line `---`, its YAML frontmatter, and a line `---`; the Markdown body follows.
`split` separates the two, `parse` reads the frontmatter, `load` does both. Inside the subset, `parse`
returns what PyYAML's `yaml.safe_load` returns for the same text; outside it, it raises FrontmatterError
naming the file and the line. It never guesses.

The subset:
- a block mapping at the top; nested block mappings and block sequences (`- item`, compact `- key: value`);
- plain, 'single-quoted' ('' is a quote) and "double-quoted" scalars (YAML's escapes), on one line or
  folded over several as YAML folds them; `|` and `>` block scalars with the chomping indicators `-`, `+`
  and an indentation indicator 1-9;
- flow sequences `[a, b]` and flow mappings `{a: 1}` (every key with its `:`), nested, over several lines;
- comments: `#` at a line's start or after a space, never inside quotes; an empty value is null.

Refused, where PyYAML would load something: anchors and aliases (`&a`, `*a`), tags (`!!str`, `!x`),
directives (`%YAML`), a second document (`---`, `...`), complex keys (`? `), merge keys (`<<`), a `{a}`
key without its `:` (PyYAML reads `{a:1}` as the key 'a:1'), a comment glued to a value (`"a"#b`), tabs
outside quotes, block scalar text and comments (PyYAML refuses most of them too), the line breaks U+0085,
U+2028 and U+2029 (breaks to PyYAML, not to JSON), and a top level that is not a block mapping. A
duplicate key is refused: PyYAML silently keeps the last value.

Scalars are typed as PyYAML types them (YAML 1.1): `~`, `null` and nothing are None; yes/no/on/off and
true/false in the three casings are booleans; ints in decimal, `0x` hex and `0b` binary, with `_`
separators; floats need a dot (`1.5`, `1.`, `.5`, `1.0e+5`), so `1e5`, `0o17` and `-.5` stay strings,
as in PyYAML. Refused, because PyYAML's answer would surprise or cannot become JSON (the server renders
frontmatter as JSON): dates and timestamps (PyYAML makes date and datetime objects), base-60 numbers
(`1:30` is 90 to YAML 1.1, a string to YAML 1.2), a leading-zero integer whose octal and decimal values
differ (`017` is 15 to YAML 1.1, 17 to YAML 1.2; `007` is fine), `.inf`, `.nan` and floats too large to
be finite, integers too long for JSON text, escapes of lone surrogates, and keys that are not strings
(`1:`, `true:`, `null:`; quote them).

Cost is linear in the input: the text is bounded (MAX_FRONTMATTER_BYTES), nesting is bounded
(MAX_DEPTH), each line is scanned a bounded number of times, every regex here is fixed characters and
single runs of one class (nothing for the engine to retry but a run's length), and strings are built by
joining their pieces once.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn, Optional

__all__ = ["MAX_DEPTH", "MAX_FRONTMATTER_BYTES", "FrontmatterError", "load", "parse", "split"]

# Real frontmatter is a few hundred bytes; the Skills spec caps a description at 1,024 characters.
MAX_FRONTMATTER_BYTES = 64 * 1024
# Collections inside collections, block or flow. Real frontmatter uses three.
MAX_DEPTH = 64
# PyYAML finds no key whose ':' is more than 1,024 characters after the key's start.
MAX_KEY_CHARS = 1024
# Python 3.11+ converts no more than 4,300 digits between int and text (JSON), and converting more costs
# time quadratic in the length on the Pythons without that limit.
MAX_INT_DIGITS = 4300
_MAX_INT_BITS = 14284  # 2**14284 < 10**4300: an int this long has at most MAX_INT_DIGITS digits

# A fence line: `---`, trailing blanks allowed, as the one after it is found only at a line's start.
_FENCE = r"---[ \t]*(?:\r\n|\r|\n|\Z)"
_OPENING = re.compile("\ufeff?" + _FENCE)
_CLOSING = re.compile(r"(?<=[\r\n])" + _FENCE)
_LINE_BREAK = re.compile(r"\r\n?")

# What PyYAML's reader refuses (control characters but tab and line feed, lone surrogates, U+FFFE, U+FFFF), and
# the characters it takes for line breaks that neither JSON nor a YAML 1.2 reader does (U+0085, U+2028, U+2029).
_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")

# Where a plain scalar stops within a line: a tab (refused), ' #' (a comment), or ': ' / ':' at the end
# (a key's end; inside a value, a mapping that is not allowed there).
_BLOCK_PLAIN_STOP = re.compile(r"\t| #|:(?= |$)")
# In [...] and {...} a plain scalar also stops at , ? [ ] { } and at a ':' before one of them.
_FLOW_PLAIN_STOP = re.compile(r"[ \t,?\[\]{}]|:(?=[ \t,\[\]{}]|$)")
_DOUBLE_QUOTED_STOP = re.compile(r'["\\]')
_SINGLE_QUOTED_STOP = re.compile("'")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@` \t")

_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_BOOLEANS = {word: value for value, words in ((True, "yes true on"), (False, "no false off"))
             for lower in words.split() for word in (lower, lower.capitalize(), lower.upper())}
# YAML 1.1's numbers and timestamps, as PyYAML's resolver reads them (a float needs its dot).
_INTEGER = re.compile(r"[-+]?(?:0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]+|0|[1-9][0-9_]*)")
_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?")
_NOT_FINITE = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_BASE_60 = re.compile(r"[-+]?(?:[1-9][0-9_]*(?::[0-5]?[0-9])+|[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*)")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
                        r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?")

_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028",
            "P": "\u2029"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}  # how many hex digits follow
_HEX_DIGITS = re.compile("[0-9A-Fa-f]*")


class FrontmatterError(ValueError):
    """Frontmatter that this parser does not read: `str()` is `SOURCE:LINE: message`."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}")
        self.source = source
        self.line = line  # 1-based, in the file
        self.message = message


def split(text: str, source: str) -> tuple[str, str]:
    """The frontmatter block of a SKILL.md (the lines between its `---` fences) and its body."""
    opening = _OPENING.match(text)
    if opening is None:
        raise FrontmatterError(source, 1, "no frontmatter: a SKILL.md starts with a line '---', its YAML "
                                          "frontmatter, and a line '---'")
    closing = _CLOSING.search(text, opening.end())
    if closing is None:
        raise FrontmatterError(source, 1, "the frontmatter opened here is never closed by a line '---'")
    return text[opening.end():closing.start()], text[closing.end():]


def load(text: str, source: str) -> tuple[dict[str, Any], str]:
    """A SKILL.md's frontmatter, parsed, and its body."""
    block, body = split(text, source)
    return parse(block, source, first_line=2), body


def parse(text: str, source: str, first_line: int = 1) -> dict[str, Any]:
    """The mapping that the YAML `text` holds; `first_line` is the file's line where `text` starts."""
    if len(text) > MAX_FRONTMATTER_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise FrontmatterError(source, first_line, f"the frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes"
                                                   " (MAX_FRONTMATTER_BYTES)")
    if text.startswith("\ufeff"):  # a byte order mark, which YAML skips
        text = text[1:]
    return _Parser(_LINE_BREAK.sub("\n", text), source, first_line).document()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _starts_plain(line: str, col: int, flow: bool) -> bool:
    """Whether a plain scalar may start at `col` (YAML's rule: not at an indicator, except -?: before text)."""
    char = line[col]
    if char not in _INDICATORS:
        return True
    if col + 1 == len(line) or line[col + 1] in " \t":
        return False
    return char == "-" or (not flow and char in "?:")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number"}.get(type(value), "not a string")


class _Parser:
    """One pass over the lines; each method takes a position (row, col) and returns where it stopped."""

    def __init__(self, text: str, source: str, first_line: int) -> None:
        self.source = source
        self.first_line = first_line
        self.lines = text.split("\n")  # every line but the last ends with a line break
        forbidden = _FORBIDDEN.search(text)
        if forbidden is not None:
            char = forbidden.group()
            why = "a line break to YAML 1.1 but not to JSON" if char in "\x85\u2028\u2029" else "not allowed in YAML"
            self.fail(text.count("\n", 0, forbidden.start()), f"character U+{ord(char):04X} is {why}; remove it or "
                                                              "write it as an escape in double quotes")
        for row, line in enumerate(self.lines):
            if line[:3] in ("---", "...") and line[3:4] in ("", " ", "\t"):
                self.fail(row, f"{line[:3]!r} starts or ends a YAML document; frontmatter is one document")

    def fail(self, row: int, message: str) -> NoReturn:
        raise FrontmatterError(self.source, self.first_line + row, message)

    def fail_tab(self, row: int) -> NoReturn:
        self.fail(row, "a tab where YAML wants spaces: indent and separate with spaces")

    # Block structure.

    def document(self) -> dict[str, Any]:
        row = self.next_content(0)
        if row == len(self.lines):
            self.fail(0, "the frontmatter is empty; it must be a mapping of 'key: value' lines")
        col = _indent(self.lines[row])
        if self.key(row, col) is None:
            if self.is_entry(row, col):
                self.fail(row, "the frontmatter is a list; it must be a mapping of 'key: value' lines")
            self.not_a_key(row, col, "the frontmatter must be a mapping of 'key: value' lines")
        mapping, row = self.block_mapping(row, col, 1)
        if row < len(self.lines):
            self.fail(row, "this line is indented less than the keys above it")
        return mapping

    def next_content(self, row: int) -> int:
        """The first row from `row` on that is neither blank nor a comment (len(lines) at the end)."""
        while row < len(self.lines):
            stripped = self.lines[row].lstrip(" ")
            if stripped[:1] == "\t":
                self.fail_tab(row)
            if stripped and stripped[0] != "#":
                return row
            row += 1
        return row

    def check_depth(self, row: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.fail(row, f"collections nested more than {MAX_DEPTH} deep (MAX_DEPTH)")

    def is_entry(self, row: int, col: int) -> bool:
        """Whether a block sequence entry '- ' starts at (row, col)."""
        line = self.lines[row]
        if line[col] != "-" or line[col + 1:col + 2] not in ("", " ", "\t"):
            return False
        if line[col + 1:col + 2] == "\t":
            self.fail_tab(row)
        return True

    def block_mapping(self, row: int, col: int, depth: int) -> tuple[dict[str, Any], int]:
        """The mapping whose first key starts at (row, col); the next row after it."""
        self.check_depth(row, depth)
        mapping: dict[str, Any] = {}
        key_rows: dict[str, int] = {}
        while True:
            found = self.key(row, col)
            if found is None:
                if self.is_entry(row, col):
                    self.fail(row, "a list item where a key was expected; indent the list under its key")
                self.not_a_key(row, col, "expected 'key: value' here")
            key, after = found
            if key in key_rows:
                self.fail(row, f"duplicate key {key!r} (first at line {self.first_line + key_rows[key]}); PyYAML "
                               "would silently keep the last")
            key_rows[key] = row
            mapping[key], row = self.value(row, after, col, depth, in_mapping=True)
            row = self.next_content(row)
            if row == len(self.lines) or _indent(self.lines[row]) < col:
                return mapping, row
            if _indent(self.lines[row]) > col:
                self.fail(row, "this line is indented more than the key above it, and no value is open there")

    def block_sequence(self, row: int, col: int, depth: int) -> tuple[list[Any], int]:
        """The sequence whose first '-' is at (row, col); the next row after it."""
        self.check_depth(row, depth)
        items = []
        while True:
            item, row = self.value(row, col + 1, col, depth, in_mapping=False)
            items.append(item)
            row = self.next_content(row)
            if row == len(self.lines) or _indent(self.lines[row]) < col:
                return items, row
            if _indent(self.lines[row]) > col:
                self.fail(row, "this line is indented more than the list item above it")
            if not self.is_entry(row, col):
                return items, row  # a key of the mapping that this unindented list is the value of

    def value(self, row: int, col: int, parent: int, depth: int, in_mapping: bool) -> tuple[Any, int]:
        """The value after a key's ':' or a '- ' at (row, col), in a collection whose column is `parent`."""
        line = self.lines[row]
        while col < len(line) and line[col] == " ":
            col += 1
        if col < len(line) and line[col] == "\t":
            self.fail_tab(row)
        if col < len(line) and line[col] != "#":
            if in_mapping:
                return self.inline(row, col, parent, depth)
            return self.node(row, col, parent, depth)
        below = self.next_content(row + 1)
        if below < len(self.lines):
            indent = _indent(self.lines[below])
            if indent > parent:
                return self.node(below, indent, parent, depth)
            if indent == parent and in_mapping and self.is_entry(below, indent):
                return self.block_sequence(below, indent, depth + 1)
        return None, row + 1

    def node(self, row: int, col: int, parent: int, depth: int) -> tuple[Any, int]:
        """Any value starting at (row, col): a block collection, or what `inline` reads."""
        if self.is_entry(row, col):
            return self.block_sequence(row, col, depth + 1)
        if self.key(row, col) is not None:
            return self.block_mapping(row, col, depth + 1)
        return self.inline(row, col, parent, depth)

    def inline(self, row: int, col: int, parent: int, depth: int) -> tuple[Any, int]:
        """A scalar or flow collection starting at (row, col); the row after it."""
        char = self.lines[row][col]
        if char in "\"'":
            value, end_row, end_col = self.quoted(row, col)
        elif char in "[{":
            value, end_row, end_col = self.flow(row, col, depth + 1)
        elif char in "|>":
            return self.block_scalar(row, col, parent)
        else:
            if not _starts_plain(self.lines[row], col, flow=False):
                self.refuse_indicator(row, col)
            text, end_row = self.plain(row, col, parent)
            return self.resolve(text, row), end_row + 1
        self.end_line(end_row, end_col)
        return value, end_row + 1

    def end_line(self, row: int, col: int) -> None:
        """Nothing but blanks and a comment may follow a quoted scalar or flow collection on its line."""
        rest = self.lines[row][col:]
        stripped = rest.lstrip(" ")
        if not stripped or (stripped[0] == "#" and len(stripped) < len(rest)):
            return
        if stripped[0] == "\t":
            self.fail_tab(row)
        if stripped[0] == "#":
            self.fail(row, "a comment needs a space before its '#'")
        self.fail(row, f"unexpected {stripped[:20]!r} after the value on this line")

    def key(self, row: int, col: int) -> Optional[tuple[str, int]]:
        """The key starting at (row, col) and the column after its ':', or None where no key starts."""
        line = self.lines[row]
        if line[col] in "\"'":
            key, end_row, end = self.quoted(row, col)
            if end_row != row:
                return None
            while end < len(line) and line[end] == " ":
                end += 1
            if line[end:end + 1] != ":" or line[end + 1:end + 2] not in ("", " ", "\t"):
                return None
        else:
            if not _starts_plain(line, col, flow=False):
                return None
            stop = _BLOCK_PLAIN_STOP.search(line, col)
            if stop is None or stop.group() == " #":
                return None
            if stop.group() == "\t":
                self.fail_tab(row)
            end = stop.start()
            key = self.resolve(line[col:end].rstrip(" "), row)
            if not isinstance(key, str):
                self.fail(row, f"the key {line[col:end].rstrip(' ')!r} is {_kind(key)} to YAML, and JSON keys "
                               "are strings; quote it")
        if end - col > MAX_KEY_CHARS:
            self.fail(row, f"a key longer than {MAX_KEY_CHARS} characters (MAX_KEY_CHARS)")
        return key, end + 1

    def not_a_key(self, row: int, col: int, message: str) -> NoReturn:
        line = self.lines[row]
        if col == 0 and line[0] == "%":
            self.fail(row, "directives (%YAML, %TAG) are not supported in frontmatter")
        if line[col] in "&*!?":
            self.refuse_indicator(row, col)
        if line[col] in "[{":
            self.fail(row, "a flow collection ([...] or {...}) as a key is not supported; keys are strings")
        if re.search(":[^ ]", line[col:]):
            message += " (the ':' after a key needs a space after it)"
        self.fail(row, message)

    def refuse_indicator(self, row: int, col: int) -> NoReturn:
        """The error for a value that starts with one of YAML's indicators that this subset leaves out."""
        char = self.lines[row][col]
        if char == "&":
            self.fail(row, "anchors (&name) are not supported in frontmatter; write the value out")
        if char == "*":
            self.fail(row, "aliases (*name) are not supported in frontmatter; write the value out")
        if char == "!":
            self.fail(row, "tags (!name, !!type) are not supported in frontmatter; quote a value to make it text")
        if char == "?":
            self.fail(row, "complex keys ('? ') are not supported in frontmatter; keys are strings")
        if char == "-":
            self.fail(row, "a list item ('- ') cannot start here; put the list on the lines below its key")
        if char in "|>":
            self.fail(row, f"a block scalar ({char}) cannot start inside [...] or {{...}}")
        if char == ":":
            self.fail(row, "a ':' with no key before it")
        self.fail(row, f"a value cannot start with {char!r}; quote it")

    # Scalars.

    def plain(self, row: int, col: int, parent: int) -> tuple[str, int]:
        """A plain scalar in block context: its folded text and its last row. Continuation lines are
        indented more than `parent`; a blank line between two is a line break, a line break a space."""
        pieces: list[str] = []
        breaks = 0
        last = row
        while True:
            line = self.lines[row]
            stop = _BLOCK_PLAIN_STOP.search(line, col)
            end = len(line) if stop is None else stop.start()
            if stop is not None and stop.group() == "\t":
                self.fail_tab(row)
            if stop is not None and stop.group() != " #":
                self.fail(row, "': ' inside a plain value starts a mapping, which cannot start here; quote the value")
            if pieces:
                pieces.append("\n" * breaks if breaks else " ")
            pieces.append(line[col:end].rstrip(" "))
            last = row
            if stop is not None:  # a comment ends the scalar
                break
            breaks = 0
            row += 1
            while row < len(self.lines) and not self.lines[row].strip(" "):
                breaks += 1
                row += 1
            if row == len(self.lines):
                break
            col = _indent(self.lines[row])
            if col <= parent or self.lines[row][col] == "#":
                break
            if self.lines[row][col] == "\t":
                self.fail_tab(row)
        return "".join(pieces), last

    def quoted(self, row: int, col: int) -> tuple[str, int, int]:
        """A single- or double-quoted scalar whose quote is at (row, col): its text and the position after it."""
        quote = self.lines[row][col]
        double = quote == '"'
        stop = _DOUBLE_QUOTED_STOP if double else _SINGLE_QUOTED_STOP
        pieces = []
        start = row
        col += 1
        while True:
            line = self.lines[row]
            found = stop.search(line, col)
            if found is None:  # the line ends inside the scalar: fold it into the next
                pieces.append(line[col:].rstrip(" \t"))
                row, col, blank = self.quoted_break(row, start, quote)
                pieces.append("\n" * blank if blank else " ")
                continue
            pieces.append(line[col:found.start()])
            col = found.start() + 1
            if line[found.start()] == quote:
                if not double and line[col:col + 1] == "'":
                    pieces.append("'")
                    col += 1
                    continue
                return "".join(pieces), row, col
            if col == len(line):  # an escaped line break joins the lines with nothing between them
                row, col, blank = self.quoted_break(row, start, quote)
                pieces.append("\n" * blank)
                continue
            char = line[col]
            if char in _ESCAPES:
                pieces.append(_ESCAPES[char])
                col += 1
                continue
            if char not in _HEX_ESCAPES:
                self.fail(row, f"\\{char} is not an escape in double quotes; write \\\\ for a backslash")
            digits = line[col + 1:col + 1 + _HEX_ESCAPES[char]]
            if len(digits) < _HEX_ESCAPES[char] or not _HEX_DIGITS.fullmatch(digits):
                self.fail(row, f"\\{char} in double quotes takes {_HEX_ESCAPES[char]} hex digits")
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                self.fail(row, f"\\{char}{digits} is not a Unicode character that JSON can carry")
            pieces.append(chr(code))
            col += 1 + len(digits)

    def quoted_break(self, row: int, start: int, quote: str) -> tuple[int, int, int]:
        """Past a line break inside quotes: the next row with text, the column of its text, and the
        number of blank lines skipped."""
        blank = 0
        row += 1
        while row < len(self.lines) and not self.lines[row].strip(" \t"):
            if row == len(self.lines) - 1:
                break
            blank += 1
            row += 1
        if row == len(self.lines) or not self.lines[row].strip(" \t"):
            self.fail(start, f"the quoted value opened on this line is never closed by {quote}")
        line = self.lines[row]
        return row, len(line) - len(line.lstrip(" \t")), blank

    def block_header(self, row: int, col: int) -> tuple[bool, Optional[str], Optional[int]]:
        """A block scalar's header at (row, col): whether it folds (`>`), its chomping indicator (+ or -) and its
        indentation indicator (1-9), each None when not given; only a comment may follow them."""
        line = self.lines[row]
        folded = line[col] == ">"
        chomping: Optional[str] = None
        increment: Optional[int] = None
        col += 1
        for _ in range(2):
            char = line[col:col + 1]
            if char in ("+", "-") and chomping is None:
                chomping = char
            elif char.isdigit() and char.isascii() and increment is None:
                if char == "0":
                    self.fail(row, "a block scalar's indentation indicator is 1 to 9, not 0")
                increment = int(char)
            else:
                break
            col += 1
        rest = line[col:]
        if rest.lstrip(" ")[:1] not in ("", "#") or rest[:1] == "#":
            if "\t" in rest[:len(rest) - len(rest.lstrip(" \t"))]:
                self.fail_tab(row)
            self.fail(row, f"after {line[col - 1]!r} only a chomping indicator (+ or -), an indentation "
                           "indicator (1-9) and a comment may follow")
        return folded, chomping, increment

    def block_scalar(self, row: int, col: int, parent: int) -> tuple[str, int]:
        """A `|` or `>` block scalar whose header is at (row, col), in a collection at column `parent`:
        its text and the first row after it. Indentation, folding and chomping as PyYAML reads them."""
        folded, chomping, increment = self.block_header(row, col)
        lines = self.lines
        last = len(lines) - 1
        row += 1
        if increment is None:  # the first line with text sets the indentation, or a longer blank one before it
            indent = breaks = 0
            while row <= last:
                indent = max(indent, _indent(lines[row]))
                if lines[row].strip(" ") or row == last:
                    break
                breaks += 1
                row += 1
            indent = max(indent, parent + 1)
        else:
            indent = parent + increment
            breaks, row = self.block_breaks(row, indent)
        pieces = []
        line_break = ""
        while self.is_block_text(row, indent):
            pieces.append("\n" * breaks)
            text = lines[row][indent:]
            pieces.append(text)
            line_break = "\n" if row < last else ""
            breaks, row = self.block_breaks(row + 1, indent)
            if not self.is_block_text(row, indent):
                break
            if folded and line_break and text[0] not in " \t" and lines[row][indent] not in " \t":
                if not breaks:
                    pieces.append(" ")
            else:
                pieces.append(line_break)
        if chomping != "-":
            pieces.append(line_break)
        if chomping == "+":
            pieces.append("\n" * breaks)
        return "".join(pieces), row

    def block_breaks(self, row: int, indent: int) -> tuple[int, int]:
        """The blank lines (no longer than `indent`, each ending in a line break) from `row` on: their
        number and the row after them."""
        start = row
        while row < len(self.lines) - 1 and len(self.lines[row]) <= indent and not self.lines[row].strip(" "):
            row += 1
        return row - start, row

    def is_block_text(self, row: int, indent: int) -> bool:
        line = self.lines[row] if row < len(self.lines) else ""
        return len(line) > indent and _indent(line) >= indent

    # Flow collections.

    def flow(self, row: int, col: int, depth: int) -> tuple[Any, int, int]:
        """A flow sequence or mapping whose bracket is at (row, col): its value and the position after it."""
        self.check_depth(row, depth)
        is_mapping = self.lines[row][col] == "{"
        closer = "}" if is_mapping else "]"
        start = row
        mapping: dict[str, Any] = {}
        items: list[Any] = []
        row, col = self.flow_space(row, col + 1, start)
        while self.lines[row][col] != closer:
            if is_mapping:
                key_row, key_col = row, col
                key, row, col = self.flow_node(row, col, depth)
                if not isinstance(key, str):
                    self.fail(key_row, f"the key {key!r} is {_kind(key)} to YAML, and JSON keys are strings; quote it")
                line = self.lines[row]
                while col < len(line) and line[col] == " ":
                    col += 1
                if row != key_row or line[col:col + 1] != ":":
                    self.fail(key_row, "a key in {...} needs ': value' after it on its line (a ':' between "
                                       "two words needs a space after it)")
                if col - key_col > MAX_KEY_CHARS:
                    self.fail(row, f"a key longer than {MAX_KEY_CHARS} characters (MAX_KEY_CHARS)")
                if key in mapping:
                    self.fail(key_row, f"duplicate key {key!r}; PyYAML would silently keep the last")
                row, col = self.flow_space(row, col + 1, start)
                if self.lines[row][col] in ",}":
                    mapping[key] = None
                else:
                    mapping[key], row, col = self.flow_node(row, col, depth)
            else:
                item, row, col = self.flow_node(row, col, depth)
                items.append(item)
            row, col = self.flow_space(row, col, start)
            char = self.lines[row][col]
            if char == ",":
                row, col = self.flow_space(row, col + 1, start)
            elif char == ":" and not is_mapping:
                self.fail(row, "a 'key: value' pair inside [...] is not supported; write {key: value}")
            elif char != closer:
                self.fail(row, f"expected ',' or {closer!r} in the {'{...}' if is_mapping else '[...]'} opened at "
                               f"line {self.first_line + start}, found {char!r}")
        return mapping if is_mapping else items, row, col + 1

    def flow_space(self, row: int, col: int, start: int) -> tuple[int, int]:
        """Past blanks, line breaks and comments inside a flow collection opened on row `start`."""
        while True:
            line = self.lines[row]
            while col < len(line) and line[col] == " ":
                col += 1
            if col < len(line) and line[col] == "\t":
                self.fail_tab(row)
            if col < len(line) and line[col] == "#" and col > 0 and line[col - 1] != " ":
                self.fail(row, "a comment needs a space before its '#'")
            if col < len(line) and line[col] != "#":
                return row, col
            row += 1
            col = 0
            if row == len(self.lines):
                self.fail(start, "the [...] or {...} opened on this line is never closed")

    def flow_node(self, row: int, col: int, depth: int) -> tuple[Any, int, int]:
        """A scalar or collection inside [...] or {...}: its value and the position after it."""
        char = self.lines[row][col]
        if char in "\"'":
            return self.quoted(row, col)
        if char in "[{":
            return self.flow(row, col, depth + 1)
        if not _starts_plain(self.lines[row], col, flow=True):
            if char in ",]}":
                self.fail(row, f"a value is missing before {char!r}")
            self.refuse_indicator(row, col)
        text, end_row, end_col = self.flow_plain(row, col)
        return self.resolve(text, row), end_row, end_col

    def flow_plain(self, row: int, col: int) -> tuple[str, int, int]:
        """A plain scalar inside [...] or {...}: its folded text and the position after it."""
        pieces = []
        line = self.lines[row]
        while True:
            stop = _FLOW_PLAIN_STOP.search(line, col)
            end = len(line) if stop is None else stop.start()
            pieces.append(line[col:end])
            col = end
            while col < len(line) and line[col] == " ":
                col += 1
            if col < len(line):
                if _FLOW_PLAIN_STOP.match(line, col) or line[col] == "#":
                    return "".join(pieces), row, col
                pieces.append(line[end:col])
                continue
            if row + 1 == len(self.lines):
                return "".join(pieces), row, col
            next_row = row + 1
            while next_row < len(self.lines) - 1 and not self.lines[next_row].strip(" "):
                next_row += 1
            next_line = self.lines[next_row]
            next_col = _indent(next_line)
            if next_col == len(next_line) or _FLOW_PLAIN_STOP.match(next_line, next_col) or next_line[next_col] == "#":
                return "".join(pieces), next_row, next_col
            pieces.append("\n" * (next_row - row - 1) if next_row - row > 1 else " ")
            row, col, line = next_row, next_col, next_line

    # Typing, as YAML 1.1 (PyYAML) types a plain scalar.

    def resolve(self, text: str, row: int) -> Any:
        if text in _NULLS:
            return None
        if text in _BOOLEANS:
            return _BOOLEANS[text]
        if text == "<<":
            self.fail(row, "merge keys (<<) are not supported in frontmatter; write the keys out")
        if text == "=":
            self.fail(row, "'=' alone is YAML 1.1's value key, which YAML readers refuse; quote it")
        if text[0] not in "-+.0123456789":
            return text
        if _DATE.fullmatch(text) or _TIMESTAMP.fullmatch(text):
            self.fail(row, f"{text} is a date to YAML (a date object, not text), which JSON cannot carry; quote it")
        if _BASE_60.fullmatch(text):
            number: float = 0
            for part in text.replace("_", "").lstrip("+-").split(":"):
                number = number * 60 + (float(part) if "." in part else int(part))
            self.fail(row, f"{text} is a base-60 number to YAML 1.1 ({'-' if text[0] == '-' else ''}{number}) and "
                           "text to YAML 1.2; quote it")
        if _NOT_FINITE.fullmatch(text):
            self.fail(row, f"{text} is not a finite number, which JSON cannot carry; quote it for text")
        if _FLOAT.fullmatch(text):
            number = float(text.replace("_", ""))
            if number in (_INFINITY, -_INFINITY):
                self.fail(row, f"{text} is too large for a number that JSON can carry; quote it for text")
            return number
        if _INTEGER.fullmatch(text):
            return self.integer(text, row)
        return text

    def integer(self, text: str, row: int) -> int:
        digits = text.replace("_", "").lstrip("+-")
        sign = -1 if text[0] == "-" else 1
        base = {"0b": 2, "0x": 16}.get(digits[:2], 10)
        if base != 10:
            digits = digits[2:]
            if not digits:
                self.fail(row, f"{text} has no digits after its {text.lstrip('+-')[:2]}; quote it for text")
        if len(digits) > MAX_INT_DIGITS:
            self.fail(row, f"an integer of more than {MAX_INT_DIGITS} digits (MAX_INT_DIGITS); quote it for text")
        if base == 10 and digits[0] == "0" and len(digits) > 1 and int(digits, 8) != int(digits):
            self.fail(row, f"{text} is octal to YAML 1.1 ({sign * int(digits, 8)}) and decimal to YAML 1.2; "
                           "quote it, or drop the leading zero")
        value = sign * int(digits, base)
        if value.bit_length() > _MAX_INT_BITS:
            self.fail(row, f"an integer of more than {MAX_INT_DIGITS} digits (MAX_INT_DIGITS); quote it for text")
        return value


_INFINITY = float("inf")
