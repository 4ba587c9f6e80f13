"""Sources and sinks."""

from __future__ import annotations

from falkirk.io.sinks import MemorySink, ParquetTableSink
from falkirk.io.sources import FileSource

__all__ = ["FileSource", "MemorySink", "ParquetTableSink"]
