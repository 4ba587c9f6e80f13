"""Which changes of a keyed processor's state an upgrade can carry over, and how.

An upgrade (``Engine(pipeline, storage, upgrade=True)``) starts a changed pipeline
from a savepoint of the old one. Each keyed processor of the new pipeline is matched
by name (after ``renamed=``) with the savepoint's, and its new
:class:`~falkirk.graph.signatures.StateSignature` is compared with the one the
savepoint recorded. Every difference is either **carried over** by a
:class:`StateMapping` - the old rows, column by column, become the new state - or
**refused** with a reason naming what to do. The table (also in the docs' upgrade
guide):

=====================================================  ==================================
change                                                 at the upgrade
=====================================================  ==================================
a new aggregate, a new column of a ``stateful`` state  allowed: null for the keys held
                                                       (or ``defaults=``), then computed
                                                       over the rows read from then on
a column widened (int to bigint, float to double, ..)  allowed: the stored values cast
a window's ``watermark_delay``                         allowed
the ``ttl`` of an aggregate, ``stateful`` or window    allowed: keys older than the new
                                                       one leave at the next epoch
an aggregate or state column removed                   only with ``drop=["proc.column"]``
the key columns                                        refused
an existing aggregate's function or input column       refused
a window's shape, time column, mode or function;       refused
a join's ``how`` or ``retain``; a buffer's ``retain``
another kind of processor under the same name          refused
=====================================================  ==================================

Pure Python: nothing here touches Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from falkirk.graph.signatures import StateSignature

#: Settings an upgrade may change (by processor kind): the state's rows mean the same.
CHANGEABLE_SETTINGS: dict[str, frozenset[str]] = {
    "window": frozenset({"watermark_delay", "ttl"}),
    "aggregate": frozenset({"ttl"}),  # keys older than a new ttl leave at the upgrade's first epoch
    "stateful": frozenset({"ttl"}),
}

#: Integer and floating-point types, narrowest first: a column may move right.
WIDENING: tuple[tuple[str, ...], ...] = (("tinyint", "smallint", "int", "bigint"), ("float", "double"))


def widens(old: str, new: str) -> bool:
    """Whether a column of Spark type ``old`` can be read as ``new`` without loss."""
    for ladder in WIDENING:
        if old in ladder and new in ladder:
            return ladder.index(old) <= ladder.index(new)
    return False


@dataclass(frozen=True)
class NewColumn:
    """A state column the old state does not have: ``default`` (None: null) for
    every key the old state holds."""

    name: str
    dtype: str
    default: object = None
    #: What it is, for people (``aggregate 'max_amount'``; empty: the column).
    label: str = ""


@dataclass(frozen=True)
class StateMapping:
    """How one processor's old state rows become its new state: the columns kept
    (cast to ``casts``' type where widened), the columns added, the columns dropped.
    ``unchanged`` when the rows stay as they are."""

    processor: str
    old_name: str
    kept: tuple[str, ...] = ()
    casts: Mapping[str, str] = field(default_factory=dict)
    added: tuple[NewColumn, ...] = ()
    dropped: tuple[str, ...] = ()
    #: The settings that changed (``ttl``, ``watermark_delay``): name -> (old, new).
    settings: Mapping[str, tuple[object, object]] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not (self.casts or self.added or self.dropped) and self.old_name == self.processor

    def describe(self) -> list[str]:
        """One phrase per change, for the version history and ``falkirk status``."""
        said = [f"renamed from {self.old_name!r}"] if self.old_name != self.processor else []
        labels = dict.fromkeys(c.label or f"column {c.name!r}" for c in self.added)  # (an average adds two partials)
        defaults = {c.label or f"column {c.name!r}": c.default for c in self.added}
        said += [f"{label} added ({'null' if defaults[label] is None else repr(defaults[label])} for the keys held)" for label in labels]
        said += [f"column {name!r} widened to {dtype}" for name, dtype in self.casts.items()]
        said += [f"column {name!r} dropped" for name in self.dropped]
        said += [f"{name} {_setting_text(was)} -> {_setting_text(now)}" for name, (was, now) in self.settings.items()]
        return said


def _setting_text(value: object) -> str:
    return "none" if value is None else str(value)


@dataclass(frozen=True)
class Refusal:
    """Why one processor's state cannot be carried over, and what to do."""

    processor: str
    kind: str
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return f"processor {self.processor!r} ({self.kind}): {'; '.join(self.reasons)}"


def map_state(
    processor: str,
    old_name: str,
    old: StateSignature,
    new: StateSignature,
    *,
    drop: frozenset[str] = frozenset(),
    defaults: Mapping[str, object] | None = None,
) -> StateMapping | Refusal:
    """The mapping of ``old_name``'s state (signature ``old``, as the savepoint
    recorded it) onto ``processor``'s (signature ``new``), or why there is none.
    ``drop``: names ``"processor.column"`` (the new processor's name) whose removal
    the user asked for; ``defaults``: a value per new state column (or per new
    aggregate: its stored partial)."""
    defaults = dict(defaults or {})
    if old.kind != new.kind:
        return Refusal(processor, new.kind, (f"kind was {old.kind}, is now {new.kind}: give the new processor another name",))
    reasons: list[str] = []
    if old.keys != new.keys:
        reasons.append(
            f"key columns were {list(old.keys)}, are now {list(new.keys)}: the state is partitioned and looked up by "
            "its keys; give the processor another name (it starts empty, or from initial_state=)"
        )
    old_functions = {f.output: f for f in old.functions}
    changed_functions: set[str] = set()  # (their partial columns' changes follow from it: not said again)
    for f in new.functions:
        before = old_functions.get(f.output)
        if before is not None and before != f:
            changed_functions.add(f.output)
            reasons.append(
                f"aggregate {f.output!r} was {before.describe()}, is now {f.describe()}: its stored value means the "
                "old one; add the new one under another name"
            )
    changeable = CHANGEABLE_SETTINGS.get(new.kind, frozenset())
    old_settings, new_settings = dict(old.settings), dict(new.settings)
    for name in sorted(set(old_settings) | set(new_settings)):
        if old_settings.get(name) != new_settings.get(name) and name not in changeable:
            reasons.append(
                f"setting {name!r} was {old_settings.get(name)}, is now {new_settings.get(name)}: the stored state depends "
                "on it; give the processor another name (it starts empty)"
            )
    old_columns, new_columns = dict(old.columns), dict(new.columns)
    kept, casts, added, dropped = [], {}, [], []
    for name, dtype in new_columns.items():
        if name not in old_columns:
            output = _output_of(name, new)
            label = f"aggregate {output!r}" if output != name else ""
            added.append(NewColumn(name, dtype, defaults.get(name, defaults.get(output)), label))
        elif old_columns[name] == dtype:
            kept.append(name)
        elif widens(old_columns[name], dtype):
            kept.append(name)
            casts[name] = dtype
        else:
            reasons.append(
                f"state column {name!r} was {old_columns[name]}, is now {dtype}: only widening (e.g. int to bigint, "
                "float to double) keeps the stored values"
            )
    for name in old_columns:
        if name in new_columns:
            continue
        asked = {f"{processor}.{name}", f"{processor}.{_output_of(name, old)}"}
        if _output_of(name, old) in changed_functions:
            continue
        if asked & drop:
            dropped.append(name)
        else:
            what = _output_of(name, old)
            reasons.append(
                f"state column {name!r} was removed: its stored values would be lost; say so with "
                f"drop=[{processor + '.' + what!r}]"
            )
    if reasons:
        return Refusal(processor, new.kind, tuple(reasons))
    settings = {n: (old_settings.get(n), new_settings.get(n)) for n in sorted(set(old_settings) | set(new_settings)) if old_settings.get(n) != new_settings.get(n)}
    return StateMapping(processor, old_name, tuple(kept), casts, tuple(added), tuple(dropped), settings)


def _output_of(column: str, signature: StateSignature) -> str:
    """The aggregate a stored partial column belongs to (``total__sum`` -> ``total``),
    else the column itself."""
    for f in signature.functions:
        if column.startswith(f"{f.output}__"):
            return f.output
    return column
