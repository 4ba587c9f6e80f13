"""Poison rows: a processor's step that fails on a few rows sets them aside, exactly
once, and the pipeline goes on (:mod:`falkirk.graph.errors`). Bad values in a JVM
expression (an ANSI cast), in the user's Python function (a UDF), and in keyed
processors (a ``stateful`` function, an overflowing ``aggregate`` sum): the whole
output and the rows set aside are compared with plain Python."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from prometheus_client import generate_latest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from falkirk.demo.payments import build_pipeline as build_payments
from falkirk.execution.diagnosis import StepError
from falkirk.execution.isolation import ErrorLimitExceeded, NonDeterministicRowsError
from falkirk.graph import EagerCheckpoint, ErrorLimit, FullHistory, LazyCheckpoint, Pipeline
from falkirk.io import FileSource, MemorySink, ParquetTableSink
from falkirk.io.exceptions import InputChangedError, LateInputError, SourceError
from falkirk.ops.status import quarantine, render, status
from falkirk.runtime import Engine
from falkirk.storage import MetaStore, QuarantineUnit
from falkirk.testing.halving import expected
from falkirk.testing.payments import write_input
from falkirk.testing.verify import differences

CAST_ERROR = "[CAST_INVALID_INPUT] The value 'xx'"


def readme_pipeline(work: Path, **options: object) -> Pipeline:
    """The first example of docs/how-to/pipelines.md."""
    p = Pipeline("clicks", **options)  # type: ignore[arg-type]
    raw = p.source(
        "events",
        FileSource(str(work / "in"), "csv", "user string, ts string, _raw string", options={"header": "true", "columnNameOfCorruptRecord": "_raw"}),
    )
    valid, rejected = raw.validate("validate", lambda df: df.withColumn("reason", F.when(F.col("_raw").isNotNull(), "malformed row")))
    rejected.sink("dead_letter", ParquetTableSink(str(work / "rejected"), epoch_column=None))
    (
        valid.map("parse", lambda df: df.select("user", F.col("ts").cast("long").alias("ts")))
        .exchange("by_user", "user")
        .aggregate("stats", "user", {"n": ("count", None), "last": ("max", "ts")}, policy=LazyCheckpoint(every=5))
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def sha256_of(path: Path) -> str:
    """The hash a file source commits for a file, computed independently (plain Python)."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def write(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def test_the_readme_example_with_carol_xx_runs_to_the_end_with_the_row_set_aside(spark: SparkSession, tmp_path: Path) -> None:
    write(tmp_path / "in", {"a-1.csv": "user,ts\nalice,1\nbob,2\n", "a-2.csv": "user,ts\nalice,3\ncarol,xx\ncarol,4\n"})
    engine = Engine(readme_pipeline(tmp_path), str(tmp_path / "state"), spark=spark, ui="127.0.0.1:0", max_in_flight=2)
    report = engine.run()
    engine.close()
    assert report.epochs == [1, 2] and report.set_aside == [("parse", 2, 1)]
    assert engine.telemetry is not None
    metrics = generate_latest(engine.telemetry.registry).decode()
    assert 'falkirk_rows_set_aside_total{processor="parse"} 1.0' in metrics
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(map(tuple, out[["user", "n", "last", "epoch"]].values.tolist())) == [
        ("alice", 1, 1, 1), ("alice", 2, 3, 2), ("bob", 1, 2, 1), ("carol", 1, 4, 2),
    ]  # fmt: skip
    # No sink reads parse's errors: the row is in the root's quarantine table.
    errors = pd.read_parquet(tmp_path / "state" / "quarantine" / "parse")
    assert errors[["user", "ts", "processor", "epoch"]].values.tolist() == [["carol", "xx", "parse", 2]]
    assert errors["reason"][0].startswith(CAST_ERROR) and "== DataFrame ==" not in errors["reason"][0]
    store = MetaStore(tmp_path / "state", read_only=True)
    record = store.quarantined()[("parse", 2)]
    store.close()
    assert (record.unit, record.rows, len(record.reasons), len(record.files)) == (QuarantineUnit.ROW, 1, 1, 1)
    # falkirk status counts them; falkirk inspect ROOT quarantine shows them.
    shown = status(str(tmp_path / "state"))
    assert shown["processors"]["parse"]["set_aside"] == {"rows": 1, "epochs": 1, "in_table": 1}
    assert "parse set aside 1 rows it could not process, in 1 epochs: see the quarantine table" in render(shown)
    [entry] = quarantine(str(tmp_path / "state"))["set_aside"]
    assert (entry["processor"], entry["epoch"], entry["rows"], entry["where"]) == ("parse", 2, 1, "quarantine table")
    assert [(r["user"], r["ts"]) for r in entry["first_rows"]] == [("carol", "xx")]


