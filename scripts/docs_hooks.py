"""MkDocs hooks of the documentation site (mkdocs.yml): the build fails when the API reference leaves out a public
name, a public module has no page, or a page is missing from llms.txt; and it lists the decision records.

A module's public names are its `__all__` (less a name that starts with an underscore, private whatever the list
says); the reference's pages are docs/reference/api/*.md, each naming its module with `::: mcpserver.NAME`. After
mkdocstrings wrote the inventory of what it rendered (objects.inv), every public name of every module with a page
must be in it, and every module of the package whose name does not start with an underscore must have a page or be
in NOT_DOCUMENTED, with the reason.
"""

from __future__ import annotations

import ast
import logging
import re
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "server" / "mcpserver"
PAGES = ROOT / "docs" / "reference" / "api"
NOT_DOCUMENTED = {
    "mcpserver.legacy": "the initialize-based era, reached only through protocol.dispatch and the transports",
    "mcpserver.schema": "schemas from signatures, used through Server.tool and its input_schema=",
    "mcpserver.cli": "the command line, documented as one (reference/cli.md)",
}
log = logging.getLogger("mkdocs.hooks.api_reference")


def public_names(module: str) -> list[str]:
    """The module's `__all__`, read from its source (importing it is not needed, and costs the build nothing)."""
    relative = module.split(".")[1:]
    path = PACKAGE.joinpath(*relative, "__init__.py") if PACKAGE.joinpath(*relative).is_dir() else \
        PACKAGE.joinpath(*relative[:-1], relative[-1] + ".py") if relative else PACKAGE / "__init__.py"  # fmt: skip
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [str(name) for name in ast.literal_eval(node.value)]
    return []


def documented_modules() -> list[str]:
    return sorted({m for page in PAGES.glob("*.md") for m in re.findall(r"^::: (mcpserver[\w.]*)", page.read_text(),
                                                                         re.M)})  # fmt: skip


def package_modules() -> list[str]:
    """Every module and folder of the package whose own name does not start with an underscore."""
    found = ["mcpserver"]
    for path in sorted(PACKAGE.rglob("*")):
        relative = path.relative_to(PACKAGE)
        if any(part.startswith(("_", ".")) for part in relative.parts) or "__pycache__" in relative.parts:
            continue
        if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py":
            found.append("mcpserver." + ".".join(relative.with_suffix("").parts))
    return found


def inventory(site: Path) -> set[str]:
    body = (site / "objects.inv").read_bytes().partition(b"zlib.\n")[2]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines()}


def missing_references(site: Path) -> list[str]:
    rendered = inventory(site)
    documented = documented_modules()
    missing = [f"{module}: no page in docs/reference/api/" for module in package_modules()
               if module not in documented and module not in NOT_DOCUMENTED]  # fmt: skip
    for module in documented:
        missing += [f"{module}.{name}: in __all__, not in the API reference" for name in public_names(module)
                    if f"{module}.{name}" not in rendered and not name.startswith("_")]  # fmt: skip
    return missing


def pages_not_in_llms_txt(site: Path, docs: Path) -> list[str]:
    """Every page but the single ADRs (their index is listed) is in llms.txt, the index coding agents read."""
    listed = (site / "llms.txt").read_text(encoding="utf-8")
    pages = [page.relative_to(docs) for page in docs.rglob("*.md") if not page.match("adr/0*.md")]
    return [f"{page}: not in llms.txt (mkdocs.yml, the llmstxt plugin's sections)" for page in pages
            if not any(link in listed for link in llms_links(page))]


def llms_links(page: Path) -> list[str]:
    """How llms.txt may link a page: as the Markdown copy the plugin writes beside its HTML."""
    links = [f"/{page.with_suffix('')}/index.md)", f"/{page})"]
    if page.name in ("index.md", "README.md"):
        links.append(f"/{page.parent}/index.md)".replace("/./", "/"))
    return links


def on_config(config: Any, **kwargs: Any) -> Any:
    """The nav's decision records are every docs/adr/NNNN-*.md, in order: a record added on any branch is listed
    without an edit of mkdocs.yml, which would otherwise fail the strict build as a page left out of the nav."""
    records = sorted(str(path.relative_to(Path(config["docs_dir"])))
                     for path in (Path(config["docs_dir"]) / "adr").glob("[0-9]*.md"))  # fmt: skip
    for section in config["nav"] or []:
        for entries in section.values() if isinstance(section, dict) else []:
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and "Decision records" in entry:
                    entry["Decision records"] = ["adr/README.md", *records]
    return config


def on_post_build(config: Any, **kwargs: Any) -> None:
    site, docs = Path(config["site_dir"]), Path(config["docs_dir"])
    for problem in missing_references(site) + pages_not_in_llms_txt(site, docs):
        log.warning(problem)
