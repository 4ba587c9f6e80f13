"""A pipeline in two versions, the second an upgrade of the first (``examples/upgrade.py``).

CSV files with header ``user,amount`` are read in name order, one file per epoch.

Version 1::

    payments (FileSource) ── by_user (exchange) ── totals (aggregate; lazy, every 3) ── totals_out (Parquet)

* ``totals``: per user the running ``n`` (count) and ``total`` (sum of ``amount``),
  one row per user changed in an epoch (``user, epoch, n, total``).

Version 2, started from version 1's savepoint (``Engine(upgrade=True)``):

* the same processors, ``totals`` with one more aggregate, ``max_amount`` (the
  greatest ``amount`` of the user's rows read since the upgrade: it starts null for
  the users the savepoint holds) and eager checkpoints;
* a new branch, ``big``: every row with ``amount > 1000`` (``user, epoch, amount``),
  from the upgrade's first epoch on (no backfill).

``n`` and ``total`` go on across the upgrade as if there had been none.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline, Policy
from falkirk.io import FileSource, ParquetTableSink

SCHEMA = "user string, amount long"
CSV_OPTIONS = {"header": "true"}
TOTALS_COLUMNS = ["user", "epoch", "n", "total"]
TOTALS_COLUMNS_2 = [*TOTALS_COLUMNS, "max_amount"]
BIG_COLUMNS = ["user", "epoch", "amount"]
#: Rows above this amount go to ``OUT/big`` (version 2).
BIG = 1000
VERSIONS = (1, 2)


def build_pipeline(input_dir: str, output_dir: str, version: int) -> Pipeline:
    """Version ``version`` (1 or 2) of the pipeline (see the module docstring); its
    tables under ``output_dir``."""
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    p = Pipeline("upgrade")
    rows = p.source("payments", FileSource(input_dir, "csv", SCHEMA, options=CSV_OPTIONS))
    aggregates = {"n": ("count", None), "total": ("sum", "amount")}
    policy: Policy = LazyCheckpoint(every=3)
    if version == 2:
        aggregates["max_amount"] = ("max", "amount")
        policy = EagerCheckpoint()
    rows.exchange("by_user", "user").aggregate("totals", "user", aggregates, policy=policy).sink(
        "totals_out", ParquetTableSink(f"{output_dir}/totals")
    )
    if version == 2:
        rows.map("big", lambda df: df.filter(F.col("amount") > BIG)).sink("big_out", ParquetTableSink(f"{output_dir}/big"))
    return p
