"""Unit tests of the operators other than the join, each run by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from falkirk.graph import GraphError, LazyCheckpoint
from falkirk.graph.specs import (
    AggregateSpec,
    ExchangeSpec,
    LookupSpec,
    MapSpec,
    StatefulSpec,
    UnionSpec,
    ValidateSpec,
)
from falkirk.spark.files import write_parquet
from falkirk.storage import LocalFileSystem


def rows(out: list[dict], *cols: str) -> list[tuple]:  # type: ignore[type-arg]
    return sorted((tuple(r[c] for c in cols) for r in out), key=repr)


def test_lookup_sees_the_table_as_of_the_end_of_each_epoch(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(LookupSpec(on=("k",)), "k string, q long", "k string, v long")
    # epoch 1: a query for a before any version, the table gets a=1
    assert rows(h.step([("a", 1), ("b", 2)], [("a", 1)]), "k", "q", "v") == [("a", 1, 1), ("b", 2, None)]
    # epoch 2: a=5 replaces a=1; two versions of b in one epoch: the greatest wins
    assert rows(h.step([("a", 3), ("b", 4)], [("a", 5), ("b", 7), ("b", 6)]), "k", "q", "v") == [("a", 3, 5), ("b", 4, 7)]
    assert rows(h.step([("a", 8)], []), "k", "q", "v") == [("a", 8, 5)]  # no update: the current version
    inner = harness(LookupSpec(on=("k",), how="inner"), "k string, q long", "k string, v long")
    assert rows(inner.step([("a", 1), ("b", 2)], [("a", 9)]), "k", "q", "v") == [("a", 1, 9)]


def test_lookup_restores_its_table(harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    h = harness(LookupSpec(on=("k",)), "k string, q long", "k string, v long", policy=LazyCheckpoint())
    h.step([], [("a", 1), ("b", 2)])
    chain = [(1, "base", write_parquet(h.operator.checkpoint(1, True), str(tmp_path), "e1", LocalFileSystem()))]
    h.step([], [("a", 3)])  # lost: not checkpointed
    again = harness(LookupSpec(on=("k",)), "k string, q long", "k string, v long", policy=LazyCheckpoint())
    again.operator.restore(chain, 1)
    again.epoch = 1
    assert rows(again.step([("a", 0), ("b", 0)], []), "k", "v") == [("a", 1), ("b", 2)]


def test_lookup_errors(harness) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphError, match=r"columns \['v'\] are in the stream and the table"):
        harness(LookupSpec(on=("k",)), "k string, v long", "k string, v long")
    with pytest.raises(GraphError, match="only key columns"):
        harness(LookupSpec(on=("k",)), "k string, q long", "k string")


def test_union_merges_same_schema_streams_and_names_a_mismatch(harness) -> None:  # type: ignore[no-untyped-def]
    h = harness(UnionSpec(), "k string, v long", "v long, k string", "k string, v long")
    assert rows(h.step([("a", 1)], [(2, "b")], [("c", 3)]), "k", "v") == [("a", 1), ("b", 2), ("c", 3)]
    with pytest.raises(GraphError, match=r"input 1 \(in1.out\) has columns k string, v int"):
        harness(UnionSpec(), "k string, v long", "k string, v int")


def test_map_validate_exchange(harness) -> None:  # type: ignore[no-untyped-def]
    doubled = harness(MapSpec(fn=lambda df, epoch: df.selectExpr("k", f"v * 2 + {epoch} AS v")), "k string, v long")
    assert rows(doubled.step([("a", 1)]), "k", "v") == [("a", 3)]  # the epoch is 1
    check = harness(ValidateSpec(fn=lambda df: df.selectExpr("*", "CASE WHEN v < 0 THEN 'negative' END AS reason")), "k string, v long")
    assert rows(check.step([("a", 1), ("b", -1)], port="valid"), "k", "v") == [("a", 1)]
    assert check.outputs["valid"].fieldNames() == ["k", "v"]
    with pytest.raises(GraphError, match="must add a string column 'reason'"):
        harness(ValidateSpec(fn=lambda df: df), "k string")
    spread = harness(ExchangeSpec(key=("k",)), "k string, v long")
    assert rows(spread.step([("a", 1), ("a", 2)]), "k", "v") == [("a", 1), ("a", 2)]
    with pytest.raises(GraphError, match=r"\['x'\] are not in its input"):
        harness(ExchangeSpec(key=("x",)), "k string")


def test_aggregate_and_stateful_keep_state_across_epochs(harness) -> None:  # type: ignore[no-untyped-def]
    agg = harness(AggregateSpec(key=("k",), aggregates={"n": ("count", None), "s": ("sum", "v")}), "k string, v long")
    agg.step([("a", 1), ("b", 2)])
    assert rows(agg.step([("a", 5)]), "k", "n", "s") == [("a", 2, 6)]  # only the touched key

    def count(key, new, state):  # type: ignore[no-untyped-def]
        import pandas as pd

        seen = int(state["n"].iloc[0]) if len(state) else 0
        return pd.DataFrame({"k": [key], "n": [seen + len(new)]}), pd.DataFrame({"n": [seen + len(new)]})

    counter = harness(StatefulSpec(key=("k",), fn=count, state_schema="n long", output_schema="k string, n long"), "k string, v long")
    counter.step([("a", 1), ("a", 2)])
    assert rows(counter.step([("a", 3), ("b", 1)]), "k", "n") == [("a", 3), ("b", 1)]


def test_source_reads_its_offsets_and_nothing_without_them(harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from falkirk.graph.specs import SourceSpec
    from falkirk.io import FileSource
    from falkirk.operators import Step

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"k": "a"}\n')
    source = FileSource(str(tmp_path / "in"), "json", "k string")
    h = harness(SourceSpec(reader=source))
    offsets = source.next_offsets(None)
    assert [r.k for r in h.operator.step(Step(1, [], offsets=offsets))["out"].collect()] == ["a"]
    assert h.operator.step(Step(2, [], offsets=None))["out"].count() == 0


def test_sink_writes_an_epoch_and_returns_its_files(harness, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    from falkirk.graph.specs import SinkSpec
    from falkirk.io import ParquetTableSink
    from falkirk.operators import Step

    h = harness(SinkSpec(writer=ParquetTableSink(str(tmp_path / "out"))), "k string")
    h.operator.start()
    files = h.operator.emit(Step(1, [h.frame(0, [("a",), ("b",)])]))
    assert files is not None and len(files) == 1 and files[0].sha256
    assert pd.read_parquet(tmp_path / "out").empty, "written, not committed: not shown yet"
    h.operator.publish_output(1)  # the epoch committed
    assert sorted(pd.read_parquet(tmp_path / "out")["k"]) == ["a", "b"]
    assert (tmp_path / "out" / "epoch-0000000001.parquet").stat().st_size == files[0].size