def test_errors_go_to_the_sink_connected_to_them_and_a_replay_sets_aside_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    """Epoch 2's bad rows are found and committed; ``stats`` checkpoints every third
    epoch, so the next run re-runs epochs 1 and 2 through ``parse``, which sets aside
    the committed identities without searching again."""
    write(tmp_path / "in", {"a-1.csv": "user,ts\nalice,1\n", "a-2.csv": "user,ts\nbob,xx\nalice,2\nbob,yy\nbob,xx\n", "a-3.csv": "user,ts\nbob,5\n"})

    def pipeline() -> Pipeline:
        p = Pipeline("clicks")
        raw = p.source("events", FileSource(str(tmp_path / "in"), "csv", "user string, ts string", options={"header": "true"}))
        parsed = raw.map("parse", lambda df: df.select("user", F.col("ts").cast("long").alias("ts")))
        parsed.errors().sink("errors", ParquetTableSink(str(tmp_path / "errors"), epoch_column=None))
        parsed.exchange("by_user", "user").aggregate("stats", "user", {"n": ("count", None), "sum": ("sum", "ts")}, policy=LazyCheckpoint(every=3)).sink(
            "out", ParquetTableSink(str(tmp_path / "out"))
        )
        return p

    first = Engine(pipeline(), str(tmp_path / "state"), spark=spark).run(max_epochs=2)
    assert first.set_aside == [("parse", 2, 2)]  # two distinct rows: 'bob,xx' twice is one identity
    second = Engine(pipeline(), str(tmp_path / "state"), spark=spark).run()
    assert second.recovered is not None and second.recovered["stats"] == 0  # epochs 1 and 2 re-run
    assert second.epochs == [1, 2, 3] and second.set_aside == []  # the committed identities, no search
    errors = pd.read_parquet(tmp_path / "errors")
    assert sorted(map(tuple, errors[["user", "ts", "epoch"]].values.tolist())) == [("bob", "xx", 2), ("bob", "xx", 2), ("bob", "yy", 2)]
    assert not (tmp_path / "state" / "quarantine").exists()
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(map(tuple, out[["user", "n", "sum", "epoch"]].values.tolist())) == [("alice", 1, 1, 1), ("alice", 2, 3, 2), ("bob", 1, 5, 3)]


def test_a_python_function_that_raises_on_some_rows(spark: SparkSession, tmp_path: Path) -> None:
    write(tmp_path / "in", {"a-1.csv": "k,v\na,1\nb,-2\nc,3\nd,-4\ne,5\n"})

    @F.udf("long")
    def checked(v: int) -> int:
        if v < 0:
            raise ValueError(f"negative value {v}")
        return v * 10

    def scale(df: DataFrame) -> DataFrame:
        return df.select("k", checked("v").alias("v"))

    sink, errors = MemorySink(), MemorySink()
    p = Pipeline("udf")
    scaled = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"})).map("scale", scale)
    scaled.sink("out", sink)
    scaled.errors().sink("errors", errors)
    assert Engine(p, str(tmp_path / "state"), spark=spark).run().set_aside == [("scale", 1, 2)]
    assert sorted((r["k"], r["v"]) for r in sink.epochs[1]) == [("a", 10), ("c", 30), ("e", 50)]
    found = sorted((r["k"], r["v"], r["processor"], r["reason"]) for r in errors.epochs[1])
    assert found == [("b", -2, "scale", "ValueError: negative value -2"), ("d", -4, "scale", "ValueError: negative value -4")]


