"""Connection strings without their secrets, for messages, logs and descriptions.

A PostgreSQL DSN (a ``postgresql://`` URL or ``key=value`` pairs) or a service URL
(``redis://:secret@host/0``) may hold a password. Whatever Falkirk prints, logs or
records about one goes through these functions: the password is removed, the rest
(host, port, database, user) kept, so that the message still says where.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: Query parameters and ``key=value`` keys that hold a secret.
SECRET_KEYS = frozenset({"password", "passwd", "pass", "pwd", "secret", "token", "sslpassword", "requirepass"})
_KV_SECRET = re.compile(r"(?i)\b(" + "|".join(sorted(SECRET_KEYS)) + r")\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def _conninfo(dsn: str) -> dict[str, Any] | None:
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - depends on the installation
        return None
    try:
        return dict(conninfo_to_dict(dsn))
    except Exception:  # not a valid DSN: redacted as text below
        return None


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password (as ``key=value`` pairs when it parses)."""
    parts = _conninfo(dsn)
    if parts is None:
        return redact_url(dsn) if "://" in dsn else _KV_SECRET.sub(r"\1=***", dsn)
    from psycopg.conninfo import make_conninfo

    return str(make_conninfo(**{k: v for k, v in parts.items() if k.lower() not in SECRET_KEYS}))


def where_dsn(dsn: str) -> str:
    """Where ``dsn`` points, for a message: ``host:port/database`` (no user, no
    password)."""
    parts = _conninfo(dsn)
    if parts is None:
        return redact_dsn(dsn)
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port") or "5432"
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def redact_url(url: str) -> str:
    """``url`` without the password of its user part or its query."""
    try:
        split = urlsplit(url)
    except ValueError:
        return _KV_SECRET.sub(r"\1=***", re.sub(r"//[^/@]*@", "//***@", url))
    netloc = split.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:***@{host}" if ":" in user else f"{user}@{host}"
    query = urlencode([(k, "***" if k.lower() in SECRET_KEYS else v) for k, v in parse_qsl(split.query, keep_blank_values=True)])
    return urlunsplit((split.scheme, netloc, split.path, query, split.fragment))
