"""Losing an executor on a cluster, like Figure 8 of the Flux paper: per-partition
output rate over time through a worker kill, with partition pairs against rollback
recovery against a full restart; MTTR, how long output stalled, and what keeping
pairs costs when nothing fails.

    .venv/bin/python -m bench.failover --runs 3 --files 12 --kill-after 5

Each run starts a fresh standalone cluster on this machine (3 workers of 1 core and
1 GB, :mod:`falkirk.spark.standalone`) and runs the clickstream example on it as a
service would (all input present, ``FALKIRK_SPARK_MASTER``). Modes, interleaved in
each round:

* ``pairs``: ``--replicated`` (every block of state on two executors); worker 1 and
  its executor are SIGKILLed once ``kill-after`` epochs are out.
* ``rollback``: no copies; the same kill, recovered in the same driver by a partial
  rollback.
* ``restart``: no copies; the same kill, and the driver SIGKILLed with it and started
  again at once (what recovery costs when any loss means a restart).
* ``pairs-clean`` and ``plain-clean``: no kill, with and without copies.

The output of each epoch is watched from outside (:class:`bench.watch.OutputWatcher`:
the time each ``epoch-N.parquet`` first appears). Rows are assigned to the state
partition that produced them (Spark's hash partitioning of ``user_id`` over the
shuffle partitions), so the rate of each partition can be drawn over time.

* **MTTR**: from the kill to the first epoch beyond those out before it.
* **stall**: the longest gap between two new epochs from the kill on, less the median
  gap before it (the time output stopped beyond a normal epoch).
* **throughput**: epochs per second over the whole run (clean modes: the cost of pairs).

Writes ``bench/results/failover.csv`` (one row per run), ``failover_timeline.csv``
(epoch, partition, rows, seconds since start) and ``failover.png``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.watch import OutputWatcher
from falkirk.spark import standalone
from falkirk.testing.clickstream import write_input

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "clickstream.py"
RESULTS = ROOT / "bench" / "results"
MODES = ("pairs", "rollback", "restart", "pairs-clean", "plain-clean")
PARTITIONS = 4  # the session's spark.sql.shuffle.partitions on a cluster (falkirk.spark.session)


def launch(cluster: standalone.Cluster, data: Path, work: Path, replicated: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FALKIRK_SPARK_MASTER": cluster.url}
    env.pop("FALKIRK_CRASH_AT", None)
    args = ["--input", str(data), "--output", str(work / "out"), "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    with open(work / "stderr.log", "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(EXAMPLE), *args, *(["--replicated"] if replicated else [])],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def run(mode: str, data: Path, work: Path, kill_after: int, epochs: int, timeout: float = 900) -> dict[str, Any]:
    """One run of ``mode`` on a fresh cluster; the output's timeline and figures."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cluster = standalone.start(3, cores=1, memory="1g", port=standalone._free_port(), directory=work / "cluster")
    try:
        watcher = OutputWatcher("falkirk", work / "out")
        started = time.time()
        proc = launch(cluster, data, work, replicated=mode.startswith("pairs"))
        killed_at: float | None = None
        before = -1
        deadline = started + timeout
        while time.time() < deadline:
            watcher.poll()
            out = [i for i in watcher.seen if i > 0]  # epoch 0: the empty file a table starts with
            if killed_at is None and not mode.endswith("clean") and len(out) >= kill_after:
                before = watcher.last_index()
                killed_at = time.time()
                cluster.kill_worker(1)
                if mode == "restart":
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    proc = launch(cluster, data, work, replicated=False)
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        else:
            raise TimeoutError(f"{mode}: no end within {timeout}s (see {work / 'stderr.log'})")
        watcher.poll()
        if proc.returncode != 0:
            raise RuntimeError(f"{mode}: the driver exited {proc.returncode} (see {work / 'stderr.log'})")
        if len([i for i in watcher.seen if i > 0]) != epochs:
            raise RuntimeError(f"{mode}: {len(watcher.seen)} epochs out, expected {epochs}")
    finally:
        cluster.stop()
    seen = {i: c.seen for i, c in watcher.seen.items() if i > 0}
    order = sorted(seen)
    times = [seen[i] for i in order]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    result: dict[str, Any] = {
        "mode": mode,
        "epochs": len(order),
        "seconds": times[-1] - started,
        "epochs_per_second": (len(order) - 1) / (times[-1] - times[0]),
        "median_gap": statistics.median(gaps),
        "mttr": "",
        "stall": "",
        "rolled_back": "an executor was lost" in (work / "stderr.log").read_text(errors="replace"),
        "started": started,
        "killed_at": killed_at,
        "seen": seen,
        "out": work / "out",
    }
    if killed_at is not None:
        normal = statistics.median([b - a for a, b, i in zip(times, times[1:], order, strict=False) if i < before])
        after = [killed_at, *[t for i, t in zip(order, times, strict=True) if i > before]]
        result["mttr"] = after[1] - killed_at
        result["stall"] = max(b - a for a, b in itertools.pairwise(after)) - normal
    return result


