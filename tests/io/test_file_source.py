"""FileSource: names read literally, offsets that identify input exactly, input that
changes or arrives late stops the pipeline with an error naming it (finding 2 of the
data-loss review)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.graph import GraphError, LazyCheckpoint, LogOutputs, Pipeline
from falkirk.io import FileSource, MemorySink, ParquetTableSink
from falkirk.io.exceptions import InputChangedError, LateInputError, SourceError
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.testing.verify import differences

#: Names Spark's reader would treat as glob patterns, or Hadoop as URI syntax.
ODD_NAMES = ["f1.json", "f[1].json", "g{x,y}.json", "a*b.json", "q?.json", "colon:1.json",
             "sp ace.json", "pct%20.json", "hash#1.json", "back\\slash.json", "ü.json", "f.json"]


def write(directory: Path, name: str, *rows: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("".join(json.dumps({"name": r}) + "\n" for r in rows))
    return path


def test_planning_walks_the_names_in_order_and_keeps_only_a_position(tmp_path: Path) -> None:
    for name in ("b.json", "a.json", "c.json", ".hidden.json", "_staging.json"):
        write(tmp_path, name, name)
    source = FileSource(str(tmp_path), "json", "name string", files_per_epoch=2)
    first = source.next_offsets(None)
    assert first is not None and [f[0] for f in first["files"]] == ["a.json", "b.json"]
    assert first["last"] == "b.json" and first["seen"] == 2
    second = source.next_offsets(first)
    assert second is not None and [f[0] for f in second["files"]] == ["c.json"]
    assert source.next_offsets(second) is None  # nothing new
    write(tmp_path, "d.json", "d")
    third = source.next_offsets(second)
    assert third is not None and [f[0] for f in third["files"]] == ["d.json"]
    size = (tmp_path / "d.json").stat().st_size
    assert third["files"][0][1] == size and third["files"][0][2] == (tmp_path / "d.json").stat().st_mtime_ns


def test_a_file_that_sorts_before_consumed_input_is_reported_not_skipped(tmp_path: Path) -> None:
    write(tmp_path, "b.json", "b")
    source = FileSource(str(tmp_path), "json", "name string")
    first = source.next_offsets(None)
    write(tmp_path, "a.json", "a")  # arrives late, with an earlier name
    with pytest.raises(LateInputError, match=r"'a.json'.*arrived after 'b.json'"):
        source.next_offsets(first)
    (tmp_path / "a.json").unlink()
    (tmp_path / "b.json").unlink()  # consumed input may be deleted
    assert source.next_offsets(first) is None


def test_a_deleted_consumed_file_cannot_hide_a_late_one(tmp_path: Path) -> None:
    # Review: the late check was a count, so deleting one consumed file let one late
    # file through unread and unreported.
    for name in ("a.json", "b.json", "c.json"):
        write(tmp_path, name, name)
    source = FileSource(str(tmp_path), "json", "name string", files_per_epoch=3)
    first = source.next_offsets(None)
    (tmp_path / "a.json").unlink()
    write(tmp_path, "b2.json", "late")
    with pytest.raises(LateInputError, match=r"'b2.json'"):
        source.next_offsets(first)


def test_a_name_spark_cannot_read_is_named(tmp_path: Path) -> None:
    bad = os.fsencode(str(tmp_path)) + b"/02\xff.csv"
    with open(bad, "w") as f:
        f.write('{"name": "x"}\n')
    with pytest.raises(SourceError, match=r"02\\xff.csv.*not valid UTF-8"):
        FileSource(str(tmp_path), "json", "name string").next_offsets(None)


def test_a_changed_or_deleted_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", "a")
    source = FileSource(str(tmp_path), "json", "name string")
    offsets = source.next_offsets(None)
    assert offsets is not None
    source.check(offsets)
    path.write_text('{"name": "rewritten, longer"}\n')
    with pytest.raises(InputChangedError, match=r"a\.json' changed after .*\(size 14 -> 30 bytes"):
        source.check(offsets)
    path.unlink()
    with pytest.raises(InputChangedError, match=r"a\.json' was deleted .* Put the original file back"):
        source.check(offsets)


@pytest.mark.parametrize("per_epoch", [1, 3])
def test_odd_names_are_read_literally_each_exactly_once(spark: SparkSession, tmp_path: Path, per_epoch: int) -> None:
    for name in ODD_NAMES:
        write(tmp_path / "in", name, name)
    sink = MemorySink()
    p = Pipeline("odd")
    p.source("src", FileSource(str(tmp_path / "in"), "json", "name string", files_per_epoch=per_epoch)).sink("mem", sink)
    report = Engine(p, tmp_path / "state", spark=spark).run()
    assert len(report.epochs) == -(-len(ODD_NAMES) // per_epoch)
    got = {epoch: sorted(r["name"] for r in rows) for epoch, rows in sink.epochs.items()}
    ordered = sorted(ODD_NAMES)
    want = {1 + i // per_epoch: sorted(ordered[i : i + per_epoch]) for i in range(0, len(ordered), per_epoch)}
    assert got == want


def _counting(tmp_path: Path, files_per_epoch: int = 1, every: int = 2) -> Pipeline:
    p = Pipeline("counts")
    src = p.source("src", FileSource(str(tmp_path / "in"), "json", "name string", files_per_epoch=files_per_epoch))
    src.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=every)).sink("out", ParquetTableSink(str(tmp_path / "out")))
    return p


@pytest.mark.parametrize("change", ["rewrite", "delete"])
def test_input_changed_before_a_replay_stops_with_the_file_named(spark: SparkSession, tmp_path: Path, change: str) -> None:
    for i in range(1, 5):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)
    # The checkpoint is at epoch 2: a restart replays epoch 3 from e3.json.
    if change == "rewrite":
        write(tmp_path / "in", "e3.json", "x", "y3", "z")
    else:
        (tmp_path / "in" / "e3.json").unlink()
    with pytest.raises(InputChangedError, match=r"e3\.json"):
        Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run()
    # Nothing was committed from the changed input: epoch 3's output is the first run's.
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(out["epoch"].unique()) == [1, 2, 3]


def test_restored_input_lets_the_pipeline_finish_exactly(spark: SparkSession, tmp_path: Path) -> None:
    for i in range(1, 5):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)
    original = (tmp_path / "in" / "e3.json").read_bytes()
    stat = (tmp_path / "in" / "e3.json").stat()
    (tmp_path / "in" / "e3.json").write_bytes(b'{"name": "other"}\n')
    with pytest.raises(InputChangedError):
        Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run()
    (tmp_path / "in" / "e3.json").write_bytes(original)  # put back as it was
    os.utime(tmp_path / "in" / "e3.json", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run()
    out = pd.read_parquet(tmp_path / "out")
    want = pd.DataFrame(
        [("x", n, n) for n in range(1, 5)] + [(f"y{i}", 1, i) for i in range(1, 5)], columns=["name", "n", "epoch"]
    )
    assert differences(out, want) == []


def _offsets_of(state: Path, epoch: int) -> dict[str, object]:
    store = MetaStore(state, read_only=True)
    try:
        return store.offsets("src")[epoch]  # type: ignore[no-any-return]
    finally:
        store.close()


def _sha256(path: Path) -> str:
    """The hash a source commits for a file, computed independently (plain Python)."""
    with open(path, "rb") as f:
        return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()


def _put_back(path: Path, content: bytes) -> None:
    """``content`` written anew at ``path`` (a copy from a backup: a new modification time)."""
    before = path.stat().st_mtime_ns if path.exists() else None
    path.unlink(missing_ok=True)
    path.write_bytes(content)
    assert path.stat().st_mtime_ns != before


def test_a_file_put_back_with_a_new_modification_time_is_read_by_the_replay(spark: SparkSession, tmp_path: Path) -> None:
    # Finding 6: a byte-identical copy of a deleted input file was refused (its mtime is new).
    for i in range(1, 5):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}", "x")
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)
    assert _offsets_of(tmp_path / "state", 3)["content"] == {"e3.json": _sha256(tmp_path / "in" / "e3.json")}
    original = (tmp_path / "in" / "e3.json").read_bytes()
    _put_back(tmp_path / "in" / "e3.json", original)  # the checkpoint is at 2: the restart reads e3.json again
    report = Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None and report.recovered["agg"] == 2
    assert "recovered in " in str(report) and report.recovery_story == (
        "agg restarts from its checkpoint at epoch 2, so epoch 3 is computed again; nothing committed is written twice"
    )
    want = pd.DataFrame(
        [("x", 2 * n, n) for n in range(1, 5)] + [(f"y{i}", 1, i) for i in range(1, 5)], columns=["name", "n", "epoch"]
    )
    assert differences(pd.read_parquet(tmp_path / "out"), want) == []


def test_files_put_back_with_pattern_characters_in_their_names_are_compared_as_read(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the comparison read an epoch's files in one path list, which Spark
    reads once per name that looks like a pattern: every row counted twice, and the
    identical files refused."""
    names = ["a[1].json", "a2.json", "b{x}.json", "b*y.json"]
    for i, name in enumerate(names):
        write(tmp_path / "in", name, "x", f"y{i}")

    def build() -> Pipeline:
        return _counting(tmp_path, files_per_epoch=2, every=5)

    Engine(build(), tmp_path / "state", spark=spark).run()
    assert _offsets_of(tmp_path / "state", 1)["content"] == {name: _sha256(tmp_path / "in" / name) for name in names[:2]}
    for name in names:  # nothing is checkpointed: a restart reads every file again
        _put_back(tmp_path / "in" / name, (tmp_path / "in" / name).read_bytes())
    Engine(build(), tmp_path / "state", spark=spark).run()
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(map(tuple, out[["name", "n", "epoch"]].values.tolist())) == [
        ("x", 2, 1), ("x", 4, 2), *sorted((f"y{i}", 1, 1 + i // 2) for i in range(4))
    ]


def test_a_put_back_file_is_judged_by_its_bytes_whatever_the_pipeline_read_of_it(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the row digest was a Spark observation, reported by the first query that
    ended: a processor function's ``isEmpty()`` (or a limit, a loop, a cache two jobs
    filled at once) made it count part of the rows, and a changed file of its size
    giving that part was accepted - the other rows lost. The hash is of the file's bytes."""
    names = ["x"] + [f"y{i}" for i in range(9)]
    write(tmp_path / "in", "e1.json", *names)
    write(tmp_path / "in", "e2.json", "z")

    def build() -> Pipeline:
        p = Pipeline("peek")
        src = p.source("src", FileSource(str(tmp_path / "in"), "json", "name string"))
        peeked = src.map("peek", lambda df: df.filter("false") if df.isEmpty() else df)  # an action reading one row
        peeked.map("top", lambda df: df.orderBy("name").limit(5)).sink("top_out", ParquetTableSink(str(tmp_path / "top")))
        peeked.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=100)).sink("out", ParquetTableSink(str(tmp_path / "out")))
        return p

    Engine(build(), tmp_path / "state", spark=spark).run(max_epochs=1)
    path = tmp_path / "in" / "e1.json"
    assert _offsets_of(tmp_path / "state", 1)["content"] == {"e1.json": _sha256(path)}
    original = path.read_bytes()
    first = original.split(b"\n")[0] + b"\n"
    for changed in (first + b"\n" * (len(original) - len(first)), b"\0" * len(original)):  # its first row only; zeros
        _put_back(path, changed)
        with pytest.raises(InputChangedError, match=r"e1\.json' changed .*its bytes differ from the file the epoch read"):
            Engine(build(), tmp_path / "state", spark=spark).run()
    _put_back(path, original)  # nothing is checkpointed (every=100): the restart reads it again
    Engine(build(), tmp_path / "state", spark=spark).run()
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(map(tuple, out[["name", "n"]].values.tolist())) == sorted([(n, 1) for n in names] + [("z", 1)])
    assert sorted(pd.read_parquet(tmp_path / "top")["name"]) == sorted([*sorted(names)[:5], "z"])


