"""Saying where a run-time error comes from: the processor, the epoch, the input and
the user's line.

Spark runs a step's plan lazily, so an error raised by one processor's expression
surfaces at whichever action ran it - often a sink or a checkpoint further down -
wrapped in the JVM's trace, with the call site PySpark records switched off (it
costs a JVM call per Column operation; see :mod:`falkirk.spark.session`). When a
step fails with an error of the data or of the user's code (not a lost executor,
damaged or full storage, or Falkirk's own), the epoch is *diagnosed* before the run
stops - only then: a run that does not fail pays nothing:

1. **the processor**: every output the epoch built above the processor where the
   error surfaced is run alone, in graph order, into Spark's no-op sink (running
   their user functions and UDFs again); the first that fails with the same cause
   names its processor (none: the processor where it surfaced);
2. **the user's line**: a stateless processor's step is built again with PySpark's
   DataFrame call-site capture on (its user function is called again: it builds a
   plan) and run again, so that Spark's query context names
   the file and line of the failing expression; for a Python exception (a user
   function in a ``map``'s UDF or a ``stateful`` function) the innermost frame of its
   traceback outside PySpark and Falkirk;
3. **the input**: what the epoch read from the sources above the processor (file
   names for a :class:`~falkirk.io.FileSource`, offsets otherwise).

The result is a :class:`StepError` (a :class:`~falkirk.spark.errors.DataError`) whose message is one line
(``processor 'parse' failed on epoch 3's data: [CAST_INVALID_INPUT] The value 'xx'
... (a map; input: events: clicks-3.csv; at pipeline.py:12)``); the JVM's trace stays
its ``__cause__``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sysconfig
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import py4j  # type: ignore[import-untyped]
import pyspark
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

import falkirk
from falkirk.exceptions import error_text
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.graph import Processor
from falkirk.graph.errors import ERRORS_PORT
from falkirk.operators import Step
from falkirk.redact import redact_text
from falkirk.spark.errors import DataError
from falkirk.storage import MetaStore
from falkirk.storage.identity import LAST_FAILURE

logger = logging.getLogger(__name__)

#: A frame of a Python traceback: its file and line.
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
#: Where code that is not the user's lives: PySpark, Py4J, Python's own library, and
#: Falkirk's engine (its demo and testing pipelines are users' code).
_ENGINE = os.path.dirname(os.path.abspath(falkirk.__file__))
_NOT_USERS = (
    os.path.dirname(os.path.abspath(pyspark.__file__)),
    os.path.dirname(os.path.abspath(py4j.__file__)),
    sysconfig.get_paths()["stdlib"],
    "<frozen ",
)
_USERS_IN_ENGINE = (os.path.join(_ENGINE, "demo"), os.path.join(_ENGINE, "testing"))


#: Held while PySpark's call-site capture is switched on (:func:`_call_sites`).
_CAPTURING = threading.Lock()


def _is_users(path: str) -> bool:
    """Whether code at ``path`` is the user's (see :data:`_NOT_USERS`)."""
    if path.startswith(_NOT_USERS):
        return False
    return not path.startswith(_ENGINE) or path.startswith(_USERS_IN_ENGINE)


