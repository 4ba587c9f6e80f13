"""Small DataFrame helpers shared by the Spark layer."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType


def empty(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame with ``schema``, made in the JVM. (``createDataFrame([],
    schema)`` goes through pickled Python rows: running it starts Python workers,
    about 2 s at the start of a run.) It is an empty RDD rather than an empty local
    relation, which the optimizer would fold away together with a repartitioning
    meant to give it a known layout."""
    jschema = spark._jsparkSession.parseDataType(schema.json())
    rows = spark._jsc.emptyRDD()
    return DataFrame(spark._jsparkSession.createDataFrame(rows, jschema), spark)


def quote(name: str) -> str:
    """``name`` as a SQL identifier (for ``selectExpr``)."""
    return "`" + name.replace("`", "``") + "`"
