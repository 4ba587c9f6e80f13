"""A driver for the per-processor pairs test (run as ``python -m tests.cluster.paired
INPUT WORK`` with ``FALKIRK_SPARK_MASTER`` set): the clickstream query with only
``sessions`` paired (``EagerCheckpoint(replicas=2)``) and ``user_stats`` not
(``LazyCheckpoint(every=5)``). Prints, as JSON, the copies each keeps of its state's
blocks at the end, the fewest executors holding a block of ``sessions`` (2 once
Spark has re-created the copies lost with the executor: the pair whole again), the
epochs that met an executor loss, and the processors each
rollback handed to the solver as failed.

``python -m tests.cluster.paired INPUT WORK EPOCHS PARTITIONS`` runs at most
``EPOCHS`` epochs with ``PARTITIONS`` state partitions (a rescale when the root
recorded another number): a root started on one machine (without
``FALKIRK_SPARK_MASTER``: one copy of ``sessions``) moves to the cluster."""

from __future__ import annotations

import json
import os
import sys

from falkirk.demo.clickstream import build_pipeline
from falkirk.graph import EagerCheckpoint, LazyCheckpoint
from falkirk.runtime import Engine
from falkirk.spark.blocks import checkpointed_rdds, fewest_copies


def main(input_dir: str, work: str, epochs: str = "0", partitions: str = "0") -> int:
    replicas = 2 if os.environ.get("FALKIRK_SPARK_MASTER") else 1  # one machine alone keeps one copy
    pipeline = build_pipeline(
        input_dir, f"{work}/out", f"{work}/rej", sessions_policy=EagerCheckpoint(replicas=replicas), stats_policy=LazyCheckpoint(every=5)
    )
    engine = Engine(pipeline, f"{work}/state", parallelism=int(partitions) or None)
    report = engine.run(max_epochs=int(epochs) or None)
    copies = {
        name: sorted({int(rdd.getStorageLevel().replication()) for df in engine.state.operators[name].held() or [] for rdd in checkpointed_rdds(df)})
        for name in ("sessions", "user_stats")
    }
    whole = fewest_copies(engine.spark, engine.state.operators["sessions"].held() or [])
    held = {df.rdd.getNumPartitions() for name in ("sessions", "user_stats") for df in engine.state.operators[name].held() or []}
    print(json.dumps({
        "copies": copies, "fewest": whole, "losses": report.executor_losses, "failed": [sorted(f) for f, _, _ in report.partial],
        "partitions": report.partitions, "rescaled_from": report.rescaled_from, "held_partitions": sorted(held),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
