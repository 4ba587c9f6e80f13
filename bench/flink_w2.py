"""W2 (per-key count/sum/max) in Apache Flink through PyFlink's SQL API, RocksDB state
backend with incremental checkpoints. Runs in the Flink virtualenv (``.venv-flink``,
made by ``scripts/bench.sh``), not in Falkirk's.

    .venv-flink/bin/python bench/flink_w2.py INPUT_DIR WORK_DIR

Prints ``RESULT {json}`` like bench/runner.py. The filesystem source is bounded (the
files present at start), so the streaming job ends when they are consumed. Flink's
SQL aggregate emits an update stream, which its filesystem sink cannot write; the
result goes to the ``blackhole`` sink with mini-batching on, so Flink pays for
computing every update but not for writing it (Falkirk and Structured Streaming
write theirs): its figure is an upper bound.
"""

from __future__ import annotations

import json
import sys
import time

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment


def main(input_dir: str, work: str) -> dict[str, object]:
    started = time.perf_counter()
    conf = Configuration()
    for key, value in {
        "parallelism.default": "2",
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
        "execution.checkpointing.interval": "1 s",
        "execution.checkpointing.dir": f"file://{work}/checkpoints",
        "table.exec.mini-batch.enabled": "true",
        "table.exec.mini-batch.allow-latency": "1 s",
        "table.exec.mini-batch.size": "5000",
        "rest.bind-address": "127.0.0.1",
        "rest.address": "127.0.0.1",
    }.items():
        conf.set_string(key, value)
    env = TableEnvironment.create(EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build())
    env.execute_sql(f"""
        CREATE TABLE events (key BIGINT, `value` BIGINT) WITH (
            'connector' = 'filesystem', 'path' = 'file://{input_dir}', 'format' = 'csv',
            'csv.ignore-parse-errors' = 'false', 'csv.allow-comments' = 'false')
    """)
    env.execute_sql("CREATE TABLE sink (key BIGINT, c BIGINT, s BIGINT, m BIGINT) WITH ('connector' = 'blackhole')")
    startup = time.perf_counter() - started
    start = time.perf_counter()
    env.execute_sql(
        "INSERT INTO sink SELECT key, COUNT(*), SUM(`value`), MAX(`value`) FROM events GROUP BY key"
    ).wait()
    return {"seconds": time.perf_counter() - start, "epoch_seconds": [], "startup_seconds": startup}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
