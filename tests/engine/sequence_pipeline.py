"""A small sequence-number region for the engine's tests (also run as a subprocess
for crash tests).

    python sequence_pipeline.py IN OUT STATE CHUNK

Rows ``user,amount`` (one CSV per epoch) are numbered into region ``ledger``; its
``balance`` processor (eager, per user) emits each record with the user's balance
after it, so applying a record twice or losing one shows in the output; ``regroup``
takes the rows back to epochs and the sink writes them with their epoch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io import FileSource, ParquetTableSink
from falkirk.runtime import Engine
from falkirk.time.ticks import SEQ_BLOCK


def running(key, rows: pd.DataFrame, state: pd.DataFrame):  # type: ignore[no-untyped-def]
    rows = rows.sort_values("_seq")
    before = int(state["balance"].iloc[0]) if len(state) else 0
    balance = before + rows["amount"].cumsum()
    user = key[0] if isinstance(key, tuple) else key
    out = pd.DataFrame({"user": user, "seq": rows["_seq"], "amount": rows["amount"], "balance": balance})
    return out, pd.DataFrame({"balance": [int(balance.iloc[-1])]})


def build(inp: str, out: str, chunk: int) -> Pipeline:
    p = Pipeline("ledger")
    rows = p.source("rows", FileSource(inp, "csv", "user long, amount long", options={"header": "true"}))
    ledger = p.sequenced("ledger", chunk=chunk)
    numbered = ledger.enter("number", rows)
    balances = numbered.stateful(
        "balance",
        "user",
        running,
        state_schema="balance long",
        output_schema="user long, seq long, amount long, balance long",
        policy=EagerCheckpoint(compact_every=4),
    )
    ledger.leave("regroup", balances).sink("out", ParquetTableSink(out))
    return p


def write(directory: Path, epochs: list[list[tuple[int, int]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for e, rows in enumerate(epochs):
        (directory / f"rows-{e:03d}.csv").write_text("user,amount\n" + "".join(f"{u},{a}\n" for u, a in rows))


def expected(epochs: list[list[tuple[int, int]]]) -> pd.DataFrame:
    """Every record with its number (epoch e's k-th: (e - 1) * SEQ_BLOCK + k) and its
    user's balance after it, in plain Python."""
    balance: dict[int, int] = {}
    out = []
    for e, rows in enumerate(epochs, start=1):
        for k, (user, amount) in enumerate(rows, start=1):
            balance[user] = balance.get(user, 0) + amount
            out.append((user, (e - 1) * SEQ_BLOCK + k, amount, balance[user], e))
    return pd.DataFrame(out, columns=["user", "seq", "amount", "balance", "epoch"]).astype("int64")


if __name__ == "__main__":
    inp, out, state, chunk = sys.argv[1:5]
    Engine(build(inp, out, int(chunk)), state).run()
