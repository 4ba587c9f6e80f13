"""The Redis-to-PostgreSQL demo's reference (:mod:`falkirk.demo.redis_postgres` holds
the pipeline): the final table and dead letters, in plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from falkirk.demo.redis_postgres import MAX_USER_BYTES


@dataclass(frozen=True)
class Expected:
    totals: pd.DataFrame  # user_id, total, events
    dead: pd.DataFrame  # id, reason


def expected(entries: list[tuple[str, list[tuple[bytes, bytes]]]]) -> Expected:
    """The final table and dead-letter entries for ``entries`` (id, fields as the
    stream holds them: (name, value) byte pairs in order), in plain Python,
    independent of the pipeline."""
    import re

    totals: dict[str, list[int]] = {}
    dead: list[tuple[str, str]] = []
    for entry_id, pairs in entries:
        values: dict[bytes, list[bytes]] = {}
        for name, value in pairs:
            values.setdefault(name, []).append(value)
        user_raw, amount_raw = values.get(b"user_id", []), values.get(b"amount", [])
        try:
            user = user_raw[0].decode() if len(user_raw) == 1 else None
            amount = amount_raw[0].decode() if len(amount_raw) == 1 else None
        except UnicodeDecodeError:
            user = amount = None
        ok = (
            bool(user)
            and "\x00" not in str(user)
            and len(user_raw[0]) <= MAX_USER_BYTES
            and amount is not None
            and re.fullmatch(r"-?[0-9]+", amount) is not None
            and -(2**63) <= int(amount) < 2**63
        )
        if not ok:
            dead.append((entry_id, "invalid"))
            continue
        t = totals.setdefault(str(user), [0, 0])
        t[0] += int(str(amount))
        t[1] += 1
    return Expected(
        pd.DataFrame([(u, t, n) for u, (t, n) in totals.items()], columns=["user_id", "total", "events"]),
        pd.DataFrame(dead, columns=["id", "reason"]),
    )
