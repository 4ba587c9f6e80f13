"""Solver benchmark: a 1,000-processor graph with 100 checkpoints each.

Not a test: prints timings. Run with ``.venv/bin/python bench/solver_bench.py``.
The graph is a random DAG of epoch processors (each with 1-3 inputs from earlier
processors); a fraction log their outputs (D̄ = ∅); every processor has 100
checkpoints at increasing epochs; a random 10% have failed (no ⊤ entry). Reports
the median of several solves, for the plain solve and for one monitor ``add``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from falkirk.recovery import CheckpointMeta, Monitor, Topology, solve
from falkirk.time import EpochDomain, Frontier


def build(n: int, checkpoints: int, seed: int) -> tuple[Topology, dict[str, list[CheckpointMeta]]]:
    rng = random.Random(seed)
    epoch = EpochDomain()
    names = [f"p{i}" for i in range(n)]
    edges = []
    for i in range(1, n):
        for j in rng.sample(range(i), k=min(i, rng.randint(1, 3))):
            edges.append((f"e{j}_{i}", names[j], names[i], "identity"))
    topo = Topology.build({p: epoch for p in names}, edges)
    logs = {p for p in names if rng.random() < 0.3}
    failed = {p for p in names if rng.random() < 0.1}
    available: dict[str, list[CheckpointMeta]] = {}
    for p in names:
        epochs = sorted(rng.sample(range(1, 10 * checkpoints), checkpoints))
        metas = []
        for t in epochs:
            f = Frontier.down(epoch, [t])
            discarded = {e.name: Frontier.empty(epoch) for e in topo.outputs(p)} if p in logs else None
            metas.append(CheckpointMeta.build(topo, p, f, discarded=discarded))
        if p not in failed:
            discarded = {e.name: Frontier.empty(epoch) for e in topo.outputs(p)} if p in logs else None
            metas.append(CheckpointMeta.build(topo, p, Frontier.top(epoch), discarded=discarded))
        available[p] = metas
    return topo, available


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processors", type=int, default=1000)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    topo, available = build(args.processors, args.checkpoints, seed=7)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        plan = solve(topo, available)
        times.append(time.perf_counter() - start)
    moved = sum(1 for p, f in plan.frontiers.items() if f != available[p][-1].frontier)
    print(
        f"solve: {args.processors} processors, {len(topo.edges)} edges, {args.checkpoints} "
        f"checkpoints each: median {statistics.median(times):.3f} s over {args.runs} runs "
        f"(min {min(times):.3f}, max {max(times):.3f}); {moved} processors below their latest"
    )
    monitor = Monitor(topo)
    persisted = {p: [m for m in ms if not m.frontier.is_top] for p, ms in available.items()}
    monitor.add_many(m for ms in persisted.values() for m in ms[:-1])
    last = [ms[-1] for ms in persisted.values()][: args.runs]
    add_times = []
    for meta in last:
        start = time.perf_counter()
        monitor.add(meta)
        add_times.append(time.perf_counter() - start)
    print(f"monitor.add (one record, after garbage collection): median {statistics.median(add_times):.3f} s")


if __name__ == "__main__":
    main()
