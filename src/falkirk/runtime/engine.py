"""The engine: runs a pipeline epoch by epoch and recovers it after any crash.

One epoch, step by step (the crash points of :mod:`falkirk.control.faults` are named):

1. Plan: each source picks the epoch's input (its offsets) from its position and the
   plan is committed before any work, so a replay reads exactly the same input
   (``epoch.planned``); see :mod:`falkirk.control.ledger`.
2. Compute: every processor runs its operator's step as Spark jobs, in graph order;
   processors that already hold the epoch (after a rollback) skip it, and receivers
   that need their output read it from the log (the rollback's re-send, Q'(e)).
3. Persist: logged outputs and keyed-state checkpoints are written as Parquet under
   fresh names (``epoch.computed``); sinks write their epoch file (``sink.written``);
   see :mod:`falkirk.execution.epoch`.
4. Commit: once the sources confirm the epoch's input is unchanged, one metadata
   transaction records the logs, the checkpoint files, the Ξ(p, ↓e) of every
   processor that can now roll back to the epoch (:mod:`falkirk.control.xi`), and
   forgets what the previous commit's low-watermarks let go (``commit.before`` /
   ``commit.after``).
5. Collect: the files of the forgotten records are deleted (``gc.before``); the new
   low-watermarks say what the next commit forgets. Steps 4 and 5 are
   :mod:`falkirk.execution.commits`.

Recovery: on start, if the storage root holds an earlier run, every processor is
failed; the solver picks a consistent frontier for each from the committed Ξ records
(logged at INFO with the reason), keyed state is restored from its checkpoints (each
file checked against its committed size and SHA-256 first), and the loop resumes
from the earliest frontier (:mod:`falkirk.coordinator.rollback`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from falkirk.control.barriers import BarrierClock
from falkirk.control.domains import topology
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.control.ledger import Ledger
from falkirk.coordinator.coordinator import RecoveryCoordinator
from falkirk.execution.admission import Admission
from falkirk.execution.checks import (
    check_pair_sinks,
    check_replicas,
    set_up_operators,
    written_places,
)
from falkirk.execution.commits import Committer, Part
from falkirk.execution.description import describe
from falkirk.execution.diagnosis import StepError, recorded_failure
from falkirk.execution.edges import EdgeActions
from falkirk.execution.epoch import EpochRunner
from falkirk.execution.loop_stage import LoopStage
from falkirk.execution.observer import Observer, telemetry_for
from falkirk.execution.pairing import Pair, join_member
from falkirk.execution.quarantine import Quarantines
from falkirk.execution.report import RunReport
from falkirk.execution.run_state import RunState
from falkirk.execution.savepointing import take_savepoint
from falkirk.execution.sequence_stage import SequenceStage
from falkirk.graph import GraphError, Pipeline
from falkirk.observe.address import parse_address
from falkirk.operators import Operator
from falkirk.operators.sink import SinkOperator
from falkirk.runtime.epoch_loop import EpochLoop, RunControl, RunParts, Schedule
from falkirk.runtime.parallelism import (
    PARTITIONS_FACT,
    Parallelism,
    check_parallelism,
    resolve,
    use,
)
from falkirk.runtime.progress import EpochWatchers
from falkirk.runtime.root import StorageRoot, check_writable
from falkirk.runtime.stopping import RunAbandoned, stop_on_signals
from falkirk.runtime.versioning import start_version
from falkirk.spark.errors import first_line
from falkirk.spark.materialise import REPLICAS_CONF
from falkirk.spark.session import engine_session, interrupted_start, spark_session
from falkirk.storage import MetaStore, StorageFullError
from falkirk.storage.full import storage_full_error
from falkirk.storage.identity import PAIR_MEMBER, RootIdentity, establish
from falkirk.upgrades.savepoints import check_free
from falkirk.upgrades.upgrade import Upgrade, upgrade_of

if TYPE_CHECKING:
    from falkirk.observe.dashboard import Dashboard

logger = logging.getLogger(__name__)


class Engine:
    """Runs ``pipeline`` with its state and metadata under ``storage``: a local
    directory, or any Hadoop filesystem URI Spark can write (``hdfs://...``,
    ``s3a://...``, ``file:///...``). Only one engine may use a storage root at a
    time (fencing).

    For a URI root the metadata database is worked on in ``metadata_dir`` (a local
    directory; by default one under ``~/.cache/falkirk`` derived from the URI) and
    published to the root after every commit, so a driver on any machine recovers
    it (:mod:`falkirk.storage.published`). ``metadata_dir`` is ignored for local roots,
    whose database lives in the root itself. On a URI root drivers on different
    machines are fenced by a lease in the root: a driver on another host whose
    heartbeat has not moved for ``lease_timeout`` seconds is taken to be dead (a dead
    driver on the same host is seen at once); whatever the timing, a driver whose
    lease was taken can never commit again.

    ``parallelism=N`` sets the number of partitions of every keyed state. The root
    records it at its first run (by default the session's
    ``spark.sql.shuffle.partitions``) and later runs use the recorded number; a
    different ``N`` rescales the state as it is restored
    (:mod:`falkirk.runtime.parallelism`). The engine runs on its own clone of the
    session, so its settings do not leak into the session it was given."""

    def __init__(
        self,
        pipeline: Pipeline,
        storage: str | Path,
        *,
        spark: SparkSession | None = None,
        metadata_dir: str | Path | None = None,
        on_epoch: Callable[[int, float, RunReport], None] | None = None,
        progress: bool | None = None,
        max_in_flight: int = 2,
        lease_timeout: float = 10.0,
        ui: str | None = None,
        ui_token: str | None = None,
        allow_remote: bool = False,
        replicas: int = 1,
        pair: str | None = None,
        pair_name: str | None = None,
        parallelism: int | None = None,
        upgrade: bool | Upgrade = False,
        from_savepoint: str | None = None,
    ) -> None:
        pipeline.check()
        check_parallelism(parallelism)
        if max_in_flight < 1:
            raise GraphError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.pipeline = pipeline
        check_writable(storage, metadata_dir)  # before Spark's start-up: a read-only root is said at once
        # Ctrl-C while Spark starts and the engine is set up (py4j calls) is held until
        # it is done, then raised as one KeyboardInterrupt (falkirk.spark.session).
        with interrupted_start("interrupted while the engine was starting: nothing ran") as held:
            given = spark or spark_session()
            held.hold_again()  # (spark_session held it and put PySpark's handler back)
            #: The engine's own clone of the session (:func:`~falkirk.spark.session.engine_session`).
            self.spark = engine_session(given)
            #: ``parallelism=N``: the number of partitions of every keyed state; the root
            #: records it, and a number other than the recorded one rescales the state as
            #: it is restored (:mod:`falkirk.runtime.parallelism`). None: the root's
            #: number (a new root: the session's ``spark.sql.shuffle.partitions``).
            self.requested_parallelism = parallelism
            #: ``upgrade=True`` (or an :class:`~falkirk.upgrades.upgrade.Upgrade`), or
            #: ``from_savepoint=NAME``: a pipeline changed since the root's last run starts
            #: from a savepoint of the old one (:mod:`falkirk.upgrades.upgrade`); an
            #: unchanged one restarts as usual.
            self.upgrade = upgrade_of(upgrade, from_savepoint)
            self._session_partitions = int(self.spark.conf.get("spark.sql.shuffle.partitions") or "4")
            #: Copies of every state and epoch block, on different executors: 2 keeps
            #: the pipeline going through the loss of one executor with nothing rolled
            #: back (Flux's partition pairs; needs a cluster of two executors or more).
            self.replicas = replicas
            check_replicas(pipeline, self.spark.sparkContext.master or "local", replicas)
            self.spark.conf.set(REPLICAS_CONF, str(replicas))
            #: The storage root: where state and metadata live, and holding it (:mod:`falkirk.runtime.root`).
            self.storage = StorageRoot(storage, self.spark, metadata_dir=metadata_dir, lease_timeout=lease_timeout)
            self.fs, self.root, self.meta_dir = self.storage.fs, self.storage.root, self.storage.meta_dir
            #: What names the run's external writes (prepared transactions): the root's
            #: identity, recorded in its metadata (:mod:`falkirk.storage.identity`); known
            #: once the run holds the root.
            self.identity: RootIdentity | None = None
            #: ``pair="postgresql://..."``: this driver is a member of the driver pair
            #: ``pair_name`` (default: the pipeline's name) that shares that database
            #: (Flux's dataflow pairs, see :mod:`falkirk.storage.pairs`). Both members
            #: write the same sinks, so their external transactions share a name.
            self.pair: Pair | None = None
            self._pair_at: tuple[str, str] | None = None
            if pair is not None:
                check_pair_sinks(pipeline)
                self._pair_at = (pair, pair_name or pipeline.name)
            elif pair_name is not None:
                raise GraphError("pair_name= needs pair= (the PostgreSQL database the two drivers share)")
            #: ``progress``: None shows a live line while :meth:`run` runs when stdout is
            #: a terminal (nothing per epoch otherwise), True also a plain line per epoch
            #: off a terminal, False nothing (:mod:`falkirk.runtime.progress`).
            self.watchers = EpochWatchers(pipeline.name, progress, on_epoch)
            self.topology = topology(pipeline)
            #: What tools read of this pipeline in its storage root (and the dashboard draws).
            self.description = describe(pipeline, None, self.topology)
            #: Where the run writes: a full one is named (:class:`StorageFullError`).
            self.places = written_places(self.root, self.meta_dir, self.description, self.spark)
            self.report = RunReport()
            self.barriers = BarrierClock(pipeline.checkpoints)
            self._operators: tuple[dict[str, Operator], dict[tuple[str, str], StructType]] | None = None
            #: ``ui="HOST:PORT"`` (or ``"PORT"``: on 127.0.0.1): the live dashboard, its
            #: JSON status and Prometheus metrics, served from the first :meth:`run` on and
            #: kept up after it returns or fails (saying how it ended) until :meth:`close`
            #: or the process exits.
            #: A host other than the loopback needs ``ui_token=`` (a bearer token every
            #: request carries) or ``allow_remote=True`` (see :mod:`falkirk.observe.dashboard`).
            #: ``FALKIRK_UI_TOKEN`` gives the token when ``ui_token`` is not given.
            ui_token = ui_token or os.environ.get("FALKIRK_UI_TOKEN") or None
            self.ui = parse_address(ui, token=ui_token, allow_remote=allow_remote) if ui is not None else None
            self._ui_token = ui_token
            self.telemetry = telemetry_for(pipeline) if self.ui is not None else None
            self.observer = Observer(pipeline, self.telemetry)
            self.dashboard: Dashboard | None = None  # started by run() when ui= is given
            #: Every recovery path of every run (restart, partial failure, executor loss,
            #: in-process restart): see :mod:`falkirk.coordinator.coordinator`.
            self.recovery = RecoveryCoordinator(self.report, self.observer, self.barriers)
            #: The parts of the current (or last) run, once its recovery is done.
            self._current: RunParts | None = None
            #: What other threads ask of the current run: stop it (:meth:`stop`, SIGINT,
            #: SIGTERM), fail processors (:meth:`fail`); see :mod:`falkirk.runtime.epoch_loop`.
            self.control = RunControl()
            #: Whether (and under which name) the current run ends with a savepoint.
            self._savepoint: bool | str = False
        held.raise_if_seen()

    @property
    def on_epoch(self) -> Callable[[int, float, RunReport], None] | None:
        """Called in the driver (epoch, seconds, report) when an epoch has committed."""
        return self.watchers.on_epoch

    @on_epoch.setter
    def on_epoch(self, callback: Callable[[int, float, RunReport], None] | None) -> None:
        self.watchers.on_epoch = callback

    def fail(self, processor: str) -> None:
        """Make ``processor`` lose its in-memory state after the current epoch (as if
        its executor died). Only what the rollback constraints require rolls back: the
        other processors keep their state (section 4.4). Also reachable as the fault
        point ``FALKIRK_FAIL_AT="processor:epoch"``."""
        if processor not in self.pipeline.processors:
            raise GraphError(f"cannot fail {processor!r}: no such processor ({sorted(self.pipeline.processors)})")
        self.control.failures.arm({processor})

    def stop(self, wait: bool = True, timeout: float | None = None, savepoint: bool | str | None = None) -> bool:
        """Stop the run in progress cleanly, from any thread: no new epoch is planned,
        the epochs in flight are computed and committed, and :meth:`run` returns
        (:attr:`RunReport.stopped` is ``"stop()"``); a run with the same storage root
        resumes after the last of them. SIGINT and SIGTERM do the same while
        :meth:`run` runs on the main thread, and a second one abandons the epochs in
        flight (see :mod:`falkirk.runtime.stopping`). ``wait``: return once the run
        has ended (True), or when ``timeout`` seconds passed first (False); called on
        the run's own thread (from ``on_epoch``) it cannot wait, and returns False. No
        run in progress: nothing to do (True; a later :meth:`run` runs).
        ``savepoint=True`` (or a name): the run ends with a savepoint (see :meth:`run`;
        None: as :meth:`run` was asked; a name a finished savepoint has is refused at
        once, with :class:`~falkirk.upgrades.savepoints.SavepointError`)."""
        if not self.control.stop.running:
            return True
        if savepoint is not None:
            if isinstance(savepoint, str):
                check_free(self.fs, self.root, savepoint)  # a name taken: said now, the run goes on
            self._savepoint = savepoint
        self.control.stop.ask("stop()")
        if not wait or threading.get_ident() == self.control.stop.thread:
            return not self.control.stop.running
        return self.control.stop.wait_ended(timeout)

    # -- public -----------------------------------------------------------------------

    def run(
        self,
        *,
        max_epochs: int | None = None,
        idle_timeout: float = 0.0,
        poll_interval: float = 0.1,
        standby: bool = False,
        on_standby: Callable[[], None] | None = None,
        finish: bool = False,
        savepoint: bool | str = False,
    ) -> RunReport:
        """Process epochs until no source has new input (or ``max_epochs`` epochs).

        ``savepoint=True`` (or a name) ends a run that ends cleanly - the input
        done, :meth:`stop`, SIGINT or SIGTERM - with a savepoint: every keyed
        processor's state at the last committed epoch, kept in the storage root
        until dropped, from which a changed pipeline can start
        (:mod:`falkirk.upgrades.savepoints`; ``RunReport.savepoint`` names it).

        ``finish=True`` says the input is complete once no source has new input: the
        engine then runs one more epoch, without input, that ends it (recorded once
        in the metadata: a restart does not end it again). Operators that hold
        results back emit them all in that epoch: a window operator advances its
        watermark past every window. Input that arrives later is still processed,
        but windows count it as late.

        With ``idle_timeout`` > 0 the engine keeps running as a service: when no
        input is there it polls the sources every ``poll_interval`` seconds and stops
        only after ``idle_timeout`` seconds without new input (``math.inf``: never).

        Up to ``max_in_flight`` epochs are computed at once (their Spark jobs run
        concurrently; a stateful processor still applies epochs in order); epochs
        commit strictly in order.

        ``standby=True`` runs this engine as a warm standby of the driver that holds
        the storage root: it starts its Spark session, checks the pipeline's schemas
        and sets up its state (calling ``on_standby`` when that is done), then waits
        for the root's lock. When the active driver stops or dies, the standby takes
        the lock and recovers from the committed metadata exactly as a restarted
        driver would - it reads nothing before it holds the lock - but without the
        JVM start and set-up. Without ``standby``, a held root raises
        :class:`~falkirk.storage.StorageInUseError`.

        Any write that finds its file system full ends the run with a one-line
        :class:`~falkirk.storage.StorageFullError` naming the place (see
        :mod:`falkirk.storage.full`); once space is freed a new run recovers."""
        if idle_timeout < 0 or poll_interval <= 0:
            raise GraphError(f"run(idle_timeout={idle_timeout}, poll_interval={poll_interval}): need idle_timeout >= 0 and poll_interval > 0")
        schedule = Schedule(max_epochs, idle_timeout, poll_interval, finish)
        if isinstance(savepoint, str):
            check_free(self.fs, self.root, savepoint)  # before any epoch runs
        self._savepoint = savepoint
        if self.ui is not None and self.telemetry is not None and self.dashboard is None:
            from falkirk.observe.dashboard import Dashboard  # the web server, only when asked for

            self.dashboard = Dashboard(self.telemetry, self.description, *self.ui, token=self._ui_token)
            self.dashboard.start()
        if self.telemetry is not None:
            self.telemetry.began()
        ended = "failed"
        self.control.stop.begin()
        started = time.perf_counter()
        try:
            with stop_on_signals(self.control.stop, self.spark.sparkContext.cancelAllJobs), self.watchers.watching(self.root):
                report = self._run_locked(schedule, standby, on_standby)
            report.seconds = time.perf_counter() - started
            if self.control.stop.asked:
                last = min(self._current.state.frontier.values(), default=0) if self._current is not None else 0
                self.control.stop.stopped(report, last, self.root)
            ended = f"stopped by {report.stopped}" if report.stopped else "finished"
            return report
        except Exception as exc:  # whichever write found its file system full: say which, in one line
            said = self._full_disk(exc) or self.control.stop.ended_by(exc, self.spark)
            ended = f"failed: {first_line(said or exc)}"
            if isinstance(said, RunAbandoned):  # a second signal: one line, not the cancelled job's JVM trace
                said.cause = exc  # (shown with -v: falkirk.runtime.exits.failed)
                raise said from None
            if said is not None:
                raise said from exc
            raise
        finally:
            self.control.stop.end()
            if self.telemetry is not None:
                self.telemetry.ended(ended)

    def close(self) -> None:
        """Stop the dashboard (``ui=``), which otherwise stays up after :meth:`run`
        returns or fails - showing how the run ended - until the process exits."""
        if self.dashboard is not None:
            self.dashboard.stop()
            self.dashboard = None

    def _run_locked(self, schedule: Schedule, standby: bool, on_standby: Callable[[], None] | None) -> RunReport:
        if standby:
            self._set_up()
            if on_standby is not None:
                on_standby()
        with self.storage.held(wait=standby):
            try:
                self._run_recovering(schedule)
            finally:
                self._leave_pair()
        return self.report

    def _run_recovering(self, schedule: Schedule) -> None:
        """Run until done; a run that a lost executor ended is run again in this
        driver when the coordinator says so (its path 4), recovering from the
        committed metadata as a restarted driver would."""
        self.recovery.new_run()
        while True:
            before = len(self.report.epochs)
            try:
                self._run(schedule)
                return
            except Exception as exc:
                if self.control.stop.asked:
                    raise  # stopping: the next run recovers
                left = self.recovery.restart_in_process(exc, len(self.report.epochs) - before, schedule.max_epochs)
                schedule = replace(schedule, max_epochs=left)
                self._leave_pair()

    def _full_disk(self, exc: BaseException) -> StorageFullError | None:
        """``exc`` as a :class:`StorageFullError` naming the place, if it says a file
        system is full (and is not one already)."""
        return None if isinstance(exc, StorageFullError) else storage_full_error(exc, self.places)

    def _leave_pair(self) -> None:
        if self.pair is not None:
            self.pair.leave()

    @property
    def state(self) -> RunState:
        """The current (or last) run's explicit state (see :mod:`falkirk.execution.run_state`)."""
        return self._parts().state

    @property
    def ledger(self) -> Ledger:
        """The run's ledger (planning, commits; see :mod:`falkirk.control.ledger`)."""
        return self._parts().state.ledger

    @property
    def loops(self) -> LoopStage:
        """The run's stage for loops and sequence-number regions (:mod:`falkirk.execution.loop_stage`)."""
        return self._parts().loops

    def _parts(self) -> RunParts:
        if self._current is None:
            raise GraphError("this engine has not run yet: call run() first")
        return self._current

    def _run(self, schedule: Schedule) -> None:
        """Run while holding the storage root (see :meth:`run`)."""
        self.storage.check()
        paired = self._join_pair() if self._pair_at is not None else None
        store = self.storage.open()
        pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="falkirk-epoch")
        writers = ThreadPoolExecutor(2 * self.max_in_flight, thread_name_prefix="falkirk-write")
        rounds = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="falkirk-round")
        operators: dict[str, Operator] = {}
        loops: LoopStage | None = None
        try:
            parallelism = self._use_parallelism(store)
            operators, schemas = start_version(
                spark=self.spark, fs=self.fs, root=self.root, store=store, pipeline=self.pipeline, topology=self.topology,
                set_up=self._set_up(), set_up_again=self._set_up_again, description=self.description,
                upgrade=self.upgrade, paired=paired, report=self.report,
            )  # fmt: skip
            if store.fact(PARTITIONS_FACT) != str(parallelism.partitions):
                store.record_fact(PARTITIONS_FACT, str(parallelism.partitions))
            self.identity = establish(store, self.pipeline.name, paired)  # before any external write
            if self.pair is not None and store.fact(PAIR_MEMBER) != self.pair.member:
                store.record_fact(PAIR_MEMBER, self.pair.member)
            self.description["identity"] = str(self.identity)
            for operator in operators.values():
                operator.pipeline = str(self.identity)
                if isinstance(operator, SinkOperator):
                    operator.egress = self.pair
            self._operators = None  # a later run() of this engine sets up afresh
            state = RunState(
                pipeline=self.pipeline,
                topology=self.topology,
                spark=self.spark,
                operators=operators,
                schemas=schemas,
                fs=self.fs,
                root=self.root,
                store=store,
                ledger=Ledger(self.pipeline, self.topology, store, ingress=self.pair),
                report=self.report,
                telemetry=self.telemetry,
                counting=self.watchers.counting(self.telemetry is not None),
                quarantine=Quarantines.read(store),
            )
            edges = self._start(state)  # refuses a root written by another pipeline
            if parallelism.rescaled_from is not None:
                for operator in operators.values():
                    operator.wait_restored()
                crash_point(CrashPoint.RESCALE_RESTORED)
            self.observer.started(state)
            store.describe(self.pipeline.name, self.description)
            runner = EpochRunner(state, writers, {p.name: len(store.state_files(p.name)) for p in state.keyed})
            committer = Committer(state, runner, edges, self.barriers, self.observer)
            loops = LoopStage(
                state,
                runner,
                partial(committer.part, Part.ITERATION),
                SequenceStage(state, runner, partial(committer.part, Part.CHUNK)),
                rounds,
            )
            run = RunParts(state, runner, committer, loops, Admission(state, committer, loops.active))
            self._current = run
            try:
                loop = EpochLoop(
                    parts=run, schedule=schedule, control=self.control, recovery=self.recovery,
                    barriers=self.barriers, watchers=self.watchers, report=self.report,
                    max_in_flight=self.max_in_flight, global_rollback=self.pipeline.checkpoints is not None,
                    processors=frozenset(self.pipeline.processors), full_disk=self._full_disk,
                )  # fmt: skip
                loop.run(pool)
                if self._savepoint is not False and not self.control.failures.armed:
                    name = self._savepoint if isinstance(self._savepoint, str) else None
                    take_savepoint(state, self.description, str(self.identity), parallelism.partitions, name)
            except StepError as exc:  # the details stay with the root: falkirk inspect ROOT failure
                raise recorded_failure(store, exc, self.root) from exc.__cause__
            committer.collect(state.ledger.flush())
            self.observer.count(wait=2.0)  # counts Spark reports after the last commit
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            writers.shutdown(wait=True, cancel_futures=True)
            rounds.shutdown(wait=True, cancel_futures=True)
            if loops is not None:  # None: it failed before the loops' stage
                loops.close()  # frees what epochs a failure left inside a loop kept
            for operator in operators.values():
                operator.stop()
            store.close()

    def _join_pair(self) -> RootIdentity:
        """Join the driver pair (see :func:`~falkirk.execution.pairing.join_member`):
        the identity the pair's members share."""
        assert self._pair_at is not None
        self.pair, identity, copied = join_member(*self._pair_at, self.pipeline.name, self.meta_dir, self.fs, self.root, self.spark)
        self.report.caught_up_from = copied or self.report.caught_up_from
        return identity

    # -- start ----------------------------------------------------------------------------

    def _use_parallelism(self, store: MetaStore) -> Parallelism:
        """Resolve the run's number of state partitions against the root's record and
        set the engine's session to it (operators set up under another number, by a
        standby, are set up again)."""
        parallelism = resolve(self.requested_parallelism, store.fact(PARTITIONS_FACT), self._session_partitions)
        if use(self.spark, parallelism, self.pipeline.name):
            self._operators = None
        self.report.partitions, self.report.rescaled_from = parallelism.partitions, parallelism.rescaled_from
        self.description["parallelism"] = parallelism.partitions
        return parallelism

    def _set_up_again(self) -> tuple[dict[str, Operator], dict[tuple[str, str], StructType]]:
        """Fresh operators (an upgrade used the first ones to write the new state)."""
        self._operators = None
        return self._set_up()

    def _set_up(self) -> tuple[dict[str, Operator], dict[tuple[str, str], StructType]]:
        """Every processor's operator and output schemas (:func:`set_up_operators`),
        once per run (a standby does it before taking the lock)."""
        if self._operators is None:
            self._operators = set_up_operators(self.pipeline, self.spark)
        return self._operators

    def _start(self, state: RunState) -> EdgeActions:
        """Start the operators, recover what the root holds (the coordinator's
        restart), and act at the edges on what is committed: the run's edge actions."""
        for operator in state.operators.values():
            operator.start()
        self.recovery.restart(state)
        edges = EdgeActions(state, self.observer, self.pair)
        edges.act()
        # After a recovery every processor stands at the last global checkpoint (on a root
        # that moved to global checkpoints: at its own restore point; see BarrierClock.start).
        self.barriers.start(min(state.frontier.values(), default=0), max(state.frontier.values(), default=0))
        return edges
