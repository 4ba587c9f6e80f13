"""A window's event-time column: an integer in its own unit, or a timestamp.

Over an integer column the window operator computes with the column's values and
the shape's integer sizes, as they are. Over a ``timestamp`` (or ``timestamp_ntz``)
column it computes in microseconds since 1970-01-01 00:00:00 (UTC for a
``timestamp``; the wall clock for a ``timestamp_ntz``): the rows' times are turned
into microseconds on the way in, the shape's and the watermark delay's durations
too, and ``window_start``/``window_end`` (in the output and on late rows) and the
time column of late rows go back to the column's type on the way out. Windows are
aligned at 1970-01-01, as Spark's ``window()`` and ``session_window()`` align them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    IntegralType,
    LongType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from falkirk.graph import GraphError
from falkirk.graph.durations import micros
from falkirk.graph.windows import WindowShape, WindowSpec

#: Microseconds per day.
_DAY = 86_400_000_000


def shape_text(spec: WindowSpec, time: EventTime) -> str:
    """The shape as a state's signature records it: as given over an integer column
    (as before timestamps were accepted), in microseconds over a timestamp (the same
    windows however the durations were written)."""
    return repr(spec.shape) if not time.timed else f"{time.shape!r} in microseconds of a {time.kind.value}"


class TimeKind(enum.Enum):
    """What the event-time column holds."""

    INTEGER = "integer"
    TIMESTAMP = "timestamp"
    TIMESTAMP_NTZ = "timestamp_ntz"


@dataclass(frozen=True)
class EventTime:
    """A window processor's event-time column and the units it computes in."""

    column: str
    kind: TimeKind
    #: The shape in the units computed with (microseconds over a timestamp).
    shape: WindowShape
    #: The watermark delay in the same units.
    delay: int

    @classmethod
    def of(cls, spec: WindowSpec, schema: StructType) -> EventTime:
        """The event time of ``spec`` over input ``schema``; refuses sizes of the
        other kind than the column (integers for a timestamp, durations for an integer)."""
        column = spec.time
        dtype = schema[column].dataType
        if isinstance(dtype, IntegralType):
            if spec.shape.timed:
                raise GraphError(
                    f"window: the event-time column {column!r} is an integer ({dtype.simpleString()}), so give "
                    f"{spec.shape!r} and the watermark delay as integers in its unit; durations such as '10 minutes' "
                    "need a timestamp column"
                )
            return cls(column, TimeKind.INTEGER, spec.shape, micros(spec.watermark_delay))
        kind = TimeKind.TIMESTAMP if isinstance(dtype, TimestampType) else TimeKind.TIMESTAMP_NTZ if isinstance(dtype, TimestampNTZType) else None
        if kind is None:
            raise GraphError(
                f"window: the event-time column {column!r} is {dtype.simpleString()}; it must be a timestamp, a "
                "timestamp_ntz or an integer (cast a string with to_timestamp(), or an epoch number with .cast('long'))"
            )
        if not spec.shape.timed:
            raise GraphError(
                f"window: the event-time column {column!r} is a {kind.value}, so give {spec.shape!r}'s sizes as "
                "durations ('10 minutes' or a datetime.timedelta), e.g. Tumbling('10 minutes')"
            )
        if spec.fn is not None:
            raise GraphError(
                f"window: fn= over the {kind.value} column {column!r} is not supported; give aggregates, or an "
                "integer event time (F.unix_micros(column)) with integer sizes"
            )
        return cls(column, kind, spec.shape.in_micros(), micros(spec.watermark_delay))

    @property
    def timed(self) -> bool:
        return self.kind is not TimeKind.INTEGER

    def aggregates_of_time(self, aggregates: Mapping[str, tuple[str, str | None]]) -> tuple[str, ...]:
        """The aggregates over a timestamp event-time column itself: ``min`` and
        ``max`` (computed in microseconds, given back as timestamps); a sum or an
        average of timestamps is refused, as Spark refuses it."""
        if not self.timed:
            return ()
        over = {out: func for out, (func, column) in aggregates.items() if column == self.column}
        summed = sorted(out for out, func in over.items() if func in ("sum", "avg"))
        if summed:
            raise GraphError(f"window aggregates {summed}: a sum or an average of the {self.kind.value} column {self.column!r} means nothing; use min or max")
        return tuple(out for out, func in over.items() if func in ("min", "max"))

    @property
    def bound_type(self) -> DataType:
        """The type of ``window_start`` and ``window_end`` as users see them."""
        return {TimeKind.INTEGER: LongType(), TimeKind.TIMESTAMP: TimestampType(), TimeKind.TIMESTAMP_NTZ: TimestampNTZType()}[self.kind]

    def inside(self, schema: StructType) -> StructType:
        """``schema`` as the operator computes with it (the time column in microseconds)."""
        if not self.timed:
            return schema
        return StructType([StructField(f.name, LongType(), f.nullable) if f.name == self.column else f for f in schema.fields])

    def to_inside(self, rows: DataFrame) -> DataFrame:
        """Rows with their time column in the units computed with."""
        if not self.timed:
            return rows
        if self.kind is TimeKind.TIMESTAMP:
            inside = F.unix_micros(F.col(self.column))
        else:  # from the wall clock's fields, which no time zone touches (a cast would)
            c = f"`{self.column}`"
            inside = F.expr(
                f"date_diff(to_date({c}), DATE'1970-01-01') * {_DAY}L + hour({c}) * 3600000000L + minute({c}) * 60000000L"
                f" + CAST(date_part('SECOND', {c}) * 1000000 AS BIGINT)"
            )
        return rows.withColumn(self.column, inside)

    def outside(self, name: str) -> Column:
        """Column ``name``, a time computed with (microseconds), as the column's type."""
        return F.expr(self._outside_sql(f"`{name}`"))

    def text(self, sql: str) -> Column:
        """A time computed with (the SQL expression ``sql``) as text, for messages:
        the integer, or the timestamp as Spark prints it."""
        return F.expr(f"CAST({self._outside_sql(sql)} AS STRING)")

    def _outside_sql(self, sql: str) -> str:
        return outside_sql(self.kind, sql)

    def to_outside(self, rows: DataFrame, *columns: str) -> DataFrame:
        """``rows`` with ``columns`` (times computed with) back in the column's type."""
        if not self.timed:
            return rows
        return rows.withColumns({name: self.outside(name) for name in columns})


def outside_sql(kind: TimeKind | None, sql: str) -> str:
    """SQL of a time computed with (microseconds, the SQL expression ``sql``) as a
    column of ``kind`` holds it (None: an integer column, as it is)."""
    if kind is TimeKind.TIMESTAMP:
        return f"timestamp_micros({sql})"
    if kind is TimeKind.TIMESTAMP_NTZ:  # the wall clock's fields again (see to_inside)
        day = f"date_add(DATE'1970-01-01', CAST(({sql} - pmod({sql}, {_DAY}L)) div {_DAY}L AS INT))"
        rest = f"pmod({sql}, {_DAY}L)"
        return (
            f"make_timestamp_ntz(year({day}), month({day}), day({day}), CAST({rest} div 3600000000L AS INT),"
            f" CAST(pmod({rest}, 3600000000L) div 60000000L AS INT), CAST(pmod({rest}, 60000000L) AS DECIMAL(16, 6)) / 1000000)"
        )
    return sql
