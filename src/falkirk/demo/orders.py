"""Orders and payments: a join of two streams, per-customer totals (``examples/orders.py``).

Orders ``order_id,customer_id,amount_cents,ts`` and payments
``payment_id,order_id,amount_cents,ts`` arrive as CSV files in two directories, one
file of each per epoch. A payment belongs to the order with its ``order_id`` and may
arrive before or after it. Per customer the output keeps the number of orders, their
total, the total paid on them, and how many are not fully paid; one row per customer
per epoch in which any of these changed.

The dataflow (every shape of a general graph: two sources, fan-out, union, join)::

    orders ──check_orders──┬─ parse_orders ──┬──────────────── order_events ─┐
                           │                 └─(right)┐                      ├ events ─ per_order ─ changes ─ customers ─ output
    payments ─check_payments┼─ parse_payments ─(left)─ match ─ payment_events ┘
                           └─ rejected_* ── rejected (union) ─ dead_letter

Policies, and why:

* sources, checks, parsing, events, ``changes``: stateless - cheap to recompute
  from the input files, which a replay reads exactly as the first time;
* ``match`` (the join): ``EagerCheckpoint`` - its state holds every order and every
  unmatched payment forever (payments may precede their order by any number of
  epochs), too much to rebuild by replaying every file; eagerly it writes only each
  epoch's new rows, and its logged output lets everything downstream roll back
  without dragging the join (or the sources) back;
* ``per_order``: ``LazyCheckpoint(every=3)`` - a state per order, written every
  third epoch; a crash replays at most two epochs of events from ``match``'s log;
* ``customers``: ``LazyCheckpoint(every=3)``, the aggregate the sink reads, at the
  same epochs as ``per_order``: ``per_order`` does not log its output, so
  ``customers`` can only keep a checkpoint of an epoch at which ``per_order`` has
  one too (the solver would otherwise roll it back further, and nothing below
  either could be collected).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink

ORDER_FIELDS = ("order_id", "customer_id", "amount_cents", "ts")
PAYMENT_FIELDS = ("payment_id", "order_id", "amount_cents", "ts")
#: The dead-letter table's columns: which input, its raw fields, the raw line, why.
REJECTED_COLUMNS = ("input", "order_id", "customer_id", "payment_id", "amount_cents", "ts", "raw", "reason")
OUTPUT_COLUMNS = ("customer_id", "orders", "ordered_cents", "paid_cents", "open_orders", "epoch")
_DIGITS = r"^[0-9]+\z"  # Java regex: \z, not $, which also matches before a final \r
_SIGNED = r"^-?[0-9]+\z"


def lines(df: DataFrame) -> DataFrame:
    """One row per line of each file (read whole), without the header line and without
    empty lines: ``raw`` and its comma-separated ``fields``."""
    numbered = df.select(F.posexplode(F.split(F.col("value"), r"\r?\n")).alias("n", "raw"))
    kept = numbered.filter((F.col("n") > 0) & (F.col("raw") != ""))
    return kept.select("raw", F.split(F.col("raw"), ",", -1).alias("fields"))


def _long(column: Column) -> Column:
    return column.try_cast("long")


def check(fields: tuple[str, ...], *, ids: tuple[str, ...]) -> Callable[[DataFrame], DataFrame]:
    """The validation of one input: exactly 4 fields, non-empty ids, ``amount_cents``
    plain decimal digits, ``ts`` an optional ``-`` then digits, both 64-bit."""

    def validate(df: DataFrame) -> DataFrame:
        count = F.size("fields")
        named = [F.get(F.col("fields"), i).alias(name) for i, name in enumerate(fields)]
        df = df.select("raw", count.alias("_n"), *named)
        reason = F.when(F.col("raw").contains("\ufffd"), F.lit("not valid UTF-8"))
        reason = reason.when(F.col("_n") != 4, F.concat(F.lit("expected 4 fields, got "), F.col("_n").cast("string")))
        for name in ids:
            reason = reason.when(F.col(name) == "", F.lit(f"empty {name}"))
        amount, ts = F.col("amount_cents"), F.col("ts")
        reason = (
            reason.when(~amount.rlike(_DIGITS), F.lit("amount_cents is not a non-negative integer"))
            .when(_long(amount).isNull(), F.lit("amount_cents does not fit in 64 bits"))
            .when(~ts.rlike(_SIGNED), F.lit("ts is not an integer"))
            .when(_long(ts).isNull(), F.lit("ts does not fit in 64 bits"))
        )
        return df.withColumn("reason", reason).drop("_n")

    return validate


def rejected_rows(input_name: str) -> Callable[[DataFrame], DataFrame]:
    def shape(df: DataFrame) -> DataFrame:
        cols = [F.lit(input_name).alias("input")]
        for name in REJECTED_COLUMNS[1:]:
            cols.append(F.col(name) if name in df.columns else F.lit(None).cast("string").alias(name))
        return df.select(*cols)

    return shape


def parse_orders(df: DataFrame) -> DataFrame:
    return df.select("order_id", "customer_id", _long(F.col("amount_cents")).alias("order_cents"))


def parse_payments(df: DataFrame) -> DataFrame:
    return df.select("payment_id", "order_id", _long(F.col("amount_cents")).alias("paid_cents"))


EVENT_COLUMNS = ("order_id", "customer_id", "amount", "paid", "is_order")


def order_events(df: DataFrame) -> DataFrame:
    return df.select("order_id", "customer_id", F.col("order_cents").alias("amount"), F.lit(0).cast("long").alias("paid"), F.lit(1).cast("long").alias("is_order"))


def payment_events(df: DataFrame) -> DataFrame:
    return df.select("order_id", "customer_id", F.lit(0).cast("long").alias("amount"), F.col("paid_cents").alias("paid"), F.lit(0).cast("long").alias("is_order"))


ORDER_STATE = "customer_id string, amount long, paid long, placed long"
CHANGES = "customer_id string, d_orders long, d_ordered long, d_paid long, d_open long"


def per_order(events: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each order's amount and paid total; emits, per order the epoch touched, how its
    customer's figures change (``stateful(vectorized=True)``)."""
    new = events.groupby("order_id").agg(
        customer_id=("customer_id", "first"), amount=("amount", "sum"), paid=("paid", "sum"), placed=("is_order", "sum")
    )
    old = state.set_index("order_id").reindex(new.index)
    old_amount, old_paid, old_placed = (old[c].fillna(0).astype("int64") for c in ("amount", "paid", "placed"))
    customer = old["customer_id"].where(old["customer_id"].notna(), new["customer_id"])
    amount, paid, placed = old_amount + new["amount"], old_paid + new["paid"], old_placed + new["placed"]
    was_open = (old_placed > 0) & (old_paid < old_amount)
    is_open = (placed > 0) & (paid < amount)
    changes = pd.DataFrame(
        {
            "customer_id": customer.to_numpy(),
            "d_orders": new["placed"].to_numpy(),
            "d_ordered": new["amount"].to_numpy(),
            "d_paid": new["paid"].to_numpy(),
            "d_open": (is_open.astype("int64") - was_open.astype("int64")).to_numpy(),
        }
    )
    kept = state.set_index("order_id")
    kept = kept.drop(index=new.index.intersection(kept.index))
    updated = pd.DataFrame({"customer_id": customer, "amount": amount, "paid": paid, "placed": placed})
    return changes, pd.concat([kept, updated]).reset_index(names="order_id")