def refuse_negative(key: str, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    if (rows["v"] < 0).any():
        raise ValueError(f"negative value for key {key}")
    n = int(state["n"].iloc[0]) if len(state) else 0
    n += len(rows)
    return pd.DataFrame({"k": [key], "n": [n]}), pd.DataFrame({"n": [n]})


def test_a_keyed_function_that_raises_sets_aside_the_keys_rows_of_the_epoch(spark: SparkSession, tmp_path: Path) -> None:
    """A ``stateful`` function fails on a key (its rows of the epoch with its state):
    every row of that key in that epoch is set aside, its state stays as it was, and
    the other keys go on; the key's later epochs count from its state before."""
    write(tmp_path / "in", {"a-1.csv": "k,v\nx,1\ny,1\n", "a-2.csv": "k,v\nx,1\ny,2\ny,-3\nz,1\n", "a-3.csv": "k,v\ny,1\n"})
    sink, errors = MemorySink(), MemorySink()
    p = Pipeline("keyed")
    counted = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"})).stateful(
        "count", "k", refuse_negative, state_schema="n long", output_schema="k string, n long", policy=EagerCheckpoint()
    )
    counted.sink("out", sink)
    counted.errors().sink("errors", errors)
    report = Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert report.set_aside == [("count", 2, 1)]
    assert {e: sorted((r["k"], r["n"]) for r in rows) for e, rows in sink.epochs.items()} == {
        1: [("x", 1), ("y", 1)], 2: [("x", 2), ("z", 1)], 3: [("y", 2)],
    }  # fmt: skip
    assert sorted((r["k"], r["v"], r["epoch"], r["reason"]) for r in errors.epochs[2]) == [
        ("y", -3, 2, "ValueError: negative value for key y"), ("y", 2, 2, "ValueError: negative value for key y"),
    ]  # fmt: skip


def test_an_overflowing_sum_sets_aside_the_keys_rows_of_the_epoch(spark: SparkSession, tmp_path: Path) -> None:
    big = 2**62
    write(tmp_path / "in", {"a-1.csv": f"k,v\nx,{big}\ny,1\n", "a-2.csv": f"k,v\nx,{big}\ny,1\n", "a-3.csv": "k,v\nx,1\n"})
    sink, errors = MemorySink(), MemorySink()
    p = Pipeline("sums")
    summed = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"})).aggregate(
        "sum", "k", {"total": ("sum", "v")}, policy=EagerCheckpoint()
    )
    summed.sink("out", sink)
    summed.errors().sink("errors", errors)
    report = Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert report.set_aside == [("sum", 2, 1)]
    assert {e: sorted((r["k"], r["total"]) for r in rows) for e, rows in sink.epochs.items()} == {
        1: [("x", big), ("y", 1)], 2: [("y", 2)], 3: [("x", big + 1)],
    }  # fmt: skip
    [row] = errors.epochs[2]
    assert (row["k"], row["v"]) == ("x", big) and "ARITHMETIC_OVERFLOW" in row["reason"]


def test_on_error_stop_names_the_row_and_switching_it_changes_no_edge(spark: SparkSession, tmp_path: Path) -> None:
    write(tmp_path / "in", {"a-1.csv": "user,ts\nalice,1\n", "a-2.csv": "user,ts\nalice,3\ncarol,xx\n"})
    with pytest.raises(StepError) as caught:
        Engine(readme_pipeline(tmp_path, on_error="stop"), str(tmp_path / "state"), spark=spark).run()
    message = str(caught.value)
    assert message.startswith(f"processor 'parse' failed on epoch 2's data: {CAST_ERROR}") and "a-2.csv" in message
    report = Engine(readme_pipeline(tmp_path), str(tmp_path / "state"), spark=spark).run()  # the same root
    assert report.epochs == [1, 2] and report.set_aside == [("parse", 2, 1)]  # stats checkpoints every 5th


def test_more_bad_rows_than_the_limit_stop_the_run(spark: SparkSession, tmp_path: Path) -> None:
    write(tmp_path / "in", {"a-1.csv": "user,ts\n" + "".join(f"u{i},x{i}\n" for i in range(6)) + "alice,1\n"})
    with pytest.raises(ErrorLimitExceeded, match=r"processor 'parse' cannot process .* ErrorLimit\(rows=2, share=0.1\)"):
        Engine(readme_pipeline(tmp_path, error_limit=ErrorLimit(rows=2, share=0.1)), str(tmp_path / "state"), spark=spark).run()
    assert not (tmp_path / "out").exists() or pd.read_parquet(tmp_path / "out").empty