def test_a_deleted_file_is_named_when_another_of_its_epoch_was_put_back(spark: SparkSession, tmp_path: Path) -> None:
    """Review: the row digest covered an epoch's files together, so the file put back
    byte for byte was named as changed when it was another of the epoch that was gone."""
    for name in ("a.json", "b.json"):
        write(tmp_path / "in", name, "x", name)

    def build() -> Pipeline:
        return _counting(tmp_path, files_per_epoch=2, every=5)

    Engine(build(), tmp_path / "state", spark=spark).run()
    _put_back(tmp_path / "in" / "a.json", (tmp_path / "in" / "a.json").read_bytes())
    (tmp_path / "in" / "b.json").unlink()
    with pytest.raises(InputChangedError, match=r"b\.json' was deleted"):
        Engine(build(), tmp_path / "state", spark=spark).run()


def test_a_file_put_back_with_other_rows_of_its_size_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    for i in range(1, 5):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)
    original = (tmp_path / "in" / "e3.json").read_bytes()
    _put_back(tmp_path / "in" / "e3.json", original.replace(b"y3", b"y9"))
    with pytest.raises(InputChangedError, match=r"e3\.json' changed .* its bytes differ from the file the epoch read \(another SHA-256\)"):
        Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run()
    assert sorted(pd.read_parquet(tmp_path / "out")["epoch"].unique()) == [1, 2, 3]  # nothing of the other rows


