"""SKILL.md frontmatter (mcpserver.skills._frontmatter): the YAML subset read as PyYAML reads it, the rest refused.

PyYAML's `yaml.safe_load` is the reference for two corpora in tests/unit/frontmatter/: corpus.txt, written for
these tests to reach every construct of the subset, and public.json, the frontmatter of public SKILL.md files. The
reference's answers are golden data (frontmatter/golden.json, frontmatter_golden.py): PyYAML is built per platform
and the lab's cells have only pure-Python wheels, so every cell compares the parser with the golden file, and on the
host a test checks the file against PyYAML itself, so it cannot drift from it.
"""

import datetime
import json
import math
import sys

import frontmatter_golden as golden
import pytest
from mcpserver.skills._frontmatter import MAX_DEPTH, MAX_FRONTMATTER_BYTES, FrontmatterError, load, parse, split

CORPUS = golden.CORPUS
PUBLIC = golden.PUBLIC
large_frontmatter = golden.large_frontmatter
GOLDEN = golden.load()


def reference(name, text):
    """What PyYAML makes of `text`, as the golden file has it under `name`."""
    entry = GOLDEN["documents"].get(name)
    assert entry is not None, f"golden.json has nothing for {name!r}: run `python tests/unit/frontmatter_golden.py`"
    assert entry["sha256"] == golden.digest(text), (f"{name!r} changed since golden.json was written: run "
                                                    "`python tests/unit/frontmatter_golden.py`")
    return golden.decode(entry["value"])


def public_name(entry):
    return f"public/{entry['repository']}/{entry['path']}"