def test_a_late_file_is_left_unread_and_recorded_with_late_set_aside(spark: SparkSession, tmp_path: Path) -> None:
    """A file whose name sorts before one already consumed stops a run by default; a
    ``FileSource(late="set_aside")`` leaves it unread, records it with the next epoch
    (also an epoch of its own when nothing new came with it), and goes on."""
    write(tmp_path / "in", {"b.csv": "k,v\nb,1\n"})
    sink = MemorySink()

    def pipeline(late: str) -> Pipeline:
        p = Pipeline("late")
        p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"}, late=late)).sink("out", sink)
        return p

    state = str(tmp_path / "state")
    assert Engine(pipeline("set_aside"), state, spark=spark).run().epochs == [1]
    write(tmp_path / "in", {"a.csv": "k,v\na,1\n"})
    with pytest.raises(LateInputError, match=r"'a\.csv'"):
        Engine(pipeline("stop"), state, spark=spark).run()
    assert Engine(pipeline("set_aside"), state, spark=spark).run().epochs == [2]  # the record alone
    write(tmp_path / "in", {"a2.csv": "k,v\na,2\n", "c.csv": "k,v\nc,1\n"})
    assert Engine(pipeline("set_aside"), state, spark=spark).run().epochs == [3]
    assert {e: sorted(r["k"] for r in rows) for e, rows in sink.epochs.items()} == {1: ["b"], 2: [], 3: ["c"]}
    shown = status(state)
    assert shown["processors"]["rows"]["set_aside"]["files"] == 2
    assert "rows left 2 late input files unread, in 2 epochs" in render(shown)
    found = {(e["epoch"], e["unit"], e["where"]): e["reasons"] for e in quarantine(state)["set_aside"]}
    assert list(found) == [(2, "file", "input directory"), (3, "file", "input directory")]
    assert found[(3, "file", "input directory")][0].startswith("a2.csv: arrived after 'b.csv'")


def test_an_unreadable_file_is_left_out_of_its_epoch_with_unreadable_set_aside(spark: SparkSession, tmp_path: Path) -> None:
    """A file Spark's reader fails on (not gzip although named .gz) stops the run by
    default; with ``FileSource(unreadable="set_aside")`` its epoch is read without
    it, and it is recorded with the epoch (the next run does not search again)."""
    import gzip

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv.gz").write_bytes(gzip.compress(b"k,v\na,1\n"))
    (tmp_path / "in" / "b.csv.gz").write_bytes(b"this is not gzip at all")
    (tmp_path / "in" / "c.csv.gz").write_bytes(gzip.compress(b"k,v\nc,3\n"))
    sink = MemorySink()

    def pipeline(unreadable: str) -> Pipeline:
        p = Pipeline("gz")
        source = FileSource(str(tmp_path / "in"), "csv", "k string, v long", files_per_epoch=3, options={"header": "true"}, unreadable=unreadable)
        p.source("rows", source).aggregate("sum", "k", {"total": ("sum", "v")}, policy=EagerCheckpoint()).sink("out", sink)
        return p

    state = str(tmp_path / "state")
    with pytest.raises(SourceError, match=r"source 'rows' cannot read input file\(s\) of epoch 1: b\.csv\.gz: unreadable: java\.io\."):
        Engine(pipeline("stop"), state, spark=spark).run()
    report = Engine(pipeline("set_aside"), state, spark=spark).run()
    assert report.epochs == [1] and report.set_aside == [("rows", 1, 1)]
    assert sorted((r["k"], r["total"]) for r in sink.epochs[1]) == [("a", 1), ("c", 3)]
    [entry] = quarantine(state)["set_aside"]
    assert (entry["processor"], entry["unit"], entry["where"]) == ("rows", "file", "input directory")
    assert entry["reasons"][0].startswith("b.csv.gz: unreadable: ")


