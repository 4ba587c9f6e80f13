"""The benchmark harness: Falkirk vs Spark Structured Streaming (and PyFlink, and one
Spark batch job) on the same generated input, side by side in one run.

    .venv/bin/python bench/run.py [--quick] [--runs 3] [--out bench/results]

Prints a table and writes ``results.csv`` (every run), ``summary.csv`` (medians and
same-run ratios), ``report.md`` and PNG plots under ``--out``. Every configuration
runs in a fresh process; the rounds are interleaved (round 1 of every
configuration, then round 2...) so that the machine's background noise hits all
configurations alike, and ratios are computed within a round, then their median
taken.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import flink, plots, service
from bench.inputs import QUICK, Sizes, prepare, prepare_state_sizes
from falkirk.spark.session import spark_session

RUNNER = Path(__file__).with_name("runner.py")

#: (label, system, policy) per workload, in table order.
CONFIGS = {
    "w1": [
        ("falkirk-none", "falkirk", "none"),
        ("falkirk-lazy", "falkirk", "lazy"),
        ("falkirk-eager", "falkirk", "eager"),
        ("falkirk-lazy-perkey", "falkirk", "lazy-perkey"),
        ("ss-rocksdb", "ss", "rocksdb"),
        ("spark-batch", "batch", "batch"),
    ],
    "w2": [
        ("falkirk-none", "falkirk", "none"),
        ("falkirk-lazy", "falkirk", "lazy"),
        ("falkirk-eager", "falkirk", "eager"),
        ("ss-rocksdb", "ss", "rocksdb"),
        ("flink-rocksdb", "flink", "rocksdb"),
        ("spark-batch", "batch", "batch"),
    ],
}


#: Recovery: Falkirk with its default (lazy, every 10 epochs: a kill after 5 epochs
#: replays them) and with eager checkpoints, restarted cold like Structured Streaming;
#: and Falkirk with eager checkpoints taken over by a warm standby driver (started
#: next to the primary, so no JVM start after the kill; SS has no such mode).
#: (label, system, policy, standby)
RECOVERY_CONFIGS = [
    ("falkirk-lazy", "falkirk", "lazy", False),
    ("falkirk-eager", "falkirk", "eager", False),
    ("falkirk-eager-standby", "falkirk", "eager", True),
    ("ss-rocksdb", "ss", "rocksdb", False),
]


def run_one(spec: dict[str, Any], log: Path) -> dict[str, Any]:
    """One configuration in a fresh process; its work directory is removed after."""
    work = Path(spec["work"])
    shutil.rmtree(work, ignore_errors=True)
    if spec["system"] == "flink":
        result = flink.run(spec, log)
    else:
        with open(log, "ab") as err:
            proc = subprocess.run(
                [sys.executable, str(RUNNER), json.dumps(spec)], stdout=subprocess.PIPE, stderr=err, check=False
            )
        lines = [line for line in proc.stdout.decode().splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"{spec} failed (exit {proc.returncode}); see {log}")
        result = json.loads(lines[-1].removeprefix("RESULT "))
    shutil.rmtree(work, ignore_errors=True)
    return result


def median(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.median(items) if items else float("nan")


def throughput(inputs: dict[str, Path], sizes: Sizes, runs: int, scratch: Path, log: Path, skip: set[str]) -> list[dict[str, Any]]:
    rows = {"w1": sizes.w1_rows, "w2": sizes.w2_rows}
    results = []
    for round_no in range(1, runs + 1):
        for workload, configs in CONFIGS.items():
            for label, system, policy in configs:
                if system in skip:
                    continue
                spec = {"system": system, "workload": workload, "policy": policy,
                        "input": str(inputs[workload]), "work": str(scratch / f"{workload}-{label}")}
                print(f"  round {round_no}: {workload} {label} ...", end="", flush=True)
                result = run_one(spec, log)
                records = _input_rows(inputs[workload]) if workload == "w1" else rows[workload]
                result.update(label=label, round=round_no, records=records, records_per_second=records / result["seconds"])
                results.append(result)
                print(f" {result['seconds']:.1f} s, {result['records_per_second']:,.0f} records/s", flush=True)
    return results


def _input_rows(directory: Path) -> int:
    """Rows in CSV files (minus headers): W1's true input size."""
    total = 0
    for f in sorted(directory.glob("*.csv")):
        with open(f, "rb") as handle:
            total += sum(1 for _ in handle) - 1
    return total


