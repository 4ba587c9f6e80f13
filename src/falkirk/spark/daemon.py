"""The Python worker daemon of Falkirk's sessions (``spark.python.daemon.module``).

It is PySpark's own daemon (:mod:`pyspark.daemon`) with one cost removed. Before
every Python task, a PySpark 4.0 worker calls :func:`importlib.invalidate_caches`
(to see files added with ``addPyFile``). On Python 3.11 that makes every
``zipimporter`` on the path re-read its archive's directory, and the workers import
PySpark from ``pyspark.zip``: one importer per package imported from it, each
re-reading the 3 MB archive. Measured here: about 0.15 s of CPU per task, most of
the Python time of a small stateful epoch. Archives already on the path do not
change while a worker lives, so their importers keep their directory; a file added
with ``addPyFile`` is a new path entry with a new importer and is still found
(upstream PySpark skips the invalidation when nothing was added: SPARK-54744).
"""

from __future__ import annotations

import zipimport
from typing import Any


def _keep_directory(self: Any) -> None:
    """Archives on the path are immutable while the worker lives: nothing to re-read."""


def install() -> None:
    zipimport.zipimporter.invalidate_caches = _keep_directory  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    from pyspark import daemon  # reads the worker module from sys.argv, as when run itself

    daemon.manager()  # type: ignore[no-untyped-call]