def test_rows_with_nulls_in_different_columns_are_different_rows(spark: SparkSession, tmp_path: Path) -> None:
    """Review: xxhash64 skips nulls, so (null, 'abc') and ('abc', null) were one
    identity and the good row was set aside with the bad one."""
    write(tmp_path / "in", {"a-1.csv": "a,b\n,abc\nabc,\nx,1\n"})
    sink, errors = MemorySink(), MemorySink()
    p = Pipeline("nulls")
    typed = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "a string, b string", options={"header": "true"})).map(
        "typed", lambda df: df.select("a", F.col("b").cast("long").alias("b"))
    )
    typed.sink("out", sink)
    typed.errors().sink("errors", errors)
    Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert sorted((r["a"], r["b"]) for r in sink.epochs[1]) == [("abc", None), ("x", 1)]
    assert [(r["a"], r["b"]) for r in errors.epochs[1]] == [(None, "abc")]


def test_an_error_on_every_row_or_of_a_service_stops_instead_of_setting_rows_aside(spark: SparkSession, tmp_path: Path) -> None:
    """Review: a function that fails on every row (a bug, a service down) had the
    whole epoch set aside under the error limit's row count."""
    write(tmp_path / "in", {"a-1.csv": "k,v\n" + "".join(f"k{i},{i}\n" for i in range(40))})

    @F.udf(LongType())
    def broken(v: int) -> int:
        return undefined_name + v  # type: ignore[name-defined, no-any-return]  # noqa: F821

    @F.udf(LongType())
    def service(v: int) -> int:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    for name, fn, said in (("broken", broken, "fails on each of the rows of epoch 1 tried alone"), ("service", service, "ConnectionRefusedError")):
        p = Pipeline(name)
        p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"})).map(
            "call", lambda df, fn=fn: df.select("k", fn("v").alias("v"))
        ).sink("out", MemorySink())
        with pytest.raises(StepError, match=said) as caught:
            Engine(p, str(tmp_path / f"state-{name}"), spark=spark).run()
        assert caught.value.failure.processor == "call"
        assert not (tmp_path / f"state-{name}" / "quarantine").exists()


def test_an_input_that_changes_between_reads_stops_after_two_searches(spark: SparkSession, tmp_path: Path) -> None:
    """Review: rand() above the failing step gave the bad row a new identity on every
    re-run, so it was searched for again and again until the error limit."""
    write(tmp_path / "in", {"a-1.csv": "k,v\na,1\nb,-1\nc,2\n"})

    @F.udf(LongType())
    def positive(v: int) -> int:
        if v < 0:
            raise ValueError("negative")
        return v

    p = Pipeline("changing")
    (
        p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"}))
        .map("noise", lambda df: df.withColumn("r", F.rand()))
        .map("check", lambda df: df.select("k", positive("v").alias("v"), "r"))
        .sink("out", MemorySink())
    )
    with pytest.raises(NonDeterministicRowsError, match="not the same each time"):
        Engine(p, str(tmp_path / "state"), spark=spark).run()


def test_rows_whose_bad_column_a_later_step_prunes_are_set_aside_where_they_fail(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the search hashed every column of the failing step's input, computing a
    cast the plan had pruned, and a raw error escaped."""
    write(tmp_path / "in", {"a-1.csv": "amount,ts\n1,1\n2,yy\nzz,3\n4,4\n"})
    sink, errors = MemorySink(), MemorySink()
    p = Pipeline("pruned")
    parsed = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "amount string, ts string", options={"header": "true"})).map(
        "parse", lambda df: df.select(F.col("amount").cast("long").alias("amount"), F.col("ts").cast("long").alias("ts"))
    )
    parsed.errors().sink("errors", errors)
    parsed.map("double", lambda df: df.select((F.col("amount") * 2).alias("twice"))).sink("out", sink)
    report = Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert [name for name, _, _ in report.set_aside] == ["parse"] * len(report.set_aside)
    assert sorted(r["twice"] for r in sink.epochs[1]) == [2, 8]
    assert sorted((r["amount"], r["ts"]) for r in errors.epochs[1]) == [("2", "yy"), ("zz", "3")]


def test_a_key_set_aside_under_full_history_stays_out_of_its_replayed_input(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the input log was written before the rows were set aside, so a restart
    that replayed it met the bad key again and failed for good."""
    write(tmp_path / "in", {"a-1.csv": "k,v\nx,1\ny,1\n", "a-2.csv": "k,v\ny,2\ny,-3\nz,1\n"})
    sink = MemorySink()

    def pipeline() -> Pipeline:
        p = Pipeline("history")
        counted = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"})).stateful(
            "count", "k", refuse_negative, state_schema="n long", output_schema="k string, n long", policy=FullHistory()
        )
        counted.sink("out", sink)
        return p

    assert Engine(pipeline(), str(tmp_path / "state"), spark=spark).run().set_aside == [("count", 2, 1)]
    write(tmp_path / "in", {"a-3.csv": "k,v\ny,1\n"})
    report = Engine(pipeline(), str(tmp_path / "state"), spark=spark).run()  # restores by replaying the log
    assert report.epochs[-1] == 3 and report.set_aside == []
    assert sorted((r["k"], r["n"]) for r in sink.epochs[3]) == [("y", 2)]


