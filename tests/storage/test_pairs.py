"""The driver pair's shared store against a real PostgreSQL: the ingress assigns an
epoch once, the egress lets one member write each epoch (the other takes its files,
or takes the claim over once the writer's connection is gone), acknowledgements wait
for a joining member, and retained rows are collected."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from falkirk.storage import StoredFile
from falkirk.storage.pairs import PairError, PairStore

pytestmark = pytest.mark.usefixtures("postgres_server")


@pytest.fixture
def pair(postgres_server) -> tuple[PairStore, PairStore]:  # type: ignore[no-untyped-def]
    name = f"p{uuid.uuid4().hex[:8]}"
    a, b = PairStore(postgres_server.dsn, name, "/a"), PairStore(postgres_server.dsn, name, "/b")
    a.join("/a")
    b.join("/b")
    yield a, b
    a.leave()
    b.leave()


def test_the_ingress_assigns_each_epoch_once(pair: tuple[PairStore, PairStore]) -> None:
    a, b = pair
    first = a.assign(1, {"offsets": {"clicks": {"files": ["x"]}}, "end": False})
    second = b.assign(1, {"offsets": {"clicks": {"files": ["y"]}}, "end": False})
    assert first == second == {"offsets": {"clicks": {"files": ["x"]}}, "end": False}
    assert b.assigned(1) == first and b.assigned(2) is None


def test_the_egress_lets_one_member_write_and_hands_its_files_to_the_other(pair: tuple[PairStore, PairStore]) -> None:
    a, b = pair
    assert a.claim("out", 1) is None  # a writes
    got: list[list[StoredFile] | None] = []
    waiter = threading.Thread(target=lambda: got.append(b.claim("out", 1)))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive(), "b waits while a (alive) writes"
    files = [StoredFile("/t/epoch-1.parquet", 10, "ab" * 32)]
    a.written("out", 1, files)
    waiter.join(5)
    assert got == [files]
    assert a.claim("out", 1) == files, "a replay of a written epoch writes nothing"
    assert a.egress("out") == [(1, "/a", True, 0)]


def test_a_dead_writer_s_claim_is_taken_over_and_it_can_never_finish_it(postgres_server, pair: tuple[PairStore, PairStore]) -> None:  # type: ignore[no-untyped-def]
    a, b = pair
    assert a.claim("out", 2) is None
    a.leave()  # its connection ends, as when its process is killed
    assert b.claim("out", 2) is None, "b takes the unfinished claim over"
    assert b.egress("out") == [(2, "/b", False, 1)]
    a.join("/a")  # a comes back: the claim is b's now
    with pytest.raises(PairError, match="taken over"):
        a.written("out", 2, [])
    b.written("out", 2, [])
    assert a.claim("out", 2) == []


def test_a_member_already_running_is_refused(postgres_server, pair: tuple[PairStore, PairStore]) -> None:  # type: ignore[no-untyped-def]
    a, _ = pair
    again = PairStore(postgres_server.dsn, a.pair, "/a")
    with pytest.raises(PairError, match="already running"):
        again.join("/a", wait=0.3)


def test_acknowledgements_wait_for_the_other_member_even_dead(pair: tuple[PairStore, PairStore]) -> None:
    a, b = pair
    assert a.ack_limit("clicks") == 0, "b is joining: nothing may be acknowledged"
    b.progress(5, 4, {"clicks": 3})
    assert a.ack_limit("clicks") == 3
    b.leave()
    assert a.ack_limit("clicks") == 3, "b may come back and replay from its own root"
    operator = PairStore(a.dsn, a.pair, "operator")  # removes a member without joining
    b.join("/b")
    with pytest.raises(PairError, match="running"):
        operator.remove("/b")
    b.leave()
    deadline = time.monotonic() + 5
    while any(m.alive for m in a.members() if m.name == "/b"):  # the server ends b's session
        assert time.monotonic() < deadline
        time.sleep(0.05)
    operator.remove("/b")
    assert [m.name for m in a.members()] == ["/a"], "the operator left no row of its own"
    assert a.ack_limit("clicks") is None, "no other member: no limit"


def test_rows_every_live_member_released_are_collected(pair: tuple[PairStore, PairStore]) -> None:
    a, b = pair
    for e in (1, 2, 3):
        a.assign(e, {"offsets": {}, "end": False})
        assert a.claim("out", e) is None
        a.written("out", e, [])
    a.progress(3, 3, {})
    assert a.assigned(1) is not None, "b has not released anything yet"
    b.progress(3, 2, {})
    b.leave()  # a dead member's needs are kept too
    a.progress(3, 3, {})
    assert [a.assigned(e) is None for e in (1, 2, 3)] == [True, True, False]
    assert [e for e, *_ in a.egress("out")] == [3]


def test_a_pair_refuses_sinks_in_one_driver_s_memory_and_roots_of_another_identity(postgres_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from falkirk.demo.clickstream import build_pipeline
    from falkirk.demo.redis_postgres import build_pipeline as redis_to_postgres
    from falkirk.execution.checks import check_pair_sinks
    from falkirk.graph import GraphError, Pipeline
    from falkirk.io import FileSource
    from falkirk.io.sinks import MemorySink
    from falkirk.storage import MetaStore
    from falkirk.storage.identity import IdentityError, RootIdentity, establish

    check_pair_sinks(build_pipeline("in", "out", "rej"))  # Parquet tables: shared
    check_pair_sinks(redis_to_postgres("redis://127.0.0.1:1", "s", "g", "postgresql://x@h/db", "t"))
    memory = Pipeline("m")
    memory.source("src", FileSource("in", format="csv", schema="a string")).sink("out", MemorySink())
    with pytest.raises(GraphError, match="sink 'out' is a MemorySink"):
        check_pair_sinks(memory)
    store = PairStore(postgres_server.dsn, f"p{uuid.uuid4().hex[:8]}", "/x")
    respelled = PairStore(postgres_server.dsn + "?application_name=other", store.pair, "/y")
    assert store.pair_id() == respelled.pair_id(), "the pair's id does not depend on how a member spells the address"
    assert store.pair_id() != PairStore(postgres_server.dsn, store.pair + "-2", "/x").pair_id()
    one = RootIdentity.of_pair("clicks", store.pair_id())

    def root(name: str) -> MetaStore:
        return MetaStore(tmp_path / name)

    assert establish(root("member"), "clicks", one) == one  # a fresh root
    assert establish(root("member"), "clicks", one) == one
    lone = establish(root("lone"), "clicks")
    assert establish(root("lone"), "clicks") == lone, "a lone root keeps its identity"
    with pytest.raises(IdentityError, match="fresh root"):
        establish(root("lone"), "clicks", one)  # a lone driver's root joining a pair
    with pytest.raises(IdentityError, match="fresh root"):
        establish(root("member"), "clicks")  # a member's root run alone