def same(ours, theirs):
    """Equal, and of the same types all the way down (1 == True == 1.0 in Python), with keys in the same order."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return list(ours) == list(theirs) and all(same(ours[key], theirs[key]) for key in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs))
    if isinstance(ours, float) and math.isnan(ours):
        return math.isnan(theirs)
    return ours == theirs


def refusal(text, source="skills/demo/SKILL.md", first_line=1):
    with pytest.raises(FrontmatterError) as caught:
        parse(text, source, first_line)
    return caught.value


# The corpora.

def test_the_written_corpus_has_at_least_150_documents():
    assert len(CORPUS) >= 150


def test_the_golden_file_has_every_input_and_no_other():
    assert set(GOLDEN["documents"]) == set(golden.inputs())


@pytest.mark.host_only("PyYAML, the reference, is built per platform: the host has it (the test extra), the cells "
                       "compare with the golden file it wrote")
def test_the_golden_file_is_what_pyyaml_reads_today():
    import yaml

    today = golden.made_by(yaml)
    written = {name: json.dumps(entry) for name, entry in GOLDEN["documents"].items()}  # NaN != NaN, its text is
    changed = [name for name, entry in today["documents"].items() if written.get(name) != json.dumps(entry)]
    assert not changed, (f"PyYAML {yaml.__version__} reads {len(changed)} inputs otherwise than golden.json says, "
                         f"first {changed[0]!r}: run `python tests/unit/frontmatter_golden.py` and look at the diff")
    assert golden.dumps(today) == golden.FILE.read_text(encoding="utf-8"), "golden.json is not as dumps() writes it"


@pytest.mark.parametrize("final_break", [True, False], ids=["with-final-break", "without"])
@pytest.mark.parametrize("name", list(CORPUS))
def test_each_corpus_document_reads_as_pyyaml_reads_it(name, final_break):
    text = CORPUS[name] if final_break else CORPUS[name].removesuffix("\n")
    expected = reference(f"corpus/{name}/{'with-final-break' if final_break else 'without'}", text)
    assert isinstance(expected, dict), "a corpus document must be a mapping that PyYAML loads"
    ours = parse(text, name)
    assert same(ours, expected), f"{name}:\n ours:   {ours!r}\n PyYAML: {expected!r}"


def test_the_public_corpus_has_at_least_100_files_from_several_repositories():
    assert len(PUBLIC) >= 100
    assert len({entry["repository"] for entry in PUBLIC}) >= 10


@pytest.mark.parametrize("entry", PUBLIC, ids=[f"{e['repository']}/{e['path']}" for e in PUBLIC])
def test_each_public_frontmatter_reads_as_pyyaml_reads_it_or_is_refused_as_listed(entry):
    expected = reference(public_name(entry), entry["frontmatter"])  # PyYAML loads every one, refused or not
    if "refused" not in entry:
        ours = parse(entry["frontmatter"], entry["path"], first_line=2)
        assert same(ours, expected), f"ours:   {ours!r}\nPyYAML: {expected!r}"
        return
    error = refusal(entry["frontmatter"], entry["path"], first_line=2)
    assert (error.line, error.message) == (entry["refused"]["line"], entry["refused"]["message"])
    assert str(error).startswith(f"{entry['path']}:{error.line}: ")


def dates_in(value):
    if isinstance(value, dict):
        return [date for item in value.values() for date in dates_in(item)]
    if isinstance(value, list):
        return [date for item in value for date in dates_in(item)]
    return [value] if isinstance(value, datetime.date) else []


def test_the_public_files_outside_the_subset_are_refused_for_the_dates_pyyaml_makes_of_them():
    refused = [entry for entry in PUBLIC if "refused" in entry]
    assert refused, "public.json lists the public files that the parser refuses"
    for entry in refused:
        line = entry["frontmatter"].split("\n")[entry["refused"]["line"] - 2]  # the block starts on the file's line 2
        date = entry["refused"]["message"].split(" ")[0]
        assert date in line
        assert date in [str(found) for found in dates_in(reference(public_name(entry), entry["frontmatter"]))]


def test_every_value_read_from_the_corpora_is_json():
    for text in [*CORPUS.values(), *(entry["frontmatter"] for entry in PUBLIC if "refused" not in entry)]:
        value = parse(text, "SKILL.md")
        assert json.loads(json.dumps(value, allow_nan=False)) == value


# Splitting a SKILL.md.

def test_split_returns_the_lines_between_the_fences_and_the_body_after_them():
    assert split("---\nname: x\ndescription: y\n---\n# Title\n\nBody.\n", "SKILL.md") == (
        "name: x\ndescription: y\n", "# Title\n\nBody.\n")


def test_split_takes_windows_line_breaks_a_byte_order_mark_and_blanks_after_a_fence():
    assert split("\ufeff---  \r\nname: x\r\n--- \t\r\nBody\r\n", "SKILL.md") == ("name: x\r\n", "Body\r\n")


def test_split_stops_at_the_first_closing_fence_and_leaves_later_ones_to_the_body():
    assert split("---\na: 1\n---\ntext\n---\nmore\n", "SKILL.md") == ("a: 1\n", "text\n---\nmore\n")


def test_a_fence_closes_the_file_without_a_line_break_after_it():
    assert split("---\na: 1\n---", "SKILL.md") == ("a: 1\n", "")


def test_a_line_that_only_starts_with_three_dashes_is_not_a_fence():
    assert split("---\na: |\n  ---x\n---\n", "SKILL.md") == ("a: |\n  ---x\n", "")
    with pytest.raises(FrontmatterError, match="never closed"):
        split("---\na: 1\n----\n", "SKILL.md")


@pytest.mark.parametrize("text", ["", "# Title\n", "name: x\n", "\n---\nname: x\n---\n", "--- name: x\n---\n"])
def test_a_file_without_frontmatter_is_refused_naming_the_file(text):
    with pytest.raises(FrontmatterError) as caught:
        split(text, "skills/demo/SKILL.md")
    assert str(caught.value) == ("skills/demo/SKILL.md:1: no frontmatter: a SKILL.md starts with a line '---', its "
                                 "YAML frontmatter, and a line '---'")


def test_an_unterminated_frontmatter_is_refused_naming_the_file():
    with pytest.raises(FrontmatterError) as caught:
        split("---\nname: x\ndescription: y\n\nBody\n", "skills/demo/SKILL.md")
    assert str(caught.value) == "skills/demo/SKILL.md:1: the frontmatter opened here is never closed by a line '---'"


def test_load_reads_the_frontmatter_and_counts_lines_from_the_top_of_the_file():
    assert load("---\nname: x\nlist: [1, 2]\n---\nBody\n", "SKILL.md") == ({"name": "x", "list": [1, 2]}, "Body\n")
    with pytest.raises(FrontmatterError) as caught:
        load("---\nname: x\nsource: &a text\n---\nBody\n", "skills/demo/SKILL.md")
    assert str(caught.value) == ("skills/demo/SKILL.md:3: anchors (&name) are not supported in frontmatter; write "
                                 "the value out")


# What the subset leaves out: each refusal names the file and the line.

REFUSALS = [
    # (frontmatter, the line refused, what the message says)
    ("name: x\nsource: &a text\n", 2, "anchors (&name) are not supported in frontmatter; write the value out"),
    ("name: x\nother: *a\n", 2, "aliases (*name) are not supported in frontmatter; write the value out"),
    ("a: [x, &a y]\n", 1, "anchors (&name) are not supported"),
    ("a:\n  - *a\n", 2, "aliases (*name) are not supported"),
    ("&a name: x\n", 1, "anchors (&name) are not supported"),
    ("name: !!str 1\n", 1, "tags (!name, !!type) are not supported"),
    ("a: 1\nb: !local x\n", 2, "tags (!name, !!type) are not supported"),
    ("a: {b: !!int 1}\n", 1, "tags (!name, !!type) are not supported"),
    ("name: x\n--- \nname: y\n", 2, "'---' starts or ends a YAML document; frontmatter is one document"),
    ("name: x\n...\n", 2, "'...' starts or ends a YAML document"),
    ('a: "x\n---\n"\n', 2, "'---' starts or ends a YAML document"),
    ("%YAML 1.2\nname: x\n", 1, "directives (%YAML, %TAG) are not supported in frontmatter"),
    ("name: x\n%TAG ! tag:x,2024:\n", 2, "directives (%YAML, %TAG) are not supported"),
    ("name: x\n? complex\n: value\n", 2, "complex keys ('? ') are not supported in frontmatter"),
    ("a: {? b: 1}\n", 1, "complex keys ('? ') are not supported"),
    ("a: 1\n[b, c]: d\n", 2, "a flow collection ([...] or {...}) as a key is not supported"),
    ("base: {a: 1}\nmerged:\n  <<: {b: 2}\n", 3, "merge keys (<<) are not supported in frontmatter; write the keys"),
    ("a: <<\n", 1, "merge keys (<<) are not supported"),
    ("name: x\ndescription: y\nname: z\n", 3,
     "duplicate key 'name' (first at line 1); PyYAML would silently keep the last"),
    ("a:\n  b: 1\n  'b': 2\n", 3, "duplicate key 'b' (first at line 2)"),
    ("a: {b: 1, \"b\": 2}\n", 1, "duplicate key 'b'"),
    ("a:\n\tb: 1\n", 2, "a tab where YAML wants spaces"),
    ("a: 1\t\n", 1, "a tab where YAML wants spaces"),
    ("a:\tb\n", 1, "a tab where YAML wants spaces"),
    ("a: [b,\tc]\n", 1, "a tab where YAML wants spaces"),
    ("a: |\n  text\n\tmore\n", 3, "a tab where YAML wants spaces"),
    ("- a\n- b\n", 1, "the frontmatter is a list; it must be a mapping of 'key: value' lines"),
    ("just text\n", 1, "the frontmatter must be a mapping of 'key: value' lines"),
    ("\n\n'quoted text'\n", 3, "the frontmatter must be a mapping of 'key: value' lines"),
    ("{name: x}\n", 1, "a flow collection ([...] or {...}) as a key is not supported"),
    ("name:x\n", 1, "the frontmatter must be a mapping of 'key: value' lines (the ':' after a key needs a space"),
    ("", 1, "the frontmatter is empty; it must be a mapping of 'key: value' lines"),
    ("# only a comment\n\n", 1, "the frontmatter is empty"),
    ("created: 2024-01-15\n", 1, "2024-01-15 is a date to YAML (a date object, not text), which JSON cannot carry; "
                                 "quote it"),
    ("a: 1\nat: 2001-12-14t21:59:43.10-05:00\n", 2, "2001-12-14t21:59:43.10-05:00 is a date to YAML"),
    ("at: 2001-12-14\n  21:59:43\n", 1, "2001-12-14 21:59:43 is a date to YAML"),
    ("2024-01-15: launch\n", 1, "2024-01-15 is a date to YAML"),
    ("time: 1:30\n", 1, "1:30 is a base-60 number to YAML 1.1 (90) and text to YAML 1.2; quote it"),
    ("time: -1:30.5\n", 1, "-1:30.5 is a base-60 number to YAML 1.1 (-90.5)"),
    ("mode: 0755\n", 1, "0755 is octal to YAML 1.1 (493) and decimal to YAML 1.2; quote it, or drop the leading zero"),
    ("a: [1, 017]\n", 1, "017 is octal to YAML 1.1 (15)"),
    ("a: .inf\n", 1, ".inf is not a finite number, which JSON cannot carry; quote it for text"),
    ("a: -.Inf\n", 1, "-.Inf is not a finite number"),
    ("a: .NaN\n", 1, ".NaN is not a finite number"),
    ("a: 1.0e+999\n", 1, "1.0e+999 is too large for a number that JSON can carry"),
    ("a: " + "1" * 4301 + "\n", 1, "an integer of more than 4300 digits (MAX_INT_DIGITS)"),
    ("a: 0x" + "f" * 3600 + "\n", 1, "an integer of more than 4300 digits (MAX_INT_DIGITS)"),
    ("a: 0x_\n", 1, "0x_ has no digits after its 0x"),
    ("1: one\n", 1, "the key '1' is an integer to YAML, and JSON keys are strings; quote it"),
    ("name: x\ntrue: yes\n", 2, "the key 'true' is a boolean to YAML"),
    ("on: push\n", 1, "the key 'on' is a boolean to YAML"),
    ("~: tilde\n", 1, "the key '~' is null to YAML"),
    ("a:\n  1.5: x\n", 2, "the key '1.5' is a number to YAML"),
    ("a: {1: x}\n", 1, "the key 1 is an integer to YAML"),
    ("a: {null: x}\n", 1, "the key None is null to YAML"),
    ("a: =\n", 1, "'=' alone is YAML 1.1's value key, which YAML readers refuse; quote it"),
    ('a: "\\ud800"\n', 1, "\\ud800 is not a Unicode character that JSON can carry"),
    ('a: "\\U00110000"\n', 1, "\\U00110000 is not a Unicode character that JSON can carry"),
    ('a: "\\q"\n', 1, "\\q is not an escape in double quotes; write \\\\ for a backslash"),
    ('a: 1\nb: "\\x4"\n', 2, "\\x in double quotes takes 2 hex digits"),
    ('a: 1\nb: "never\n  closed\n', 2, 'the quoted value opened on this line is never closed by "'),
    ("a: 'never closed\n", 1, "the quoted value opened on this line is never closed by '"),
    ("a: 1\nb: [x,\n  y\n", 2, "the [...] or {...} opened on this line is never closed"),
    ("a: [x y z\n", 1, "the [...] or {...} opened on this line is never closed"),
    ("a: 1\nb: x\u2028y\n", 2, "character U+2028 is a line break to YAML 1.1 but not to JSON"),
    ("a: x\x85y\n", 1, "character U+0085 is a line break to YAML 1.1 but not to JSON"),
    ("a: 1\n\nb: x\x07y\n", 3, "character U+0007 is not allowed in YAML"),
    ("a: x\ud800y\n", 1, "character U+D800 is not allowed in YAML"),
    ("a: 'x\n  \uffff'\n", 2, "character U+FFFF is not allowed in YAML"),
    ("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", 1, f"collections nested more than {MAX_DEPTH} deep (MAX_DEPTH)"),
    ("k" * 1025 + ": x\n", 1, "a key longer than 1024 characters (MAX_KEY_CHARS)"),
    ("description: Use when: the user asks\n", 1, "': ' inside a plain value starts a mapping, which cannot start "
                                                  "here; quote the value"),
    ("description: one line\n  key: value\n", 2, "': ' inside a plain value starts a mapping"),
    ('a: "x"#comment\n', 1, "a comment needs a space before its '#'"),
    ("a: [x]#comment\n", 1, "a comment needs a space before its '#'"),
    ("a: [x,#comment\n  y]\n", 1, "a comment needs a space before its '#'"),
    ('a: "x" y\n', 1, "unexpected 'y' after the value on this line"),
    ("a: [x: 1]\n", 1, "a 'key: value' pair inside [...] is not supported; write {key: value}"),
    ("a: {x}\n", 1, "a key in {...} needs ': value' after it on its line"),
    ("a: {x:1}\n", 1, "a key in {...} needs ': value' after it on its line"),
    ("a: [x, , y]\n", 1, "a value is missing before ','"),
    ("a: [x} \n", 1, "expected ',' or ']' in the [...] opened at line 1, found '}'"),
    ("a: - x\n", 1, "a list item ('- ') cannot start here; put the list on the lines below its key"),
    ("a: 1\n- x\n", 2, "a list item where a key was expected; indent the list under its key"),
    ('a: "1"\n  b: 2\n', 2, "this line is indented more than the key above it, and no value is open there"),
    ("a:\n  - [x]\n   - y\n", 3, "this line is indented more than the list item above it"),
    ("  a: 1\nb: 2\n", 2, "this line is indented less than the keys above it"),
    ("a: @x\n", 1, "a value cannot start with '@'; quote it"),
    ("a: |0\n  x\n", 1, "a block scalar's indentation indicator is 1 to 9, not 0"),
    ("a: |x\n  x\n", 1, "after '|' only a chomping indicator (+ or -), an indentation indicator (1-9) and a comment"),
    ("a: >-#c\n  x\n", 1, "after '-' only a chomping indicator"),
    ("a: [|]\n", 1, "a block scalar (|) cannot start inside [...] or {...}"),
    ("a: [:x]\n", 1, "a ':' with no key before it"),
    ("a: {[b]: c}\n", 1, "the key ['b'] is not a string to YAML"),
]


@pytest.mark.parametrize(("text", "line", "message"), REFUSALS, ids=[r[2][:60] for r in REFUSALS])
def test_a_construct_outside_the_subset_is_refused_naming_the_file_and_line(text, line, message):
    error = refusal(text)
    assert isinstance(error, ValueError)
    assert (error.source, error.line) == ("skills/demo/SKILL.md", line)
    assert error.message.startswith(message)
    assert str(error) == f"skills/demo/SKILL.md:{line}: {error.message}"


IN_A_FILE = [refused for refused in REFUSALS if "\n---" not in "\n" + refused[0]]  # a '---' line would close it


@pytest.mark.parametrize(("text", "line", "message"), IN_A_FILE, ids=[r[2][:60] for r in IN_A_FILE])
def test_a_refusal_in_a_skill_file_names_its_line_in_the_file(text, line, message):
    with pytest.raises(FrontmatterError) as caught:
        load("---\n" + text + "---\nBody\n", "skills/demo/SKILL.md")
    assert str(caught.value).startswith(f"skills/demo/SKILL.md:{line + 1}: {message[:20]}")


# Bounds: nesting, size, and a cost in proportion to the input.

def nested_mappings(depth):
    """A mapping `depth` mappings deep (the top one counts), one key to a line."""
    return "".join(" " * level + f"k{level}:\n" for level in range(depth - 1)) + " " * (depth - 1) + "leaf: 1\n"


def test_nesting_up_to_the_limit_parses_and_one_level_more_is_refused():
    value = parse("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n", "SKILL.md")
    for _ in range(MAX_DEPTH - 1):
        (value,) = value.values() if isinstance(value, dict) else value
    assert value == []
    value = parse(nested_mappings(MAX_DEPTH), "SKILL.md")
    for level in range(MAX_DEPTH - 1):
        value = value[f"k{level}"]
    assert value == {"leaf": 1}
    error = refusal(nested_mappings(MAX_DEPTH + 1))
    assert (error.line, error.message) == (MAX_DEPTH + 1, f"collections nested more than {MAX_DEPTH} deep (MAX_DEPTH)")


def test_a_large_frontmatter_within_the_size_limit_reads_as_pyyaml_reads_it():
    text = large_frontmatter(golden.LARGE_CHUNKS)
    assert 58 * 1024 < len(text.encode()) <= MAX_FRONTMATTER_BYTES
    ours = parse(text, "SKILL.md")
    assert len(ours) == golden.LARGE_CHUNKS
    assert same(ours, reference(f"large/{golden.LARGE_CHUNKS}", text))


def test_frontmatter_over_the_size_limit_is_refused_naming_the_limit():
    assert parse("a: " + "x" * (MAX_FRONTMATTER_BYTES - 4) + "\n", "SKILL.md")
    error = refusal("a: " + "x" * (MAX_FRONTMATTER_BYTES - 3) + "\n")
    assert error.message == f"the frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes (MAX_FRONTMATTER_BYTES)"
    two_bytes_each = "a: " + "é" * (MAX_FRONTMATTER_BYTES // 2)  # fewer characters than the limit, more bytes
    assert refusal(two_bytes_each).message == error.message


def calls_to_parse(text):
    """How many Python and builtin calls parsing `text` makes: a cost that can be counted instead of timed."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        parse(text, "SKILL.md")
    finally:
        sys.setprofile(None)
    return count


