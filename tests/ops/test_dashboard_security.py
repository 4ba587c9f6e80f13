"""The dashboard against other sites and other machines (issue 30, finding 5): a
request naming another host (DNS rebinding) is refused, a non-loopback bind needs a
bearer token or an explicit allow_remote, a token is checked on every request, and
the page is filled in one pass (a pipeline's name is never read as a slot)."""

from __future__ import annotations

import logging
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from falkirk.control.domains import topology
from falkirk.execution.description import describe
from falkirk.execution.observer import telemetry_for
from falkirk.graph import GraphError, Pipeline
from falkirk.io import MemorySink, keyed_generator
from falkirk.observe.address import parse_address
from falkirk.observe.dashboard import Dashboard, allowed_hosts, fill

TOKEN = "s3cret-token-0123456789"


def serve(name: str, token: str | None = None) -> Dashboard:
    p = Pipeline(name)
    p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1)).sink("out", MemorySink())
    dashboard = Dashboard(telemetry_for(p), describe(p, None, topology(p)), "127.0.0.1", 0, token=token)
    dashboard.start()
    return dashboard


@pytest.fixture
def open_board() -> Iterator[Dashboard]:
    board = serve("dash {{drawing}} {{legend}}")
    yield board
    board.stop()


def get(url: str, host: str | None = None, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if host is not None:
        request.add_header("Host", host)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_request_naming_another_host_is_refused(open_board: Dashboard) -> None:
    port = open_board.port
    for path in ("/api/status", "/metrics/", "/"):
        assert get(open_board.url + path, host=f"attacker.example:{port}")[0] == 400, path
        assert get(open_board.url + path, host=f"localhost:{port}")[0] == 200, path
    assert get(open_board.url + "/api/status", host=f"[::1]:{port}")[0] == 200


def test_the_page_is_filled_in_one_pass(open_board: Dashboard) -> None:
    _, page = get(open_board.url + "/")
    assert "<title>Falkirk: dash {{drawing}} {{legend}}</title>" in page, "the name is shown, not spliced into"
    assert page.count("<svg") <= 1
    assert fill("{{a}} {{b}}", {"a": "{{b}}", "b": "x"}) == "{{b}} x"


def test_a_token_is_checked_on_every_request() -> None:
    board = serve("tokened", token=TOKEN)
    try:
        for path in ("/api/status", "/metrics/", "/", "/api/graph.svg"):
            assert get(board.url + path)[0] == 401, path
            assert get(board.url + path, token="wrong-token-0123456789")[0] == 401, path
        assert get(board.url + "/api/status", token=TOKEN)[0] == 200
        assert get(board.url + f"/api/status?token={TOKEN}")[0] == 200
        status, page = get(board.url + f"/?token={TOKEN}")
        assert status == 200 and "Authorization" in page, "the page passes the token on"
        # Reached by the name other machines use: served (a rebinding page has no token).
        assert get(board.url + "/api/status", host="falkirk.example:8050", token=TOKEN)[0] == 200
        assert get(board.url + "/api/status", host="falkirk.example:8050")[0] in (400, 401)
    finally:
        board.stop()


def test_bound_to_every_interface_the_machine_s_own_names_are_served() -> None:
    hosts = allowed_hosts("0.0.0.0")
    assert socket.gethostname().lower() in hosts and "attacker.example" not in hosts
    assert socket.gethostname().lower() not in allowed_hosts("127.0.0.1")  # a loopback bind: loopback names only


def test_a_bind_other_machines_reach_needs_a_token_or_allow_remote() -> None:
    with pytest.raises(GraphError, match="reachable from other machines: give ui_token="):
        parse_address("0.0.0.0:0")
    assert parse_address("0.0.0.0:0", token=TOKEN) == ("0.0.0.0", 0)
    assert parse_address("0.0.0.0:0", allow_remote=True) == ("0.0.0.0", 0)
    with pytest.raises(GraphError, match="at least 16 characters"):
        parse_address("127.0.0.1:0", token="short")
    for weak in (" " * 16, "a" * 20, "abababababababab", "sixteen chars with spaces"):
        with pytest.raises(GraphError, match="at least 8 of them different, no spaces"):
            parse_address("127.0.0.1:0", token=weak)


def test_the_address_is_logged_at_info_not_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # Newcomer finding: the dashboard's URL was a WARNING on every start. It is one
    # only when the system chose the port (ui="0"): nothing else would tell which.
    with caplog.at_level(logging.INFO, logger="falkirk.observe.dashboard"):
        chosen = serve("chosen")
        chosen.stop()
        board = Dashboard(telemetry_for(Pipeline("quiet")), describe(Pipeline("quiet"), None, topology(Pipeline("quiet"))), "127.0.0.1", chosen.port)
        board.start()
        board.stop()
    said = [r for r in caplog.records if "falkirk dashboard at" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in said] == [
        (logging.WARNING, f"falkirk dashboard at {chosen.url}"), (logging.INFO, f"falkirk dashboard at {board.url}")
    ]
