"""Runs one benchmark configuration in a fresh process and prints its result.

    python bench/runner.py '{"system": "falkirk", "workload": "w2", "policy": "lazy",
                             "input": "/data/w2", "work": "/tmp/run1"}'

Prints one line ``RESULT {json}`` with the processing seconds, the per-epoch
seconds and the session start-up seconds. A fresh process per run keeps JVM state
(caches, JIT, state stores) from leaking between configurations.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.systems import RUNNERS, STANDBY_READY
from falkirk.spark.session import spark_session


def main(spec: dict[str, Any]) -> dict[str, object]:
    started = time.perf_counter()
    spark = spark_session(app=f"bench-{spec['system']}-{spec['workload']}")
    startup = time.perf_counter() - started
    run = RUNNERS[(spec["system"], spec["workload"])]
    if spec["system"] == "batch":  # the practical limit: Spark's defaults, adaptive execution on
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    extra: dict[str, Any] = {"service": True} if spec.get("service") else {}
    if spec.get("standby"):  # a warm standby: signals readiness with this file
        extra["standby_ready"] = Path(spec["work"]) / STANDBY_READY
    result = run(spark, spec["input"], Path(spec["work"]), spec.get("policy", ""), **extra)
    return {**spec, **result, "startup_seconds": startup}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
