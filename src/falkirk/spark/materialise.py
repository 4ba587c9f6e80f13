"""Materialising a DataFrame in the executors: computed once, its lineage cut
(``localCheckpoint``), kept serialized in memory and spilling to disk, with one
copy of each block or two on different executors (Flux's partition pairs).

Keyed state, kept rows, buffers and window partials are all made of such
DataFrames; :mod:`falkirk.spark.blocks` finds which of them lost blocks with an
executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

#: How materialised DataFrames are kept: serialized, in memory, spilling to disk. A
#: run is then a few byte arrays per partition instead of an object per row, which
#: the garbage collector would otherwise trace at every full collection (and which
#: take twice the memory): it matters from millions of keys of state.
STORAGE = StorageLevel(useDisk=True, useMemory=True, useOffHeap=False, deserialized=False)
#: The session setting that makes every materialised block two copies (or more) on
#: different executors (``Engine(replicas=2)``: Flux's partition pairs).
REPLICAS_CONF = "spark.falkirk.replicas"


def storage_level(replicas: int) -> StorageLevel:
    """:data:`STORAGE` with ``replicas`` copies of each block, on different executors."""
    return StorageLevel(STORAGE.useDisk, STORAGE.useMemory, STORAGE.useOffHeap, STORAGE.deserialized, replicas)


#: Copies asked for by the processor whose work runs in this context (its policy's
#: ``replicas``); the session's :data:`REPLICAS_CONF` applies to every processor.
_PROCESSOR_REPLICAS: ContextVar[int] = ContextVar("falkirk_processor_replicas", default=1)


@contextmanager
def replicated(copies: int) -> Iterator[None]:
    """Within this context :func:`materialise` keeps at least ``copies`` copies of
    each block (the engine enters it around each processor's work, with the
    ``replicas`` of the processor's policy)."""
    token = _PROCESSOR_REPLICAS.set(copies)
    try:
        yield
    finally:
        _PROCESSOR_REPLICAS.reset(token)


def materialise(df: DataFrame) -> DataFrame:
    """``df`` computed now and kept in the executors, its lineage truncated
    (``localCheckpoint``): its blocks are never in the driver, and losing them is a
    processor failure that recovery repairs from checkpoints.

    The result's plan is a leaf with Spark's default size estimate, so planning a
    later epoch costs what its own operators cost, whatever came before. (Spark
    gives a checkpointed DataFrame the statistics of the plan it was computed from;
    a join's estimated size is the product of its inputs' sizes, and each epoch's
    delta was computed by joining the previous runs, so the estimate of the n-th run
    had about 2^n digits and planning an epoch took twice as long as the one before:
    minutes per epoch after ~25 epochs.)

    With the session's :data:`REPLICAS_CONF` at 2 every block is kept on two
    executors: losing one executor loses no block (Spark reads the other copy, and
    re-creates the lost copies on the surviving executors in the background:
    ``spark.storage.replication.proactive``). A processor whose policy has
    ``replicas=2`` gets the same inside :func:`replicated`."""
    replicas = max(int(df.sparkSession.conf.get(REPLICAS_CONF, "1") or "1"), _PROCESSOR_REPLICAS.get())
    return forget_statistics(df.localCheckpoint(eager=True, storageLevel=storage_level(replicas)))


_COPY_ARITY: dict[str, int] = {}


def _copy_arity(plan: Any) -> int:
    """The number of parameters of ``LogicalRDD.copy`` in this JVM's Spark (asked once)."""
    name = plan.getClass().getName()
    if name not in _COPY_ARITY:
        _COPY_ARITY[name] = next(len(m.getParameterTypes()) for m in plan.getClass().getMethods() if m.getName() == "copy")
    return _COPY_ARITY[name]


def forget_statistics(df: DataFrame) -> DataFrame:
    """``df`` (a checkpointed DataFrame: a plan that is one ``LogicalRDD``) with the
    statistics of the plan it was computed from dropped: the same RDD, partitioning
    and ordering, estimated at Spark's default size (``spark.sql.defaultSizeInBytes``)."""
    spark = df.sparkSession
    jvm: Any = spark._jvm  # py4j: Spark has no Python API for a plan's statistics
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        raise TypeError(f"internal: expected a checkpointed DataFrame, got a plan {plan.getClass().getName()}")
    none = jvm.scala.Option.empty()
    # LogicalRDD(output, rdd, partitioning, ordering, isStreaming, stream)(session,
    # originStats, originConstraints[, fromCheckpoint: Spark 4.1 on]).
    fields = [plan.productElement(i) for i in range(plan.productArity())]
    fields += [spark._jsparkSession, none, none]
    if _copy_arity(plan) == len(fields) + 1:
        fields.append(True)  # fromCheckpoint: it is (a private field, no getter)
    bare = plan.copy(*fields)
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, bare), spark)
