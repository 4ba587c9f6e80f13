"""The orders demo's references and input generator (:mod:`falkirk.demo.orders` holds the
pipeline): :func:`expected` computes the whole output and dead-letter table in plain
Python, :func:`batch_expected` the same by one plain Spark batch job, both without
the pipeline's functions; :func:`write_input` generates input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from falkirk.demo.orders import ORDER_FIELDS, OUTPUT_COLUMNS, PAYMENT_FIELDS


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
