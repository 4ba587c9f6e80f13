"""Runs one benchmark configuration in a fresh process and prints its result.

    python bench/runner.py '{"system": "falkirk", "workload": "w2", "policy": "lazy",
                             "input": "/data/w2", "work": "/tmp/run1"}'

Prints one line ``RESULT {json}`` with the processing seconds, the per-epoch
seconds, the session start-up seconds and the CPU seconds the run used (the JVM's,
and the driver's Python's: on a shared machine CPU time varies less than wall
time). ``"conf": {...}`` in the spec adds Spark settings. A fresh process per run keeps JVM state
(caches, JIT, state stores) from leaking between configurations.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.systems import RUNNERS, STANDBY_READY
from falkirk.spark.session import spark_session


def main(spec: dict[str, Any]) -> dict[str, object]:
    started = time.perf_counter()
    spark = spark_session(app=f"bench-{spec['system']}-{spec['workload']}", conf=spec.get("conf"))
    startup = time.perf_counter() - started
    run = RUNNERS[(spec["system"], spec["workload"])]
    if spec["system"] == "batch":  # the practical limit: Spark's defaults, adaptive execution on
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    extra: dict[str, Any] = {"service": True} if spec.get("service") else {}
    if spec.get("standby"):  # a warm standby: signals readiness with this file
        extra["standby_ready"] = Path(spec["work"]) / STANDBY_READY
    jvm_cpu = _jvm_cpu_seconds(spark)
    python_cpu = time.process_time()
    result = run(spark, spec["input"], Path(spec["work"]), spec.get("policy", ""), **extra)
    return {
        **spec,
        **result,
        "startup_seconds": startup,
        "jvm_cpu_seconds": _jvm_cpu_seconds(spark) - jvm_cpu,
        "python_cpu_seconds": time.process_time() - python_cpu,
    }


def _jvm_cpu_seconds(spark: Any) -> float:
    """User + system CPU seconds of the session's JVM so far (Linux /proc)."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
