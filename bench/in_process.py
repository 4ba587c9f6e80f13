"""Runs a pipeline to the end in the bench's own process, optionally failing one
processor once (a partial failure, recovered in place: :meth:`Engine.fail`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from falkirk.graph import Pipeline
from falkirk.runtime import Engine, RunReport


def run_failing_once(
    spark: Any,
    pipeline: Pipeline,
    state: Path,
    processor: str,
    fail_after: int | None,
    *,
    finish: bool = False,
    before_failure: Callable[[Engine], None] | None = None,
) -> tuple[Engine, RunReport, float]:
    """The engine, its report and the wall seconds of one run of ``pipeline`` on
    ``state`` (one epoch in flight); with ``fail_after``, ``processor`` loses its
    state once, after that epoch (``before_failure`` sees the engine first).
    ``finish``: end the input (see :meth:`Engine.run`)."""
    engine = Engine(pipeline, state, spark=spark, max_in_flight=1)
    failed: list[int] = []

    def fail_once(epoch: int, *_: object) -> None:
        if fail_after is not None and epoch == fail_after and not failed:
            failed.append(epoch)
            if before_failure is not None:
                before_failure(engine)
            engine.fail(processor)

    engine.on_epoch = fail_once
    started = time.perf_counter()
    report = engine.run(finish=finish)
    return engine, report, time.perf_counter() - started
