"""The live dashboard a running engine serves (``Engine(..., ui="127.0.0.1:8050")``).

* ``/``: the dataflow drawn by Graphviz with every processor shaded by its
  fault-tolerance policy (as in the Falkirk Wheel paper's Figure 1) and its live epoch
  and rate written in its box; a table of per-processor figures (epoch, frontier, last
  checkpoint, low-watermark, state size, records/s); the last recovery's chosen
  frontiers with the solver's reason for each; a timeline of epochs, checkpoints,
  garbage collection, failures and recoveries. The page polls ``/api/status`` every
  second and loads nothing from outside the engine.
* ``/api/status``: JSON, ``{"pipeline", "epoch" (last committed), "processors":
  {name: {"policy", "kind", "epoch", "frontier", "last_checkpoint", "low_watermark",
  "state_bytes", "records", "records_per_second"}}, "edges", "last_recovery",
  "timeline"}``.
* ``/api/graph.svg``: the drawing alone. ``/metrics``: Prometheus metrics (see
  :mod:`falkirk.observe.telemetry`).

Served by uvicorn (Starlette) on a background thread for as long as ``run()`` runs;
bound to 127.0.0.1 unless another host is given. It changes nothing, but it shows
the pipeline's structure and figures, so:

* without a token, every request must name the dashboard in its ``Host`` header
  (``localhost``, ``127.0.0.1``, ``[::1]``, the bound host, and bound to every
  interface this machine's names and addresses): a page of another site whose name
  resolves to this machine (DNS rebinding) gets ``400`` (with a token any name is
  served: such a page cannot send the token);
* a host other than the loopback is refused unless the engine is given a bearer
  token (``ui_token=``: every request must carry ``Authorization: Bearer <token>``,
  or ``?token=<token>`` - the page passes it on to its own requests) or is told
  ``allow_remote=True`` (anyone who reaches the port reads it).

Drawing needs Graphviz's ``dot``
(Debian package ``graphviz``, installed by ``scripts/bootstrap.sh``); without it the
page says so and shows everything else.
"""

from __future__ import annotations

import contextlib
import hmac
import html
import logging
import re
import shutil
import socket
import subprocess
import threading
import time
from importlib import resources
from typing import Any

import uvicorn
from prometheus_client import make_asgi_app
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from falkirk.graph import GraphError
from falkirk.graph.edge_id import EdgeId
from falkirk.observe.telemetry import Telemetry

logger = logging.getLogger(__name__)

#: Fill colour of each policy in the drawing (and the page's legend).
POLICY_COLOURS = {
    "Stateless": "#e8e8e8",
    "LogOutputs": "#b9d7f0",
    "LazyCheckpoint": "#cfe8c0",
    "EagerCheckpoint": "#7cc47c",
    "FullHistory": "#f5d38a",
    "AtBarriers": "#d9b3e6",
}
OTHER_COLOUR = "#ffffff"


#: The names a request may give the dashboard in its Host header, besides the bound host.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_SLOT = re.compile(r"\{\{(\w+)\}\}")


class _BearerToken:
    """ASGI middleware: refuse (401) a request that does not carry the token, as
    ``Authorization: Bearer <token>`` or ``?token=<token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._carries(Request(scope)):
            response = PlainTextResponse("a bearer token is required (Authorization: Bearer ..., or ?token=...)", status_code=401)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _carries(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        offered = given.strip() if scheme.lower() == "bearer" else request.query_params.get("token", "")
        return hmac.compare_digest(offered.encode(), self.token)


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with every ``{{name}}`` replaced by ``values[name]``, in one pass:
    what is filled in is never read for slots again."""
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def graph_dot(description: dict[str, Any]) -> str:
    """The pipeline as Graphviz DOT: one box per processor (id ``proc-NAME``), filled
    by policy, with a third label line the page fills with live figures; an edge
    from an output other than ``out`` is labelled with its port (``late``,
    ``rejected``, ``errors``...)."""
    lines = [
        "digraph falkirk {",
        '  rankdir=LR; bgcolor="transparent";',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, margin="0.15,0.06"];',
        '  edge [color="#666666", arrowsize=0.7];',
    ]
    for name, info in description["processors"].items():
        fill = POLICY_COLOURS.get(info["policy"], OTHER_COLOUR)
        label = "\\n".join([_dot(name), _dot(f"{info['kind']} · {info['policy']}"), "epoch 0000 · 00000 rows/s"])
        lines.append(f'  "{_dot(name)}" [id="proc-{_dot(name)}", label="{label}", fillcolor="{fill}"];')
    for name, edge in description["topology"]["edges"].items():
        port = EdgeId.parse(name).port
        label = "" if port == "out" else f' [label="{_dot(port)}", fontname="Helvetica", fontsize=9, fontcolor="#444444"]'
        lines.append(f'  "{_dot(edge["src"])}" -> "{_dot(edge["dst"])}"{label};')
    lines.append("}")
    return "\n".join(lines)


