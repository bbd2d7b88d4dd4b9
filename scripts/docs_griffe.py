"""A griffe extension for the API reference (mkdocs.yml): the package's docstrings read as its source writes them.

- A doctest (`>>> `) is a fenced code block, not the nested quotes Markdown reads it as.
- A list right after a line of prose ("Rules of this module:" then "- ..."), as the docstrings write them, gets
  the blank line Markdown needs to see a list rather than one run-on paragraph.
- A constant documented as the package writes constants, with a comment at the end of its line
  (`MAX_HEAD_BYTES = 32 * 1024  # ...; past it, 431`) or in the lines right above it, has that comment as its
  docstring.
- An instance attribute set from the parameter of its name shows no value (`params = params` says nothing).
- A class shows what its users call: its dunders (`__slots__`, `__repr__`, ...) are left out, except those that are
  how it is used (`__call__` of a WSGI app, `__enter__` of a client).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from griffe import Attribute, Class, Docstring, Extension, Object

USED_DUNDERS = frozenset({"__init__", "__call__", "__enter__", "__exit__", "__iter__", "__len__", "__contains__"})
LIST_ITEM = re.compile(r"^\s*(?:[-*] |\d+\. )")


def fenced_doctests(text: str) -> str:
    """A doctest (`>>> ` and `... ` lines) as a fenced pycon block, which Markdown would read as nested quotes."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        prompt = line.lstrip().startswith((">>>", "..."))
        if prompt and not inside:
            out.append("```pycon")
        elif not prompt and inside:
            out.append("```")
        inside = prompt
        out.append(line.strip() if prompt else line)
    if inside:
        out.append("```")
    return "\n".join(out)


def spaced_lists(text: str) -> str:
    """A blank line before each list that follows prose directly (outside indented code)."""
    lines = text.split("\n")
    out: list[str] = []
    for index, line in enumerate(lines):
        previous = lines[index - 1] if index else ""
        if (LIST_ITEM.match(line) and previous.strip() and not LIST_ITEM.match(previous)
                and not previous.startswith((" ", "\t")) and not line.startswith("    ")):  # fmt: skip
            out.append("")
        out.append(line)
    return "\n".join(out)


def trailing_comment(lines: list[str]) -> str:
    """The comment at the end of an assignment's line(s), else ''. A '#' inside a string is no comment."""
    found = []
    for line in lines:
        code, hashed, comment = line.partition("  # ")
        quoted = code.count('"') % 2 or code.count("'") % 2
        if hashed and not quoted and not comment.startswith(("type:", "noqa", "fmt:")):
            found.append(comment.strip())
    return capitalized(" ".join(found))


def comment_above(attr: Attribute) -> str:
    """The block of comment lines right above an assignment, else ''."""
    source = Path(str(attr.filepath)).read_text(encoding="utf-8").split("\n")
    above: list[str] = []
    index = (attr.lineno or 1) - 2
    while index >= 0 and source[index].lstrip().startswith("# "):
        above.insert(0, source[index].strip()[2:])
        index -= 1
    return capitalized(" ".join(above))


def capitalized(text: str) -> str:
    """A sentence's first letter up, unless it starts with a name from the code (`mcpserver.auth.Principal`)."""
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


class ReadAsWritten(Extension):
    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = spaced_lists(fenced_doctests(obj.docstring.value))

    def on_attribute_instance(self, *, attr: Attribute, **kwargs: Any) -> None:
        if "instance-attribute" in attr.labels and str(attr.value) == attr.name:
            attr.value = None  # `self.params = params` says nothing the signature does not
        if attr.docstring is None and attr.lineno is not None:
            comment = trailing_comment(attr.lines) or comment_above(attr)
            if comment:
                attr.docstring = Docstring(comment, parent=attr)

    def on_class_members(self, *, cls: Class, **kwargs: Any) -> None:
        for name in [name for name in cls.members if name.startswith("__") and name.endswith("__")]:
            if name not in USED_DUNDERS:
                del cls.members[name]
