"""The starter server's tools through the real protocol, in both eras (pytest test_server.py)."""

import pytest
from mcpserver.testing import Client

from server import server


@pytest.fixture(params=["modern", "legacy"])
def client(request):
    with Client(server, era=request.param) as client:
        yield client


def test_add(client):
    assert client.call_tool("add", {"a": 2, "b": 3}).structured == {"sum": 5}


def test_convert(client):
    assert client.call_tool("convert", {"value": 10, "unit": "km"}).text == "6.214 mi"


def test_a_negative_distance_is_an_error_the_model_can_read(client):
    result = client.call_tool("convert", {"value": -1, "unit": "km"})
    assert result.is_error and "zero or more" in result.text


def test_a_unit_outside_the_schema_is_refused_before_the_tool_runs(client):
    assert client.call_tool("convert", {"value": 1, "unit": "yards"}).is_error