def test_without_hashes_a_file_put_back_is_refused_with_how_to_restore_its_time(spark: SparkSession, tmp_path: Path) -> None:
    def build() -> Pipeline:
        p = Pipeline("counts")
        src = p.source("src", FileSource(str(tmp_path / "in"), "json", "name string", hash_content=False))
        src.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=2)).sink("out", ParquetTableSink(str(tmp_path / "out")))
        return p

    for i in range(1, 5):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
    Engine(build(), tmp_path / "state", spark=spark).run(max_epochs=3)
    assert "content" not in _offsets_of(tmp_path / "state", 3)
    path = tmp_path / "in" / "e3.json"
    planned = path.stat().st_mtime_ns
    _put_back(path, path.read_bytes())
    with pytest.raises(InputChangedError, match=r"No hash of its bytes was committed \(hash_content=False\).*\(touch -m -d @") as raised:
        Engine(build(), tmp_path / "state", spark=spark).run()
    command = str(raised.value).split("(touch ", 1)[1].split(")", 1)[0]
    subprocess.run(["touch", *command.split()], check=True)  # the advice, followed
    assert path.stat().st_mtime_ns == planned
    Engine(build(), tmp_path / "state", spark=spark).run()
    assert sorted(pd.read_parquet(tmp_path / "out")["epoch"].unique()) == [1, 2, 3, 4]


