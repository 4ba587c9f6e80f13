"""Where a replicated block's second copy goes: chained declustering.

With two copies of state (``Engine(replicas=2)``, a policy's ``replicas=2``) Spark's
default places each copy on a random other executor. Falkirk's
``falkirk.spark.ChainedDeclustering`` (``jvm/ChainedDeclustering.java``) orders the
executors in a ring by id and puts the copy of a block held by executor k on the
next live executor after k: when executors hold consecutive partitions, partition
i's copy lies beside partition i+1's primary (the Flux paper's layout), and a lost
executor's load falls on its neighbour alone.

The class is compiled once against the installed PySpark's jars (``javac``, from a
JDK: ``scripts/bootstrap.sh`` installs ``openjdk-17-jdk-headless``) into
``$XDG_CACHE_HOME/falkirk/jars`` and put on the driver's and executors' class path
(``spark.{driver,executor}.extraClassPath``), so every executor must find the jar at
the same path and be able to read it: true for a cluster on this machine run by the
same user (:mod:`falkirk.spark.standalone`), and for one whose hosts share that
directory. The class path settings replace those of ``spark-defaults.conf`` (Spark
gives ``--conf`` settings precedence): pass your own through ``spark_session(conf=)``,
which they are added to, or set ``FALKIRK_PLACEMENT=random``. ``$FALKIRK_PLACEMENT`` chooses:

* ``auto`` (the default): chained declustering on a cluster whose master is on this
  machine (``spark://127.0.0.1:...`` or ``localhost``), when the jar can be built;
  Spark's random placement otherwise;
* ``chained``: chained declustering on any cluster (the jar must be at the same path
  on every host), an error if it cannot be built;
* ``random``: Spark's default.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlparse

import pyspark

from falkirk.exceptions import FalkirkError
from falkirk.storage.permissions import cache_dir, trusted

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("jvm") / "ChainedDeclustering.java"
POLICY = "falkirk.spark.ChainedDeclustering"
CHOICES = ("auto", "chained", "random")


class PlacementError(FalkirkError):
    """The chained-declustering class cannot be built or was asked for wrongly."""


def placement_jar() -> Path:
    """The jar of :data:`POLICY`, built if it is not there yet (raises
    :class:`PlacementError` saying why it cannot be)."""
    source = SOURCE.read_bytes()
    tag = hashlib.sha256(source + pyspark.__version__.encode() + b"release17").hexdigest()[:16]
    cache = cache_dir("jars")
    jar = cache / f"falkirk-placement-{tag}.jar"
    if trusted(jar):
        return jar  # (one someone else could have written goes on no class path: built again)
    javac = shutil.which("javac")
    if javac is None:
        raise PlacementError("chained declustering needs javac (a JDK: apt-get install openjdk-17-jdk-headless) to build its placement class")
    jars = Path(pyspark.__file__).parent / "jars"
    with tempfile.TemporaryDirectory(prefix="falkirk-placement-") as scratch:
        done = subprocess.run(
            [javac, "-nowarn", "--release", "17", "-d", scratch, "-cp", f"{jars}/*", str(SOURCE)], capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise PlacementError(f"building the chained-declustering class failed: {done.stderr.strip()[-2000:]}")
        staged = cache / f".{jar.name}.{os.getpid()}"
        with zipfile.ZipFile(staged, "w") as out:
            for path in sorted(Path(scratch).rglob("*.class")):
                out.write(path, path.relative_to(scratch).as_posix())
        staged.replace(jar)  # atomic: two drivers building at once both end with a whole jar
    if not trusted(jar):  # replaced between the build and here
        raise PlacementError(f"{jar} changed hands after it was built: check who else writes to {cache}")
    return jar


def placement_conf(master: str) -> dict[str, str]:
    """The Spark settings of the placement ``$FALKIRK_PLACEMENT`` chooses for
    ``master`` (see the module docstring): empty for Spark's random placement."""
    choice = os.environ.get("FALKIRK_PLACEMENT", "auto")
    if choice not in CHOICES:
        raise PlacementError(f"FALKIRK_PLACEMENT must be one of {CHOICES}, got {choice!r}")
    host = urlparse(master).hostname if master.startswith("spark://") else None
    if choice == "random" or (choice == "auto" and host not in ("127.0.0.1", "localhost")):
        return {}
    try:
        jar = placement_jar()
    except (PlacementError, OSError, subprocess.SubprocessError) as exc:
        if choice == "chained" and not isinstance(exc, PlacementError):
            raise PlacementError(f"cannot build the chained-declustering class: {exc}") from exc
        if choice == "chained":
            raise
        logger.warning("placing block copies at random: %s", exc)
        return {}
    return {
        "spark.storage.replication.policy": POLICY,
        "spark.driver.extraClassPath": str(jar),
        "spark.executor.extraClassPath": str(jar),
    }
