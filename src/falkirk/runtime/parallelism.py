"""How many partitions a pipeline's keyed state is split into, and rescaling it.

Every keyed operator keeps its state hash-partitioned by key (aggregates,
``stateful``, joins, buffers, windows, loop states; ``exchange`` partitions rows the
same way), so that an epoch joins its rows with the state in place. The number of
partitions is a property of the **storage root**, not of the Spark session it runs
in: it is recorded at the first run and used by every later one, whatever
``spark.sql.shuffle.partitions`` the session says. It changes only on purpose, with
``Engine(..., parallelism=N)``: the run then **rescales**, re-partitioning every
state as it is restored from its checkpoints (which hold rows, not partitions), and
from then on runs as a root created with ``N`` would.

Each engine runs on its own clone of the Spark session (as Structured Streaming
runs each query), whose ``spark.sql.shuffle.partitions`` is the root's number: two
engines with different parallelism can share one session.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession

from falkirk.graph.exceptions import GraphError

logger = logging.getLogger(__name__)

#: The root's fact holding the number of state partitions.
PARTITIONS_FACT = "state_partitions"


@dataclass(frozen=True)
class Parallelism:
    """The number of state partitions a run uses, and whether it rescales."""

    #: Partitions of every keyed state (and of ``exchange``) in this run.
    partitions: int
    #: The number the root recorded before, when this run changes it (a rescale).
    rescaled_from: int | None = None

    def __str__(self) -> str:
        if self.rescaled_from is None:
            return f"{self.partitions} state partitions"
        return f"{self.partitions} state partitions (rescaled from {self.rescaled_from})"


def check_parallelism(requested: int | None) -> None:
    """Refuse a ``parallelism=`` that is not a positive integer."""
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
        raise GraphError(f"parallelism must be a positive integer (the number of state partitions), got {requested!r}")


def resolve(requested: int | None, recorded: str | None, session_default: int) -> Parallelism:
    """The run's parallelism: ``requested`` (``Engine(parallelism=)``) if given,
    else the root's ``recorded`` number, else - a new root, or one written before
    the number was recorded, whose state any number restores - the session's
    ``spark.sql.shuffle.partitions`` (``session_default``)."""
    before = int(recorded) if recorded is not None else None
    if requested is None:
        return Parallelism(before if before is not None else session_default)
    if before is not None and before != requested:
        return Parallelism(requested, rescaled_from=before)
    return Parallelism(requested)


def use(spark: SparkSession, parallelism: Parallelism, pipeline: str) -> bool:
    """Set the engine's session (its own clone) to ``parallelism``'s number of
    partitions; whether it changed (operators set up before must be set up again)."""
    if parallelism.rescaled_from is not None:
        logger.info("%s: rescaling the keyed state from %d to %d partitions", pipeline, parallelism.rescaled_from, parallelism.partitions)
    if spark.conf.get("spark.sql.shuffle.partitions") == str(parallelism.partitions):
        return False
    spark.conf.set("spark.sql.shuffle.partitions", str(parallelism.partitions))
    return True