@dataclass(frozen=True)
class StepFailure:
    """Where an epoch failed (see the module docstring)."""

    processor: str
    #: The processor's kind (``map``, ``aggregate``, ...).
    kind: str
    epoch: int
    #: What failed, in one line that is the same in every run (no query context).
    cause: str
    #: What the epoch read from the sources above the processor, one entry per source.
    inputs: tuple[str, ...] = ()
    #: The user's ``file:line`` of the failing expression or function, if found.
    line: str | None = None
    #: Why the rows were not set aside (``on_error="dead_letter"``), if they could not be.
    note: str = ""
    #: The storage root whose ``falkirk inspect ROOT failure`` shows the details (once recorded).
    recorded_in: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The failure as ``falkirk inspect ROOT failure`` shows it (without the trace)."""
        return {
            "processor": self.processor, "kind": self.kind, "epoch": self.epoch, "cause": self.cause,
            "inputs": list(self.inputs), "line": self.line, "note": self.note,
        }  # fmt: skip

    def message(self) -> str:
        where = [f"a {self.kind}"]
        if self.inputs:
            where.append("input: " + "; ".join(self.inputs))
        if self.line:
            where.append(f"at {self.line}")
        what = f"failed writing epoch {self.epoch}" if self.kind == "sink" else f"failed on epoch {self.epoch}'s data"
        why = f" {self.note}." if self.note else ""
        details = f" (details: falkirk inspect {self.recorded_in} failure)" if self.recorded_in else ""
        return (
            f"processor {self.processor!r} {what}: {self.cause} ({'; '.join(where)}).{why} A replay fails the same way: "
            f"fix the function, or reject such rows in a validate step before it; then run again{details}"
        )


class StepError(DataError):
    """A processor's step failed on an epoch's data or in the user's code: replaying
    the epoch would fail the same way. :attr:`failure` says where."""

    def __init__(self, failure: StepFailure) -> None:
        super().__init__(failure.message())
        self.failure = failure


def recorded_failure(store: MetaStore, exc: StepError, root: str) -> StepError:
    """Keep ``exc``'s details - the failure and its whole trace, the JVM's included,
    passwords masked - as the root's last failure, and return the same error saying
    where to read them (``exc`` itself if they could not be recorded)."""
    detail = {**exc.failure.to_json(), "at": time.time(), "trace": redact_text(_whole_trace(exc.__cause__ or exc))}
    try:
        store.record_fact(LAST_FAILURE, json.dumps(detail))
    except Exception:  # the error itself matters more than its record
        logger.warning("the details of the failure could not be recorded", exc_info=True)
        return exc
    return StepError(replace(exc.failure, recorded_in=root))


def _whole_trace(exc: BaseException) -> str:
    """``exc``'s Python trace, then the JVM's stack trace of every Spark error in its chain."""
    parts = ["".join(traceback.format_exception(exc))]
    seen: BaseException | None = exc
    while seen is not None:
        jvm = getattr(seen, "_stackTrace", None)
        if isinstance(jvm, str) and jvm:
            parts.append(f"JVM stack trace of {type(seen).__name__}:\n{jvm}")
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def cause_of(exc: BaseException) -> str | None:
    """The stable one-line cause of a failure of the data or of the user's code:
    Spark's error condition and message without its query context, or the Python
    exception a task raised; None for anything else."""
    python = _python_exception(error_text(exc))
    if python is not None:
        return python
    spark = _spark_exception(exc)
    if spark is None or not spark.getCondition():
        return None
    text = spark.getMessage() if hasattr(spark, "getMessage") else str(spark)
    first = text.split("== DataFrame ==")[0].split("== SQL")[0].strip().splitlines()[0]
    return first[:500]


def _spark_exception(exc: BaseException) -> PySparkException | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PySparkException):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _python_exception(text: str) -> str | None:
    """The exception line after the last Python traceback in ``text``."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    for line in text[start:].splitlines()[1:]:
        if line and not line[0].isspace():  # the exception's own line, after its frames
            return line.strip()[:500]
    return None


