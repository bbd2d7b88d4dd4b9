"""completion/complete through the pure core: the limits of the result, the context a completer sees,
and the refusals (WIRE.md's CompleteRequest/CompleteResult; schema: completion.values maxItems 100)."""

import pytest
from mcpserver import ConfigError, Server
from mcptest import answer, request

CITIES = [f"city{n:03}" for n in range(250)]


@pytest.fixture
def server():
    server = Server("completions", "1.0.0")
    seen = []

    @server.prompt(completions={"city": CITIES, "mood": ["Calm", "calmer", "busy"]})
    def trip(city: str, mood: str = "calm") -> str:
        return f"{city} {mood}"

    def streets(value, resolved):
        seen.append(resolved)
        return [f"{resolved.get('city', '?')}/{value}{n}" for n in range(3)]

    @server.resource_template("maps://{city}/{street}", completions={"street": streets})
    def street_map(city: str, street: str) -> str:
        return f"{city}/{street}"

    server.seen = seen
    return server


def complete(server, ref, name, value, **context):
    params = {"ref": ref, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = context
    return answer(request("completion/complete", **params), server)


def test_at_most_100_values_go_back_with_the_total_and_has_more(server):
    completion = complete(server, {"type": "ref/prompt", "name": "trip"}, "city", "city")["result"]["completion"]
    assert completion["values"] == CITIES[:100] and completion["total"] == 250 and completion["hasMore"] is True
    narrow = complete(server, {"type": "ref/prompt", "name": "trip"}, "city", "city24")["result"]["completion"]
    assert narrow == {"values": [f"city24{n}" for n in range(10)], "total": 10, "hasMore": False}


def test_a_static_list_matches_by_case_insensitive_prefix(server):
    values = complete(server, {"type": "ref/prompt", "name": "trip"}, "mood", "CAL")["result"]["completion"]["values"]
    assert values == ["Calm", "calmer"]


def test_a_function_sees_the_arguments_the_client_resolved(server):
    ref = {"type": "ref/resource", "uri": "maps://{city}/{street}"}
    result = complete(server, ref, "street", "main", arguments={"city": "oslo"})["result"]
    assert result["completion"]["values"] == ["oslo/main0", "oslo/main1", "oslo/main2"]
    assert server.seen == [{"city": "oslo"}]


def test_an_argument_without_completions_gets_no_values(server):
    completion = complete(server, {"type": "ref/resource", "uri": "maps://{city}/{street}"}, "city", "o")
    assert completion["result"]["completion"] == {"values": [], "total": 0, "hasMore": False}


@pytest.mark.parametrize(("ref", "argument", "context", "says"), [
    ({"type": "ref/prompt", "name": "nope"}, {"name": "city", "value": ""}, None, "Unknown prompt"),
    ({"type": "ref/resource", "uri": "maps://{x}"}, {"name": "city", "value": ""}, None, "Unknown resource template"),
    ({"type": "ref/tool", "name": "trip"}, {"name": "city", "value": ""}, None, '"ref" must be'),
    ({"type": "ref/prompt", "name": "trip"}, {"name": "city", "value": 7}, None, '"argument" must be'),
    ({"type": "ref/prompt", "name": "trip"}, {"name": "city"}, None, '"argument" must be'),
    ({"type": "ref/prompt", "name": "trip"}, {"name": "city", "value": ""}, {"arguments": {"mood": 1}},
     "context.arguments must be an object of strings"),
], ids=["unknown-prompt", "unknown-template", "tool-ref", "value-not-string", "no-value", "context-not-strings"])
def test_bad_requests_are_invalid_params(server, ref, argument, context, says):
    params = {"ref": ref, "argument": argument}
    if context is not None:
        params["context"] = context
    error = answer(request("completion/complete", **params), server)["error"]
    assert error["code"] == -32602 and says in error["message"]


def test_the_capability_is_declared_only_when_something_completes():
    plain = Server("plain", "1.0.0")
    plain.prompt(lambda topic: topic, name="p")
    assert "completions" not in plain.capabilities()
    error = answer(request("completion/complete", ref={"type": "ref/prompt", "name": "p"},
                           argument={"name": "topic", "value": ""}), plain)["error"]
    assert error["code"] == -32601


@pytest.mark.parametrize(("completions", "says"), [
    ({"nope": ["a"]}, "not one of its arguments"),
    ({"topic": "abc"}, "must be a list of strings or a function"),
    ({"topic": ["a", 1]}, "must be a list of strings or a function"),
])
def test_a_completion_that_cannot_work_is_refused_at_registration(completions, says):
    with pytest.raises(ConfigError, match=says):
        Server("bad", "1.0.0").prompt(lambda topic: topic, name="p", completions=completions)
