"""A server with what a Server Card needs of serverInfo (a namespace/name, a description), for
tests/http/test_server_card.py."""

from mcpserver import Server

server = Server("io.example/weather", "2.1.0", title="Weather", description="Forecasts for any city, a day ahead.",
                website_url="https://weather.example.com")


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather in `city`."""
    return f"Sunny in {city}"
