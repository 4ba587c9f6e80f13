"""The SparkSession Falkirk runs on.

The master is ``$FALKIRK_SPARK_MASTER``, or the embedded ``local[2]``: for example
``spark://127.0.0.1:7077`` for a standalone cluster
(:mod:`falkirk.spark.standalone` starts one on this machine). Settings that only
make sense when the driver is the only JVM (:data:`LOCAL_ONLY`: binding the driver
to 127.0.0.1, the driver's large heap that holds the state in local mode) are left
out on a cluster.

Python workers must run an interpreter with Falkirk, pyarrow and pandas, or pandas
UDFs fail with ``No module named 'pyarrow'``. By default they run the driver's
(``sys.executable``): right for local mode, and for a cluster whose machines have the
same environment at the same path (an install step on each). Otherwise set
``$FALKIRK_PYTHON_ARCHIVE`` to a packed environment (``venv-pack -o env.tar.gz``
in a virtualenv with Falkirk installed, not editable): Spark ships it to every
executor (``spark.archives``) and runs its interpreter there.

On a cluster, copies of replicated blocks are placed by chained declustering where
the executors can load its class (:mod:`falkirk.spark.placement`). A standalone
cluster that :mod:`falkirk.spark.standalone` started on this machine asks every JVM
for its secret (``spark.authenticate``): the driver reads it from the cluster's
private folder and hands it to its JVM once that runs, never on the JVM's command
line (which every user of the machine can read).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from falkirk.spark import cds, console, standalone
from falkirk.spark.placement import placement_conf

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    # Keyed state and each epoch's hash joins live in this JVM in local mode; Spark's
    # 1 GB default runs out with a million keys of state.
    "spark.driver.memory": "4g",
    # The JVM's optimising (C2) JIT compiler spent a third of the CPU of a W1 benchmark
    # run on two cores, competing with the tasks; the quick (C1) compiler alone cut
    # that run's time by a quarter and did not slow W2. The parallel collector
    # spends less CPU than G1's concurrent work on two cores. (docs/benchmarks.md.)
    # Spark's generated code fills C1's default 48 MB code cache after a few minutes of
    # epochs; the JIT then stops compiling for good ("CodeCache is full. Compiler has
    # been disabled") and every later epoch runs interpreted: 256 MB holds it.
    # On many cores, or for runs of hours, pass your own spark.driver.extraJavaOptions;
    # spark_session() adds the class-data sharing archive (falkirk.spark.cds) to these.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:ReservedCodeCacheSize=256m",
    # Keyed state is kept hash-partitioned by key (falkirk.spark.state) so that an
    # epoch joins it in place; adaptive execution would hide that partitioning from
    # the planner and reshuffle the whole state every epoch.
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # Spark compiles (Janino) the code it generates for each plan and keeps the last
    # 100 classes. One epoch of the windowed example alone needs ~120, so with the
    # default every epoch compiled them all again (940 compiles per 8-epoch run). With
    # room for them, epochs after the first compile nothing: a warm run 38.8 s -> 30.6 s
    # on two cores (bench/codegen_cache.py). The cache stays bounded (least recently
    # used classes go), so a long run's memory does not grow with its epochs.
    "spark.sql.codegen.cache.maxEntries": "4000",
    # An epoch's input is often one small file: at Spark's default cost of opening a
    # file (4 MB) a file under ~4 MB is read by one task on one core. At 1 MB it is
    # split across the cores (CSV and JSON lines, Parquet row groups).
    "spark.sql.files.openCostInBytes": str(1 << 20),
    "spark.scheduler.mode": "FAIR",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark's worker daemon, minus a per-task cost of ~0.15 s CPU on Python 3.11
    # (falkirk.spark.daemon explains it). Executors must have falkirk installed,
    # as they must anyway for stateful steps.
    "spark.python.daemon.module": "falkirk.spark.daemon",
    "spark.ui.showConsoleProgress": "false",
    # With replicated state (Engine(replicas=2)) a block copy lost with its executor
    # is re-created on a surviving executor in the background (Flux's catch-up).
    "spark.storage.replication.proactive": "true",
    # PySpark 4 records the Python call site of every Column operation for error
    # messages, at several JVM round trips each: most of the driver's Python time
    # when an epoch builds its plans. Falkirk's own errors name the processor.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Integrity: Falkirk records every committed file's SHA-256 and checks it before
    # use, so Hadoop's .crc side files on local disks add nothing but a second place
    # to break (and they make names with ':' unreadable); Parquet's page checksums,
    # written by default, are verified on every read, so a file damaged after
    # Falkirk's check still fails loudly (falkirk.spark.errors names it).
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.parquet.page.verify-checksum.enabled": "true",
    # A stream runs for months: keep the driver's bookkeeping of finished jobs,
    # stages and SQL executions small (the defaults keep a thousand of each, and an
    # epoch runs about ten jobs).
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.ui.retainedExecutions": "50",
}


#: Left out when the master is not local (see the module docstring).
LOCAL_ONLY = ("spark.driver.host", "spark.driver.memory")
#: Where a packed Python environment (``$FALKIRK_PYTHON_ARCHIVE``) is unpacked in
#: each executor's working directory.
ARCHIVE_DIR = "falkirk_env"


def is_local(master: str) -> bool:
    """The master runs everything in the driver's JVM (``local``, ``local[N]``, ...)."""
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def spark_session(
    master: str | None = None,
    *,
    app: str = "falkirk",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the session: ``master`` defaults to ``$FALKIRK_SPARK_MASTER`` or
    ``local[2]``; ``conf`` overrides :data:`DEFAULTS` (see the module docstring)."""
    master = master or os.environ.get("FALKIRK_SPARK_MASTER") or "local[2]"
    archive = os.environ.get("FALKIRK_PYTHON_ARCHIVE")
    executor_python = f"./{ARCHIVE_DIR}/bin/python" if archive else sys.executable
    os.environ["PYSPARK_PYTHON"] = executor_python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    builder = builder.config("spark.pyspark.python", executor_python).config("spark.pyspark.driver.python", sys.executable)
    if archive:
        builder = builder.config("spark.archives", f"{archive}#{ARCHIVE_DIR}")
    defaults = {k: v for k, v in DEFAULTS.items() if is_local(master) or k not in LOCAL_ONLY}
    java = (DEFAULTS["spark.driver.extraJavaOptions"], console.java_options(), cds.java_options())
    defaults["spark.driver.extraJavaOptions"] = " ".join(o for o in java if o)
    settings = {**defaults, **(conf or {})}
    if not is_local(master):  # where block copies go (falkirk.spark.placement)
        for key, value in placement_conf(master).items():
            settings[key] = f"{value}{os.pathsep}{settings[key]}" if key.endswith("ClassPath") and key in settings else settings.get(key, value)
    secret = None if is_local(master) else standalone.secret_of(master)
    if secret is not None:
        settings["spark.authenticate"] = "true"
    for key, value in settings.items():
        builder = builder.config(key, value)
    if is_local(master):
        # Spark binds to the address the host name resolves to (and warns when that is
        # a loopback one); the embedded default stays on 127.0.0.1.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    quiet_py4j()  # before the gateway's first call: its DEBUG lines would flood a program logging at DEBUG
    with interrupted_start() as held:
        if SparkContext._gateway is None:
            # The JVM starts with every setting on its command line but the secret, which
            # the session's configuration gets through the gateway; its console is
            # filtered (falkirk.spark.console).
            start = SparkConf(loadDefaults=False).setAll(list(builder._options.items()))
            SparkContext._ensure_initialized(conf=start, gateway=console.launch_gateway(start))
        if secret is not None:
            builder = builder.config("spark.authenticate.secret", secret)
        spark = builder.getOrCreate()
        held.hold_again()  # PySpark's context put its own handler in place as it started
        spark.sparkContext.setLogLevel("ERROR")
        quiet_task_failures(spark)
        quiet_query_context_logs()
        if held.seen:
            spark.stop()
            held.raise_if_seen()
    return spark


def engine_session(spark: SparkSession) -> SparkSession:
    """A clone of ``spark`` for one engine (as Structured Streaming clones one per
    query): the same Spark application, settings, temporary views and functions,
    with SQL settings of its own, so that an engine's number of state partitions
    (``spark.sql.shuffle.partitions``, :mod:`falkirk.runtime.parallelism`) and block
    copies do not change the session it was given, nor another engine's."""
    return SparkSession(spark.sparkContext, jsparkSession=spark._jsparkSession.cloneSession())


class HeldInterrupt:
    """Ctrl-C (SIGINT) held while something must not be interrupted half-way (see
    :func:`interrupted_start`): ``seen`` says whether one came."""

    def __init__(self, message: str) -> None:
        self.seen: list[int] = []
        self.message = message
        self.active = False
        #: A handler installed meanwhile by someone else (PySpark's), put back at the end.
        self.replaced_by: Any = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.seen:  # a second one: at once
            raise KeyboardInterrupt(self.message)
        self.seen.append(signum)

    def hold_again(self) -> None:
        """Hold again after something replaced the handler (PySpark's context installs
        its own when it starts)."""
        if self.active:
            found = signal.getsignal(signal.SIGINT)
            if found != self.handler:
                self.replaced_by = found
            signal.signal(signal.SIGINT, self.handler)

    def raise_if_seen(self) -> None:
        if self.seen:
            raise KeyboardInterrupt(self.message)


@contextmanager
def interrupted_start(message: str = "interrupted while Spark was starting: nothing ran") -> Iterator[HeldInterrupt]:
    """Ctrl-C (SIGINT) while Spark starts (or an engine is set up) is held until it is
    done (a JVM interrupted half-way through its start would outlive this process; a
    py4j call interrupted half-way leaves its connection unusable and prints pages of
    tracebacks), then the caller raises ``KeyboardInterrupt(message)``
    (:meth:`HeldInterrupt.raise_if_seen`). A second Ctrl-C interrupts at once. Only on
    the main thread (the only one Python delivers signals to). On leaving, the handler
    in place when the block last held (PySpark's, once its context started) is put back."""
    held = HeldInterrupt(message)
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield held
        return
    before = signal.signal(signal.SIGINT, held.handler)
    held.active = True
    try:
        yield held
    finally:
        held.active = False
        current = signal.getsignal(signal.SIGINT)
        if current != held.handler:  # replaced inside the block and not held again: keep the replacement
            held.replaced_by = current
        signal.signal(signal.SIGINT, held.replaced_by if held.replaced_by is not None else before)


def quiet_py4j() -> None:
    """py4j logs every connection it closes at INFO ("Closing down clientserver
    connection"): a program logging at INFO (an example's ``-v``) would repeat it
    for every epoch. Its logger goes to WARNING unless the program set its level."""
    py4j = logging.getLogger("py4j")
    if py4j.level == logging.NOTSET:
        py4j.setLevel(logging.WARNING)


#: PySpark's loggers that print every captured error with a query context as one
#: JSON line of several kilobytes (the JVM trace included) before the caller gets the
#: same error: Falkirk's errors say where it comes from (falkirk.execution.diagnosis).
QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def quiet_query_context_logs() -> None:
    """Silence :data:`QUERY_CONTEXT_LOGGERS` (created as PySpark's own logger class,
    which it logs to with extra fields)."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


#: The driver JVM's log messages that repeat a failed task's error (with its stack
#: trace, some 75 lines each, several per failed job) before the job's caller gets
#: the same error: the executor's, the task set's and the file writer's (and the
#: data-source writer's, which the tries of :mod:`falkirk.execution.isolation` use).
TASK_FAILURE_MESSAGES = (
    r"(?s)(Aborting task|Aborting job .*|Job: .* aborted\.|Exception in task .*"
    r"|Task \S+ in stage \S+ failed \d+ times; aborting job"
    r"|Abort(ing|ed) commit for partition .*|Data source write support .* (is aborting|aborted)\.?)"
)


def quiet_task_failures(spark: SparkSession) -> None:
    """Keep the messages of :data:`TASK_FAILURE_MESSAGES` off the driver's console.
    Falkirk gets each failed job's error where it ran the job and reports it (a full
    disk, a damaged file, a processor's error: one line, the original chained as the
    ``__cause__``); printed by the JVM as well, one failure filled hundreds of lines
    of stderr. Every other message of the JVM's log stays (at ERROR)."""
    context = spark.sparkContext
    if getattr(context, "_falkirk_quiet", False):  # once per session: getOrCreate returns it again
        return
    jvm = context._jvm
    try:
        core = jvm.org.apache.logging.log4j.core  # type: ignore[union-attr]
        result = getattr(core, "Filter$Result")
        quiet = core.filter.RegexFilter.createFilter(TASK_FAILURE_MESSAGES, None, False, result.DENY, result.NEUTRAL)
        configuration = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()  # type: ignore[union-attr]
        for appender in configuration.getAppenders().values():
            appender.addFilter(quiet)
        setattr(context, "_falkirk_quiet", True)  # noqa: B010 (not an attribute of SparkContext's type)
    except Exception as exc:  # another logging back end: its console stays as it is
        logger.debug("task failures stay on the JVM's console: %s", exc)
