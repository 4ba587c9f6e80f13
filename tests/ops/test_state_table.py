"""The state as a table (issue 34, item 4): ``falkirk.read_state`` and ``falkirk state``.

One pipeline with every kind of keyed processor runs four epochs (one JSON file
each) and ends with a savepoint; each state read back - at the solver's frontier,
at an epoch's checkpoint, at the savepoint - is compared whole with pandas over the
files. A lazily checkpointed aggregate shows the solver's frontier is its last
checkpoint, not the last epoch. Then the refusals, the command, and reads beside a
pipeline running on the same root (its garbage collection removing old checkpoints
meanwhile): every read is the exact state of the epoch it says.
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

import falkirk
from falkirk import cli
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline
from falkirk.graph.windows import Tumbling
from falkirk.io import FileSource, MemorySink
from falkirk.ops.state_table import StateReadError, read_state_at
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.upgrades.savepoints import SavepointError

pytestmark = pytest.mark.slow

SCHEMA = "k string, x long, y long, ts timestamp"
EAGER = EagerCheckpoint()
MINUTE = pd.Timedelta(minutes=1)


def add_files(directory: Path, numbers: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in numbers:
        rnd = random.Random(i)
        rows = [
            {"k": f"k{rnd.randrange(4)}", "x": rnd.randrange(100), "y": rnd.randrange(100),
             "ts": f"2026-11-28 10:{rnd.randrange(60):02d}:00"}
            for _ in range(10)
        ]  # fmt: skip
        (directory / f"f{i:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_input(directory: Path, upto: int) -> pd.DataFrame:
    files = sorted(directory.glob("*.json"))[:upto]
    return pd.concat([pd.read_json(f, lines=True, dtype={"ts": str}).assign(epoch=e) for e, f in enumerate(files, 1)])


def tally(key: Any, rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    total = int(rows["x"].sum()) + (int(state["total"].iloc[0]) if len(state) else 0)
    return pd.DataFrame({"k": [str(key)], "total": [total]}), pd.DataFrame({"total": [total]})


def every_kind(directory: Path) -> Pipeline:
    p = Pipeline("states")
    src = p.source("src", FileSource(str(directory), "json", SCHEMA))
    by_k = src.exchange("by_k", "k")
    stats = {"n": ("count", None), "sx": ("sum", "x"), "ax": ("avg", "x"), "mx": ("max", "x")}
    by_k.aggregate("stats", "k", stats, policy=EAGER).sink("stats_out", MemorySink())
    # Through a source of its own: a restart replays its input from its last checkpoint,
    # which would take every processor reading the same source back there too.
    again = p.source("src_lazy", FileSource(str(directory), "json", SCHEMA)).exchange("by_k_lazy", "k")
    again.aggregate("lazy", "k", {"n": ("count", None)}, policy=LazyCheckpoint(every=3)).sink("lazy_out", MemorySink())
    by_k.stateful("tally", "k", tally, state_schema="total long", output_schema="k string, total long", policy=EAGER).sink(
        "tally_out", MemorySink()
    )
    left = src.map("left", lambda df: df.select("k", "x"))
    right = src.map("right", lambda df: df.select("k", "y"))
    left.join("pairs", right, "k", policy=EAGER).sink("pairs_out", MemorySink())
    left.join("recent", right, "k", how="left", retain=2, policy=EAGER).sink("recent_out", MemorySink())
    src.buffer("buf", retain=2, policy=EAGER).sink("buf_out", MemorySink())
    by_k.window("win", "k", "ts", Tumbling("10 minutes"), {"n": ("count", None)}, watermark_delay="1 day", policy=EAGER).sink(
        "win_out", MemorySink()
    )
    return p


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def stats_at(rows: pd.DataFrame) -> list[tuple[Any, ...]]:
    g = rows.groupby("k")["x"]
    return sorted((k, int(g.count()[k]), int(g.sum()[k]), pytest.approx(float(g.mean()[k])), int(g.max()[k])) for k in g.groups)


@pytest.fixture(scope="module")
def root(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("states")
    add_files(work / "in", range(1, 5))
    report = Engine(every_kind(work / "in"), work / "state", spark=spark).run(savepoint="four")
    assert report.epochs == [1, 2, 3, 4] and report.savepoint == "four"
    return work / "in", work / "state"


def test_each_kind_reads_as_the_user_declared_it(spark: SparkSession, root: tuple[Path, Path]) -> None:
    inputs, state = root
    rows = read_input(inputs, 4)
    got, where = read_state_at(spark, str(state), "stats")
    assert (where.epoch, where.solver) == (4, True)
    assert got.columns == ["k", "n", "sx", "ax", "mx"]
    assert rows_of(got) == stats_at(rows)

    tally_state = falkirk.read_state(spark, str(state), "tally")
    assert tally_state.columns == ["k", "total"]
    assert rows_of(tally_state) == sorted((k, int(v)) for k, v in rows.groupby("k")["x"].sum().items())

    pairs = falkirk.read_state(spark, str(state), "pairs")
    assert pairs.columns == ["k", "side", "epoch", "x", "y"]
    want = [(r.k, "left", r.epoch, r.x, None) for r in rows.itertuples()] + [(r.k, "right", r.epoch, None, r.y) for r in rows.itertuples()]
    assert sorted(map(tuple, pairs.collect()), key=repr) == sorted(want, key=repr)

    # retain=2: after epoch 4 a join holds the rows still waiting, those of epoch 4
    recent = falkirk.read_state(spark, str(state), "recent")
    assert sorted(map(tuple, recent.collect()), key=repr) == sorted([t for t in want if t[2] == 4], key=repr)
    two = falkirk.read_state(spark, str(state), "recent", at=2)
    assert sorted(map(tuple, two.collect()), key=repr) == sorted([t for t in want if t[2] == 2], key=repr)

    buf = falkirk.read_state(spark, str(state), "buf")
    assert buf.columns == ["k", "x", "y", "ts", "epoch"]
    kept = rows[rows["epoch"] >= 3]  # retain=2: the last two epochs' rows
    assert sorted((r.k, r.x, r.y, r.epoch) for r in buf.collect()) == sorted((r.k, r.x, r.y, r.epoch) for r in kept.itertuples())

    win = falkirk.read_state(spark, str(state), "win")
    assert win.columns == ["k", "window_start", "window_end", "n"]
    starts = pd.to_datetime(rows["ts"]).dt.floor("10min")
    want_windows = sorted((k, s.to_pydatetime(), (s + 10 * MINUTE).to_pydatetime(), int(n)) for (k, s), n in rows.assign(s=starts).groupby(["k", "s"]).size().items())
    assert rows_of(win) == want_windows


def test_the_solvers_frontier_an_epochs_checkpoint_and_a_savepoint(spark: SparkSession, root: tuple[Path, Path]) -> None:
    inputs, state = root
    lazy, where = read_state_at(spark, str(state), "lazy")
    assert (where.epoch, where.solver) == (3, True), "a lazy processor is restored from its last checkpoint"
    counts = read_input(inputs, 3).groupby("k").size()
    assert rows_of(lazy) == sorted((k, int(n)) for k, n in counts.items())

    two, where = read_state_at(spark, str(state), "stats", at=2)
    assert (where.epoch, where.solver) == (2, False)
    assert rows_of(two) == stats_at(read_input(inputs, 2))

    saved, where = read_state_at(spark, str(state), "lazy", at="four")
    assert (where.epoch, where.savepoint) == (4, "four")
    assert rows_of(saved) == sorted((k, int(n)) for k, n in read_input(inputs, 4).groupby("k").size().items())
    assert rows_of(falkirk.read_state(spark, str(state), "stats", at="four")) == stats_at(read_input(inputs, 4))


def test_what_cannot_be_read_is_refused_naming_what_can(spark: SparkSession, root: tuple[Path, Path]) -> None:
    _, state = root
    with pytest.raises(StateReadError, match=r"'lazy' has no checkpoint of epoch 2 kept; the nearest with one: epoch 3"):
        falkirk.read_state(spark, str(state), "lazy", at=2)
    with pytest.raises(StateReadError, match="epoch 9 is not committed"):
        falkirk.read_state(spark, str(state), "stats", at=9)
    with pytest.raises(StateReadError, match=r"'by_k' \(exchange\) keeps no keyed state; the keyed processors"):
        falkirk.read_state(spark, str(state), "by_k")
    with pytest.raises(StateReadError, match="no processor 'nope'"):
        falkirk.read_state(spark, str(state), "nope")
    with pytest.raises(SavepointError):
        falkirk.read_state(spark, str(state), "stats", at="no-such-savepoint")
    assert falkirk.read_state(spark, str(state), "stats", at=0).count() == 0, "before epoch 1: empty"
    empty = falkirk.read_state(spark, str(state), "win", at=0)
    assert (empty.columns, empty.count()) == (["k", "window_start", "window_end", "n"], 0)


def test_the_command_writes_parquet_and_shows_rows(spark: SparkSession, root: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs, state = root
    assert cli.main(["state", str(state), "stats", "--at", "2", "--output", str(tmp_path / "t")]) == 0
    assert "'stats' after epoch 2 (its checkpoint)" in capsys.readouterr().out
    table = pd.read_parquet(tmp_path / "t")
    assert list(table.columns) == ["k", "n", "sx", "ax", "mx"]
    assert sorted(map(tuple, table.values.tolist())) == stats_at(read_input(inputs, 2))
    assert cli.main(["state", str(state), "stats", "--output", str(tmp_path / "t")]) == 2, "an existing directory is refused"
    assert "exists" in capsys.readouterr().err
    assert cli.main(["state", str(state), "tally"]) == 0
    shown = capsys.readouterr().out
    assert "the solver's frontier" in shown and "total" in shown


def test_beside_a_running_pipeline_every_read_is_the_state_of_its_epoch(spark: SparkSession, tmp_path: Path) -> None:
    """The pipeline runs 12 epochs in a thread (its checkpoints collected as it
    goes); reads at the solver's frontier never fail and each is the exact state of
    the epoch it names."""
    add_files(tmp_path / "in", range(1, 13))
    p = Pipeline("states")
    stats = {"n": ("count", None), "sx": ("sum", "x"), "ax": ("avg", "x"), "mx": ("max", "x")}
    by_k = p.source("src", FileSource(str(tmp_path / "in"), "json", SCHEMA)).exchange("by_k", "k")
    by_k.aggregate("stats", "k", stats, policy=EagerCheckpoint(compact_every=3)).sink("stats_out", MemorySink())
    engine = Engine(p, tmp_path / "state", spark=spark)
    first = engine.run(max_epochs=1)
    assert first.epochs == [1]
    running = threading.Thread(target=engine.run)
    running.start()
    seen: list[int] = []
    try:
        while running.is_alive() or not seen:
            got, where = read_state_at(spark, str(tmp_path / "state"), "stats")
            assert rows_of(got) == stats_at(read_input(tmp_path / "in", where.epoch)), where
            seen.append(where.epoch)
    finally:
        running.join()
    assert seen == sorted(seen) and len(set(seen)) >= 2, seen
    store = MetaStore(tmp_path / "state", read_only=True)
    try:
        assert store.state_files("stats")[0][0].epoch > 1, "its first checkpoints were collected meanwhile"
    finally:
        store.close()


def test_a_file_uri_root_bad_at_values_and_a_damaged_root(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A root an engine ran under a ``file://`` URI (its metadata the driver's working
    copy, published into the root) reads under either spelling, as ``falkirk
    status`` shows it; ``at=`` of another type is refused; a committed file missing
    from a stopped root is damage, said as such (not a running pipeline's doing)."""
    add_files(tmp_path / "in", range(1, 4))
    p = Pipeline("uri")
    rows = p.source("events", FileSource(str(tmp_path / "in"), "json", SCHEMA)).exchange("by_k", "k")
    rows.aggregate("stats", "k", {"n": ("count", None)}, policy=EAGER).sink("out", MemorySink())
    uri = f"file://{tmp_path / 'state'}"
    Engine(p, uri, spark=spark).run()
    want = sorted((k, int(n)) for k, n in read_input(tmp_path / "in", 3).groupby("k").size().items())
    for storage in (uri, str(tmp_path / "state")):
        assert rows_of(falkirk.read_state(spark, storage, "stats")) == want
    assert cli.main(["status", uri]) == 0 and "stats" in capsys.readouterr().out
    for at in (True, 2.0, -1):
        with pytest.raises(StateReadError, match=r"at=.*: give an epoch"):
            falkirk.read_state(spark, uri, "stats", at=at)  # type: ignore[arg-type]
    for f in (tmp_path / "state" / "checkpoints" / "stats").rglob("*.parquet"):
        f.unlink()
    with pytest.raises(Exception, match=r"committed file .* is missing") as damaged:
        falkirk.read_state(spark, uri, "stats")
    assert "changed twice" not in str(damaged.value)