def partition_rows(outs: list[Path]) -> list[dict[int, dict[int, int]]]:
    """For each output table: rows per epoch per state partition (Spark's hash
    partitioning of ``user_id``, as the state is laid out)."""
    from pyspark.sql import functions as F

    from falkirk.spark.session import spark_session

    spark = spark_session()
    found = []
    for out in outs:
        df = spark.read.parquet(str(out)).withColumn("partition", F.expr(f"pmod(hash(user_id), {PARTITIONS})"))
        counts: dict[int, dict[int, int]] = {}
        for row in df.groupBy("epoch", "partition").count().collect():
            counts.setdefault(int(row["epoch"]), {})[int(row["partition"])] = int(row["count"])
        found.append(counts)
    spark.stop()
    return found


def draw(path: Path, runs: list[dict[str, Any]], rows: list[dict[int, dict[int, int]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [(r, c) for r, c in zip(runs, rows, strict=True) if r["mode"] in ("pairs", "rollback", "restart")]
    firsts: dict[str, tuple[dict[str, Any], dict[int, dict[int, int]]]] = {}
    for r, c in shown:  # the first run of each mode
        firsts.setdefault(r["mode"], (r, c))
    fig, axes = plt.subplots(len(firsts), 1, figsize=(8, 2.6 * len(firsts)), sharex=True)
    for ax, (mode, (r, c)) in zip(axes, firsts.items(), strict=True):
        # each epoch's rows spread over the time since the previous output: the rate
        # a reader of the table sees, per partition of the state
        order = sorted(r["seen"])
        for p in range(PARTITIONS):
            previous = r["seen"][order[0]] - r["started"]
            xs, ys = [0.0, previous], [0.0, 0.0]
            for before, epoch in itertools.pairwise(order):
                start, end = r["seen"][before] - r["started"], r["seen"][epoch] - r["started"]
                xs += [start, end]
                rate = c.get(epoch, {}).get(p, 0) / max(end - start, 1e-3)
                ys += [rate, rate]
            ax.plot(xs, ys, label=f"partition {p}", linewidth=1)
        ax.axvline(r["killed_at"] - r["started"], color="red", linestyle="--", label="worker killed")
        ax.set_title(f"{mode}: MTTR {r['mttr']:.1f} s, output stalled {r['stall']:.1f} s beyond an epoch")
        ax.set_ylabel("rows/s")
    axes[0].legend(fontsize=7, ncol=5)
    axes[-1].set_xlabel("seconds since the driver started")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=12, help="input files = epochs")
    parser.add_argument("--sessions", type=int, default=300, help="sessions per file")
    parser.add_argument("--users", type=int, default=400)
    parser.add_argument("--kill-after", type=int, default=5, help="epochs out before the kill")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--scratch", default="/tmp/falkirk-bench-failover")
    args = parser.parse_args()
    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    data = scratch / "input"
    write_input(data, files=args.files, sessions_per_file=args.sessions, users=args.users, seed=8)
    runs = []
    for round_ in range(args.runs):
        for mode in args.modes.split(","):
            result = run(mode, data, scratch / f"{mode}-{round_}", args.kill_after, args.files)
            print(f"round {round_} {mode}: {result['epochs']} epochs in {result['seconds']:.1f} s, mttr {result['mttr']}, stall {result['stall']}, rolled back {result['rolled_back']}", flush=True)
            runs.append(result)
    rows = partition_rows([r["out"] for r in runs])
    RESULTS.mkdir(exist_ok=True)
    fields = ["mode", "epochs", "seconds", "epochs_per_second", "median_gap", "mttr", "stall", "rolled_back"]
    with open(RESULTS / "failover.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["round", *fields])
        writer.writeheader()
        for i, r in enumerate(runs):
            writer.writerow({"round": i // len(args.modes.split(",")), **{k: r[k] for k in fields}})
    with open(RESULTS / "failover_timeline.csv", "w", newline="") as f:
        lines = csv.writer(f)
        lines.writerow(["mode", "round", "epoch", "partition", "rows", "seconds"])
        for i, (r, c) in enumerate(zip(runs, rows, strict=True)):
            for epoch, t in sorted(r["seen"].items()):
                for p, n in sorted(c.get(epoch, {}).items()):
                    lines.writerow([r["mode"], i // len(args.modes.split(",")), epoch, p, n, round(t - r["started"], 3)])
    draw(RESULTS / "failover.png", runs, rows)
    print()
    for mode in args.modes.split(","):
        mine = [r for r in runs if r["mode"] == mode]
        med = {k: statistics.median(r[k] for r in mine) if mine[0][k] != "" else None for k in ("seconds", "epochs_per_second", "mttr", "stall")}
        rolled = sum(r["rolled_back"] for r in mine)
        print(f"{mode:12s} seconds {med['seconds']:.1f}  epochs/s {med['epochs_per_second']:.3f}  mttr {med['mttr']}  stall {med['stall']}  runs that rolled back {rolled}/{len(mine)}")


if __name__ == "__main__":
    main()
