"""The SparkSession Falkirk runs on.

Python workers must run the driver's interpreter (the project's virtualenv), or
pandas UDFs fail with ``No module named 'pyarrow'``: ``PYSPARK_PYTHON`` is set to
``sys.executable`` before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    # Keyed state and each epoch's hash joins live in this JVM in local mode; Spark's
    # 1 GB default runs out with a million keys of state.
    "spark.driver.memory": "4g",
    # The JVM's optimising (C2) JIT compiler spent a third of the CPU of a W1 benchmark
    # run on two cores, competing with the tasks; the quick (C1) compiler alone cut
    # that run's time by a quarter and did not slow W2 (README, Benchmarks). On many
    # cores, or for runs of hours, pass your own spark.driver.extraJavaOptions.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # Keyed state is kept hash-partitioned by key (falkirk.spark.state) so that an
    # epoch joins it in place; adaptive execution would hide that partitioning from
    # the planner and reshuffle the whole state every epoch.
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def spark_session(
    master: str | None = None,
    *,
    app: str = "falkirk",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the session: ``master`` defaults to ``$FALKIRK_SPARK_MASTER`` or
    ``local[2]``; ``conf`` overrides :data:`DEFAULTS`."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or os.environ.get("FALKIRK_SPARK_MASTER", "local[2]"))
    builder = builder.appName(app).config("spark.pyspark.python", sys.executable)
    for key, value in {**DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
