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

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

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


# -- the reference: the same query in plain Python, independent of Spark and of the above


@dataclass(frozen=True)
class Expected:
    output: pd.DataFrame
    rejected: pd.DataFrame  # input, raw


_INT = re.compile(r"^[0-9]+$")
_SINT = re.compile(r"^-?[0-9]+$")


def _valid(fields: list[str], ids: tuple[int, int]) -> bool:
    if len(fields) != 4 or any(fields[i] == "" for i in ids):
        return False
    amount, ts = fields[2], fields[3]
    return bool(_INT.fullmatch(amount)) and int(amount) < 2**63 and bool(_SINT.fullmatch(ts)) and -(2**63) <= int(ts) < 2**63


def _rows(directory: str, ids: tuple[int, int], name: str, bad: list[tuple[str, str]]) -> list[tuple[int, list[str]]]:
    files = sorted(f for f in Path(directory).iterdir() if f.is_file() and not f.name.startswith((".", "_")))
    rows = []
    for epoch, path in enumerate(files, start=1):
        for raw in re.split(rb"\r?\n", path.read_bytes())[1:]:  # only \n and \r\n end a line
            if raw == b"":
                continue
            line = raw.decode("utf-8", errors="replace")  # invalid bytes: U+FFFD, and the row is invalid
            fields = line.split(",")
            if "\ufffd" not in line and _valid(fields, ids):
                rows.append((epoch, fields))
            else:
                bad.append((name, line))
    return rows


def expected(orders_dir: str, payments_dir: str) -> Expected:
    """The whole output and dead-letter table the example must produce."""
    bad: list[tuple[str, str]] = []
    orders = _rows(orders_dir, (0, 1), "orders", bad)
    payments = _rows(payments_dir, (0, 1), "payments", bad)
    order_at = {f[0]: (e, f[1], int(f[2])) for e, f in orders}  # order ids are unique
    epochs = max([e for e, _ in orders] + [e for e, _ in payments] + [0])
    paid_by: dict[str, list[tuple[int, int]]] = {}
    for e, f in payments:
        if f[1] in order_at:
            paid_by.setdefault(f[1], []).append((max(e, order_at[f[1]][0]), int(f[2])))
    rows: list[tuple[object, ...]] = []
    last: dict[str, list[int]] = {}
    for n in range(1, epochs + 1):
        figures: dict[str, list[int]] = {}
        for oid, (e, customer, amount) in order_at.items():
            if e > n:
                continue
            paid = sum(p for at, p in paid_by.get(oid, []) if at <= n)
            fig = figures.setdefault(customer, [0, 0, 0, 0])
            fig[0], fig[1], fig[2], fig[3] = fig[0] + 1, fig[1] + amount, fig[2] + paid, fig[3] + (paid < amount)
        for customer, fig in figures.items():
            if any(not -(2**63) <= v < 2**63 for v in fig):
                raise OverflowError(f"customer {customer}'s figures do not fit in 64-bit integers: the example stops with an error")
            if last.get(customer) != fig:
                rows.append((customer, *fig, n))
                last[customer] = list(fig)
    output = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS)).astype({c: "int64" for c in OUTPUT_COLUMNS[1:]})
    return Expected(output, pd.DataFrame(bad, columns=["input", "raw"]))


