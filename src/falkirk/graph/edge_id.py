"""Edge names: which output of which processor feeds which receiver.

An edge is named ``src.port>dst`` (``#k`` added when one output feeds several inputs
of the same receiver, a self-join, ``k`` being the receiver's input index). The name
is what the recovery metadata records per edge (Ξ's discarded and logged messages),
so its spelling is fixed; :class:`EdgeId` builds it and reads it back, and nothing
else splits it apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from falkirk.graph.exceptions import GraphError

_EDGE = re.compile(r"(?P<src>[A-Za-z][A-Za-z0-9_]*)\.(?P<port>[A-Za-z][A-Za-z0-9_]*)>(?P<dst>[A-Za-z][A-Za-z0-9_]*)(?:#(?P<index>\d+))?")


@dataclass(frozen=True, order=True)
class EdgeId:
    """The edge from ``src``'s output ``port`` to ``dst`` (its input ``index`` when
    the output feeds several of ``dst``'s inputs)."""

    src: str
    port: str
    dst: str
    index: int | None = None

    def __str__(self) -> str:
        return f"{self.output}>{self.dst}" + (f"#{self.index}" if self.index is not None else "")

    @property
    def output(self) -> str:
        """``src.port``: the sender's output, under which its log is kept."""
        return f"{self.src}.{self.port}"

    @classmethod
    def parse(cls, name: str) -> EdgeId:
        """The edge named ``name`` (as :meth:`__str__` spells it)."""
        match = _EDGE.fullmatch(name)
        if match is None:
            raise GraphError(f"{name!r} is not an edge name: edges are named src.port>dst (or src.port>dst#k)")
        index = match["index"]
        return cls(match["src"], match["port"], match["dst"], None if index is None else int(index))
