"""A driver for the placement test (``python -m tests.cluster.placement N`` with
``FALKIRK_SPARK_MASTER`` set): waits for N executors, keeps a DataFrame of 16
partitions with two copies of each block, and prints as JSON the executor ids and,
per partition, the executors holding its block."""

from __future__ import annotations

import json
import sys
import time

from falkirk.spark.blocks import block_locations, executor_ids
from falkirk.spark.materialise import REPLICAS_CONF, materialise
from falkirk.spark.session import spark_session


def main(executors: int) -> int:
    spark = spark_session(app="falkirk-placement-test", conf={"spark.executor.memory": "512m"})
    deadline = time.monotonic() + 120
    while len(executor_ids(spark)) < executors:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {executor_ids(spark)} registered")
        time.sleep(0.2)
    spark.conf.set(REPLICAS_CONF, "2")
    held = materialise(spark.range(0, 3200, numPartitions=16).selectExpr("id % 97 AS k", "id AS v"))
    locations = block_locations(spark, [held])
    print(json.dumps({"executors": executor_ids(spark), "blocks": [ids for _, ids in sorted(locations.items())]}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
