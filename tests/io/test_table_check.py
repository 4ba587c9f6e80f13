"""``falkirk verify STORAGE TABLE`` checks a table against the epochs its root
committed to the sink (issue 29, findings 4 and 5): a committed epoch that is gone
is damage whether its sidecar was left or not, a torn sidecar is damage and no
traceback, while what a run writes before its commit (an epoch past the last one,
a sidecar alone), the empty schema file and epochs committed but still pending
release are not. The sidecar becomes visible before its epoch file, so a crash never
leaves a file that cannot be checked."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from falkirk.cli import main
from falkirk.graph import Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.io.table_check import Committed, verify_table
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.storage.filesystem import LocalFileSystem

EPOCHS = 5


def epoch_file(table: Path, epoch: int) -> Path:
    return table / f"epoch-{epoch:010d}.parquet"


def sidecar(table: Path, epoch: int) -> Path:
    return table / f".epoch-{epoch:010d}.parquet.sha256"


def copy(work: Path, visibility: str) -> Pipeline:
    p = Pipeline("copy")
    src = p.source("src", FileSource(str(work / "in"), "csv", "k string, v long", options={"header": "true"}))
    src.sink("out", ParquetTableSink(str(work / "out"), visibility=visibility))
    return p


def run(work: Path, visibility: str, spark: SparkSession) -> Path:
    """Run a copy of EPOCHS input files into work/out; keep a pristine copy of it."""
    (work / "in").mkdir()
    for i in range(1, EPOCHS + 1):
        (work / "in" / f"e{i}.csv").write_text("k,v\n" + "".join(f"k{j},{i * j}\n" for j in range(50)))
    Engine(copy(work, visibility), str(work / "state"), spark=spark).run()
    store = MetaStore(work / "state", read_only=True)
    try:
        assert store.sink_ranges() == {"out": (1, EPOCHS)}
    finally:
        store.close()
    shutil.copytree(work / "out", work / "pristine")
    return work


def restored(work: Path) -> Iterator[Path]:
    yield work
    shutil.rmtree(work / "out")
    shutil.copytree(work / "pristine", work / "out")


@pytest.fixture(scope="module")
def committed_run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("committed"), "committed", spark)


@pytest.fixture(scope="module")
def released_run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("released"), "released", spark)


@pytest.fixture
def work(committed_run: Path) -> Iterator[Path]:
    """The committed-visibility run, its table restored after the test."""
    yield from restored(committed_run)


@pytest.fixture
def released(released_run: Path) -> Iterator[Path]:
    yield from restored(released_run)


def verify(capsys: pytest.CaptureFixture[str], work: Path, *tables: str) -> tuple[int, list[str], str]:
    """``falkirk verify``'s exit code, its ``damaged:`` lines and its whole output."""
    code = main(["verify", str(work / "state"), *(tables or [str(work / "out")])])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    return code, [line for line in out.splitlines() if line.startswith("damaged:")], out


