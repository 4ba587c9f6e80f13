"""Sources and sinks."""

from __future__ import annotations

from falkirk.io.generators import GeneratorSource, clickstream_generator, keyed_generator
from falkirk.io.sinks import MemorySink, ParquetTableSink
from falkirk.io.sources import FileSource

__all__ = [
    "FileSource",
    "GeneratorSource",
    "MemorySink",
    "ParquetTableSink",
    "clickstream_generator",
    "keyed_generator",
]
