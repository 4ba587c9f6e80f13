"""The dataflow description: processors, streams between them, and policies.

Pure Python: a :class:`Pipeline` says *what* runs (each processor's typed spec is in
:mod:`falkirk.graph.specs`); :mod:`falkirk.operators` say how on Spark, and
:mod:`falkirk.runtime` runs it.
"""

from __future__ import annotations

from falkirk.graph.edge_id import EdgeId
from falkirk.graph.errors import ErrorLimit, OnError
from falkirk.graph.exceptions import GraphError, PipelineChangedError
from falkirk.graph.loops import Loop
from falkirk.graph.pipeline import Input, Pipeline, PipelineEdge, Processor
from falkirk.graph.plugins import Sink, Source, TransactionalSink
from falkirk.graph.policies import (
    AtBarriers,
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    FullHistory,
    GlobalCheckpoints,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.sequences import Sequenced
from falkirk.graph.stream import Stream
from falkirk.graph.windows import EventTimeTtl, Session, Sliding, Tumbling, WindowShape

__all__ = [
    "AtBarriers",
    "ContinuousEventualCheckpoint",
    "EagerCheckpoint",
    "EdgeId",
    "ErrorLimit",
    "EventTimeTtl",
    "FullHistory",
    "GlobalCheckpoints",
    "GraphError",
    "Input",
    "LazyCheckpoint",
    "LogOutputs",
    "Loop",
    "OnError",
    "Pipeline",
    "PipelineChangedError",
    "PipelineEdge",
    "Policy",
    "Processor",
    "Sequenced",
    "Session",
    "Sink",
    "Sliding",
    "Source",
    "Stateless",
    "Stream",
    "TransactionalSink",
    "Tumbling",
    "WindowShape",
]
