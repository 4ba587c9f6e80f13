"""Which version of the pipeline a run starts, checked before anything is read or
written: the pipeline's state signatures against the root's, an upgrade from a
savepoint when one is asked for (:mod:`falkirk.upgrades.upgrade`), and the root's
version history carried into the description the run records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from falkirk.execution.changes import check_unchanged, record_signatures, signatures
from falkirk.execution.report import RunReport
from falkirk.graph import Pipeline
from falkirk.operators import Operator
from falkirk.recovery import Topology
from falkirk.storage import MetaStore
from falkirk.storage.filesystem import FileSystem
from falkirk.storage.identity import RootIdentity, establish
from falkirk.upgrades.upgrade import Upgrade, upgrade_root

Operators = tuple[dict[str, Operator], dict[tuple[str, str], StructType]]


def start_version(
    *,
    spark: SparkSession,
    fs: FileSystem,
    root: str,
    store: MetaStore,
    pipeline: Pipeline,
    topology: Topology,
    set_up: Operators,
    set_up_again: Callable[[], Operators],
    description: dict[str, Any],
    upgrade: Upgrade | None,
    paired: RootIdentity | None,
    report: RunReport,
) -> Operators:
    """The operators the run uses (set up again after an upgrade wrote the new
    state with the first ones). Raises :class:`~falkirk.graph.PipelineChangedError`
    for a changed pipeline without an upgrade, and the upgrade's own refusals."""
    operators, schemas = set_up
    signed = signatures(operators)
    record_signatures(description, signed)
    description["history"] = list((store.description() or {}).get("history", []))
    if upgrade is not None:  # a changed pipeline starts from a savepoint
        if not store.has_commits():  # a new root started from a copied savepoint: its identity first
            establish(store, pipeline.name, paired)
        upgraded = upgrade_root(
            spark=spark, fs=fs, root=root, store=store, pipeline=pipeline, topology=topology,
            operators=operators, current=signed, description=description, options=upgrade,
        )  # fmt: skip
        if upgraded is not None:
            report.upgraded_from = upgraded.name
            operators, schemas = set_up_again()
    check_unchanged(store, pipeline, signed)  # before anything is read or written
    return operators, schemas
