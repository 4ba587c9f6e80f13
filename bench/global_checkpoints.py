"""Global barrier checkpoints against per-processor policies, side by side in one run.

    .venv/bin/python bench/global_checkpoints.py --epochs 24 --fail-at 11 --runs 3

Both workloads, fed by seeded generators (one batch per epoch, in one Spark session):
W1, the clickstream query (validate -> sessionize per session -> per-user statistics,
two stateful processors; the one that fails is ``sessions``), and W2, a keyed
aggregate (count/sum per key; the one that fails is ``agg``). Configurations,
interleaved in every round: ``none`` (stateful processors persist nothing: the
baseline), ``lazy5`` (LazyCheckpoint(every=5)), ``eager`` (EagerCheckpoint),
``global1``, ``global5``, ``global20`` (GlobalCheckpoints(every=K)). For each: the
run's time (overhead against ``none``, within each round), and after one stateful
processor fails once after epoch ``--fail-at`` (an in-process failure: its state is
lost), the epochs and records processed again, the seconds the rollback itself took
(choosing frontiers, restoring state: ``RunReport.recovery_seconds``) and the extra
wall time the failure cost in all (rollback plus re-processing). Medians over
``--runs`` rounds; results in ``bench/results/global_checkpoints.csv``.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from falkirk.demo.clickstream import build_pipeline
from falkirk.graph import (
    EagerCheckpoint,
    GlobalCheckpoints,
    LazyCheckpoint,
    Pipeline,
    Policy,
    Stateless,
)
from falkirk.io import ParquetTableSink, clickstream_generator, keyed_generator
from falkirk.runtime import Engine
from falkirk.spark import spark_session

CONFIGS: dict[str, tuple[Callable[[], Policy] | None, int | None]] = {
    "none": (Stateless, None),
    "lazy5": (lambda: LazyCheckpoint(every=5), None),
    "eager": (EagerCheckpoint, None),
    "global1": (None, 1),
    "global5": (None, 5),
    "global20": (None, 20),
}


#: The processor that fails in each workload.
FAILS = {"w1": "sessions", "w2": "agg"}


def pipeline(workload: str, config: str, work: Path, args: argparse.Namespace) -> Pipeline:
    policy, every = CONFIGS[config]
    checkpoints = GlobalCheckpoints(every=every) if every else None
    if workload == "w1":
        source = clickstream_generator(batches=args.epochs, sessions_per_batch=args.sessions, users=args.users, seed=1)
        return build_pipeline(
            "", str(work / "out"), str(work / "rejected"), source=source, vectorized=True, checkpoints=checkpoints,
            sessions_policy=policy() if policy else None, stats_policy=policy() if policy else None,
        )
    epochs, rows, keys = args.epochs, args.rows, args.keys
    p = Pipeline("w2", checkpoints=checkpoints)
    (
        p.source("src", keyed_generator(batches=epochs, rows_per_batch=rows, keys=keys, seed=1))
        .aggregate("agg", "key", {"n": ("count", None), "s": ("sum", "value")}, policy=policy() if policy else None)
        .sink("out", ParquetTableSink(str(work / "out")))
    )
    return p


def run(spark: Any, workload: str, config: str, args: argparse.Namespace, fail_at: int | None) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix=f"falkirk-gc-{workload}-{config}-"))
    failed: list[int] = []

    def on_epoch(epoch: int, _: float, __: object) -> None:
        if fail_at is not None and epoch == fail_at and not failed:
            failed.append(epoch)
            engine.fail(FAILS[workload])

    engine = Engine(pipeline(workload, config, work, args), str(work / "state"), spark=spark, on_epoch=on_epoch)
    started = time.perf_counter()
    report = engine.run()
    seconds = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    replayed = len(report.epochs) - args.epochs  # epochs committed more than once
    rollback = sum(report.recovery_seconds)
    rows = args.rows if workload == "w2" else args.sessions * 7 // 2  # W1: ~3.5 events per session
    return {"seconds": seconds, "epochs_again": replayed, "records_again": replayed * rows, "rollback_seconds": rollback}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="w1,w2", help="comma-separated: w1, w2")
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--rows", type=int, default=20_000, help="W2: rows per epoch")
    parser.add_argument("--keys", type=int, default=50_000, help="W2: keys")
    parser.add_argument("--sessions", type=int, default=3000, help="W1: sessions started per epoch")
    parser.add_argument("--users", type=int, default=10_000, help="W1: users")
    parser.add_argument("--fail-at", type=int, default=11, help="a stateful processor fails after this epoch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/global_checkpoints.csv"))
    args = parser.parse_args()
    spark = spark_session()
    workloads = [w.strip() for w in args.workloads.split(",")]
    rows = []
    for workload in workloads:
        run(spark, workload, "none", argparse.Namespace(**{**vars(args), "epochs": 3}), None)  # warm-up: JIT, caches
    for workload in workloads:
        clean: dict[str, list[float]] = {c: [] for c in CONFIGS}
        failing: dict[str, list[dict[str, float]]] = {c: [] for c in CONFIGS}
        for r in range(args.runs):
            for config in CONFIGS:
                clean[config].append(run(spark, workload, config, args, None)["seconds"])
                failing[config].append(run(spark, workload, config, args, args.fail_at))
                print(
                    f"{workload} round {r + 1} {config}: {clean[config][-1]:.1f} s,"
                    f" with a failure {failing[config][-1]['seconds']:.1f} s",
                    flush=True,
                )
        for config in CONFIGS:  # ratios and differences within a round, then the median
            overhead = [clean[config][r] / clean["none"][r] - 1 for r in range(args.runs)]
            cost = [failing[config][r]["seconds"] - clean[config][r] for r in range(args.runs)]
            rows.append(
                {
                    "workload": workload,
                    "config": config,
                    "seconds": round(statistics.median(clean[config]), 2),
                    "overhead_vs_none": round(statistics.median(overhead), 3),
                    "epochs_again_after_failure": statistics.median(f["epochs_again"] for f in failing[config]),
                    "records_again_after_failure": statistics.median(f["records_again"] for f in failing[config]),
                    "rollback_seconds": round(statistics.median(f["rollback_seconds"] for f in failing[config]), 2),
                    "failure_cost_seconds": round(statistics.median(cost), 2),
                }
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{args.epochs} epochs, failure after epoch {args.fail_at}, medians of {args.runs} rounds")
    for row in rows:
        print("  ".join(f"{k}={v}" for k, v in row.items()))

if __name__ == "__main__":
    main()
