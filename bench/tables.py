"""The benches' rows: each printed as it is measured, all written to a CSV file, and
the medians over rounds per configuration printed at the end."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def show(row: dict[str, Any]) -> None:
    """Print one measured row (floats to 3 places)."""
    print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)


def write_csv(rows: Sequence[dict[str, Any]], out: str | Path) -> None:
    """``rows`` (all with the first row's columns) as a CSV file at ``out``."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def medians(rows: Sequence[dict[str, Any]], configs: Iterable[str], keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per configuration (the rows' ``config``), the median of each of ``keys`` over its rows."""
    keys = list(keys)
    return {c: {k: statistics.median(r[k] for r in rows if r["config"] == c) for k in keys} for c in configs}


def print_medians(found: dict[str, dict[str, float]], width: int = 11) -> None:
    """Print :func:`medians`' result, one configuration per line."""
    print("\nmedians over rounds:")
    for config, values in found.items():
        print(f"  {config:{width}s} " + " ".join(f"{k}={v:.3f}" for k, v in values.items()))
