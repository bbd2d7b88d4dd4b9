"""URI templates: linear-time matching that splits a URI exactly as a greedy regular expression would."""

import random
import re

import pytest
from mcpserver._resources import TEMPLATE_VARIABLE, ResourceTemplate


def reference(template):
    """The regular expression the matcher replaces: right on every URI, but it backtracks (quadratic with
    two `{+var}`, cubic with three) on a URI that does not fit."""
    parts, position = [], 0
    for match in re.finditer(TEMPLATE_VARIABLE, template):
        parts.append(re.escape(template[position:match.start()]))
        operator, variable = match.groups()
        parts.append(f"(?P<{variable}>{'.+' if operator else '[^/?#]+'})")
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts))


def template_of(text):
    names = [match.group(2) for match in re.finditer(TEMPLATE_VARIABLE, text)]
    namespace = {}
    exec(f"def reader({', '.join(names)}): return ''", namespace)
    return ResourceTemplate(text, namespace["reader"])


@pytest.mark.parametrize(("template", "uri", "expected"), [
    ("file:///{+path}.{ext}", "file:///a/b.c/d.tar.gz", {"path": "a/b.c/d.tar", "ext": "gz"}),
    ("repo://{+owner}/{+name}/{+path}", "repo://ada/notes/docs/readme.md",
     {"owner": "ada/notes", "name": "docs", "path": "readme.md"}),
    ("x://{a}/{+b}", "x://p/q/r", {"a": "p", "b": "q/r"}),  # a one-segment variable stops at the first /
    ("x://{a}.{b}", "x://p.q.r", {"a": "p.q", "b": "r"}),
    ("x://{a}", "x://p/q", None),
    ("x://{+a}", "x://p\nq", None),
    ("x://{a}/y", "x:///y", None),  # a variable is never empty
])
def test_splits(template, uri, expected):
    assert template_of(template).match(uri) == expected


def test_every_split_is_the_one_the_regular_expression_makes():
    rng = random.Random(2026)
    compared = matched = 0
    for _ in range(3000):
        text = "x:"
        for number in range(rng.randint(1, 4)):
            text += "".join(rng.choice("ab/.-") for _ in range(rng.randint(0, 2)))
            text += "{" + rng.choice(["", "+"]) + f"v{number}" + "}"
            text += "".join(rng.choice("ab/.-") for _ in range(rng.randint(0, 1)))
        matcher, pattern = template_of(text), reference(text)
        for _ in range(20):
            uri = "x:" + "".join(rng.choice("ab/.?#\n-") for _ in range(rng.randint(0, 12)))
            found = pattern.fullmatch(uri)
            assert matcher.match(uri) == (found.groupdict() if found else None), (text, uri)
            compared += 1
            matched += found is not None
    assert compared == 60_000 and matched > 1_000  # the comparison covers many real splits, not only misses
