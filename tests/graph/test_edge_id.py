"""Edge names are built and read back by one type: the spelling the metadata records
(``src.port>dst``, ``#k`` for a self-join's inputs) round-trips, and nothing else is
taken for an edge name."""

from __future__ import annotations

import pytest

from falkirk.graph import EdgeId, GraphError, Pipeline
from falkirk.io import MemorySink, keyed_generator


@pytest.mark.parametrize(
    ("name", "edge"),
    [("src.out>sink", EdgeId("src", "out", "sink")), ("by_user.late>j2#1", EdgeId("by_user", "late", "j2", 1))],
)
def test_a_name_round_trips(name: str, edge: EdgeId) -> None:
    assert EdgeId.parse(name) == edge
    assert str(edge) == name
    assert edge.output == name.split(">")[0]


@pytest.mark.parametrize("name", ["src>sink", "src.out>", "src.out>sink#", "a.b.c>d", "src.out>sink\n", "1src.out>sink"])
def test_anything_else_is_refused(name: str) -> None:
    with pytest.raises(GraphError, match="not an edge name"):
        EdgeId.parse(name)


def test_a_pipeline_names_its_edges_and_numbers_a_self_join() -> None:
    p = Pipeline("p")
    src = p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1))
    src.sink("out", MemorySink())
    src.join("self_join", src, on="key").sink("joined", MemorySink())
    names = [e.name for e in p.edges()]
    assert "src.out>out" in names
    assert {"src.out>self_join#0", "src.out>self_join#1"} <= set(names)
    assert all(str(e.id) == e.name for e in p.edges())
