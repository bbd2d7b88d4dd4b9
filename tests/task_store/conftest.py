"""Host-only: the task stores against a real PostgreSQL server and under gunicorn. `make test` installs
Debian's postgresql package and psycopg (the `postgres` extra); each session starts its own server."""

import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "unit")]  # pgserver; the shared contract tests

from pgserver import PostgresServer  # noqa: E402


@pytest.fixture(scope="session")
def postgres():
    server = PostgresServer()
    try:
        server.start()
    except Exception as error:
        raise RuntimeError(f"PostgreSQL did not start: {error}\n{server.log()}") from error
    yield server
    server.stop()


def with_database(dsn, name):
    """dsn, naming another database of the same server."""
    return dsn.replace("/postgres?", f"/{name}?", 1)


@pytest.fixture
def database(postgres):
    """A fresh database for one test (tasks and their counts start from nothing), dropped after."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield with_database(postgres.dsn, name)
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def spec(request, tmp_path):
    """What --task-store names, for a test of both shared stores: an SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "tasks.db")
    return request.getfixturevalue("database")
