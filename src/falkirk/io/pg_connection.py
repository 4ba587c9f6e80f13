"""Connections to PostgreSQL for the sink: psycopg loaded on demand, a connection
retried while the server refuses it, and a statement retried while the connection is
lost (a restart, a fail-over, a network blip), never when the server refused it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from falkirk.io.exceptions import SinkError
from falkirk.redact import where_dsn
from falkirk.storage.pairs import keepalive_options

_T = TypeVar("_T")


def psycopg_module() -> Any:
    """psycopg 3, or a SinkError saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SinkError("PostgresSink needs psycopg 3: pip install 'falkirk[services]'") from exc
    return psycopg


#: SQLSTATEs of a server going away or not accepting connections yet (besides class
#: 08, connection exceptions): admin, crash and "cannot connect now" shutdowns.
_GONE = ("57P01", "57P02", "57P03")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a lost or refused connection (worth retrying), not an error
    the same statement would meet again (a limit, a full disk, a cancelled query)."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in _GONE


def retrying(psycopg: Any, attempt: Callable[[], _T], retry_seconds: float, what: str) -> _T:
    """``attempt()``, run again with backoff while it fails with a lost or refused
    connection, for at most ``retry_seconds``; any other error is raised at once.
    Every attempt must be safe to repeat after a connection lost at any point."""
    deadline = time.monotonic() + retry_seconds
    pause = 0.1
    while True:
        try:
            return attempt()
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):
                raise SinkError(f"{what}: PostgreSQL refused it (SQLSTATE {exc.sqlstate}): {exc}".strip()) from exc
            if time.monotonic() + pause > deadline:
                raise SinkError(
                    f"{what}: PostgreSQL kept failing for {retry_seconds:.0f} s (a larger retry_seconds= "
                    f"waits longer for it to come back): {exc}".strip()
                ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def connect(psycopg: Any, dsn: str, autocommit: bool, retry_seconds: float = 0.0) -> Any:
    """A connection, retried for ``retry_seconds`` while the server refuses it."""
    return retrying(
        psycopg,
        lambda: psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10, **keepalive_options(dsn)),
        retry_seconds,
        f"cannot connect to PostgreSQL at {where_dsn(dsn)}",
    )
