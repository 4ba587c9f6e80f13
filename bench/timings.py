"""Where a run's time goes: one configuration with Spark's event log, summarised.

    .venv/bin/python bench/timings.py w2 lazy [--input DIR] [--system falkirk]

Runs one benchmark configuration (as bench/runner.py does) with Spark's event log
on, then prints, per Falkirk processor (the engine labels every Spark job with
``processor eN``), the wall time of its jobs, the task time and CPU time they used
on the executors, and the number of jobs and stages; and for the whole run the share
of wall time with no job running (driver work: planning, commits, Python).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def summarise(event_log: Path) -> dict[str, Any]:
    """Per job label: wall ms, executor run ms, CPU ms, GC ms, jobs, stages."""
    jobs: dict[int, dict[str, Any]] = {}
    stage_job: dict[int, int] = {}
    tasks: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    files = sorted(event_log.iterdir()) if event_log.is_dir() else [event_log]
    lines = [line for f in files if not f.name.startswith(("appstatus", ".")) for line in f.read_text().splitlines()]
    for line in lines:
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            props = event.get("Properties") or {}
            label = props.get("spark.job.description") or props.get("callSite.short") or "?"
            jobs[event["Job ID"]] = {"label": label, "start": event["Submission Time"], "stages": len(event["Stage IDs"])}
            for stage in event["Stage IDs"]:
                stage_job[stage] = event["Job ID"]
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]]["end"] = event["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            job = stage_job.get(event["Stage ID"])
            if job is None:
                continue
            acc = tasks[job]
            acc["run_ms"] += metrics.get("Executor Run Time", 0)
            acc["cpu_ms"] += metrics.get("Executor CPU Time", 0) / 1e6
            acc["gc_ms"] += metrics.get("JVM GC Time", 0)
            acc["tasks"] += 1
    by_label: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    spans = []
    for job_id, job in jobs.items():
        if "end" not in job:
            continue
        label = job["label"].split(" e")[0]
        row = by_label[label]
        row["wall_ms"] += job["end"] - job["start"]
        row["jobs"] += 1
        row["stages"] += job["stages"]
        for k, v in tasks[job_id].items():
            row[k] += v
        spans.append((job["start"], job["end"]))
    busy = _union_length(spans)
    total = (max(e for _, e in spans) - min(s for s, _ in spans)) if spans else 0
    return {"labels": {k: dict(v) for k, v in by_label.items()}, "busy_ms": busy, "span_ms": total, "jobs": len(jobs)}


def _union_length(spans: list[tuple[int, int]]) -> int:
    length, end = 0, -1
    for s, e in sorted(spans):
        if s > end:
            length += e - s
            end = e
        elif e > end:
            length += e - end
            end = e
    return length


def render(summary: dict[str, Any]) -> str:
    lines = [f"{'label':<28} {'jobs':>5} {'stages':>6} {'wall s':>8} {'task s':>8} {'cpu s':>8} {'gc s':>6} {'tasks':>6}"]
    rows = sorted(summary["labels"].items(), key=lambda kv: -kv[1]["wall_ms"])
    for label, r in rows:
        lines.append(
            f"{label[:28]:<28} {int(r['jobs']):>5} {int(r['stages']):>6} {r['wall_ms'] / 1e3:>8.2f} "
            f"{r.get('run_ms', 0) / 1e3:>8.2f} {r.get('cpu_ms', 0) / 1e3:>8.2f} {r.get('gc_ms', 0) / 1e3:>6.2f} "
            f"{int(r.get('tasks', 0)):>6}"
        )
    span, busy = summary["span_ms"] / 1e3, summary["busy_ms"] / 1e3
    lines.append(f"{summary['jobs']} jobs; {span:.1f} s from the first job to the last; "
                 f"some job running {busy:.1f} s; none {span - busy:.1f} s ({(span - busy) / max(span, 1e-9):.0%})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["w1", "w2"])
    parser.add_argument("policy", help="none, lazy, eager, lazy-perkey (Falkirk); rocksdb (ss); batch")
    parser.add_argument("--system", default="falkirk", choices=["falkirk", "ss", "batch"])
    parser.add_argument("--input", type=Path, help="input directory (default: the benchmark's generated input)")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE: a Spark setting for this run")
    parser.add_argument("--keep", action="store_true", help="keep the event log (its path is printed)")
    args = parser.parse_args()
    from bench.inputs import Sizes, prepare
    from bench.systems import RUNNERS
    from falkirk.spark.session import spark_session

    logs = Path(tempfile.mkdtemp(prefix="falkirk-eventlog-"))
    work = Path(tempfile.mkdtemp(prefix="falkirk-profile-"))
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{logs}",
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
            **dict(item.split("=", 1) for item in args.conf)}
    if args.input is None:
        spark = spark_session(app="bench-inputs")
        args.input = prepare(spark, Path("/tmp/falkirk-bench/data"), Sizes())[args.workload]
        spark.stop()
    spark = spark_session(app="profile", conf=conf)
    if args.system == "batch":
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    started = time.perf_counter()
    result = RUNNERS[(args.system, args.workload)](spark, str(args.input), work, args.policy)
    print(f"run: {time.perf_counter() - started:.1f} s (as the benchmark counts it: {result['seconds']:.1f} s)")
    spark.stop()
    log = next(p for p in logs.iterdir() if not p.name.endswith(".inprogress"))
    print(render(summarise(log)))
    if result.get("step_seconds"):
        for name, seconds in result["step_seconds"].items():
            print(f"step {name:<20} sum {sum(seconds):6.2f} s  per epoch {[round(s, 2) for s in seconds]}")
    shutil.rmtree(work, ignore_errors=True)
    if args.keep:
        print(f"event log kept in {logs}")
    else:
        shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