def batch_expected(spark: SparkSession, orders_dir: str, payments_dir: str) -> Expected:
    """The same reference as :func:`expected`, computed by one plain Spark batch job
    over all the input, written without the pipeline's functions: crash tests compare
    the example's whole output with it (and a test checks the two references agree)."""

    def read(directory: str, name: str) -> DataFrame:
        files = sorted(f.name for f in Path(directory).iterdir() if f.is_file() and not f.name.startswith((".", "_")))
        frames = [
            spark.read.option("__globPaths__", "false").text(str(Path(directory) / f), wholetext=True)
            .select(F.posexplode(F.split("value", "\r?\n")).alias("pos", "raw"))
            .where((F.col("pos") > 0) & (F.col("raw") != ""))
            .select(F.lit(name).alias("input"), "raw", F.lit(i + 1).cast("long").alias("epoch"))
            for i, f in enumerate(files)
        ]
        empty = spark.createDataFrame([], "input string, raw string, epoch long")
        out = empty
        for frame in frames:
            out = out.unionByName(frame)
        f = F.split("raw", ",", -1)
        amount, ts = f.getItem(2), f.getItem(3)
        valid = (
            ~F.col("raw").contains("\ufffd") & (F.size(f) == 4) & (f.getItem(0) != "") & (f.getItem(1) != "")
            & amount.rlike(r"^[0-9]+\z") & F.expr("try_cast(split(raw, ',', -1)[2] AS BIGINT)").isNotNull()
            & ts.rlike(r"^-?[0-9]+\z") & F.expr("try_cast(split(raw, ',', -1)[3] AS BIGINT)").isNotNull()
        )
        return out.withColumn("valid", F.coalesce(valid, F.lit(False)))

    orders, payments = read(orders_dir, "orders"), read(payments_dir, "payments")
    rejected = orders.unionByName(payments).where(~F.col("valid")).select("input", "raw")
    o = orders.where("valid").select(
        F.split("raw", ",").getItem(0).alias("order_id"), F.split("raw", ",").getItem(1).alias("customer_id"),
        F.split("raw", ",").getItem(2).cast("long").alias("amount"), F.col("epoch").alias("o_epoch"),
    )
    pay = payments.where("valid").select(
        F.split("raw", ",").getItem(1).alias("order_id"), F.split("raw", ",").getItem(2).cast("long").alias("paid"),
        F.col("epoch").alias("p_epoch"),
    )
    last = orders.unionByName(payments).agg(F.coalesce(F.max("epoch"), F.lit(0))).first()[0]  # type: ignore[index]
    at = spark.range(1, int(last) + 1).select(F.col("id").alias("n"))
    # every order at every epoch from its own, with what was paid on it by then
    # (a payment counts from the later of its epoch and its order's)
    order_at = o.join(at, F.col("o_epoch") <= F.col("n")).join(pay, "order_id", "left")
    paid_by_then = F.when(F.col("p_epoch").isNotNull() & (F.greatest("p_epoch", "o_epoch") <= F.col("n")), F.col("paid")).otherwise(F.lit(0))
    per_order = order_at.groupBy("order_id", "customer_id", "amount", "n").agg(F.sum(paid_by_then).alias("paid"))
    figures = per_order.groupBy("customer_id", "n").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("ordered_cents"),
        F.sum("paid").alias("paid_cents"), F.sum(F.when(F.col("paid") < F.col("amount"), 1).otherwise(0)).alias("open_orders"),
    )
    w = Window.partitionBy("customer_id").orderBy("n")
    values = ["orders", "ordered_cents", "paid_cents", "open_orders"]
    changed = F.lag("n").over(w).isNull()
    for c in values:
        changed = changed | (F.lag(c).over(w) != F.col(c))
    out = figures.withColumn("changed", changed).where("changed").select(
        "customer_id", *[F.col(c).cast("long") for c in values], F.col("n").cast("long").alias("epoch")
    )
    return Expected(out.toPandas(), rejected.toPandas())


def write_input(orders_dir: str | Path, payments_dir: str | Path, *, epochs: int, orders_per_epoch: int, customers: int, seed: int) -> None:
    """Generate order and payment files: payments (0-3 per order, some of 0 cents)
    arrive up to 3 epochs before or after their order, some orders are never paid
    and some payments never find their order; about 4% of lines are invalid in one
    of the ways the contract names. The payments directory gets one file fewer."""
    import random

    rng = random.Random(seed)
    orders: list[list[str]] = [[] for _ in range(epochs)]
    payments: list[list[str]] = [[] for _ in range(epochs)]
    bad_orders = ["o,c,12.50,1", "o,c,42USD,1", ",c,5,1", "o,,5,1", "o,c,-5,1", "o,c,5", "o,c,5,1,9", "o,c,5,1.5", "o,c, 5,1"]
    bad_payments = ["p,o,12.50,1", "p,,5,1", ",o,5,1", "p,o,5,x", "p,o,5", "p,o,99999999999999999999,1"]
    for e in range(epochs):
        for i in range(orders_per_epoch):
            oid, customer, amount = f"o{e}_{i}", f"c{rng.randrange(customers)}", rng.randrange(0, 5000)
            orders[e].append(f"{oid},{customer},{amount},{e * 100 + i}")
            for j in range(rng.choice([0, 1, 1, 2, 3])):
                at = min(max(e + rng.randint(-3, 3), 0), epochs - 2)
                share = rng.choice([0, amount // 2, amount, amount + 1])
                payments[at].append(f"p{e}_{i}_{j},{oid},{share},{-(e * 100 + i)}")
        payments[rng.randrange(epochs - 1)].append(f"px{e},nowhere{e},100,1")  # never matched
    for lines_, bad in ((orders, bad_orders), (payments, bad_payments)):
        for chunk in lines_:
            for _ in range(max(1, len(chunk) // 25)):
                chunk.insert(rng.randrange(len(chunk) + 1), rng.choice(bad))
            rng.shuffle(chunk)
    for directory, header, chunks in ((orders_dir, ",".join(ORDER_FIELDS), orders), (payments_dir, ",".join(PAYMENT_FIELDS), payments[:-1])):
        Path(directory).mkdir(parents=True, exist_ok=True)
        for e, chunk in enumerate(chunks):
            (Path(directory) / f"part-{e:04d}.csv").write_text(header + "\n" + "\n".join(chunk) + "\n")
