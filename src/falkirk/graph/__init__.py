"""The dataflow description: processors, streams between them, and policies.

Pure Python: a :class:`Pipeline` says *what* runs (each processor's typed spec is in
:mod:`falkirk.graph.specs`); :mod:`falkirk.operators` say how on Spark, and
:mod:`falkirk.runtime` runs it.
"""

from __future__ import annotations

from falkirk.graph.exceptions import GraphError
from falkirk.graph.loops import Loop
from falkirk.graph.pipeline import Input, Pipeline, Processor, Stream
from falkirk.graph.plugins import Sink, Source, TransactionalSink
from falkirk.graph.policies import (
    AtBarriers,
    EagerCheckpoint,
    FullHistory,
    GlobalCheckpoints,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.sequences import Sequenced

__all__ = [
    "AtBarriers",
    "EagerCheckpoint",
    "FullHistory",
    "GlobalCheckpoints",
    "GraphError",
    "Input",
    "LazyCheckpoint",
    "LogOutputs",
    "Loop",
    "Pipeline",
    "Policy",
    "Processor",
    "Sequenced",
    "Sink",
    "Source",
    "Stateless",
    "Stream",
    "TransactionalSink",
]