def test_an_intact_table_is_intact(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, damaged, out = verify(capsys, work)
    assert (code, damaged) == (0, []) and "all intact" in out


def test_a_deleted_epoch_file_is_missing_though_its_sidecar_is_left(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    epoch_file(work / "out", 3).unlink()
    code, damaged, out = verify(capsys, work)
    assert code == 1, out
    assert len(damaged) == 1 and "1 damaged" in out
    assert "epoch 3 is missing" in damaged[0] and "its sidecar remains" in damaged[0] and "'out'" in damaged[0]
    assert "epoch-0000000000" not in out  # the empty schema file is no committed epoch, and fine


def test_epochs_deleted_with_their_sidecars_are_missing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for epoch in (2, 3):
        epoch_file(work / "out", epoch).unlink()
        sidecar(work / "out", epoch).unlink()
    epoch_file(work / "out", EPOCHS).unlink()  # and the last one, its sidecar left
    code, damaged, out = verify(capsys, work)
    assert code == 1, out
    assert "2 damaged" in out
    assert "epochs 2-3 are missing" in damaged[0] and "their sidecars too" in damaged[0]
    assert f"epoch {EPOCHS} is missing" in damaged[1]


@pytest.mark.parametrize("torn", [b"", b'{"size": 12'], ids=["empty", "cut"])
def test_a_torn_sidecar_is_damage_not_a_traceback(work: Path, capsys: pytest.CaptureFixture[str], torn: bytes) -> None:
    sidecar(work / "out", 2).write_bytes(torn)
    code, damaged, out = verify(capsys, work)
    assert code == 1, out
    assert len(damaged) == 1 and "Traceback" not in out
    assert f"{sidecar(work / 'out', 2)} is torn ({'0 bytes' if not torn else f'{len(torn)} bytes'}" in damaged[0]


def test_what_a_run_writes_before_its_commit_is_not_damage(spark: SparkSession, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = work / "out"
    # "written" visibility (and a rollback past committed epochs, until the replay
    # rewrites them) leaves an epoch in the table past the committed ones...
    ParquetTableSink(str(table)).write(spark.createDataFrame([("k", 1)], "k string, v long"), EPOCHS + 1)
    # ...an older Falkirk's write, interrupted after its file by a full disk, tore its sidecar...
    sidecar(table, EPOCHS + 1).write_bytes(b"")
    # ...and a crash between a sidecar and its file leaves the sidecar alone.
    shutil.copy(sidecar(table, 1), sidecar(table, EPOCHS + 2))
    code, damaged, out = verify(capsys, work)
    assert (code, damaged) == (0, []), out
    assert "all intact" in out
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 2, out
    assert f"epoch {EPOCHS + 1} is past the committed ones (epochs 1-{EPOCHS}" in notes[0] and "is torn" in notes[0]
    assert f"{sidecar(table, EPOCHS + 2)} has no epoch file: epoch {EPOCHS + 2} is past the committed ones" in notes[1]
    assert f"checked {EPOCHS + 1} committed files" in out  # epochs 0-5: the late one is not committed


def test_a_table_that_is_no_sink_of_the_root_is_refused(work: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, damaged, out = verify(capsys, work, str(work / "in"))
    assert code == 2 and "all intact" not in out
    assert f"{work / 'in'} is not the table of any sink of storage root" in out
    assert f"its sinks write: out -> {work / 'out'}" in out
    # the same table by another spelling is the sink's table
    (tmp_path / "link").symlink_to(work / "out")
    for spelling in (str(tmp_path / "link"), f"file://{work / 'out'}/"):
        epoch_file(work / "out", 2).unlink()
        code, damaged, out = verify(capsys, work, spelling)
        assert code == 1 and "epoch 2 is missing" in damaged[0], out
        shutil.copy(epoch_file(work / "pristine", 2), epoch_file(work / "out", 2))


def test_a_released_table_may_hold_committed_epochs_pending(released: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table, pending = released / "out", released / "out" / "_pending"
    assert list(pending.glob("*")) == []  # every epoch released at its commit
    pending.mkdir(exist_ok=True)
    # epoch 4 committed, not released yet; epoch 5's release interrupted after its sidecar moved
    for path in (epoch_file(table, 4), sidecar(table, 4), epoch_file(table, 5)):
        path.rename(pending / path.name)
    code, damaged, out = verify(capsys, released)
    assert (code, damaged) == (0, []), out
    assert f"checked {EPOCHS + 1} committed files: all intact" in out  # epochs 0-5, pending ones too
    data = bytearray(epoch_file(pending, 5).read_bytes())
    data[len(data) // 2] ^= 0x10
    epoch_file(pending, 5).write_bytes(bytes(data))
    epoch_file(pending, 4).unlink()
    code, damaged, out = verify(capsys, released)
    assert code == 1 and len(damaged) == 2, out
    assert f"{epoch_file(pending, 5)} is damaged" in damaged[0]
    assert "epoch 4 is missing" in damaged[1] and "_pending/" in damaged[1]


class Watched(LocalFileSystem):
    """Checks, after every rename and write, that no epoch file is visible without
    its whole sidecar (in the table or pending); can crash at a chosen rename."""

    def __init__(self, table: Path, crash_at: str | None = None) -> None:
        self.table, self.crash_at, self.steps = table, crash_at, 0

    def replace(self, src: str, dst: str) -> None:
        if self.crash_at is not None and dst.endswith(self.crash_at):
            raise OSError("crash")
        super().replace(src, dst)
        self.check()

    def write_bytes(self, path: str, data: bytes) -> None:
        super().write_bytes(path, data)
        self.check()

    def check(self) -> None:
        self.steps += 1
        for folder in (self.table, self.table / "_pending"):
            for f in folder.glob("epoch-*.parquet"):
                record = sidecar(folder, int(f.name[6:16]))
                record = record if record.exists() else sidecar(self.table, int(f.name[6:16]))
                assert record.exists(), f"{f} is visible without its sidecar"
                assert json.loads(record.read_bytes())["size"] == f.stat().st_size


@pytest.mark.parametrize("visibility", ["committed", "released", "written"])
def test_the_sidecar_is_visible_before_its_epoch_file(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, visibility: str) -> None:
    table = tmp_path / "t"
    watched = Watched(table)
    monkeypatch.setattr("falkirk.io.sinks.filesystem_for", lambda path, spark=None: (watched, path))
    sink = ParquetTableSink(str(table), visibility=visibility)
    df = spark.createDataFrame([(1,)], "x long")
    sink.prepare(df.limit(0))
    for epoch in (1, 2):
        sink.pre_commit(df, epoch)
    sink.publish_upto(2)
    sink.commit_upto(2)
    assert watched.steps >= 6
    # a crash after the sidecar, before the file: a sidecar alone, of an uncommitted epoch
    watched.crash_at = epoch_file(table, 3).name
    with pytest.raises(OSError, match="crash"):
        sink.pre_commit(df, 3)
    folder = table if visibility == "written" else table / "_pending"
    assert sidecar(folder, 3).exists() and not epoch_file(folder, 3).exists()
    report = verify_table(watched, str(table), Committed("out", range(1, 3), visibility))
    assert (report.checked, report.problems) == (3, [])
    assert len(report.notes) == 1 and "epoch 3 is past the committed ones" in report.notes[0]
    # committed, it would be an epoch missing with its sidecar left
    report = verify_table(watched, str(table), Committed("out", range(1, 4), visibility))
    assert [(p.kind.value, p.epochs) for p in report.problems] == [("orphaned", (3, 3))]


class Releasing(LocalFileSystem):
    """Releases epoch 4 (sidecar first, as ParquetTableSink.commit_upto) while a check
    runs: once ``_pending`` is listed, or when its file is about to be read."""

    def __init__(self, table: Path, when: str) -> None:
        self.table, self.when = table, when

    def release(self) -> None:
        for path in (sidecar(self.table / "_pending", 4), epoch_file(self.table / "_pending", 4)):
            if path.exists():
                path.rename(self.table / path.name)

    def children(self, path: str) -> list[tuple[str, bool]]:
        found = super().children(path)
        if self.when == "listed" and path.endswith("_pending"):
            self.release()
        return found

    def read_bytes(self, path: str) -> bytes | None:
        if self.when == "read" and path == str(sidecar(self.table / "_pending", 4)):
            self.release()
        return super().read_bytes(path)


@pytest.mark.parametrize("when", ["listed", "read"])
def test_an_epoch_released_during_the_check_is_found(released: Path, when: str) -> None:
    table, pending = released / "out", released / "out" / "_pending"
    pending.mkdir(exist_ok=True)
    for path in (epoch_file(table, 4), sidecar(table, 4)):
        path.rename(pending / path.name)
    report = verify_table(Releasing(table, when), str(table), Committed("out", range(1, EPOCHS + 1), "released"))
    assert (report.checked, report.problems) == (EPOCHS + 1, [])
    assert epoch_file(table, 4).exists()
