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
#: A secret's value in ``key=value`` text: quoted, or everything up to the next
#: ``key=`` (an unquoted value with spaces is not valid, but must not leak either).
_KV_SECRET = re.compile(
    r"(?i)\b(" + "|".join(sorted(SECRET_KEYS)) + r")\s*=\s*('(?:[^'\\]|\\.)*'|.*?(?=\s+[A-Za-z_][\w.-]*\s*=|$))"
)


def ambiguous_userinfo(url: str) -> bool:
    """Whether the user part of ``url`` (``scheme://USER:PASSWORD@host...``) holds a
    character a URL parser takes for the end of it (``/``, ``?``, ``#``, another
    ``@``): such a password must be percent-encoded, and is hidden whole."""
    _, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return False
    userinfo = rest[: rest.rindex("@")]
    return any(c in userinfo for c in "/?#@")


def _mask_userinfo(url: str) -> str:
    """``url`` with everything between ``://`` and its last ``@`` hidden."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest[rest.rindex('@') + 1 :]}"


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
    if ambiguous_userinfo(dsn):
        return redact_url(dsn)
    parts = _conninfo(dsn)
    if parts is None:
        return redact_url(dsn) if "://" in dsn else _KV_SECRET.sub(r"\1=***", dsn)
    from psycopg.conninfo import make_conninfo

    return str(make_conninfo(**{k: v for k, v in parts.items() if k.lower() not in SECRET_KEYS}))


def where_dsn(dsn: str) -> str:
    """Where ``dsn`` points, for a message: ``host:port/database`` (no user, no
    password)."""
    parts = None if ambiguous_userinfo(dsn) else _conninfo(dsn)
    if parts is None:
        return redact_dsn(dsn)
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port") or "5432"
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def redact_url(url: str) -> str:
    """``url`` without the password of its user part or its query."""
    if ambiguous_userinfo(url):
        url = _mask_userinfo(url)
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


def check_dsn(dsn: str, what: str) -> None:
    """Refuse (``ValueError``, its message redacted, no chained cause that could hold
    the secret) a PostgreSQL connection string that does not parse, or whose password
    a URL parser would split (``what``: who needs it, for the message)."""
    if ambiguous_userinfo(dsn):
        raise ValueError(
            f"{what}: the user part of the connection URL {redact_url(dsn)} holds '/', '?', '#' or '@': "
            "percent-encode them in the password (urllib.parse.quote(password, safe=''))"
        )
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - depends on the installation
        return
    try:
        conninfo_to_dict(dsn)
    except Exception:
        pass
    else:
        return
    raise ValueError(
        f"{what}: cannot parse the PostgreSQL connection string {redact_dsn(dsn)}: write it as a URL "
        "(postgresql://user:password@host:port/database, the password percent-encoded) or as key=value pairs "
        "with values that hold spaces in single quotes"
    )


def check_url(url: str, what: str) -> None:
    """Refuse (``ValueError``, redacted) a service URL whose password a URL parser
    would split, or that does not parse (``what``: who needs it)."""
    if ambiguous_userinfo(url):
        raise ValueError(
            f"{what}: the user part of the URL {redact_url(url)} holds '/', '?', '#' or '@': percent-encode them "
            "in the password (urllib.parse.quote(password, safe=''))"
        )
    try:
        split = urlsplit(url)
        split.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        pass
    else:
        return
    raise ValueError(f"{what}: cannot parse the URL {redact_url(url)}")


#: A URL's user part with a password (``scheme://user:secret@``).
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]*:[^/\s@]*@")


def redact_text(text: str) -> str:
    """Free text - an error's trace - with every URL's password and every secret
    ``key=value`` masked, for a record kept beside the data."""
    return _KV_SECRET.sub(r"\1=***", _URL_USERINFO.sub(r"\1***@", text))
