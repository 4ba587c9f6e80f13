"""The session Falkirk starts: its Python workers and its JVM's class-data sharing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from falkirk import warmup
from falkirk.spark import cds


def test_python_workers_keep_their_zip_directories(spark: SparkSession) -> None:
    """falkirk.spark.daemon: workers do not re-read pyspark.zip before every task."""

    def probe(batches):  # type: ignore[no-untyped-def]
        import zipimport

        import pyarrow as pa

        name = zipimport.zipimporter.invalidate_caches.__qualname__
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"patched": [name]})

    names = {r["patched"] for r in spark.range(4).mapInArrow(probe, "patched string").collect()}
    assert names == {"_keep_directory"}


def test_sessions_use_the_class_data_sharing_archive(spark: SparkSession) -> None:
    """scripts/bootstrap.sh built the archive (falkirk warm-up); sessions start with it."""
    options = spark.conf.get("spark.driver.extraJavaOptions") or ""
    assert cds.archive_path().is_file(), "run `falkirk warm-up` (scripts/bootstrap.sh does)"
    assert f"-XX:SharedArchiveFile={cds.archive_path()}" in options


def test_without_an_archive_or_when_disabled_there_are_no_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FALKIRK_CACHE", str(tmp_path))
    assert cds.java_options() == ""  # nothing built there
    cds.archive_path().parent.mkdir(parents=True, exist_ok=True)  # the cache makes it, private
    cds.archive_path().write_bytes(b"x")
    assert "-XX:SharedArchiveFile=" in cds.java_options()
    monkeypatch.setenv("FALKIRK_CDS", "0")
    assert cds.java_options() == ""


def test_a_failed_training_run_leaves_no_archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FALKIRK_CACHE", str(tmp_path))

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        return subprocess.CompletedProcess(args, 1, b"", b"Error: no base archive")

    monkeypatch.setattr(warmup.subprocess, "run", failing)
    assert warmup.build() is None
    assert list(cds.archive_path().parent.iterdir()) == []  # no partial archive under any name