def _user_frame(text: str) -> str | None:
    """The innermost frame of the last Python traceback in ``text`` that is the user's."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    found = None
    for line in text[start:].splitlines():
        m = _FRAME.match(line)
        if m and _is_users(m.group(1)):
            found = f"{m.group(1)}:{m.group(2)}"
    return found


def culprit_of(state: RunState, surfaced: Processor, work: EpochWork, exc: BaseException, cause: str) -> tuple[Processor, BaseException]:
    """The processor whose step raised ``exc`` (``cause``), which surfaced while
    ``surfaced`` ran its step of ``work``'s epoch (step 1 of the module docstring),
    and the error it raised run alone."""
    for q in _above(state, surfaced):
        outputs = [df for (name, port), df in list(work.outputs.items()) if name == q.name and port != ERRORS_PORT]
        error = next((e for e in map(run_alone, outputs) if e is not None), None)
        # The same cause only: run alone, an output computes what the epoch's plan
        # pruned or filtered away, and may fail on that instead.
        if error is not None and cause_of(error) == cause:
            return q, error
    return surfaced, exc


def failing_above(state: RunState, p: Processor, work: EpochWork) -> Processor | None:
    """The first processor above ``p`` (in graph order) whose output fails alone with an
    error of the data, whatever its cause; None if none does."""
    for q in _above(state, p):
        outputs = [df for (name, port), df in list(work.outputs.items()) if name == q.name and port != ERRORS_PORT]
        error = next((e for e in map(run_alone, outputs) if e is not None), None)
        if error is not None and cause_of(error) is not None:
            return q
    return None


def diagnose(
    state: RunState, surfaced: Processor, work: EpochWork, exc: BaseException, cause: str, *, found: tuple[Processor, BaseException] | None = None, note: str = ""
) -> StepError:
    """The :class:`StepError` saying where ``exc`` (``cause``), raised while
    ``surfaced`` ran its step of ``work``'s epoch, comes from (``found``: its
    :func:`culprit_of`, if known; ``note``: a sentence added to the message)."""
    culprit, failed = found or culprit_of(state, surfaced, work, exc, cause)
    line = _user_frame(error_text(failed)) or _call_site(state, culprit, work)
    failure = StepFailure(
        processor=culprit.name,
        kind=culprit.spec.kind,
        epoch=work.epoch,
        cause=cause_of(failed) or cause,
        inputs=_inputs(state, culprit, work),
        line=line,
        note=note,
    )
    return StepError(failure)


def _above(state: RunState, p: Processor) -> list[Processor]:
    """The processors above ``p`` (every path into it), in graph order."""
    wanted = {p.name}
    for q in reversed(state.order):
        if q.name in wanted:
            wanted |= {i.src for i in q.inputs}
    return [q for q in state.order if q.name in wanted and q.name != p.name]


def run_alone(df: DataFrame) -> BaseException | None:
    """Run ``df`` into the no-op sink: the error it raises, if any."""
    try:
        df.write.format("noop").mode("overwrite").save()
    except Exception as exc:  # the diagnosis looks at every error
        return exc
    return None


@contextmanager
def _call_sites(spark: SparkSession) -> Iterator[None]:
    """PySpark's DataFrame call-site capture on, for the plans built in the body (on
    this thread, which needs ``spark`` as its active session: PySpark records a call
    site only then, and an epoch's worker thread has none)."""
    import pyspark.errors.utils as origin

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    SparkSession._get_j_spark_session_class(jvm).setActiveSession(spark._jsparkSession)
    with _CAPTURING:  # (PySpark's switch is one module global: one diagnosis at a time)
        before = origin._enable_debugging_cache
        origin._enable_debugging_cache = True  # type: ignore[assignment]
        try:
            yield
        finally:
            origin._enable_debugging_cache = before


def _call_site(state: RunState, p: Processor, work: EpochWork) -> str | None:
    """Build ``p``'s step again (a stateless processor: building it has no effect)
    with call sites captured, run it, and read the failing expression's call site."""
    if p.spec.keyed or p.spec.source or p.spec.sink or p.region is not None:
        return None
    try:
        inputs = [work.outputs[(i.src, i.port)] for i in p.inputs]
    except KeyError:
        return None
    try:
        with _call_sites(state.spark):
            produced = state.operators[p.name].step(Step(work.epoch, inputs, offsets=work.offsets.get(p.name), final=work.final))
        for df in produced.values():
            error = run_alone(df)
            spark = _spark_exception(error) if error is not None else None
            if spark is not None:
                sites = [c.callSite() for c in spark.getQueryContext() if c.callSite()]
                users = [s for s in sites if _is_users(s.rsplit(":", 1)[0])]
                if users or sites:
                    return (users or sites)[0]
    except Exception:  # a diagnosis never hides the error it diagnoses
        logger.debug("no call site for processor %s", p.name, exc_info=True)
    return None


def _inputs(state: RunState, p: Processor, work: EpochWork) -> tuple[str, ...]:
    """What the epoch read from each source at or above ``p``."""
    sources = [q for q in [*_above(state, p), p] if q.spec.source]
    return tuple(f"{q.name}: {_describe(work.offsets.get(q.name))}" for q in sources if work.offsets.get(q.name) is not None)


def _describe(offsets: dict[str, Any] | None) -> str:
    if offsets is None:
        return "nothing new"
    files = offsets.get("files")
    if isinstance(files, list) and all(isinstance(f, list) and f for f in files):
        return ", ".join(str(f[0]) for f in files)
    return json.dumps(offsets, sort_keys=True, default=str)[:200]
