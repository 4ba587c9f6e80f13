"""Before a run touches its storage: the operators set up and checked, the copies
of state asked for checked against the master, and the storage root's spelling
checked against how it was used before."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from falkirk.execution.exceptions import EpochInvariantError
from falkirk.execution.quarantine import errors_schema
from falkirk.graph import GraphError, Pipeline
from falkirk.graph.errors import ERRORS_PORT
from falkirk.graph.specs import SinkSpec
from falkirk.operators import Operator, operator_for
from falkirk.operators.loop import FeedbackOperator
from falkirk.spark.session import is_local
from falkirk.storage import MetaStore, StorageError
from falkirk.storage.filesystem import FileSystem, is_uri, local_path
from falkirk.storage.full import Place
from falkirk.storage.identity import IDENTITY, PAIR_MEMBER, recorded
from falkirk.storage.schema import DB_NAME


def check_replicas(pipeline: Pipeline, master: str, replicas: int) -> None:
    """Refuse copies of state that cannot be kept: ``replicas`` (the engine's, for
    every processor) or a policy's ``replicas`` other than 1 or 2, and 2 on a master
    with one executor (``local``)."""
    if replicas not in (1, 2):
        raise GraphError(f"replicas must be 1 or 2, got {replicas}")
    for p in pipeline.processors.values():
        if p.policy.replicas not in (1, 2):
            raise GraphError(f"processor {p.name!r}: its policy's replicas must be 1 or 2, got {p.policy.replicas}")
    paired = [p.name for p in pipeline.processors.values() if p.policy.replicas > 1]
    if (replicas > 1 or paired) and is_local(master):
        who = f"replicas={replicas}" if replicas > 1 else f"replicas=2 in the policy of {', '.join(map(repr, paired))}"
        raise GraphError(
            f"{who} keeps copies on different executors, and master {master!r} has one: run on a cluster "
            "(FALKIRK_SPARK_MASTER=spark://...; python -m falkirk.spark.standalone starts one on this machine), "
            "or use replicas=1"
        )


def set_up_operators(
    pipeline: Pipeline, spark: SparkSession
) -> tuple[dict[str, Operator], dict[tuple[str, str], StructType]]:
    """What needs no storage: every processor's operator, output schemas and (empty)
    state, found by applying each step to empty DataFrames - so the whole pipeline is
    checked before anything runs."""
    operators: dict[str, Operator] = {}
    schemas: dict[tuple[str, str], StructType] = {}
    for p in pipeline.processors.values():
        operator = operator_for(p, spark)
        try:  # a loop's feedback comes before its input: it declares its schema
            outputs = operator.set_up([schemas[(i.src, i.port)] for i in p.inputs if (i.src, i.port) in schemas])
        except GraphError as exc:
            raise GraphError(f"processor {p.name!r}: {exc}") from exc
        except Exception as exc:  # pyspark analysis errors: name the processor
            raise GraphError(f"processor {p.name!r} ({p.kind}) cannot run on its input: {exc}") from exc
        if p.has_errors and p.inputs:  # the rows it sets aside, with its (first) input's columns
            outputs = {**outputs, ERRORS_PORT: errors_schema(schemas[(p.inputs[0].src, p.inputs[0].port)])}
        missing = set(p.ports) - set(outputs)
        if missing:
            raise EpochInvariantError(f"operator {p.kind!r} gave no schema for ports {sorted(missing)}")
        schemas.update({(p.name, port): schema for port, schema in outputs.items()})
        operators[p.name] = operator
    for p in pipeline.processors.values():
        if isinstance(operators[p.name], FeedbackOperator):
            try:
                operators[p.name].check_input(schemas[(p.inputs[0].src, p.inputs[0].port)])  # type: ignore[attr-defined]
            except GraphError as exc:
                raise GraphError(f"feedback {p.name!r}: {exc}") from exc
    return operators, schemas


def local_root(root: str) -> Path | None:
    """The local directory a ``file:`` URI root names (None for a path or a remote URI)."""
    local = local_path(root) if is_uri(root) else None
    return Path(local) if local is not None else None


def check_spelling(root: str, *, uri_root: bool) -> None:
    """Refuse a root used before under the other spelling (a local path vs a
    ``file:`` URI; ``uri_root``: given as a URI now): each keeps its metadata in its
    own way, and neither sees the other's."""
    where = local_root(root) or (Path(root) if not is_uri(root) else None)
    if where is None:
        return
    as_path = (where / DB_NAME).exists()
    as_uri = any(where.glob("_meta/meta-*.sqlite"))
    if (uri_root and as_path) or (not uri_root and as_uri):
        used, now = ("a local path", "a file: URI") if as_path else ("a file: URI", "a local path")
        raise StorageError(
            f"storage root {where} was used as {used} and is now given as {now}; give it as "
            f"{used} again (each spelling keeps its metadata its own way)"
        )


