"""What the driver's JVM prints on the console: errors that matter, not its noise.

Spark's JVM writes to the driver's stderr. Left alone, every start prints a banner
(which log4j profile, "Setting default log level", Hadoop's native-library warning,
the JVM's incubator-module notice), and a driver killed with SIGKILL leaves a JVM
that prints a hundred lines of ``SparkException: Job ... cancelled because
SparkContext was shut down`` while it dies. :func:`launch_gateway` starts the JVM

* with Falkirk's log4j configuration (:data:`LOG4J_CONFIG`: errors only, the banner
  and native-library warning off), unless ``spark.driver.extraJavaOptions`` names one;
* with its stderr on a pipe that a thread of this process copies to file
  descriptor 2, line by line, leaving out :data:`NOISE`. When this process dies, the
  pipe has no reader: whatever the orphaned JVM writes while it shuts down is lost,
  as it should be.

Nothing of what the JVM logs at ERROR is filtered (falkirk.spark.session quiets
only the repeats of failed tasks' errors that Falkirk reports itself).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from importlib.resources import files
from typing import IO, Any

from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway as pyspark_launch_gateway

#: The driver JVM's log4j configuration that Falkirk ships.
LOG4J_CONFIG = str(files("falkirk.spark").joinpath("log4j2.properties"))

#: Lines of the JVM's stderr that are never shown: start-up notices that say nothing
#: about the user's pipeline.
NOISE = re.compile(
    r"^(WARNING: Using incubator modules:"
    r"|Using Spark's default log4j profile:"
    r"|Setting default log level to"
    r"|To adjust logging level use sc\.setLogLevel)"
)


def java_options() -> str:
    """The JVM option that selects :data:`LOG4J_CONFIG`."""
    return f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"


def launch_gateway(conf: SparkConf) -> Any:
    """PySpark's gateway to a new JVM started with ``conf``, its stderr copied to this
    process's stderr without :data:`NOISE` (see the module)."""
    gateway = pyspark_launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:  # None: a JVM that spark-submit started
        threading.Thread(target=copy_lines, args=(proc.stderr,), name="falkirk-jvm-stderr", daemon=True).start()
    return gateway


def copy_lines(stream: IO[bytes], fd: int = 2) -> None:
    """Copy ``stream`` to ``fd`` until it ends, without the lines of :data:`NOISE`.
    Never stops reading before the end (a full pipe would stall the JVM), whatever
    writing to ``fd`` does."""
    for line in iter(stream.readline, b""):
        if NOISE.match(line.decode("utf-8", "replace")):
            continue
        try:
            while line:
                line = line[os.write(fd, line) :]
        except OSError:
            continue