def test_the_quarantine_table_holds_each_row_once_when_an_epoch_runs_again(spark: SparkSession, tmp_path: Path) -> None:
    """Review: ``parse`` wrote its rows to the quarantine table, then ``count``'s
    search made the epoch run again, which wrote them again: the table showed them
    twice. A write no commit names is swept."""
    write(tmp_path / "in", {"a-1.csv": "k,v\nx,zz\ny,-3\nz,4\n"})
    p = Pipeline("twice")
    parsed = p.source("rows", FileSource(str(tmp_path / "in"), "csv", "k string, v string", options={"header": "true"})).map(
        "parse", lambda df: df.select("k", F.col("v").cast("long").alias("v"))
    )
    parsed.stateful("count", "k", refuse_negative, state_schema="n long", output_schema="k string, n long", policy=EagerCheckpoint()).sink(
        "out", MemorySink()
    )
    report = Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert sorted(report.set_aside) == [("count", 1, 1), ("parse", 1, 1)]
    table = pd.read_parquet(tmp_path / "state" / "quarantine" / "parse")
    assert table[["k", "v", "epoch"]].values.tolist() == [["x", "zz", 1]]
    assert pd.read_parquet(tmp_path / "state" / "quarantine" / "count")[["k", "v"]].values.tolist() == [["y", -3]]


def test_a_bad_row_before_a_loop_is_set_aside_where_it_fails(spark: SparkSession, tmp_path: Path) -> None:
    """Review: ``parse``'s output is lazy; read first inside the loop's iteration, its
    error surfaced there, where rows are not set aside, and the run stopped. What a
    loop reads is computed before it, so the bad row is set aside at ``parse``."""
    write(tmp_path / "in", {"a-1.csv": "n\n1048576\n5\n", "a-2.csv": "n\n5\nxx\n", "a-3.csv": "n\n7\n"})
    p = Pipeline("halving")
    numbers = p.source("numbers", FileSource(str(tmp_path / "in"), "csv", "n string", options={"header": "true"}))
    parsed = numbers.map("parse", lambda df: df.select(F.col("n").cast("long").alias("n")))
    loop = p.iterate("halve", max_iterations=64, on_limit="fail", interleave=True)  # (epochs 2 and 3 enter while 1 iterates)
    again = loop.feedback("again", schema="n long")
    here = loop.enter("enter", parsed).union("here", again)
    sums = here.map("sum", lambda df: df.agg(F.coalesce(F.sum("n"), F.lit(0)).cast("long").alias("total")))
    kept = sums.buffer("buffer", policy=LazyCheckpoint(every=1, compact_every=4))
    loop.connect(again, here.map("halved", lambda df: df.filter("n > 1").select(F.expr("n div 2").alias("n"))))
    loop.leave("leave", kept).sink("out", ParquetTableSink(str(tmp_path / "out")))
    report = Engine(p, tmp_path / "state", spark=spark, max_in_flight=3).run()
    assert report.epochs == [1, 2, 3]
    got = pd.read_parquet(tmp_path / "out")[["total", "epoch"]].astype("int64")
    assert differences(got, expected([[1048576, 5], [5], [7]])) == []
    errors = pd.read_parquet(tmp_path / "state" / "quarantine" / "parse")
    assert errors[["n", "processor", "epoch"]].values.tolist() == [["xx", "parse", 2]]