REPEATED = {  # frontmatter made of `n` repeats of one construct
    "the nesting, escaped, folded piece": large_frontmatter,
    "words of a plain scalar": lambda n: "a: " + "x " * n,
    "lines of a folded plain scalar": lambda n: "a: x\n" + "  y\n" * n,
    "escaped quotes": lambda n: 'a: "' + '\\" ' * n + '"',
    "lines of a quoted scalar": lambda n: "a: 'x\n" + "\n  y" * n + "'",
    "blank lines in a block scalar": lambda n: "a: |\n" + "\n" * n + "  x\n",
    "lines of a block scalar": lambda n: "a: >\n" + "  x\n" * n,
    "flow entries": lambda n: "a: [" + "x, " * n + "]",
    "flow lines": lambda n: "a: [\n" + "  x,\n" * n + "]",
    "list items": lambda n: "a:\n" + "  - x\n" * n,
    "keys": lambda n: "".join(f"k{i}: v\n" for i in range(n)),
    "keys after deep nesting": lambda n: nested_mappings(60) + "".join(f"z{i}: 1\n" for i in range(n)),
    "comment lines": lambda n: "a: 1\n" + "# c\n" * n,
}


@pytest.mark.parametrize("construct", list(REPEATED))
def test_parsing_costs_calls_in_proportion_to_the_input(construct):
    quarter = 50 if construct == "the nesting, escaped, folded piece" else 1000
    small, large = calls_to_parse(REPEATED[construct](quarter)), calls_to_parse(REPEATED[construct](4 * quarter))
    assert large <= 4.1 * small, f"4 times the input cost {large / small:.1f} times the calls"
