"""Everything that touches pyspark: the session, keyed state, operators, Parquet files."""

from __future__ import annotations

from falkirk.spark.session import spark_session

__all__ = ["spark_session"]
