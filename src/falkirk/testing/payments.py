"""The payments demo's input generator and reference (:mod:`falkirk.demo.payments`
holds the pipeline).

:func:`write_input` writes CSV files ``user,amount,ts`` with about ``bad_share`` of
the rows holding an ``amount`` or a ``ts`` that cannot be cast (some both), event
times increasing so that no row is late; :func:`expected` computes in plain Python,
from the files alone, what an uninterrupted run writes: the totals per user and
epoch, the windows, and the rows set aside. Python's ``int`` and ``datetime`` parse
what the generator writes as Spark's ANSI casts do; the generator writes nothing
either would read differently (no spaces, no signs, no fractions).
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

#: The generator's first event time.
START = datetime(2026, 11, 26, 10, 0, 0)
WINDOW = timedelta(minutes=10)


@dataclass(frozen=True)
class Expected:
    """What an uninterrupted ``payments`` run writes (rows as tuples, sorted)."""

    totals: list[tuple[str, int, int, int]]  # user, epoch, n, total
    windows: list[tuple[str, datetime, datetime, int, int]]  # user, window_start, window_end, n, total
    errors: list[tuple[str, str, str]]  # user, amount, ts as read


def write_input(directory: Path, *, files: int, rows: int, users: int = 8, bad_share: float = 0.01, seed: int = 1, first: int = 0) -> None:
    """``files`` CSV files of ``rows`` rows each (``p-00000.csv`` ...), numbered from
    ``first``; each file covers 7 minutes of event time after the previous one's and
    holds ``round(rows * bad_share)`` bad rows (at least one if ``bad_share`` > 0): a
    bad ``amount``, a bad ``ts`` or both."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    count = max(round(rows * bad_share), 1 if bad_share > 0 else 0)
    for f in range(first, first + files):
        lines = ["user,amount,ts"]
        bad = set(rng.sample(range(rows), count))
        for i in range(rows):
            ts = START + timedelta(minutes=7 * f, seconds=i * 420 // rows)
            amount, stamp = str(rng.randint(-50, 1000)), ts.strftime("%Y-%m-%d %H:%M:%S")
            if i in bad:
                which = rng.choice(("amount", "ts", "both"))
                if which != "ts":
                    amount = rng.choice(["x", "12.5x", "1e3q", "NaNx", str(2**70)])
                if which != "amount":
                    stamp = rng.choice(["bad", "2026-13-40 99:00:00", "2026-11-26T25:61:00"])
            lines.append(f"u{rng.randrange(users)},{amount},{stamp}")
        (directory / f"p-{f:05d}.csv").write_text("\n".join(lines) + "\n")


def _amount(text: str) -> int | None:
    if not text.lstrip("-").isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _ts(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None


def expected(directory: Path) -> Expected:
    """What a run over every file in ``directory`` (one per epoch, in name order) writes."""
    count: dict[str, int] = {}
    total: dict[str, int] = {}
    totals, errors = [], []
    windows: dict[tuple[str, datetime], list[int]] = {}
    for epoch, path in enumerate(sorted(directory.glob("*.csv")), start=1):
        touched = set()
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                amount, ts = _amount(row["amount"]), _ts(row["ts"])
                if amount is None or ts is None:
                    errors.append((row["user"], row["amount"], row["ts"]))
                    continue
                user = row["user"]
                count[user] = count.get(user, 0) + 1
                total[user] = total.get(user, 0) + amount
                touched.add(user)
                since = ts.replace(tzinfo=UTC).timestamp()
                start = datetime.fromtimestamp(since - since % WINDOW.total_seconds(), UTC).replace(tzinfo=None)
                window = windows.setdefault((user, start), [0, 0])
                window[0] += 1
                window[1] += amount
        totals += [(u, epoch, count[u], total[u]) for u in touched]
    return Expected(
        sorted(totals),
        sorted((u, start, start + WINDOW, n, s) for (u, start), (n, s) in windows.items()),
        sorted(errors),
    )


def expected_by_key(directory: Path) -> Expected:
    """What the keyed variant writes (``tests/engine/payments_runner.py keyed``): a
    user's rows of an epoch are set aside together when any of them is bad; the
    totals count the rest (no windows)."""
    count: dict[str, int] = {}
    total: dict[str, int] = {}
    totals, errors = [], []
    for epoch, path in enumerate(sorted(directory.glob("*.csv")), start=1):
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        bad_users = {r["user"] for r in rows if _amount(r["amount"]) is None or _ts(r["ts"]) is None}
        touched = set()
        for row in rows:
            user = row["user"]
            if user in bad_users:
                errors.append((user, row["amount"], row["ts"]))
                continue
            amount = _amount(row["amount"])
            assert amount is not None
            count[user] = count.get(user, 0) + 1
            total[user] = total.get(user, 0) + amount
            touched.add(user)
        totals += [(u, epoch, count[u], total[u]) for u in touched]
    return Expected(sorted(totals), [], sorted(errors))