def test_consumed_input_a_recovery_does_not_reread_may_be_deleted(spark: SparkSession, tmp_path: Path) -> None:
    # Review: deleting consumed files wedged every restart, because the commit checked
    # the offsets of every source, also of sources that held the epoch already.
    for i in range(1, 6):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")

    def build() -> Pipeline:
        p = Pipeline("logged")
        src = p.source("src", FileSource(str(tmp_path / "in"), "json", "name string"))
        logged = src.map("keep", lambda df: df, policy=LogOutputs())
        logged.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=2)).sink(
            "out", ParquetTableSink(str(tmp_path / "out"))
        )
        return p

    Engine(build(), tmp_path / "state", spark=spark).run(max_epochs=3)
    for i in (1, 2, 3):  # epoch 3 is re-sent from keep's log: the source never re-reads it
        (tmp_path / "in" / f"e{i}.json").unlink()
    report = Engine(build(), tmp_path / "state", spark=spark, on_epoch=lambda *_: None).run()
    assert report.recovered is not None and report.recovered["agg"] == 2 and report.recovered["src"] == 3
    want = pd.DataFrame(
        [("x", n, n) for n in range(1, 6)] + [(f"y{i}", 1, i) for i in range(1, 6)], columns=["name", "n", "epoch"]
    )
    assert differences(pd.read_parquet(tmp_path / "out"), want) == []


# -- Hadoop URIs: the same contract through Hadoop's FileSystem API ------------------


