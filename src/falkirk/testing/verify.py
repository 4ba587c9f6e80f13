"""Comparing a pipeline's whole output with a reference, as multisets of rows.

Crash tests and ``falkirk demo`` check every row of every sink and dead-letter
dataset, not only each key's latest value: a comparison of latest values once hid the
loss of whole committed epochs. Rows are compared exactly on every column except
floating-point ones, which may differ in the last bits (a running average summed in
another order) and are compared with a relative tolerance.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd
from pandas.api.types import is_float_dtype


def differences(got: pd.DataFrame, want: pd.DataFrame, *, name: str = "output", rtol: float = 1e-9) -> list[str]:
    """What differs between ``got`` and ``want`` (empty when they hold the same rows,
    as multisets): missing and extra rows, then floating-point values that differ by
    more than ``rtol``. Columns must be the same, in the same order."""
    if list(got.columns) != list(want.columns):
        return [f"{name}: columns {list(got.columns)}, expected {list(want.columns)}"]
    floats = [c for c in want.columns if is_float_dtype(want[c]) or is_float_dtype(got[c])]
    exact = [c for c in want.columns if c not in floats]
    have, need = Counter(_rows(got, exact)), Counter(_rows(want, exact))
    problems = []
    for label, rows in (("missing", need - have), ("unexpected", have - need)):
        if rows:
            shown = ", ".join(repr(r) for r in sorted(rows, key=repr)[:5])
            problems.append(f"{name}: {sum(rows.values())} rows {label} ({', '.join(exact)}): {shown}")
    if problems or not floats:
        return problems
    ordered = [g.sort_values([*exact, *floats], kind="stable").reset_index(drop=True) for g in (got, want)]
    for column in floats:
        for i, (a, b) in enumerate(zip(ordered[0][column], ordered[1][column], strict=True)):
            if not _close(a, b, rtol):
                key = tuple(ordered[1].loc[i, exact])
                problems.append(f"{name}: {column} = {a!r} where {b!r} was expected, at {key}")
    return problems


def _rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return [tuple(None if _missing(v) else v for v in row) for row in frame[list(columns)].itertuples(index=False)]


def _missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _close(a: Any, b: Any, rtol: float) -> bool:
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=rtol)
