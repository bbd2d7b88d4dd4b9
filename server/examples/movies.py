"""A small cinema: search a catalogue, price and book tickets, read films as resources.

    python -m mcpserver server/examples/movies.py
"""

import json
from typing import Literal, Optional

from mcpserver import Server, ToolError

server = Server("movies", "1.0.0", title="Cinema Paradiso",
                instructions="Search the catalogue with search_movies, then book with book_tickets. "
                             "Prices are in euro cents to avoid rounding.")

Genre = Literal["drama", "comedy", "sci-fi", "animation", "thriller"]

CATALOGUE = [
    {"id": "m1", "title": "Blade Runner", "year": 1982, "genre": "sci-fi", "minutes": 117,
     "showtimes": ["18:00", "21:00"], "price_cents": 1200},
    {"id": "m2", "title": "Spirited Away", "year": 2001, "genre": "animation", "minutes": 125,
     "showtimes": ["14:00", "16:30"], "price_cents": 900},
    {"id": "m3", "title": "Amélie", "year": 2001, "genre": "comedy", "minutes": 122,
     "showtimes": ["19:00"], "price_cents": 1000},
    {"id": "m4", "title": "Parasite", "year": 2019, "genre": "thriller", "minutes": 132,
     "showtimes": ["20:00", "22:30"], "price_cents": 1200},
    {"id": "m5", "title": "Cinema Paradiso", "year": 1988, "genre": "drama", "minutes": 155,
     "showtimes": ["17:00"], "price_cents": 1000},
]
BY_ID = {movie["id"]: movie for movie in CATALOGUE}
CHILD_DISCOUNT = 0.5  # children pay half
GROUP_SIZE, GROUP_DISCOUNT = 6, 0.1  # 10% off the whole booking from six tickets


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def search_movies(query: str = "", genre: Optional[Genre] = None, year_from: int = 1900) -> dict:
    """Find films by words in the title, genre and earliest year.

    Args:
        query: Words to look for in the title (case-insensitive); empty matches every film.
        genre: Only films of this genre.
        year_from: Only films released in this year or later.
    """
    words = query.lower().split()
    found = [
        {key: movie[key] for key in ("id", "title", "year", "genre", "showtimes", "price_cents")}
        for movie in CATALOGUE
        if all(word in movie["title"].lower() for word in words)
        and (genre is None or movie["genre"] == genre)
        and movie["year"] >= year_from
    ]
    return {"count": len(found), "movies": found}


BOOKING_SCHEMA = {
    "type": "object",
    "properties": {
        "movie": {"type": "string"},
        "showtime": {"type": "string"},
        "tickets": {"type": "integer", "minimum": 1},
        "subtotal_cents": {"type": "integer", "minimum": 0},
        "discount_cents": {"type": "integer", "minimum": 0},
        "total_cents": {"type": "integer", "minimum": 0},
    },
    "required": ["movie", "showtime", "tickets", "subtotal_cents", "discount_cents", "total_cents"],
}


@server.tool(output_schema=BOOKING_SCHEMA, annotations={"destructiveHint": False, "openWorldHint": False})
def book_tickets(movie_id: str, showtime: str, adults: int, children: int = 0) -> dict:
    """Book seats for one showing and return the price. Children pay half; six or more tickets get 10% off.

    Args:
        movie_id: The film's id, as search_movies returns it (e.g. "m1").
        showtime: One of the film's showtimes, "HH:MM".
        adults: Adult tickets, 0 to 20.
        children: Child tickets, 0 to 20.
    """
    movie = BY_ID.get(movie_id)
    if movie is None:
        raise ToolError(f"No film has id {movie_id!r}; ids are " + ", ".join(BY_ID))
    if showtime not in movie["showtimes"]:
        raise ToolError(f"{movie['title']} shows at {', '.join(movie['showtimes'])}, not {showtime}")
    if not (0 <= adults <= 20 and 0 <= children <= 20) or adults + children == 0:
        raise ToolError("Book between 1 and 40 tickets: adults and children from 0 to 20 each")
    price = movie["price_cents"]
    subtotal = adults * price + round(children * price * CHILD_DISCOUNT)
    tickets = adults + children
    discount = round(subtotal * GROUP_DISCOUNT) if tickets >= GROUP_SIZE else 0
    return {"movie": movie["title"], "showtime": showtime, "tickets": tickets, "subtotal_cents": subtotal,
            "discount_cents": discount, "total_cents": subtotal - discount}


@server.resource("movies://catalogue", name="catalogue", mime_type="application/json")
def catalogue() -> str:
    """Every film with its showtimes and price."""
    return json.dumps(CATALOGUE, ensure_ascii=False)


@server.resource_template("movies://films/{movie_id}", name="film", mime_type="application/json")
def film(movie_id: str) -> Optional[str]:
    """One film by id."""
    movie = BY_ID.get(movie_id)
    return None if movie is None else json.dumps(movie, ensure_ascii=False)


@server.prompt()
def recommend(mood: str, company: str = "alone") -> str:
    """Ask for a film suggestion that fits a mood.

    Args:
        mood: How the viewer feels, in a few words.
        company: Who they watch with.
    """
    titles = ", ".join(f"{m['title']} ({m['genre']})" for m in CATALOGUE)
    return (f"I feel {mood} and will watch {company}. From this programme: {titles}, "
            "which one film would you suggest, and at which showtime?")
