"""The state of one run of a pipeline, explicit: what the epoch loop and recovery share.

:class:`RunState` holds the pipeline's operators and schemas, the storage it runs on
(file system, root, metadata, :class:`~falkirk.control.ledger.Ledger`), and where
every processor stands: ``frontier`` (the last epoch it committed wholly, or the one
a rollback took it back to), ``restored`` (it skips epochs up to this one: it holds
them already) and ``resumed`` (a loop processor a rollback took into the middle of an
epoch: the ``(epoch, iteration)`` it holds). The engine (:mod:`falkirk.runtime.engine`) runs epochs on it and
recovery (:mod:`falkirk.coordinator.rollback`) rolls it back; neither reaches into the
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from falkirk.control import garbage
from falkirk.control.domains import input_log_key
from falkirk.control.ledger import Ledger
from falkirk.execution.quarantine import Quarantines
from falkirk.execution.report import RunReport
from falkirk.graph import Pipeline, Processor
from falkirk.observe.telemetry import Telemetry
from falkirk.operators import Operator
from falkirk.recovery import Topology
from falkirk.spark.files import check_stored_schema
from falkirk.spark.frames import empty
from falkirk.storage import MetaStore, StoredFile, verify_files
from falkirk.storage.filesystem import FileSystem
from falkirk.time.ticks import Tick


@dataclass
class RunState:
    """One run's operators, storage and progress (see the module docstring)."""

    pipeline: Pipeline
    topology: Topology
    spark: SparkSession
    operators: dict[str, Operator]
    #: Output schema per (processor, port).
    schemas: dict[tuple[str, str], StructType]
    fs: FileSystem
    root: str
    store: MetaStore
    ledger: Ledger
    report: RunReport
    frontier: dict[str, int] = field(default_factory=dict)
    restored: dict[str, int] = field(default_factory=dict)
    #: Loop and region processors a rollback took back into the middle of an epoch:
    #: the tick ``(epoch, iteration)`` or ``(epoch, record)`` they hold (they skip
    #: the iterations or records up to it).
    resumed: dict[str, Tick] = field(default_factory=dict)
    #: Live figures for the dashboard (None: the engine runs without one).
    telemetry: Telemetry | None = None
    #: Whether epochs count their rows as Spark computes them (a progress display,
    #: ``on_epoch``, telemetry: :class:`~falkirk.execution.work.EpochCounts`).
    counting: bool = False
    #: The rows processors set aside, committed and found in this run.
    quarantine: Quarantines = field(default_factory=lambda: Quarantines({}))
    _verified: set[str] = field(default_factory=set)
    _laid_out: set[str] = field(default_factory=set)  # log directories whose columns were checked

    @property
    def order(self) -> list[Processor]:
        """Processors in graph order (every input before its receiver)."""
        return list(self.pipeline.processors.values())

    def holds(self, p: Processor, t: Tick) -> bool:
        """Whether ``p`` holds time ``t`` (in its domain) already: a rollback left it
        there or beyond, so it skips ``t``."""
        if p.region is None:
            return t <= Tick(self.restored[p.name])
        return t <= self.resumed.get(p.name, Tick.all_of(self.restored[p.name]))

    @property
    def keyed(self) -> list[Processor]:
        return [p for p in self.order if p.spec.keyed]

    def verified(self, files: Sequence[StoredFile]) -> Sequence[StoredFile]:
        """``files``, checked against their committed sizes and checksums before their
        first use in this run (:class:`~falkirk.storage.CorruptStorageError` names a
        damaged one)."""
        fresh = [f for f in files if f.path not in self._verified]
        verify_files(fresh, self.fs)
        self._verified.update(f.path for f in fresh)
        return files

    def read(self, files: Sequence[StoredFile], schema: StructType) -> DataFrame:
        """Committed Parquet files (verified first) as a DataFrame of ``schema``;
        :class:`~falkirk.graph.exceptions.PipelineChangedError` if they were written
        with other columns (the pipeline changed upstream of a logged edge or input:
        the replay would read its rows as something else)."""
        if not files:
            return empty(self.spark, schema)
        self.verified(files)
        fresh = [f.path for f in files if f.path.rsplit("/", 1)[0] not in self._laid_out]
        if fresh:
            check_stored_schema(self.spark, fresh, schema, "a committed log of this pipeline")
            self._laid_out.update(path.rsplit("/", 1)[0] for path in fresh)
        return self.spark.read.schema(schema).parquet(*[f.path for f in files])

    def area(self, area: str, owner: str) -> str:
        """The directory of one log or checkpoint series under the root."""
        return self.fs.join(self.root, area, owner)

    def delete(self, files: list[StoredFile]) -> None:
        """Delete files whose records a durable commit forgot."""
        if files:
            garbage.delete(self.fs, self.root, files)
            self.report.collected_files += len(files)

    def input_log(self, p: Processor, k: int) -> str:
        """The log key of input ``k`` of a processor that logs its inputs."""
        return input_log_key(p.name, k)
