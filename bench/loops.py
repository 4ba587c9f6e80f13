"""Checkpoints of a loop's state: what they cost, and what a failure re-executes.

    .venv/bin/python bench/loops.py --runs 3 --epochs 8 --edges 120 --vertices 400 --fail-after 5
    .venv/bin/python bench/loops.py --runs 3 --epochs 5 --first-edges 1500 --edges 15 --vertices 1500 \
        --fail-after 4 --configs none,lazy1,lazy1-full,eager,eager-full      # a large state, small changes

The workload is ``examples/components.py`` (incremental connected components by label
propagation in an ``iterate`` loop) over the same seeded random graph in every run, in
one Spark session. The loop's keyed processor ``propagate`` takes, interleaved in every
round:

* ``none`` - nothing persisted (``Stateless``): the baseline; a failure re-runs every
  epoch's iterations from the first;
* ``lazy3`` - ``LazyCheckpoint(every=3)``: changed vertices when an epoch's iterations
  are over, every third epoch, as the time (e, ∞);
* ``lazy1`` - the same every epoch;
* ``lazy1-full`` - every epoch, a full snapshot of the loop state each time
  (``compact_every=1``) instead of the changed vertices;
* ``eager`` - ``EagerCheckpoint``: the changed vertices and the rows sent, written and
  committed after every iteration (e, i);
* ``eager-full`` - the same with a full snapshot every iteration.

``lazy1`` and ``eager`` checkpoints are selective: each holds only the part of the
loop state that the times completed since the last one changed (the vertices whose
label or neighbours moved); ``-full`` snapshots hold all of it every time. With
``--first-edges`` the first epoch builds a large graph and the later ones change a
little of it, which is where the two differ.

For each: the run's wall time (overhead against ``none`` within its round), checkpoint
bytes written, and after ``propagate`` fails once after epoch ``--fail-after`` (an
in-process failure: its state is lost; the rest keep theirs where the rollback
constraints allow) the iterations computed again and the extra wall time. Medians
over ``--runs`` rounds; results in ``bench/results/loops.csv``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.in_process import run_failing_once
from bench.tables import medians, print_medians, show, write_csv
from falkirk.demo.components import build_pipeline
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Policy, Stateless
from falkirk.spark import spark_session
from falkirk.testing.components import write_input

CONFIGS: dict[str, Callable[[], Policy]] = {
    "none": Stateless,
    "lazy3": lambda: LazyCheckpoint(every=3, compact_every=10),
    "lazy1": lambda: LazyCheckpoint(every=1, compact_every=10),
    "lazy1-full": lambda: LazyCheckpoint(every=1, compact_every=1),
    "eager": lambda: EagerCheckpoint(compact_every=20),
    "eager-full": lambda: EagerCheckpoint(compact_every=1),
}


def run_once(spark: Any, edges: Path, config: str, fail_after: int | None) -> dict[str, float]:
    """One run of the workload with ``config``; with ``fail_after``, ``propagate``
    fails once after that epoch."""
    work = Path(tempfile.mkdtemp(prefix="falkirk-bench-loops-"))
    try:
        pipeline = build_pipeline(str(edges), str(work / "out"), str(work / "rej"), policy=CONFIGS[config]())
        _, report, seconds = run_failing_once(spark, pipeline, work / "state", "propagate", fail_after)
        computed = sum(c for _, _, _, c in report.iterations)
        first = {e: n for _, e, n, _ in report.iterations}  # iterations each epoch takes
        return {
            "seconds": seconds,
            "checkpoint_mb": report.checkpoint_bytes / 1e6,
            "iterations": float(sum(first.values())),
            "recomputed": float(computed - sum(first.values())),
            "rollback_s": sum(report.recovery_seconds),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--edges", type=int, default=120, help="edges per epoch")
    parser.add_argument("--first-edges", type=int, default=None, help="edges of the first epoch (default: --edges)")
    parser.add_argument("--vertices", type=int, default=400)
    parser.add_argument("--fail-after", type=int, default=5)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "loops.csv"))
    args = parser.parse_args()
    configs = args.configs.split(",")
    spark = spark_session()
    edges = Path(tempfile.mkdtemp(prefix="falkirk-bench-edges-"))
    write_input(edges, epochs=args.epochs, edges_per_epoch=args.edges, vertices=args.vertices, seed=7)
    if args.first_edges is not None:  # a larger first epoch: the state the later ones change
        first = Path(tempfile.mkdtemp(prefix="falkirk-bench-first-"))
        write_input(first, epochs=1, edges_per_epoch=args.first_edges, vertices=args.vertices, seed=8)
        shutil.move(str(first / "edges-0000.csv"), str(edges / "edges-0000.csv"))
        shutil.rmtree(first, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    run_once(spark, edges, "none", None)  # warm-up: JIT, Python workers
    for r in range(args.runs):
        base: dict[str, float] = {}
        for config in configs:
            plain = run_once(spark, edges, config, None)
            failing = run_once(spark, edges, config, args.fail_after)
            base = plain if config == "none" else base
            row = {
                "round": r,
                "config": config,
                "seconds": plain["seconds"],
                "overhead": plain["seconds"] / base["seconds"] - 1 if base else 0.0,
                "checkpoint_mb": plain["checkpoint_mb"],
                "iterations": plain["iterations"],
                "recomputed_iterations": failing["recomputed"],
                "failure_extra_s": failing["seconds"] - plain["seconds"],
                "rollback_s": failing["rollback_s"],
            }
            rows.append(row)
            show(row)
    write_csv(rows, args.out)
    keys = ("seconds", "overhead", "checkpoint_mb", "recomputed_iterations", "failure_extra_s", "rollback_s")
    print_medians(medians(rows, configs, keys))
    shutil.rmtree(edges, ignore_errors=True)


if __name__ == "__main__":
    main()
