"""Where the live dashboard listens (``Engine(..., ui=...)``), checked when the engine
is built: before any work, and without loading the web server
(:mod:`falkirk.observe.dashboard` serves it)."""

from __future__ import annotations

import ipaddress
import logging
import socket

from falkirk.graph import GraphError

logger = logging.getLogger(__name__)

__all__ = ["parse_address"]


def parse_address(ui: str, *, token: str | None = None, allow_remote: bool = False) -> tuple[str, int]:
    """``"PORT"`` (on 127.0.0.1), ``"HOST:PORT"`` or ``"[IPv6]:PORT"``; port 0 picks a
    free one. The host must resolve (checked now, not when the server starts). A
    host that is not the loopback needs ``token`` (a bearer token every request must
    carry) or ``allow_remote=True``."""
    if ui.startswith("["):
        host, _, rest = ui[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else "-1"
    else:
        host, _, port = ui.rpartition(":")
        if ":" in host:
            raise GraphError(f"ui={ui!r}: write an IPv6 address in brackets, e.g. '[::1]:8050'")
    number = int(port) if port.isascii() and port.isdigit() else -1
    if not 0 <= number <= 65535:
        raise GraphError(f"ui={ui!r}: give 'PORT' or 'HOST:PORT' (e.g. '127.0.0.1:8050'; port 0 picks a free one)")
    host = host or "127.0.0.1"
    try:
        found = socket.getaddrinfo(host, number, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise GraphError(f"ui={ui!r}: host {host!r} is not an address of this machine or a name that resolves ({exc})") from exc
    if not all(ipaddress.ip_address(str(f[4][0]).split("%")[0]).is_loopback for f in found):
        if token is None and not allow_remote:
            raise GraphError(
                f"ui={ui!r} is reachable from other machines: give ui_token= (a bearer token every request "
                "must carry), or allow_remote=True to let anyone who reaches the port read the dashboard, or "
                "bind 127.0.0.1"
            )
        if token is None:
            logger.warning("falkirk dashboard on %s: reachable from other machines, without authentication (allow_remote=True)", host)
    if token is not None and (len(token) < 16 or len(set(token)) < 8 or any(c.isspace() for c in token)):
        raise GraphError(
            "ui_token= must be at least 16 characters, at least 8 of them different, no spaces "
            "(e.g. secrets.token_urlsafe())"
        )
    return host, number
