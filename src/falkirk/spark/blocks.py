"""Which materialised DataFrames lost blocks when an executor died.

State is kept in the executors as locally checkpointed RDDs
(:func:`~falkirk.spark.materialise.materialise`): their lineage is cut, so a block lost
with its executor cannot be recomputed, and the first job that needs it fails
("Checkpoint block rdd_N_M not found"). After an executor loss the engine asks, for
each keyed processor, whether every block of every DataFrame holding its state is
still registered with Spark's block manager master; a processor whose state is
whole survives the loss (section 4.4 of the Falkirk Wheel paper: only what failed
is handed to the solver as failed).

Spark's ``getRDDStorageInfo`` reports, per persisted RDD, how many of its partitions
have a block on some live executor; blocks of an executor that is gone are
unregistered when the driver learns of the loss. If the driver has not learnt of it
yet, a processor may be reported whole and meet the lost block in the next epoch:
that is a second loss, recovered the same way (the engine bounds how many come in a
row).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def checkpointed_rdds(df: DataFrame) -> list[Any]:
    """The locally checkpointed RDDs (JVM objects) ``df``'s plan reads: the
    ``LogicalRDD`` leaves of its logical plan."""
    plan: Any = df._jdf.queryExecution().logical()
    leaves = plan.collectLeaves()
    found = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRDD":
            found.append(leaf.rdd())
    return found


def free(df: DataFrame) -> None:
    """Drop ``df`` - a frame :func:`~falkirk.spark.materialise.materialise` returned -
    from the executors: its cache entry and its locally checkpointed RDD's blocks
    (``DataFrame.unpersist`` alone leaves those in place for the life of the run).
    Call it only once nothing will read ``df`` or a frame built on it."""
    df.unpersist()
    for rdd in checkpointed_rdds(df):
        rdd.unpersist(False)


def cached_partitions(spark: SparkSession) -> dict[int, int]:
    """For every persisted RDD with a block somewhere: its id and how many of its
    partitions have one (one call to the block manager master)."""
    infos: Any = spark.sparkContext._jsc.sc().getRDDStorageInfo()
    return {int(info.id()): int(info.numCachedPartitions()) for info in infos}


def lost_blocks(spark: SparkSession, frames: Iterable[DataFrame], cached: dict[int, int] | None = None) -> bool:
    """True if some partition of an RDD the ``frames`` are checkpointed in has no
    block on any live executor. ``cached``: :func:`cached_partitions`, asked once for
    several calls (asked here if not given)."""
    cached = cached_partitions(spark) if cached is None else cached
    for df in frames:
        for rdd in checkpointed_rdds(df):
            partitions = int(rdd.getNumPartitions())
            if partitions and cached.get(int(rdd.id()), 0) < partitions:
                return True
    return False



def fewest_copies(spark: SparkSession, frames: Iterable[DataFrame]) -> int:
    """The fewest live executors holding a block of any partition of the RDDs the
    ``frames`` are checkpointed in (0 if a block is lost; 2 when every pair is whole
    again after a loss). One call to the block manager master per partition: for
    tests and diagnostics."""
    jvm: Any = spark.sparkContext._jvm
    master = jvm.org.apache.spark.SparkEnv.get().blockManager().master()
    fewest: int | None = None
    for df in frames:
        for rdd in checkpointed_rdds(df):
            for partition in range(int(rdd.getNumPartitions())):
                held = int(master.getLocations(jvm.org.apache.spark.storage.RDDBlockId(int(rdd.id()), partition)).size())
                fewest = held if fewest is None else min(fewest, held)
    return 0 if fewest is None else fewest


def executor_ids(spark: SparkSession) -> list[str]:
    """The ids of the executors whose block managers the driver knows (not the driver's)."""
    jvm: Any = spark.sparkContext._jvm
    status = jvm.org.apache.spark.SparkEnv.get().blockManager().master().getMemoryStatus()
    ids = [str(k.executorId()) for k in jvm.scala.jdk.javaapi.CollectionConverters.asJava(status.keySet())]
    return sorted((i for i in ids if i != "driver"), key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i))


def block_locations(spark: SparkSession, frames: Iterable[DataFrame]) -> dict[tuple[int, int], list[str]]:
    """Per (RDD, partition) of the RDDs the ``frames`` are checkpointed in, the ids of
    the executors holding its block (for tests and diagnostics: one call to the block
    manager master per partition)."""
    jvm: Any = spark.sparkContext._jvm
    master = jvm.org.apache.spark.SparkEnv.get().blockManager().master()
    found: dict[tuple[int, int], list[str]] = {}
    for df in frames:
        for rdd in checkpointed_rdds(df):
            for partition in range(int(rdd.getNumPartitions())):
                held = master.getLocations(jvm.org.apache.spark.storage.RDDBlockId(int(rdd.id()), partition))
                found[(int(rdd.id()), partition)] = sorted(str(b.executorId()) for b in jvm.scala.jdk.javaapi.CollectionConverters.asJava(held))
    return found
