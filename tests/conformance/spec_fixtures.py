"""A server answering to the names the spec's own example requests use (get_weather, code_review, ...),
plus every example Tool definition from the spec registered as it is written."""

import glob
import json
import os

from mcpserver import Server, content

SPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "spec",
                    "examples-2026-07-28")

server = Server("spec-fixtures", "1.0.0")


@server.tool()
def get_weather(location: str) -> str:
    """Get current weather information for a location."""
    return f"Sunny in {location}, 22°C"


@server.tool()
def build_simulation(city: str) -> dict:
    """Build a city simulation."""
    return {"city": city, "population": 1000}


@server.resource("file:///project/src/main.rs", name="main.rs", mime_type="text/x-rust")
def main_rs() -> str:
    return 'fn main() {\n    println!("Hello world!");\n}\n'


@server.resource("file:///project/logo.png", name="logo.png", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG\r\n\x1a\n"


@server.resource_template("file:///project/{+path}", name="project-file")
def project_file(path: str) -> None:
    return None  # nothing else exists: resources/read answers "Resource not found"


@server.prompt()
def code_review(code: str) -> list:
    """Asks the LLM to analyze code quality and suggest improvements."""
    return [{"role": "user", "content": f"Please review this Python code:\n{code}"},
            {"role": "assistant", "content": content.text("I will review it.")}]


def _returns_for(definition):
    schema = definition.get("outputSchema")
    if schema is None:
        return lambda **arguments: "ok"
    if schema.get("type") == "array":
        return lambda **arguments: []
    sample = {name: {"string": "x", "number": 1.5, "integer": 1, "boolean": True, "array": [], "object": {}}.get(
        prop.get("type"), "x") for name, prop in schema.get("properties", {}).items()}
    return lambda **arguments: sample


for path in sorted(glob.glob(os.path.join(SPEC, "Tool", "*.json"))):
    with open(path, encoding="utf-8") as file:
        definition = json.load(file)
    if definition["name"] in server.tools:
        continue
    server.tool(_returns_for(definition), name=definition["name"], title=definition.get("title"),
                description=definition.get("description"), input_schema=definition["inputSchema"],
                output_schema=definition.get("outputSchema"), annotations=definition.get("annotations"),
                icons=definition.get("icons"))
