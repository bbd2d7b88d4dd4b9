"""The frontmatter parser's reference, as golden data: what PyYAML's `yaml.safe_load` makes of every input of
tests/unit/test_frontmatter.py, in frontmatter/golden.json, each beside the sha256 of its input. PyYAML is built per
platform and is not in the lab's cells, so every cell compares the parser with this file instead; on the host,
test_the_golden_file_is_what_pyyaml_reads_today checks the file against PyYAML itself, so it cannot drift.

    python tests/unit/frontmatter_golden.py     # after changing the corpora or PyYAML: writes golden.json again

PyYAML's values are kept with their types, which JSON alone would lose: a date, a timestamp, bytes, and a mapping
whose keys are not all text (or start with "$") are written as {"$date": ...}, {"$datetime": ...}, {"$bytes": ...}
and {"$map": [[key, value], ...]}; every other value is the JSON value of the same type (1, 1.0 and true stay apart,
as do key orders, NaN and -0.0).
"""

import base64
import datetime
import hashlib
import json
import pathlib

HERE = pathlib.Path(__file__).parent / "frontmatter"
FILE = HERE / "golden.json"
STAND_INS = {"␣": " ", "→": "\t", "␍": "\r"}
LARGE_CHUNKS = 220  # test_a_large_frontmatter_within_the_size_limit_reads_as_pyyaml_reads_it's size


def read_corpus():
    """corpus.txt's documents by name (the file's first lines say how it is written)."""
    documents = {}
    name = None
    for line in (HERE / "corpus.txt").read_text(encoding="utf-8").removesuffix("\n").split("\n"):
        if line.startswith("=== "):
            name = line[4:]
            assert name not in documents, f"two documents named {name!r}"
            documents[name] = ""
        elif name is not None:
            for stand_in, char in STAND_INS.items():
                line = line.replace(stand_in, char)
            documents[name] += line + "\n"
    return documents


CORPUS = read_corpus()
PUBLIC = json.loads((HERE / "public.json").read_text(encoding="utf-8"))["files"]


def large_frontmatter(chunks):
    """`chunks` copies of a piece of frontmatter that nests, folds, escapes and quotes (about 275 bytes each)."""
    piece = ('k{n}:\n  description: "Escapes \\"quoted\\" \\t \\u00e9 \\U0001F600 and a folded\n    line"\n'
             "  tools: [Read, 'it''s', {deep: [1, 2.5, yes, ~]}]\n"
             "  steps:\n    - name: step {n}\n      run: |\n        echo one\n        echo two\n"
             "    - >-\n      folded\n      text\n  plain: one\n    two # comment\n")
    return "".join(piece.replace("{n}", str(n)) for n in range(chunks))


def inputs():
    """Every text the tests compare with the reference, by the name golden.json keeps it under."""
    found = {}
    for name, text in CORPUS.items():
        found[f"corpus/{name}/with-final-break"] = text
        found[f"corpus/{name}/without"] = text.removesuffix("\n")
    for entry in PUBLIC:
        found[f"public/{entry['repository']}/{entry['path']}"] = entry["frontmatter"]
    found[f"large/{LARGE_CHUNKS}"] = large_frontmatter(LARGE_CHUNKS)
    return found


def digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def encode(value):
    """A value PyYAML made, as JSON that keeps its types."""
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: encode(item) for key, item in value.items()}
        return {"$map": [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, datetime.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"$date": value.isoformat()}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"no golden form for a {type(value).__name__}: {value!r}")


def decode(data):
    """The value `encode` wrote."""
    if isinstance(data, list):
        return [decode(item) for item in data]
    if isinstance(data, dict):
        if set(data) == {"$map"}:
            return {_hashable(decode(key)): decode(item) for key, item in data["$map"]}
        if set(data) == {"$datetime"}:
            return datetime.datetime.fromisoformat(data["$datetime"])
        if set(data) == {"$date"}:
            return datetime.date.fromisoformat(data["$date"])
        if set(data) == {"$bytes"}:
            return base64.b64decode(data["$bytes"])
        return {key: decode(item) for key, item in data.items()}
    return data


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def made_by(yaml):
    """The golden file's contents as this PyYAML makes them."""
    return {
        "reference": f"PyYAML {yaml.__version__}: yaml.safe_load",
        "documents": {name: {"sha256": digest(text), "value": encode(yaml.safe_load(text))}
                      for name, text in inputs().items()},
    }


def dumps(golden):
    """golden.json's text: one document a line, so a change reads as the lines it changed."""
    lines = [f"  {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False)}" for name, entry in
             golden["documents"].items()]
    return ('{\n  "reference": ' + json.dumps(golden["reference"]) + ',\n  "documents": {\n  ' +
            ",\n  ".join(lines) + "\n  }\n}\n")


def load():
    return json.loads(FILE.read_text(encoding="utf-8"))


if __name__ == "__main__":
    import yaml

    FILE.write_text(dumps(made_by(yaml)), encoding="utf-8")
    print(f"wrote {FILE} with PyYAML {yaml.__version__}")
