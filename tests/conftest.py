"""Shared fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from falkirk.spark import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
