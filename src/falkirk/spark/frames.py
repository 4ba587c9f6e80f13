"""Small DataFrame helpers shared by the Spark layer."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType


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


def has_map(t: DataType) -> bool:
    """Whether type ``t`` is or holds a map (which ``xxhash64`` does not take)."""
    if isinstance(t, MapType):
        return True
    if isinstance(t, StructType):
        return any(has_map(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return has_map(t.elementType)
    return False