def epoch_cost(data: Path, key_counts: list[int], epochs: int, rows: int, runs: int, scratch: Path, log: Path) -> list[dict[str, Any]]:
    """Per-epoch time of the keyed aggregate at several state sizes (same epoch size)."""
    spark = spark_session(app="bench-inputs")
    dirs = {k: prepare_state_sizes(spark, data, k, epochs, rows) for k in key_counts}
    results = []
    for round_no in range(1, runs + 1):
        for keys in key_counts:
            for system, policy in (("falkirk", "lazy"), ("ss", "rocksdb")):
                spec = {"system": system, "workload": "w2", "policy": policy, "input": str(dirs[keys]),
                        "work": str(scratch / f"state-{system}-{keys}")}
                result = run_one(spec, log)
                # Epoch 1 fills the state; the next one still warms the JVM up. Falkirk
                # overlaps an epoch's first half with the previous epoch, so a step's own
                # seconds include waiting for it: its cost per epoch is the interval
                # between successive steps' ends. SS runs one micro-batch at a time.
                if system == "falkirk":
                    finished = result["step_finished"]["per_key"]
                    per_epoch = [b - a for a, b in itertools.pairwise(finished[1:])]
                else:
                    per_epoch = result["epoch_seconds"][2:]
                results.append({"system": system, "keys": keys, "round": round_no,
                                "median_epoch_seconds": median(per_epoch), "mean_epoch_seconds": statistics.fmean(per_epoch),
                                "epoch_seconds": per_epoch})
                print(f"  round {round_no}: {system} {keys:>9,} keys: {median(per_epoch):.2f} s per epoch", flush=True)
    return results


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per configuration and same-round ratios."""
    summary = []
    by_round: dict[tuple[str, int], dict[str, float]] = {}
    for r in results:
        by_round.setdefault((r["workload"], r["round"]), {})[r["label"]] = r["records_per_second"]

    def ratio(workload: str, a: str, b: str) -> float:
        return median(v[a] / v[b] for (w, _), v in by_round.items() if w == workload and a in v and b in v)

    for workload, configs in CONFIGS.items():
        for label, _, _ in configs:
            mine = [r for r in results if r["workload"] == workload and r["label"] == label]
            if not mine:
                continue
            summary.append({
                "workload": workload,
                "config": label,
                "runs": len(mine),
                "median_seconds": median(r["seconds"] for r in mine),
                "median_records_per_second": median(r["records_per_second"] for r in mine),
                "vs_ss": ratio(workload, label, "ss-rocksdb"),
                "vs_batch": ratio(workload, label, "spark-batch"),
                "vs_falkirk_none": ratio(workload, label, "falkirk-none"),
                "vs_flink": ratio(workload, label, "flink-rocksdb"),
            })
    return summary


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()})


def fmt(x: float, pattern: str = "{:.2f}") -> str:
    return "-" if x != x else pattern.format(x)  # NaN: not measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, for a smoke run")
    parser.add_argument("--runs", type=int, default=3, help="rounds of every configuration (medians)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--data", type=Path, default=Path("/tmp/falkirk-bench/data"), help="generated input (reused)")
    parser.add_argument("--skip", default="", help="comma-separated: throughput,epochcost,recovery,latency,flink")
    parser.add_argument("--state-keys", default="4,5,6,7", help="powers of ten of the keys of state in the per-epoch cost "
                        "(default: %(default)s; 10^7 adds ~30 minutes for 3 rounds, mostly SS)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    sizes = QUICK if args.quick else Sizes()
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = args.data.parent / "scratch"
    log = args.out / "bench-stderr.log"
    log.write_text("")
    systems_skip = {"flink"} if "flink" in skip or not flink.available() else set()
    if "flink" not in skip and not flink.available():
        print(f"PyFlink is not installed ({flink.PYTHON}): run `bash scripts/bench.sh` to install it; Flink is skipped.")

    print("== input ==", flush=True)
    spark = spark_session(app="bench-inputs")
    inputs = prepare(spark, args.data, sizes)
    spark.stop()
    report: dict[str, Any] = {"sizes": sizes.__dict__, "runs": args.runs}

    # A skipped section keeps its figures from the previous report in --out (so one
    # section can be measured again without the others); say so.
    previous = json.loads((args.out / "report.json").read_text()) if (args.out / "report.json").exists() else {}
    for section, key in (("throughput", "summary"), ("epochcost", "epoch_cost"), ("recovery", "recovery"), ("latency", "latency")):
        if section in skip and previous.get(key):
            print(f"({section}: figures kept from {args.out / 'report.json'})")

    results: list[dict[str, Any]] = []
    if "throughput" not in skip:
        print("== throughput ==", flush=True)
        results = throughput(inputs, sizes, args.runs, scratch, log, systems_skip)
        write_csv(args.out / "results.csv", results)
        summary = summarize(results)
        write_csv(args.out / "summary.csv", summary)
    else:
        summary = previous.get("summary", [])

    costs: list[dict[str, Any]] = previous.get("epoch_cost", []) if "epochcost" in skip else []
    if "epochcost" not in skip:
        print("== per-epoch cost of the keyed operator vs state size ==", flush=True)
        keys = [10**3, 10**4] if args.quick else [10 ** int(p) for p in args.state_keys.split(",")]
        costs = epoch_cost(args.data, keys, 8, 20_000 if args.quick else 100_000, args.runs, scratch, log)
        write_csv(args.out / "epoch_cost.csv", costs)

    recoveries: list[dict[str, Any]] = previous.get("recovery", []) if "recovery" in skip else []
    timelines: dict[str, Any] = {}
    if "recovery" not in skip:
        print("== recovery time (SIGKILL -> first new output) ==", flush=True)
        for round_no in range(1, args.runs + 1):
            for label, system, policy, standby in RECOVERY_CONFIGS:
                spec = {"system": system, "workload": "w2", "policy": policy, "input": str(inputs["w2"])}
                r = service.recovery(spec, scratch / f"recovery-{label}", kill_after=3 if args.quick else 5, standby=standby)
                recoveries.append({"system": label, "round": round_no, "seconds": r.seconds})
                timelines.setdefault(label, (r.killed_at, r.timeline))
                print(f"  round {round_no}: {label}: {r.seconds:.1f} s", flush=True)
        write_csv(args.out / "recovery.csv", recoveries)

    latencies: list[dict[str, Any]] = previous.get("latency", []) if "latency" in skip else []
    if "latency" not in skip:
        print("== end-to-end latency at half of each system's maximum rate ==", flush=True)
        files = sorted(inputs["w2"].glob("batch-*.csv"))
        rows_per_file = sizes.w2_rows_per_batch
        for system, label, policy in (("falkirk", "falkirk-lazy", "lazy"), ("ss", "ss-rocksdb", "rocksdb")):
            best = next((s["median_records_per_second"] for s in summary if s["workload"] == "w2" and s["config"] == label), None)
            if best is None:
                continue
            rate = best / 2 / rows_per_file
            spec = {"system": system, "workload": "w2", "policy": policy}
            seconds = service.latency(spec, files, scratch / f"latency-{system}", rate)
            latencies.append({"system": system, "input_records_per_second": best / 2, "files": len(seconds),
                              "p50": statistics.quantiles(seconds, n=100)[49] if len(seconds) > 1 else float("nan"),
                              "p95": statistics.quantiles(seconds, n=100)[94] if len(seconds) > 1 else float("nan"),
                              "latencies": seconds})
            print(f"  {system}: p50 {latencies[-1]['p50']:.1f} s, p95 {latencies[-1]['p95']:.1f} s "
                  f"at {best / 2:,.0f} records/s", flush=True)
        write_csv(args.out / "latency.csv", latencies)

    report.update(summary=summary, epoch_cost=costs, recovery=recoveries, latency=latencies)
    (args.out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    plots.draw(args.out, results, summary, costs, timelines)
    print()
    print(render(summary, costs, recoveries, latencies))
    (args.out / "report.md").write_text(render(summary, costs, recoveries, latencies) + "\n")


def render(summary: list[dict[str, Any]], costs: list[dict[str, Any]], recoveries: list[dict[str, Any]], latencies: list[dict[str, Any]]) -> str:
    lines = ["| workload | configuration | runs | median s | records/s | vs SS | vs batch | vs no persistence | vs Flink |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['workload']} | {s['config']} | {s['runs']} | {s['median_seconds']:.1f} | "
                     f"{s['median_records_per_second']:,.0f} | {fmt(s['vs_ss'])} | {fmt(s['vs_batch'])} | "
                     f"{fmt(s['vs_falkirk_none'])} | {fmt(s['vs_flink'])} |")
    if costs:
        lines += ["", "| system | keys of state | median s per epoch (median of runs) | mean |", "|---|---|---|---|"]
        for system in ("falkirk", "ss"):
            for keys in sorted({c["keys"] for c in costs}):
                mine = [c for c in costs if c["system"] == system and c["keys"] == keys]
                lines.append(f"| {system} | {keys:,} | {median(c['median_epoch_seconds'] for c in mine):.2f} | "
                             f"{median(c['mean_epoch_seconds'] for c in mine):.2f} |")
    if recoveries:
        lines += ["", "| system | recovery seconds (median) | vs SS (same round) | runs |", "|---|---|---|---|"]
        ss = {r["round"]: r["seconds"] for r in recoveries if r["system"] == "ss-rocksdb"}
        for label, _, _, _ in RECOVERY_CONFIGS:
            mine = [r for r in recoveries if r["system"] == label]
            if not mine:
                continue
            vs = [r["seconds"] / ss[r["round"]] for r in mine if r["round"] in ss]
            lines.append(f"| {label} | {median(r['seconds'] for r in mine):.1f} | "
                         f"{fmt(median(vs) if vs else float('nan'))} | {len(mine)} |")
    if latencies:
        lines += ["", "| system | input records/s | p50 s | p95 s | files |", "|---|---|---|---|---|"]
        for lat in latencies:
            lines.append(f"| {lat['system']} | {lat['input_records_per_second']:,.0f} | {fmt(lat['p50'])} | "
                         f"{fmt(lat['p95'])} | {lat['files']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"\n(total {time.time() - started:.0f} s)")
