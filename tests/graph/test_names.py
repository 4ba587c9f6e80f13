"""Names of processors, loops and regions: letters, digits and underscores only, the
whole name (a trailing newline once passed the check: issue 30, finding 8)."""

from __future__ import annotations

import pytest

from falkirk.graph import GraphError, Pipeline
from falkirk.io import MemorySink, keyed_generator


@pytest.mark.parametrize("name", ["out\n", "out\nx", "1out", "out-1", "out:1", ""])
def test_a_processor_name_is_checked_whole(name: str) -> None:
    p = Pipeline("p")
    src = p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1))
    with pytest.raises(GraphError, match="letters, digits and underscores"):
        src.sink(name, MemorySink())


def test_a_loop_name_is_checked_whole() -> None:
    with pytest.raises(GraphError, match="letters, digits and underscores"):
        Pipeline("p").iterate("l\n")
