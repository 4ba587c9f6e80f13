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


@pytest.mark.parametrize("port", ["out-1", "out.x", "1out", "out>x", ""])
def test_an_operators_port_names_are_checked_when_it_is_added(port: str) -> None:
    """Edge names (``src.port>dst``) are recorded in the metadata: a port that cannot be
    read back is refused at once, not at the first commit."""
    from dataclasses import dataclass
    from typing import ClassVar

    from falkirk.graph.specs import MapSpec

    @dataclass(frozen=True)
    class OddPorts(MapSpec):
        ports: ClassVar[tuple[str, ...]] = (port,)

    src = Pipeline("p").source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1))
    with pytest.raises(GraphError, match=f"output port {port!r}.*letters, digits and underscores"):
        src.apply("odd", OddPorts(fn=lambda df: df))
