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
    from falkirk.testing.services import RedisServer

    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL on 127.0.0.1 with prepared transactions allowed."""
    from falkirk.testing.services import PostgresServer

    with PostgresServer() as server:
        yield server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first (in their order otherwise): the workers then start on the long
    crash chains and end on short tests, instead of one worker running a chain of
    minutes alone at the end. The cluster's tests stay together at the front (one
    worker takes them in turn; they share a lock)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``FALKIRK_TEST_TIMES=FILE``: each phase of each test that took a second
    or more, or failed, appended to FILE as it ends (a suite stopped by a time limit
    still tells where its time went)."""
    import os

    path = os.environ.get("FALKIRK_TEST_TIMES")
    if path and (report.duration >= 1 or report.failed):
        with open(path, "a") as out:
            out.write(f"{report.duration:.1f}\t{report.outcome}\t{report.when}\t{report.nodeid}\n")
