"""Class-data sharing for the driver JVM: a faster start, hence faster recovery.

Most of a fresh Spark session's start is the JVM loading and verifying some 20,000
classes of Spark and its libraries, and its first jobs interpret code that later
runs compiled. A *dynamic class-data sharing archive* (JDK 13+) holds those classes
pre-parsed; with it, on this 2-core machine, a session starts in ~2.0 s instead of
~3.7 s and its first job takes ~0.8 s instead of ~2.0 s. A restart after a crash
pays both, so recovery is ~3 s faster.

The archive is built once per installation by ``falkirk warm-up``
(:mod:`falkirk.warmup`; ``scripts/bootstrap.sh`` runs it): a short training run of a
Falkirk pipeline in a JVM started with ``-XX:ArchiveClassesAtExit``, written to a
temporary name and renamed into place, so a reader sees a whole archive or none.
Sessions then start with ``-XX:SharedArchiveFile`` (:func:`java_options`). The JVM checks the archive
against its own version and class path and ignores it when they differ; a
missing archive only costs the time it would have saved. ``FALKIRK_CDS=0`` turns it
off. The archive lives under ``$FALKIRK_CACHE`` (default ``~/.cache/falkirk``),
keyed by the PySpark installation and the Java runtime, and used only when it is this
user's and nobody else can write it (:func:`falkirk.storage.permissions.trusted`):
otherwise it is ignored, and ``falkirk warm-up`` builds it again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from falkirk.storage.permissions import cache_dir, trusted

#: JVM options that keep the JVM quiet about an archive it cannot use.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def enabled() -> bool:
    return os.environ.get("FALKIRK_CDS", "1") != "0"


def _java_home() -> str:
    home = os.environ.get("JAVA_HOME")
    if home:
        return home
    java = shutil.which("java")
    return str(Path(java).resolve().parent.parent) if java else ""


def archive_path() -> Path:
    """Where this installation's archive is (whether or not it exists yet)."""
    import pyspark

    key = "\n".join([pyspark.__version__, str(Path(pyspark.__file__).resolve().parent), _java_home(), sys.executable])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir("cds") / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options() -> str:
    """Driver JVM options that use the archive, or "" when there is none."""
    if not enabled():
        return ""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if trusted(path) else ""
