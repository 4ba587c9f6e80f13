"""Moved to :mod:`falkirk.testing.services` (issue 31): throw-away Redis and
PostgreSQL servers on 127.0.0.1 for tests and demos. This old path still works,
with a DeprecationWarning."""

from __future__ import annotations

import warnings

from falkirk.testing.services import (
    PostgresServer,
    RedisServer,
    ServiceError,
    free_port,
    postgres_bin,
)

__all__ = ["PostgresServer", "RedisServer", "ServiceError", "free_port", "postgres_bin"]

warnings.warn("falkirk.services moved to falkirk.testing.services; import it from there", DeprecationWarning, stacklevel=2)