def test_a_hadoop_uri_is_planned_checked_and_reported_like_a_local_path(spark: SparkSession, tmp_path: Path) -> None:
    # file: URIs go through Hadoop's listing and FileStatus (as hdfs: or s3a: would).
    for name in ("b.json", "a.json", "_staging.json"):
        write(tmp_path, name, name)
    source = FileSource(f"file://{tmp_path}/", "json", "name string")
    assert source.path == f"file://{tmp_path}"
    first = source.next_offsets(None)
    assert first is not None and [f[0] for f in first["files"]] == ["a.json"]
    assert first["files"][0][1:] == [(tmp_path / "a.json").stat().st_size, (tmp_path / "a.json").stat().st_mtime_ns // 10**6 * 10**6]
    source.check(first)
    second = source.next_offsets(first)
    assert second is not None and [f[0] for f in second["files"]] == ["b.json"]
    write(tmp_path, "a2.json", "late")
    with pytest.raises(LateInputError, match=r"'a2.json'.*arrived after 'b.json'"):
        source.next_offsets(second)
    (tmp_path / "a2.json").unlink()
    write(tmp_path, "b.json", "b rewritten")
    with pytest.raises(InputChangedError, match=r"file:.*b\.json' changed after"):
        source.check(second)
    (tmp_path / "b.json").unlink()
    with pytest.raises(InputChangedError, match=r"b\.json' was deleted"):
        source.check(second)
    with pytest.raises(Exception, match="does not exist"):
        FileSource(f"file://{tmp_path}/nowhere", "json", "name string").next_offsets(None)


def test_a_pipeline_on_hadoop_uris_restarts_exactly_and_archives_its_input(spark: SparkSession, tmp_path: Path) -> None:
    for i in range(1, 6):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
    write(tmp_path / "in", "colon:1.json", "z")  # a name Hadoop parses as URI syntax
    uri = f"file://{tmp_path}"

    def build() -> Pipeline:
        p = Pipeline("uris")
        source = FileSource(f"{uri}/in", "json", "name string", acknowledged="move", archive=f"{uri}/in/_done")
        src = p.source("src", source)
        src.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=2)).sink("out", ParquetTableSink(f"{uri}/out"))
        return p

    Engine(build(), f"{uri}/state", spark=spark).run(max_epochs=3)
    report = Engine(build(), f"{uri}/state", spark=spark).run()
    assert report.recovered is not None and report.recovered["agg"] == 2  # epoch 3 replayed from its file
    names = sorted(["colon:1.json"] + [f"e{i}.json" for i in range(1, 6)])
    firsts = {"colon:1.json": "z", **{f"e{i}.json": f"y{i}" for i in range(1, 6)}}
    rows = []
    for epoch, name in enumerate(names, start=1):
        rows += [(firsts[name], 1, epoch)] + ([("x", sum(n.startswith("e") for n in names[:epoch]), epoch)] if name.startswith("e") else [])
    want = pd.DataFrame(rows, columns=["name", "n", "epoch"])
    assert differences(pd.read_parquet(tmp_path / "out"), want) == []
    # Acknowledged files moved into the archive; none is left to read, none was lost.
    assert sorted(p.name for p in (tmp_path / "in").iterdir() if p.is_file()) == []
    assert sorted(p.name for p in (tmp_path / "in" / "_done").iterdir() if not p.name.startswith(".")) == names


def test_an_archive_on_another_filesystem_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="must be on the input's filesystem"):
        FileSource(f"file://{tmp_path}/in", "json", "name string", acknowledged="move", archive=str(tmp_path / "done"))


def test_a_hadoop_source_keeps_its_consumed_files_and_must_name_a_directory(spark: SparkSession, tmp_path: Path) -> None:
    # Review: on HDFS or S3 no inode time says when a file was placed, so deleting
    # consumed input could hide a late file; and a file given as the directory made
    # planning recurse without end.
    with pytest.raises(Exception, match="acknowledged='delete' is refused on a Hadoop filesystem"):
        FileSource("hdfs://nn/in", "json", "name string", acknowledged="delete")
    write(tmp_path, "a.json", "a")
    with pytest.raises(Exception, match="is not a directory"):
        FileSource(f"file://{tmp_path}/a.json", "json", "name string").next_offsets(None)


def test_a_root_restarted_on_another_input_directory_says_so(spark: SparkSession, tmp_path: Path) -> None:
    # Newcomer finding: pointing a root at another input folder reported a file "changed".
    for i in range(1, 4):
        write(tmp_path / "in", f"e{i}.json", "x", f"y{i}")
        write(tmp_path / "other", f"e{i}.json", "other", f"z{i}")
    Engine(_counting(tmp_path), tmp_path / "state", spark=spark).run(max_epochs=3)  # the checkpoint is at 2

    def elsewhere() -> Pipeline:
        p = Pipeline("counts")
        src = p.source("src", FileSource(str(tmp_path / "other"), "json", "name string"))
        src.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=2)).sink("out", ParquetTableSink(str(tmp_path / "out")))
        return p

    with pytest.raises(InputChangedError, match=r"^source path differs: this FileSource reads '.*/other', and the epochs .* were planned on '.*/in'\. .*e3\.json' changed") as refused:
        Engine(elsewhere(), tmp_path / "state", spark=spark).run()
    assert refused.value.__context__ is None, "one error, not one raised while handling another"


