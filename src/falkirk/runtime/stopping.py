"""Stopping a run cleanly: :meth:`Engine.stop <falkirk.runtime.Engine.stop>`, SIGINT
(Ctrl-C) and SIGTERM.

A clean stop plans no new epoch and **finishes the epochs in flight**: each is
computed, committed and (by a sink that shows committed epochs) made visible, then a
pipeline with global checkpoints takes its final checkpoint, and :meth:`Engine.run`
returns normally with :attr:`RunReport.stopped <falkirk.execution.report.RunReport.stopped>`
naming what stopped it. One line (logged at WARNING) says after which epoch it
stopped and that a run with the same storage root resumes after it.

A second SIGINT or SIGTERM while the epochs in flight are finishing **abandons**
them at once: the running Spark jobs are cancelled and :class:`RunAbandoned` (a
:class:`KeyboardInterrupt`) is raised from :meth:`Engine.run`. Nothing an abandoned
epoch wrote is visible: it is not committed, and the next run recovers from the last
committed epoch exactly as after a crash (uncommitted sink files stay hidden under
the table's ``_pending/`` and are deleted then).

Signals are handled only while :meth:`Engine.run` runs on the main thread (Python
delivers signals there); the handlers in place before (PySpark's SIGINT handler,
which cancels every job) come back when it returns. A supervisor that signals the
whole process group (a terminal's Ctrl-C does; so does ``systemd`` with
``KillMode=control-group``) reaches the JVM too: PySpark starts the JVM ignoring
SIGINT, so Ctrl-C stops cleanly, but SIGTERM ends the JVM at once, and the epochs in
flight fail - the run ends with an error, and the next run recovers exactly as after
a crash. Signal only the Python process (``KillMode=mixed``, or PID 1 of a
container running Python) for a clean stop on SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from pyspark.sql import SparkSession

from falkirk.execution.report import RunReport

logger = logging.getLogger(__name__)

#: The signals a run stops on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunAbandoned(KeyboardInterrupt):
    """A second stop signal abandoned the epochs in flight (see the module
    docstring). A :class:`KeyboardInterrupt`, so that ``except Exception`` in user
    code does not swallow it."""

    def __init__(self, message: str, signal_name: str) -> None:
        super().__init__(message)
        #: The signal that abandoned the run (``"SIGINT"`` or ``"SIGTERM"``).
        self.signal_name = signal_name
        #: What the abandoned work raised as it was cancelled (not chained: its JVM
        #: trace would bury the one line that matters).
        self.cause: BaseException | None = None


class StopRequest:
    """Whether the current run was asked to stop, and by what (thread-safe)."""

    def __init__(self) -> None:
        self._asked = threading.Event()
        self._ended = threading.Event()
        self._ended.set()
        #: What asked: ``"stop()"``, ``"SIGINT"`` or ``"SIGTERM"`` (None: nothing yet).
        self.reason: str | None = None
        #: A second signal abandoned the epochs in flight (their jobs are cancelled).
        self.abandoned = False
        #: The thread running the run (its ``on_epoch`` callback runs there too).
        self.thread: int | None = None

    def begin(self) -> None:
        """A run starts on this thread: no stop asked yet."""
        self.reason = None
        self.abandoned = False
        self.thread = threading.get_ident()
        self._asked.clear()
        self._ended.clear()

    def end(self) -> None:
        """The run ended (however)."""
        self._ended.set()

    def ask(self, reason: str) -> bool:
        """Ask the run to stop; False if a stop was asked already."""
        if self._asked.is_set():
            return False
        self.reason = reason
        self._asked.set()
        return True

    @property
    def asked(self) -> bool:
        return self._asked.is_set()

    @property
    def signalled(self) -> bool:
        """Whether a signal (not :meth:`Engine.stop`) asked."""
        return self.asked and str(self.reason).startswith("SIG")

    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` unless a stop is asked meanwhile (an idle service polls)."""
        self._asked.wait(seconds)

    def wait_ended(self, timeout: float | None) -> bool:
        """Wait until the run ended; False if ``timeout`` passed first."""
        return self._ended.wait(timeout)

    def stopped(self, report: RunReport, last: int, root: str) -> None:
        """A clean stop after epoch ``last``: recorded in ``report``, and said in one
        line with how to resume."""
        report.stopped = self.reason
        if last < 1:
            logger.warning("stopped (%s) before any epoch committed; run again with storage root %s to start", report.stopped, root)
            return
        logger.warning(
            "stopped (%s) after epoch %d, committed; run again with storage root %s to resume from epoch %d",
            report.stopped, last, root, last + 1,
        )  # fmt: skip

    def ended_by(self, exc: BaseException, spark: SparkSession) -> RunAbandoned | None:
        """What a run that failed with ``exc`` after a stop signal raises instead: a
        second signal cancelled the jobs ``exc`` comes from, or the signal reached the
        JVM too; None if neither (``exc`` is the run's own error)."""
        if self.abandoned:
            return self.abandoning()
        if self.signalled and jvm_stopped(spark):
            return self.jvm_gone(exc)
        return None

    def abandoning(self) -> RunAbandoned:
        """The error a run raises once a second signal abandoned it."""
        return RunAbandoned(f"{self.reason}: the epochs in flight were abandoned; run again with the same storage root to recover and resume", str(self.reason))

    def jvm_gone(self, exc: BaseException) -> RunAbandoned:
        """The error a run raises when a stop signal reached the JVM too (the epochs
        in flight failed with ``exc``)."""
        try:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        except Exception:  # a Py4J error asks the (gone) JVM for its text
            first = "its text is in the JVM, which is gone"
        return RunAbandoned(
            f"{self.reason}: the epochs in flight could not finish ({type(exc).__name__}: {first}): the JVM stopped too, "
            "as it does when the whole process group is signalled; signal only the Python process for a clean stop. "
            "Nothing uncommitted is visible: run again with the same storage root to recover and resume",
            str(self.reason),
        )


def jvm_stopped(spark: SparkSession) -> bool:
    """Whether the session's JVM is gone or its SparkContext stopped."""
    try:
        return bool(spark.sparkContext._jsc.sc().isStopped())
    except Exception:  # the gateway answers no more
        return True


@contextmanager
def stop_on_signals(request: StopRequest, cancel_jobs: Callable[[], None]) -> Iterator[None]:
    """While the body runs (on the main thread; elsewhere this does nothing), the
    first SIGINT or SIGTERM asks ``request`` to stop; a second marks it abandoned and
    cancels the running Spark jobs (``cancel_jobs``), after which the run raises
    :class:`RunAbandoned` at its next step. The handlers only note the signal: what
    takes locks or calls the JVM runs on a thread of its own, never inside whatever
    the main thread was doing when the signal came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(name: str) -> None:
        if request.ask(name):
            logger.warning("%s: stopping once the epochs in flight are committed (%s again abandons them at once)", name, name)

    def again(name: str) -> None:
        logger.warning("%s again: abandoning the epochs in flight; the next run recovers from the last committed epoch", name)
        cancel_jobs()

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not request.asked and request.reason is None:
            request.reason = name  # (at once: a second signal before the thread ran is a second one)
            threading.Thread(target=first, args=(name,), name="falkirk-stop", daemon=True).start()
        else:
            request.abandoned = True
            threading.Thread(target=again, args=(name,), name="falkirk-abandon", daemon=True).start()

    previous = {s: signal.signal(s, handle) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