def _dot(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def render_svg(dot_source: str) -> str:
    """SVG from Graphviz's ``dot``; raises :class:`FileNotFoundError` without it."""
    dot = shutil.which("dot")
    if dot is None:
        raise FileNotFoundError("Graphviz's dot is not installed (Debian package graphviz; scripts/bootstrap.sh installs it)")
    done = subprocess.run([dot, "-Tsvg"], input=dot_source.encode(), capture_output=True, timeout=30, check=True)
    svg = done.stdout.decode()
    return svg[svg.index("<svg") :]  # without the XML prologue: inlined in the page


def allowed_hosts(host: str, *, token: bool = False) -> list[str]:
    """The names a request's Host header may give (see the module docstring). With a
    token any: a page of another site (DNS rebinding) cannot send the token. Bound to
    every interface (``0.0.0.0``, ``::``) without one: also this machine's names and
    addresses, as other machines reach it."""
    if token:
        return ["*"]
    bound = f"[{host}]" if ":" in host else host
    names = [*LOOPBACK_NAMES, bound.lower()]
    if host in ("0.0.0.0", "::"):
        machine = socket.gethostname()
        names += [machine.lower(), socket.getfqdn().lower()]
        with contextlib.suppress(socket.gaierror):
            names += [f"[{a}]" if ":" in a else a for a in {str(f[4][0]).split("%")[0] for f in socket.getaddrinfo(machine, None)}]
    return list(dict.fromkeys(names))


class Dashboard:
    """The HTTP server of one engine's dashboard (see the module docstring)."""

    def __init__(
        self, telemetry: Telemetry, description: dict[str, Any], host: str, port: int, *, token: str | None = None
    ) -> None:
        self.telemetry = telemetry
        self.description = description
        self.host = host
        self.port = port
        self._svg: str | None = None
        self._svg_error: str | None = None
        app = Starlette(
            routes=[
                Route("/", self._page),
                Route("/api/status", self._status),
                Route("/api/graph.svg", self._graph),
                Mount("/metrics", app=make_asgi_app(registry=telemetry.registry)),
            ],
            middleware=[
                Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host, token=token is not None)),
                *([Middleware(_BearerToken, token=token)] if token is not None else []),
            ],
        )
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        #: Set once the server listens and :attr:`port` is the real one.
        self.ready = threading.Event()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Serve on a background thread; returns once the port is open (and, for port
        0, :attr:`port` is the one chosen)."""
        self._thread = threading.Thread(target=self._server.run, name="falkirk-dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise GraphError(
                    f"the dashboard could not listen on {self.url.removeprefix('http://')}: the port is in use or "
                    "the host is not an address of this machine; give another ui="
                )
            time.sleep(0.02)
        chosen = self.port == 0  # the system chose the port: nothing else tells the user which
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        self.ready.set()
        # A fact, not a warning - but said by default when nobody could know it otherwise.
        logger.log(logging.WARNING if chosen else logging.INFO, "falkirk dashboard at %s", self.url)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- endpoints ---------------------------------------------------------------------

    async def _status(self, request: Request) -> JSONResponse:
        return JSONResponse(self.telemetry.status())

    async def _graph(self, request: Request) -> Response:
        svg = self._drawing()
        if svg is None:
            return Response(self._svg_error or "no drawing", status_code=503, media_type="text/plain")
        return Response(svg, media_type="image/svg+xml")

    async def _page(self, request: Request) -> HTMLResponse:
        svg = self._drawing()
        drawing = svg if svg is not None else f'<p class="error">No drawing: {html.escape(self._svg_error or "")}</p>'
        legend = "".join(
            f'<span class="swatch" style="background:{colour}"></span>{html.escape(policy)} '
            for policy, colour in POLICY_COLOURS.items()
        )
        page = resources.files("falkirk.observe").joinpath("dashboard.html").read_text(encoding="utf-8")
        return HTMLResponse(fill(page, {"pipeline": html.escape(self.telemetry.pipeline), "legend": legend, "drawing": drawing}))

    def _drawing(self) -> str | None:
        if self._svg is None and self._svg_error is None:
            try:
                self._svg = render_svg(graph_dot(self.description))
            except (OSError, subprocess.SubprocessError) as exc:
                self._svg_error = str(exc)
                logger.warning("dashboard: %s", exc)
        return self._svg