def test_an_epoch_whose_rows_were_set_aside_commits_the_hash_of_its_file(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the row digest (a Spark observation) was completed by the first query
    that ended, failed or not; the failing step's query saw no row, and that digest (0
    rows) was committed: a byte-identical file put back was refused, and a file of its
    size giving no rows was accepted (its rows lost). The hash is of the file's bytes."""
    files = {"a-1.csv": "user,ts\nalice,1\nbob,2\n", "a-2.csv": "user,ts\nalice,3\ncarol,xx\ncarol,4\n"}
    write(tmp_path / "in", files)
    assert Engine(readme_pipeline(tmp_path), tmp_path / "state", spark=spark).run().set_aside == [("parse", 2, 1)]
    store = MetaStore(tmp_path / "state", read_only=True)
    hashes = {e: o["content"] for e, o in store.offsets("events").items()}
    store.close()
    assert hashes == {e: {f"a-{e}.csv": sha256_of(tmp_path / "in" / f"a-{e}.csv")} for e in (1, 2)}
    # Nothing is checkpointed yet (every=5): a restart reads both files again.
    second = tmp_path / "in" / "a-2.csv"
    second.unlink()
    second.write_text("user,ts" + "\n" * (len(files["a-2.csv"]) - len("user,ts")))  # its size, no rows
    with pytest.raises(InputChangedError, match=r"a-2\.csv' changed .*its bytes differ from the file the epoch read.*\(touch -m -d @"):
        Engine(readme_pipeline(tmp_path), tmp_path / "state", spark=spark).run()
    second.write_text(files["a-2.csv"])  # put back as it was: a new modification time
    report = Engine(readme_pipeline(tmp_path), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None and report.set_aside == []  # the committed identities, no search
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(map(tuple, out[["user", "n", "last", "epoch"]].values.tolist())) == [
        ("alice", 1, 1, 1), ("alice", 2, 3, 2), ("bob", 1, 2, 1), ("carol", 1, 4, 2),
    ]


def test_a_clean_stop_finishes_an_epoch_in_flight_that_set_rows_aside(spark: SparkSession, tmp_path: Path) -> None:
    """Review: a stop asked while an epoch with a bad row was in flight discarded it
    and ran it no more: the stop ended one epoch early, its search thrown away."""
    write(tmp_path / "in", {"a-1.csv": "user,ts\nalice,1\nbob,2\n", "a-2.csv": "user,ts\nalice,3\ncarol,xx\n", "a-3.csv": "user,ts\nbob,5\n"})
    engine = Engine(readme_pipeline(tmp_path), tmp_path / "state", spark=spark, max_in_flight=2)
    engine.on_epoch = lambda epoch, *_: engine.stop(wait=False) if epoch == 1 else None
    report = engine.run()
    assert report.stopped == "stop()" and report.epochs == [1, 2] and report.set_aside == [("parse", 2, 1)]
    assert sorted(pd.read_parquet(tmp_path / "out")["epoch"].unique()) == [1, 2]


def test_every_committed_epoch_of_the_payments_input_has_the_hash_of_its_file(spark: SparkSession, tmp_path: Path) -> None:
    """Review (the input where the row digest failed: epoch 3's counted 0 of its 200
    rows, taken from the failed query that found its bad rows)."""
    write_input(tmp_path / "in", files=4, rows=200, bad_share=0.02, seed=12)
    Engine(build_payments(str(tmp_path / "in"), str(tmp_path / "out")), tmp_path / "state", spark=spark).run(max_epochs=3)
    store = MetaStore(tmp_path / "state", read_only=True)
    offsets = {e: o for e, o in store.offsets("payments").items() if o}
    store.close()
    kept = {e: o.get("content") for e, o in offsets.items()}
    assert kept and kept == {e: {f[0]: sha256_of(tmp_path / "in" / f[0]) for f in o["files"]} for e, o in offsets.items()}, kept
