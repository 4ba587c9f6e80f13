"""The pyspark plumbing operators share: the session, keyed state and kept rows, Parquet files, errors."""

from __future__ import annotations

from falkirk.spark.session import spark_session

__all__ = ["spark_session"]
