"""A source and a sink without Spark, for tests of the control plane (the ledger)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CountingSource:
    """Epoch offsets {"n": 1}, {"n": 2}, ... up to ``last``; reads nothing."""

    last: int

    def struct(self, spark: Any) -> Any:
        raise AssertionError("the control plane never asks a source for its schema")

    def next_offsets(self, previous: dict[str, Any] | None) -> dict[str, Any] | None:
        n = 1 if previous is None else int(previous["n"]) + 1
        return {"n": n} if n <= self.last else None

    def count_records(self, offsets: dict[str, Any]) -> int:
        return 0

    def read(self, spark: Any, offsets: dict[str, Any]) -> Any:
        raise AssertionError("the control plane never reads input")

    def check(self, offsets: dict[str, Any]) -> None:
        return None


@dataclass(frozen=True)
class NullSink:
    def prepare(self, empty: Any) -> None:
        return None

    def write(self, df: Any, epoch: int) -> list[Any]:
        raise AssertionError("the control plane never writes output")
