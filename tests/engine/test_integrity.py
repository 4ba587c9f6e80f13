"""Committed files are trusted only as committed (finding 4 of the data-loss review): a
bit flip that keeps a file's size is caught before the file is used, and reported as
Falkirk's own error naming the file, on local and Hadoop-URI roots alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from falkirk.cli import main
from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.spark.errors import as_storage_error
from falkirk.storage import CorruptStorageError
from falkirk.storage.filesystem import HadoopFileSystem


def flip_a_bit(path: Path) -> None:
    """Change one bit in the middle of ``path`` (the size stays the same)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def totals(tmp_path: Path) -> Pipeline:
    p = Pipeline("totals")
    src = p.source("src", FileSource(str(tmp_path / "in"), "csv", "k string, v long", options={"header": "true"}))
    src.aggregate("agg", "k", {"total": ("sum", "v")}, policy=EagerCheckpoint()).sink("out", ParquetTableSink(str(tmp_path / "out")))
    return p


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    for i in range(1, 4):
        rows = "".join(f"k{j},{987654321 + i * j}\n" for j in range(200))
        (tmp_path / "in" / f"e{i}.csv").write_text("k,v\n" + rows)
    return tmp_path


@pytest.mark.parametrize("uri", [False, True], ids=["local-root", "file-uri-root"])
def test_a_same_size_bit_flip_in_a_checkpoint_is_named_before_use(spark: SparkSession, inputs: Path, uri: bool) -> None:
    root = f"file://{inputs / 'state'}" if uri else str(inputs / "state")
    meta = {"metadata_dir": inputs / "meta"} if uri else {}
    Engine(totals(inputs), root, spark=spark, **meta).run(max_epochs=2)
    checkpoint = sorted((inputs / "state" / "checkpoints" / "agg").rglob("part-*.parquet"))[-1]
    size = checkpoint.stat().st_size
    flip_a_bit(checkpoint)
    assert checkpoint.stat().st_size == size
    with pytest.raises(CorruptStorageError, match=rf"{checkpoint.name} is damaged: its SHA-256"):
        Engine(totals(inputs), root, spark=spark, **meta).run()


def test_falkirk_verify_checks_every_committed_file(spark: SparkSession, inputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Engine(totals(inputs), inputs / "state", spark=spark).run()
    command = ["verify", str(inputs / "state"), str(inputs / "out")]
    assert main(command) == 0
    assert "all intact" in capsys.readouterr().out
    output = sorted((inputs / "out").glob("epoch-*.parquet"))[1]  # long released
    flip_a_bit(output)
    assert main(command) == 1
    out = capsys.readouterr().out
    assert f"{output.name} is damaged" in out and "1 damaged" in out
    checkpoint = sorted((inputs / "state" / "checkpoints").rglob("part-*.parquet"))[-1]  # retained
    flip_a_bit(checkpoint)
    assert main(command) == 1
    assert "2 damaged" in capsys.readouterr().out
    db = inputs / "state" / "meta.sqlite"  # a metadata row, by its checksum
    data = bytearray(db.read_bytes())
    at = data.index(b'"last": "e')
    data[at + 10] ^= 0x01
    db.write_bytes(bytes(data))
    assert main(command) == 1
    assert "does not match its checksum" in capsys.readouterr().out


def test_a_flip_spark_meets_while_reading_is_named_too(spark: SparkSession, tmp_path: Path) -> None:
    # Falkirk's check runs before a read; a file damaged after it still fails, by the
    # Parquet page checksums the session verifies, and the error names the file.
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"v": list(range(100_000))}), path, write_page_checksum=True, compression="none")
    flip_a_bit(path)
    with pytest.raises(Exception) as caught:
        spark.read.parquet(str(path)).agg({"v": "sum"}).collect()
    error = as_storage_error(caught.value)
    assert error is not None and "x.parquet" in str(error)


def test_hashes_computed_in_the_jvm_equal_pythons(spark: SparkSession, tmp_path: Path) -> None:
    # For HDFS and object stores the digest is computed in the JVM as it streams.
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 1000)
    assert HadoopFileSystem(spark).jvm_sha256(f"file://{path}") == hashlib.sha256(path.read_bytes()).hexdigest()