def check_pair_sinks(pipeline: Pipeline) -> None:
    """Refuse sinks a driver pair cannot share. A pair's egress lets one driver write
    each epoch and commits the writer's files in the other, so a sink must write
    somewhere both drivers see, and a second write of an epoch (a killed driver's
    late task) must change nothing - as the sink contract asks of every sink (a
    Parquet table replaces the epoch's file; PostgreSQL and Redis sinks recognise an
    epoch written before). A :class:`MemorySink` is in one driver's memory."""
    from falkirk.io.sinks import MemorySink

    for p in pipeline.processors.values():
        if isinstance(p.spec, SinkSpec) and isinstance(p.spec.writer, MemorySink):
            raise GraphError(
                f"sink {p.name!r} is a MemorySink, in one driver's memory: a driver pair's other driver would "
                "not see the epochs this one writes. Give a pair sinks both drivers reach (a Parquet table, "
                "a PostgreSQL table, a Redis stream)"
            )


def recorded_facts(meta_dir: Path, fs: FileSystem, root: str) -> dict[str, str]:
    """The facts a root's metadata records about the root (its identity, a pair
    member's name; see :mod:`falkirk.storage.identity`), read without changing it:
    empty for a new root. A root written before facts were recorded has its
    identity in its pipeline description."""
    if not (meta_dir / DB_NAME).exists() or not (meta_dir / DB_NAME).stat().st_size:
        return {}
    store = MetaStore(meta_dir, fs=fs, root=root, read_only=True)
    try:
        facts = {name: value for name in (IDENTITY, PAIR_MEMBER) if (value := store.fact(name)) is not None}
        known = recorded(store)
        if known is not None:
            facts[IDENTITY] = known.value
        return facts
    finally:
        store.close()


def written_places(root: str, meta_dir: Path, description: dict[str, Any], spark: SparkSession) -> list[Place]:
    """Where a run writes, as :class:`~falkirk.storage.StorageFullError` names a full
    one: the storage root, a URI root's metadata directory, each sink's table (a
    sink that describes a ``path``), and Spark's scratch directories (on the
    executors' machines, on a cluster)."""
    places = [Place("the storage root", root, "move the storage root to a larger file system")]
    if is_uri(root):  # else the metadata lives in the root
        places.append(Place("the metadata directory", str(meta_dir), "give the engine a metadata_dir on a larger file system"))
    for name, processor in description["processors"].items():
        path = processor.get("target", {}).get("path")
        if path:
            places.append(Place(f"the table of sink {name!r}", str(path), "give the sink a table on a larger file system"))
    conf = spark.sparkContext.getConf()
    scratch = conf.get("spark.local.dir") or os.environ.get("SPARK_LOCAL_DIRS")
    if not scratch:  # Spark's default: the JVM's temporary directory
        scratch = str(spark.sparkContext._jvm.System.getProperty("java.io.tmpdir"))  # type: ignore[union-attr]
    here = is_local(spark.sparkContext.master or "local")
    for directory in filter(None, scratch.split(",")):
        places.append(Place("Spark's scratch directory (spark.local.dir)", directory, "set spark.local.dir to a larger file system", here))
    return places