def test_empty_set_aside_and_copying_files_and_a_directory_in_a_files_place(spark: SparkSession, tmp_path: Path) -> None:
    """Review: binaryFile gave no hash for an empty file, none for a file set aside as
    unreadable (both refused when put back), matched a directory holding a file of the
    name (accepted with the directory's other rows); and a name ending in '._COPYING_'
    was planned but never read by Spark (its rows lost)."""
    write(tmp_path / "in", "a.csv.gz", "x")
    (tmp_path / "in" / "a.csv.gz").write_bytes(b"not gzip at all\n")  # unreadable: set aside
    (tmp_path / "in" / "b.json").write_bytes(b"")
    write(tmp_path / "in", "c.json", "x", "y")
    write(tmp_path / "in", "d._COPYING_", "lost")

    def build() -> Pipeline:
        p = Pipeline("counts")
        src = p.source("src", FileSource(str(tmp_path / "in"), "json", "name string", files_per_epoch=3, unreadable="set_aside"))
        src.aggregate("agg", "name", {"n": ("count", None)}, policy=LazyCheckpoint(every=5)).sink("out", ParquetTableSink(str(tmp_path / "out")))
        return p

    Engine(build(), tmp_path / "state", spark=spark).run()
    offsets = _offsets_of(tmp_path / "state", 1)
    assert [f[0] for f in offsets["files"]] == ["a.csv.gz", "b.json", "c.json"]  # type: ignore[index]
    assert offsets["content"] == {name: _sha256(tmp_path / "in" / name) for name in ("a.csv.gz", "b.json", "c.json")}
    for name in ("a.csv.gz", "b.json", "c.json"):  # nothing is checkpointed: the restart reads them again
        _put_back(tmp_path / "in" / name, (tmp_path / "in" / name).read_bytes())
    Engine(build(), tmp_path / "state", spark=spark).run()
    assert sorted(map(tuple, pd.read_parquet(tmp_path / "out")[["name", "n"]].values.tolist())) == [("x", 1), ("y", 1)]
    original = (tmp_path / "in" / "c.json").read_bytes()
    (tmp_path / "in" / "c.json").unlink()
    (tmp_path / "in" / "c.json").mkdir()
    (tmp_path / "in" / "c.json" / "c.json").write_bytes(original)
    with pytest.raises(InputChangedError, match=r"c\.json' is no longer a regular file"):
        Engine(build(), tmp_path / "state", spark=spark).run()


def test_a_large_file_is_hashed_in_chunks_on_the_executors(spark: SparkSession, tmp_path: Path) -> None:
    """Review: binaryFile held each file (and a copy) in the JVM: one input file of
    768 MiB killed the driver, at every restart. A 1.2 GiB file (sparse: no disk) is
    hashed in 1 MiB chunks, past binaryFile's 2 GiB-per-value reach too."""
    big = tmp_path / "in" / "big.csv"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(1200 << 20)
    source = FileSource(str(tmp_path / "in"), "csv", "value string")
    assert source.content_hashes(spark, [["big.csv", big.stat().st_size, big.stat().st_mtime_ns]]) == {"big.csv": _sha256(big)}


def test_spellings_empty_files_link_loops_and_times_in_messages(spark: SparkSession, tmp_path: Path) -> None:
    """A root run on a path and then on its file: URI compares times at the coarser
    precision; an empty file with a new time is the file read; a link loop in a
    file's place is one clear error; times in messages are UTC and say so."""
    write(tmp_path / "in", "a.json", "x")
    (tmp_path / "in" / "b.json").write_bytes(b"")
    by_path = FileSource(str(tmp_path / "in"), "json", "name string", files_per_epoch=2)
    planned = by_path.next_offsets(None)
    assert planned is not None and [f[0] for f in planned["files"]] == ["a.json", "b.json"]
    FileSource(f"file://{tmp_path}/in", "json", "name string").check(planned)  # milliseconds against nanoseconds
    os.utime(tmp_path / "in" / "b.json", ns=(10**18, 10**18))  # empty, put back: the same (no) bytes
    by_path.check(planned)
    os.utime(tmp_path / "in" / "a.json", ns=(1_700_000_000_123_456_789,) * 2)
    with pytest.raises(InputChangedError, match=r"modified 20\d\d-.* UTC -> 2023-11-14 22:13:20\.123456789 UTC"):
        FileSource(str(tmp_path / "in"), "json", "name string", hash_content=False).check(planned)
    (tmp_path / "in" / "a.json").unlink()
    (tmp_path / "in" / "a.json").symlink_to(tmp_path / "in" / "a.json")
    with pytest.raises(GraphError, match=r"a\.json' cannot be examined \(Too many levels of symbolic links\)"):
        by_path.check(planned)
