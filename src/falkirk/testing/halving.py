"""The halving loop's reference and input (:mod:`falkirk.demo.halving` holds the
pipeline): the sums of each epoch's iterations in plain Python.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from falkirk.time.ticks import Tick


def write(directory: Path, epochs: list[list[int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for e, numbers in enumerate(epochs):
        (directory / f"numbers-{e:03d}.csv").write_text("n\n" + "".join(f"{n}\n" for n in numbers))


def iterations(numbers: list[int]) -> list[int]:
    """The sum of each iteration of one epoch, in plain Python."""
    sums, rows = [], list(numbers)
    while True:
        sums.append(sum(rows))
        rows = [n // 2 for n in rows if n > 1]
        if not rows:
            return sums


def expected(epochs: list[list[int]]) -> pd.DataFrame:
    """Every row of the sink: each iteration's sum with its epoch."""
    rows = [(total, e) for e, numbers in enumerate(epochs, start=1) for total in iterations(numbers)]
    return pd.DataFrame(rows, columns=["total", "epoch"]).astype("int64")


def expected_held(epochs: list[list[int]]) -> pd.DataFrame:
    """What ``buffer`` holds: each sum with its time's version (``_time``)."""
    rows = [
        (total, Tick(e, i).ordinal) for e, numbers in enumerate(epochs, start=1) for i, total in enumerate(iterations(numbers))
    ]
    return pd.DataFrame(rows, columns=["total", "_time"]).astype("int64")
