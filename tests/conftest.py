"""Shared fixtures: one SparkSession, one Redis and one PostgreSQL server for the
whole test session (the servers are real, started from the Debian packages that
scripts/bootstrap.sh installs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from falkirk.spark import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[object]:
    """A real redis-server on 127.0.0.1 (a free port, data in a temporary directory)."""
    from falkirk.services import RedisServer

    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL on 127.0.0.1 with prepared transactions allowed."""
    from falkirk.services import PostgresServer

    with PostgresServer() as server:
        yield server
