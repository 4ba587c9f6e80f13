"""Finding the rows a processor's step cannot process (:mod:`falkirk.graph.errors`).

Spark cannot catch one row's error inside a JVM expression: a task fails, and with it
the job. So when a step fails on data, the step is *tried* again on parts of its
input - by group testing - until the failing units are found:

1. the processor's input of the epoch is numbered (``monotonically_increasing_id``
   over the input kept in the executors: partition by partition, so halves are
   partitions first, then row ranges), one unit per row (a row-wise processor) or
   per key (a keyed one: every row of the key in the epoch goes together);
2. a part that fails is halved and its left half tried; the right half is tried
   too when the left fails (both may hold bad units), and is known to fail when the
   left does not; the tries of one round run concurrently. A unit is tried alone
   (its own error's text is the reason). k bad units of n cost about
   ``1.5 k log2(n/k)`` tries, each a Spark job over the kept input;
3. the bad units' identities (:mod:`falkirk.execution.quarantine`) are read back
   (a few rows), and the epoch is run again without them.

A try runs the processor's operator through :meth:`~falkirk.operators.Operator.trial`
(a keyed operator on a scratch copy of its state) into Spark's no-op sink. Only the
processor's own step is tried: the engine named it first
(:func:`falkirk.execution.diagnosis.culprit_of`). A try that fails with anything but
an error of the data (a lost executor, a full disk) stops the search and is raised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from falkirk.exceptions import FalkirkError, error_text
from falkirk.execution.diagnosis import cause_of, run_alone
from falkirk.execution.quarantine import IDENTITY, file_identity, identity, unit_of
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.graph import Processor
from falkirk.graph.errors import ErrorLimit
from falkirk.operators import Step
from falkirk.spark.errors import DataError, as_storage_error, first_line, is_executor_loss
from falkirk.storage import QuarantineRecord, QuarantineUnit
from falkirk.storage.full import no_space
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)

#: The hidden column numbering the units while they are searched.
POSITION = "_falkirk_position"
#: Tries run at once (Spark schedules their tasks side by side).
CONCURRENT_TRIES = 4


class PoisonRows(Exception):
    """Raised out of an epoch's computation: ``record`` names rows its processor cannot
    process. The engine discards the epochs in flight and runs them again without
    those rows (:mod:`falkirk.coordinator.coordinator`)."""

    def __init__(self, record: QuarantineRecord, read: int) -> None:
        super().__init__(f"processor {record.processor!r} cannot process {len(record.reasons)} {record.unit.value}s of epoch {record.epoch}")
        self.record = record
        #: The rows the processor read in the epoch (for the error limit).
        self.read = read


class CannotIsolate(Exception):
    """The failing rows cannot be set aside: ``why`` says so in a clause."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class InputFails(Exception):
    """The input of the processor being searched fails when computed alone: the bad
    rows are a processor's above it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error_text(error))
        self.error = error


class ErrorLimitExceeded(DataError):
    """A processor set aside more rows in one epoch than its pipeline's
    :class:`~falkirk.graph.errors.ErrorLimit` allows: the error looks systematic."""


class NonDeterministicRowsError(DataError):
    """A re-run of an epoch failed on rows set aside before: the processor's step does
    not fail on the same rows each time."""


@dataclass(frozen=True)
class _Segment:
    """The units numbered in one partition: positions ``first`` .. ``first + count - 1``,
    the ``offset``-th unit overall being the first."""

    first: int
    count: int
    offset: int


def isolate(state: RunState, q: Processor, work: EpochWork, inputs: list[DataFrame], limit: ErrorLimit) -> PoisonRows:
    """Find the units of ``inputs`` (``q``'s input of ``work``'s epoch, without the
    rows set aside already) that ``q``'s step cannot process: the :class:`PoisonRows`
    to raise. :class:`CannotIsolate` when they cannot be set aside,
    :class:`ErrorLimitExceeded` past ``limit``."""
    if len(inputs) != 1:
        raise CannotIsolate(f"processor {q.name!r} reads {len(inputs)} inputs; only a processor with one input sets rows aside")
    probe = state.operators[q.name].trial()
    if probe is None:
        raise CannotIsolate(f"processor {q.name!r} ({q.kind}) keeps state a try cannot set aside")
    probe.end_trial()
    unit = unit_of(q)
    df = inputs[0]
    marked = df.withColumn(IDENTITY, identity(df, q))
    units = marked if unit is QuarantineUnit.ROW else marked.select(IDENTITY).distinct()
    units = units.withColumn(POSITION, F.monotonically_increasing_id()).persist()
    try:
        try:
            rows = (
                units.groupBy(F.shiftright(F.col(POSITION), 33).alias("part"))
                .agg(F.min(POSITION).alias("first"), F.count(F.lit(1)).alias("n"))
                .orderBy("part")
                .collect()
            )
        except Exception as exc:  # its input itself fails: the rows are a processor's above it
            if cause_of(exc) is None or is_executor_loss(exc) or no_space(exc) is not None:
                raise
            raise InputFails(exc) from exc
        segments, total = [], 0
        for row in rows:
            segments.append(_Segment(int(row["first"]), int(row["n"]), total))
            total += int(row["n"])
        read = total if unit is QuarantineUnit.ROW else marked.count()

        def part(a: int, b: int) -> DataFrame:
            chosen = units.filter(_positions(segments, a, b))
            if unit is QuarantineUnit.ROW:
                return chosen.drop(IDENTITY, POSITION)
            return marked.join(chosen.select(IDENTITY), IDENTITY, "left_semi").drop(IDENTITY)

        tried: dict[tuple[int, int], str | None] = {}

        def fails(a: int, b: int) -> str | None:
            if (a, b) not in tried:
                tried[(a, b)] = _try(state, q, work, part(a, b))
            return tried[(a, b)]

        _check_not_systematic(total, fails, q, work.epoch)
        bad = _search(total, fails, q, work.epoch, limit, read)
        if total >= 2 and len(bad) == total:  # (fewer than 8 units: the sample did not say)
            raise CannotIsolate(
                f"processor {q.name!r} fails on every {unit.value} of epoch {work.epoch} alone ({next(iter(bad.values()))}): "
                "the function or the input as a whole fails, not a few bad rows"
            )
        found = units.filter(F.col(POSITION).isin([_position(segments, i) for i in bad])).select(IDENTITY, POSITION).collect()
        by_position = {int(r[POSITION]): int(r[IDENTITY]) for r in found}
        reasons = {by_position[_position(segments, i)]: reason for i, reason in bad.items()}
    finally:
        units.unpersist()
    record = QuarantineRecord(q.name, work.epoch, unit, reasons)
    logger.warning(
        "processor %r cannot process %d %s(s) of epoch %d (%s); setting them aside and running the epoch again",
        q.name, len(reasons), unit.value, work.epoch, next(iter(reasons.values())),
    )  # fmt: skip
    return PoisonRows(record, read)


#: Units tried alone before a search: if every one fails, the error is not a few bad rows.
SAMPLE = 3


def _check_not_systematic(total: int, fails: Callable[[int, int], str | None], q: Processor, epoch: int) -> None:
    """Raise :class:`CannotIsolate` if the first, middle and last unit each fail alone
    (with 8 units or more): every row failing is a broken function, a missing column
    or a service down, not bad data - setting the whole input aside would hide it."""
    if total < 8:
        return
    sample = [0, total // 2, total - 1][:SAMPLE]
    causes = [fails(i, i + 1) for i in sample]
    if all(c is not None for c in causes):
        raise CannotIsolate(
            f"processor {q.name!r} fails on each of the rows of epoch {epoch} tried alone ({len(sample)} of {total}: {causes[0]}): "
            "the function or the input as a whole fails, not a few bad rows"
        )


def _search(total: int, fails: Callable[[int, int], str | None], q: Processor, epoch: int, limit: ErrorLimit, read: int) -> dict[int, str]:
    """Group testing over units ``0 .. total-1`` (all of which, together, fail): the
    bad units' indices with their reasons. ``fails(a, b)``: the cause if units
    ``a .. b-1`` fail together, else None.

    A part known to fail is halved and its left half tried: if that fails, the right
    half is tried in the next round (it may hold bad units too); if not, the right
    half must fail and is halved without a try. A unit is always tried alone (its
    own error is its reason); one that passes alone means rows fail only together."""
    bad: dict[int, str] = {}
    known: list[tuple[tuple[int, int], str | None]] = [((0, total), None)]  # failing; None: inferred, not tried
    unknown: list[tuple[int, int]] = []  # to try
    with ThreadPoolExecutor(CONCURRENT_TRIES, thread_name_prefix="falkirk-isolate") as pool:
        while known or unknown:
            tries, splits, inferred = list(unknown), [], []
            for (a, b), cause in known:
                if b - a > 1:
                    middle = (a + b) // 2
                    splits.append(((a, middle), (middle, b)))
                    tries.append((a, middle))
                elif cause is None:
                    inferred.append((a, b))
                    tries.append((a, b))
                else:
                    bad[a] = cause
            results = dict(zip(tries, pool.map(lambda ab: fails(*ab), tries), strict=True))
            known = [(part, results[part]) for part in unknown if results[part] is not None]
            unknown = []
            for part in inferred:
                if results[part] is None:
                    raise CannotIsolate(
                        f"processor {q.name!r} fails on epoch {epoch}'s rows only together, not on any one "
                        f"{'key' if q.spec.keyed else 'row'} alone (or not on the same rows each time: a function "
                        "that fails at random, or an input that changes from one read to the next)"
                    )
                known.append((part, results[part]))
            for left, right in splits:
                if results[left] is not None:
                    known.append((left, results[left]))
                    unknown.append(right)
                else:
                    known.append((right, None))
            # Each part known to fail holds a bad unit of its own: a bound from below.
            at_least = len(bad) + len(known)
            if not limit.allows(at_least, read):
                first = next(iter(bad.values()), None) or next((c for _, c in known if c), "")
                raise ErrorLimitExceeded(
                    f"processor {q.name!r} cannot process at least {at_least} of epoch {epoch}'s {read} rows "
                    f"(first: {first}): more than {limit} allows, which looks like a "
                    "systematic error, not a few bad rows. Fix the function or the input, or allow more with "
                    "Pipeline(error_limit=ErrorLimit(...)); then run again"
                )
    return bad


def unreadable_files(state: RunState, source: Processor, epoch: int, offsets: dict[str, Any] | None) -> PoisonRows | None:
    """The files of ``source``'s ``offsets`` of ``epoch`` that its reader fails on
    alone, as the :class:`PoisonRows` that sets them aside (unit ``file``); None when
    all of them read (the error is elsewhere) or they fail only together."""
    files = (offsets or {}).get("files") or []
    if not files:
        return None
    reader = source.spec.reader  # type: ignore[attr-defined]

    def fails(a: int, b: int) -> str | None:
        try:
            error = run_alone(reader.read(state.spark, {**(offsets or {}), "files": files[a:b]}))
        except Exception as exc:  # the reader may fail before any job (a check)
            error = exc
        if error is None:
            return None
        if isinstance(error, FalkirkError) or is_executor_loss(error) or no_space(error) is not None:
            raise error  # a file deleted or changed since it was planned, a lost executor, a full disk
        return cause_of(error) or first_line(error)

    if fails(0, len(files)) is None:
        return None
    try:
        bad = _search(len(files), fails, source, epoch, ErrorLimit(rows=len(files)), len(files))
    except CannotIsolate:
        return None
    reasons = {file_identity(files[i][0]): f"{files[i][0]}: unreadable: {cause}" for i, cause in bad.items()}
    logger.warning("source %r cannot read %d file(s) of epoch %d (%s); setting them aside", source.name, len(reasons), epoch, next(iter(reasons.values())))
    return PoisonRows(QuarantineRecord(source.name, epoch, QuarantineUnit.FILE, reasons), len(files))



#: Python exceptions that say a service or the network failed, not the data.
_TRANSIENT = re.compile(
    r"^([\w.]*\.)?(Connection\w*Error|TimeoutError|\w*Timeout\w*|BrokenPipeError|OSError|IOError|socket\.\w+|"
    r"OperationalError|InterfaceError|ServiceUnavailable\w*|HTTPError|URLError|MaxRetryError|NewConnectionError)\b"
)


def transient(cause: str) -> bool:
    """Whether ``cause`` (:func:`~falkirk.execution.diagnosis.cause_of`) names an
    error of a service or the network: never a reason to set rows aside."""
    return bool(_TRANSIENT.match(cause))


def _try(state: RunState, q: Processor, work: EpochWork, rows: DataFrame) -> str | None:
    """Run ``q``'s step of the epoch on ``rows`` alone (through a stand-in): the cause
    of the data error it fails with, or None."""
    stand_in = state.operators[q.name].trial()
    assert stand_in is not None
    error: BaseException | None = None
    try:
        tick = Tick(work.epoch)
        produced = stand_in.step(Step(work.epoch, [rows], offsets=work.offsets.get(q.name), time=tick.as_time, version=tick.ordinal, final=work.final))
        for out in produced.values():
            error = error or run_alone(out)
    except Exception as exc:  # a keyed step computes (materialises) inside step()
        error = exc
    finally:
        stand_in.end_trial()
    if error is None:
        return None
    if is_executor_loss(error) or as_storage_error(error) is not None or no_space(error) is not None:
        raise error
    cause = cause_of(error)
    if cause is None:
        raise error
    if transient(cause):
        raise CannotIsolate(f"processor {q.name!r} failed with {cause}, an error of a service or the network, not of the data")
    return cause


def _positions(segments: list[_Segment], a: int, b: int) -> Column:
    """Units ``a .. b-1`` as a condition on their positions."""
    conditions = []
    for s in segments:
        lo, hi = max(a, s.offset), min(b, s.offset + s.count)
        if lo < hi:
            conditions.append(F.col(POSITION).between(s.first + lo - s.offset, s.first + hi - s.offset - 1))
    if not conditions:
        return F.lit(False)
    found = conditions[0]
    for c in conditions[1:]:
        found = found | c
    return found


def _position(segments: list[_Segment], i: int) -> int:
    """The position of the ``i``-th unit."""
    for s in segments:
        if s.offset <= i < s.offset + s.count:
            return s.first + i - s.offset
    raise IndexError(i)