def customer_changes(df: DataFrame) -> DataFrame:
    """An epoch's changes per customer, without customers whose figures did not change."""
    sums = df.groupBy("customer_id").agg(*[F.sum(c).alias(c) for c in ("d_orders", "d_ordered", "d_paid", "d_open")])
    return sums.filter((F.col("d_orders") != 0) | (F.col("d_ordered") != 0) | (F.col("d_paid") != 0) | (F.col("d_open") != 0))


def build_pipeline(orders_dir: str, payments_dir: str, output_dir: str, rejected_dir: str) -> Pipeline:
    """The query (see the module docstring)."""
    p = Pipeline("orders")
    text = {"wholetext": "true"}
    orders = p.source("orders", FileSource(orders_dir, "text", "value string", options=text)).map("order_lines", lines)
    payments = p.source("payments", FileSource(payments_dir, "text", "value string", options=text)).map("payment_lines", lines)
    orders_ok, orders_bad = orders.validate("check_orders", check(ORDER_FIELDS, ids=("order_id", "customer_id")))
    payments_ok, payments_bad = payments.validate("check_payments", check(PAYMENT_FIELDS, ids=("payment_id", "order_id")))
    bad = orders_bad.map("rejected_orders", rejected_rows("orders"))
    bad.union("rejected", payments_bad.map("rejected_payments", rejected_rows("payments"))).sink(
        "dead_letter", ParquetTableSink(rejected_dir, epoch_column=None)
    )
    placed = orders_ok.map("parse_orders", parse_orders)
    paid = payments_ok.map("parse_payments", parse_payments)
    matched = paid.join("match", placed, "order_id", policy=EagerCheckpoint(compact_every=10))
    events = placed.map("order_events", order_events).union("events", matched.map("payment_events", payment_events))
    (
        events.stateful(
            "per_order",
            "order_id",
            per_order,
            state_schema=ORDER_STATE,
            output_schema=CHANGES,
            policy=LazyCheckpoint(every=3),
            vectorized=True,
        )
        .map("changes", customer_changes)
        .aggregate(
            "customers",
            "customer_id",
            {
                "orders": ("sum", "d_orders"),
                "ordered_cents": ("sum", "d_ordered"),
                "paid_cents": ("sum", "d_paid"),
                "open_orders": ("sum", "d_open"),
            },
            policy=LazyCheckpoint(every=3),
        )
        .sink("output", ParquetTableSink(output_dir))
    )
    return p


#: What moved to :mod:`falkirk.testing.orders` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['Expected', 'batch_expected', 'expected', 'write_input'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.orders", _MOVED)
