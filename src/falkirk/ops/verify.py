"""``falkirk verify STORAGE [TABLE ...]``: a storage root's committed files, and its
sinks' tables against the epochs it committed to them.

The root's files are checked as :mod:`falkirk.storage.verify` says. Each TABLE must be
the table of one of the root's :class:`~falkirk.io.ParquetTableSink` sinks, found by
the ``target`` its pipeline description records (local paths are compared once
symlinks are resolved, URIs as Hadoop spells them); the table is then checked
against the epochs the root committed to that sink, with the sink's visibility
(:mod:`falkirk.io.table_check`): a committed epoch that is gone is reported, not
only a damaged file. A TABLE that is no sink's table is refused with an error that
names the tables the sinks write - never called intact. Only a root that records no
sink targets (written by a Falkirk before them, not run since) or whose metadata is
damaged has its tables' files checked alone, with a note saying so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from falkirk.io.table_check import Committed, verify_table
from falkirk.storage import StorageError
from falkirk.storage.filesystem import HadoopFileSystem, filesystem_for, is_uri, local_path
from falkirk.storage.verify import SinkRecord, check_files, read_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Report:
    """What :func:`verify` found: files ``checked``, ``problems`` (each a damaged or
    missing file, one line) and ``notes`` (not damage)."""

    checked: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Table:
    """A TABLE argument and what to check it against (None: its files only)."""

    path: str
    committed: Committed | None
    note: str | None = None


def verify(storage: str, tables: Sequence[str] = (), spark: SparkSession | None = None) -> Report:
    """Check the root ``storage`` and the given tables of its sinks (see the module
    docstring). Raises :class:`StorageError` before checking anything if a TABLE is
    not the table of one of the root's sinks. ``spark`` reaches Hadoop URIs."""
    fs, root = filesystem_for(storage, spark)
    verdict = read_root(fs, root)
    plans = [_plan(table, storage, verdict.sinks, spark) for table in tables]
    check_files(fs, verdict)
    report = Report(verdict.checked, list(verdict.damaged))
    for plan in plans:
        table_fs, directory = filesystem_for(plan.path, spark)
        found = verify_table(table_fs, directory, plan.committed)
        report.checked += found.checked
        report.problems += [str(p) for p in found.problems]
        report.notes += ([plan.note] if plan.note else []) + found.notes
    return report


def _plan(table: str, storage: str, sinks: dict[str, SinkRecord] | None, spark: SparkSession | None) -> _Table:
    """What ``table`` is checked against: the committed epochs of the sink writing it."""
    if sinks is None:
        return _Table(table, None, f"{table}: the root's metadata could not be read; the table's files are checked alone")
    parquet = {name: s for name, s in sinks.items() if s.target is not None and s.target.get("kind") == "parquet"}
    if not any(s.target is not None for s in sinks.values()):
        return _Table(
            table,
            None,
            f"{table}: storage root {storage} does not record where its sinks write (written by an older "
            "Falkirk; its next run records it): the table's files are checked alone, not its committed epochs",
        )
    wanted = _canonical(table, spark)
    for name, sink in parquet.items():
        if sink.target is not None and _canonical(str(sink.target["path"]), spark) == wanted:
            first, last = sink.committed if sink.committed is not None else (1, 0)
            visibility = str(sink.target.get("visibility", "committed"))
            return _Table(table, Committed(name, range(first, last + 1), visibility))
    raise StorageError(
        f"{table} is not the table of any sink of storage root {storage}; its sinks write: {_targets(sinks)}. "
        "Give the table of one of them, or the storage root of the pipeline that writes this table"
    )


def _targets(sinks: dict[str, SinkRecord]) -> str:
    """Where each sink writes, for an error message."""
    spelled = []
    for name, sink in sinks.items():
        target = sink.target or {}
        where = target.get("path") if target.get("kind") == "parquet" else f"a {target.get('kind', 'unknown')} sink"
        spelled.append(f"{name} -> {where}")
    return ", ".join(spelled) or "nothing (the pipeline has no sinks)"


def _canonical(path: str, spark: SparkSession | None) -> str:
    """``path`` spelled so that two spellings of one table compare equal: a local
    path (``file:`` URIs too) with symlinks resolved, another URI as Hadoop spells it."""
    local = local_path(path) if is_uri(path) else path
    if local is not None:
        return os.path.realpath(local)
    if spark is None:
        return path.rstrip("/")
    return HadoopFileSystem(spark).spelling(path.rstrip("/"))
