"""Input and the expected output of ``examples/upgrade.py``, in plain Python.

The expected tables follow the example's definition directly (not the engine): for
each file (an epoch) in name order and each user in it, the user's count and sum of
``amount`` over every file so far; from the upgrade's first epoch on, the greatest
amount of the user's rows since the upgrade (null before); and every row over
:data:`~falkirk.demo.upgrade.BIG` of the epochs version 2 read.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

from falkirk.demo.upgrade import BIG


def write_input(directory: Path, epochs: range, *, rows: int = 20, users: int = 6, seed: int = 0) -> None:
    """One CSV file per epoch of ``epochs`` (``e0001.csv``, ...), ``rows`` rows each;
    amounts are small or, one time in three, over :data:`BIG`."""
    directory.mkdir(parents=True, exist_ok=True)
    for e in epochs:
        rnd = random.Random(seed * 100_003 + e)
        lines = ["user,amount"] + [
            f"u{rnd.randrange(users)},{rnd.randrange(BIG + 2000) if rnd.random() < 1 / 3 else rnd.randrange(500)}" for _ in range(rows)
        ]
        (directory / f"e{e:04d}.csv").write_text("\n".join(lines) + "\n")


def read_input(directory: Path) -> list[list[tuple[str, int]]]:
    """Each file's rows (user, amount), in name order (one list per epoch)."""
    files = sorted(p for p in directory.iterdir() if p.suffix == ".csv")
    return [[(r["user"], int(r["amount"])) for r in csv.DictReader(f.open())] for f in files]


@dataclass(frozen=True)
class Expected:
    #: (user, epoch, n, total, max_amount or None)
    totals: list[tuple[str, int, int, int, int | None]]
    #: (user, epoch, amount)
    big: list[tuple[str, int, int]]


def expected(epochs: list[list[tuple[str, int]]], upgraded_after: int) -> Expected:
    """What the example writes when version 1 read the first ``upgraded_after``
    epochs and version 2 the rest."""
    n: dict[str, int] = {}
    total: dict[str, int] = {}
    greatest: dict[str, int] = {}
    totals, big = [], []
    for e, rows in enumerate(epochs, 1):
        for user, amount in rows:
            n[user] = n.get(user, 0) + 1
            total[user] = total.get(user, 0) + amount
            if e > upgraded_after:
                greatest[user] = max(greatest.get(user, amount), amount)
                if amount > BIG:
                    big.append((user, e, amount))
        for user in sorted({u for u, _ in rows}):
            totals.append((user, e, n[user], total[user], greatest.get(user) if e > upgraded_after else None))
    return Expected(sorted(totals), sorted(big))
