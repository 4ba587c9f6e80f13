"""Losing a driver: a driver pair against a warm standby against a restart.

    .venv/bin/python -m bench.driver_pairs --runs 3 --files 16 --interval 2.0 --kill-after 6

The clickstream pipeline runs as a service (embedded Spark, ``local[1]`` per driver:
two drivers share this machine's two cores) while its input arrives one file every
``interval`` seconds; the first driver is SIGKILLed once ``kill-after`` epochs are
out. Modes, interleaved in each round:

* ``pair``: two drivers on their own storage roots, a driver pair sharing a
  PostgreSQL database (started here on 127.0.0.1): the survivor goes on.
* ``standby``: one driver and a warm standby of it on the same root (its JVM
  started and the pipeline set up, waiting for the root's lock).
* ``restart``: one driver, started again at once.
* ``pair-clean`` and ``single-clean``: no kill: what running a pair costs.

Figures per run (the output is watched from outside, :class:`bench.watch.OutputWatcher`):

* **MTTR**: from the kill to the first epoch beyond those out before it.
* **stall**: the longest gap between two new epochs from the kill on, less the
  input interval (how long output stopped beyond a normal epoch interval).
* **latency**: per input file, from its arrival to its output epoch (median).

Writes ``bench/results/driver_pairs.csv`` (one row per run).
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
import uuid
from pathlib import Path
from typing import Any

from bench.watch import OutputWatcher
from falkirk.testing.clickstream import write_input

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MODES = ("pair", "standby", "restart", "pair-clean", "single-clean")
READY = "standby.ready"


def member(args: list[str]) -> None:
    """One driver (run in its own process): ``IN OUT ROOT REJ IDLE [pair DSN NAME | standby]``."""
    from falkirk.demo.clickstream import build_pipeline
    from falkirk.runtime import Engine
    from falkirk.spark.session import spark_session

    inp, out, root, rej, idle, *how = args
    pipeline = build_pipeline(inp, out, rej)
    pair = how[1] if how[:1] == ["pair"] else None
    engine = Engine(pipeline, root, spark=spark_session("local[1]"), pair=pair, pair_name=how[2] if pair else None)
    standby = how[:1] == ["standby"]
    engine.run(idle_timeout=float(idle), poll_interval=0.05, standby=standby, on_standby=lambda: (Path(root).parent / READY).touch())


def launch(work: Path, root: str, idle: float, *how: str) -> subprocess.Popen[bytes]:
    args = [str(work / "in"), str(work / "out"), str(work / root), str(work / "rej"), str(idle), *how]
    with open(work / f"{root}.log", "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "bench.driver_pairs", "member", *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def run(mode: str, data: Path, work: Path, dsn: str, interval: float, kill_after: int) -> dict[str, Any]:
    """One run of ``mode``: feed the input, kill, watch the output."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    files = sorted(data.iterdir())
    idle = 3 * interval + 10
    name = f"bench-{uuid.uuid4().hex[:8]}"
    if mode.startswith("pair"):
        procs = [launch(work, "a", idle, "pair", dsn, name), launch(work, "b", idle, "pair", dsn, name)]
    elif mode == "standby":
        procs = [launch(work, "state", idle)]
        procs.append(launch(work, "state", idle, "standby"))
    else:
        procs = [launch(work, "state", idle)]
    time.sleep(12)  # JVMs started, pipelines set up (the standby signals it)
    watcher = OutputWatcher("falkirk", work / "out")
    arrived: dict[int, float] = {}
    killed_at: float | None = None
    before = -1
    next_file = 0
    next_at = time.time()
    while True:
        now = time.time()
        if next_file < len(files) and now >= next_at:
            shutil.copy(files[next_file], work / "in" / f".{files[next_file].name}")
            os.replace(work / "in" / f".{files[next_file].name}", work / "in" / files[next_file].name)
            next_file += 1
            arrived[next_file] = time.time()  # epoch n holds the n-th file
            next_at += interval
        watcher.poll()
        out = [i for i in watcher.seen if i > 0]
        if killed_at is None and not mode.endswith("clean") and len(out) >= kill_after:
            before = watcher.last_index()
            killed_at = time.time()
            os.killpg(procs[0].pid, signal.SIGKILL)
            procs[0].wait()
            if mode == "restart":
                procs[0] = launch(work, "state", idle)
        if len(out) >= len(files):
            break
        if all(p.poll() is not None for p in procs):
            raise RuntimeError(f"{mode}: every driver exited (see the logs in {work})")
        if now > arrived.get(1, now) + len(files) * interval + 300:
            raise TimeoutError(f"{mode}: the output did not complete (see the logs in {work})")
        time.sleep(0.01)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    seen = {i: c.seen for i, c in watcher.seen.items() if i > 0}
    order = sorted(seen)
    times = [seen[i] for i in order]
    latency = statistics.median(seen[i] - arrived[i] for i in order if i in arrived)
    result: dict[str, Any] = {"mode": mode, "epochs": len(order), "latency": latency, "mttr": "", "stall": ""}
    if killed_at is not None:
        after = [killed_at, *[t for i, t in zip(order, times, strict=True) if i > before]]
        result["mttr"] = after[1] - killed_at
        result["stall"] = max(0.0, max(b - a for a, b in itertools.pairwise(after)) - interval)
    return result


def main() -> None:
    if sys.argv[1:2] == ["member"]:
        member(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=16, help="input files = epochs")
    parser.add_argument("--sessions", type=int, default=200, help="sessions per file")
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between input files")
    parser.add_argument("--kill-after", type=int, default=6, help="epochs out before the kill")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--scratch", default="/tmp/falkirk-bench-driver-pairs")
    args = parser.parse_args()
    from falkirk.testing.services import PostgresServer

    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    data = scratch / "input"
    write_input(data, files=args.files, sessions_per_file=args.sessions, users=args.users, seed=9)
    modes = args.modes.split(",")
    runs = []
    with PostgresServer() as pg:
        for round_ in range(args.runs):
            for mode in modes:
                result = run(mode, data, scratch / f"{mode}-{round_}", pg.dsn, args.interval, args.kill_after)
                result["round"] = round_
                print(f"round {round_} {mode}: latency {result['latency']:.2f} s, mttr {result['mttr']}, stall {result['stall']}", flush=True)
                runs.append(result)
    RESULTS.mkdir(exist_ok=True)
    fields = ["round", "mode", "epochs", "latency", "mttr", "stall"]
    with open(RESULTS / "driver_pairs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: r[k] for k in fields} for r in runs)
    print()
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        med = {k: statistics.median(r[k] for r in mine) if mine[0][k] != "" else None for k in ("latency", "mttr", "stall")}
        print(f"{mode:13s} latency {med['latency']:.2f} s  mttr {med['mttr']}  stall {med['stall']}")


if __name__ == "__main__":
    main()
