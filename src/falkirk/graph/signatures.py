"""What a keyed processor's stored state means: its :class:`StateSignature`.

A keyed processor's checkpoints hold rows laid out for the pipeline that wrote
them: partial aggregates named after their output column, a user function's state
columns, a join's rows of each side. Read by a pipeline that changed the processor,
the same rows mean something else - a sum of ``x`` continued as a sum of ``y``, a
``max`` over only the epochs after the restart, a new aggregate over only those
epochs - and nothing fails. So every keyed operator says what its state depends on
(:meth:`falkirk.operators.Operator.state_signature`), the engine records it with the
pipeline's description in the storage root, and a restart whose signature differs
from the recorded one is refused before any work, naming what changed
(:mod:`falkirk.execution.changes`).

A signature holds what fixes the meaning of the stored rows and nothing else: the
key columns, the functions computed into the state with their input columns, the
state's columns with their types, and the settings its rows depend on (a join's
retention, a window's shape). A user function's code is not part of it: a fixed bug
must not make a root unusable. Pure Python (types as Spark's ``simpleString``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from falkirk.graph.exceptions import GraphError

#: Version of :meth:`StateSignature.to_json`'s layout.
FORMAT = 1


@dataclass(frozen=True)
class Computed:
    """One function a processor computes into its state: ``output`` is
    ``function`` of ``column`` (None: of the rows, for a count)."""

    output: str
    function: str
    column: str | None = None

    def describe(self) -> str:
        return f"{self.function} of {self.column!r}" if self.column is not None else f"{self.function} of rows"


@dataclass(frozen=True)
class StateSignature:
    """What the stored state of one keyed processor means (see the module docstring).

    ``columns`` and ``settings`` are (name, value) pairs: a column's type as Spark's
    ``simpleString``, a setting's value as text. Order does not matter: state is
    read back by column name."""

    kind: str
    keys: tuple[str, ...] = ()
    functions: tuple[Computed, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    settings: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise GraphError(f"a state signature needs the processor's kind, got {self.kind!r}")
        for what, pairs in (("columns", self.columns), ("settings", self.settings)):
            names = [name for name, _ in pairs]
            if len(set(names)) != len(names):
                raise GraphError(f"state signature of a {self.kind}: {what} {names} repeat a name")

    @classmethod
    def of(
        cls,
        kind: str,
        *,
        keys: Sequence[str] = (),
        aggregates: Mapping[str, tuple[str, str | None]] | None = None,
        columns: Sequence[tuple[str, str]] = (),
        settings: Mapping[str, object] | None = None,
    ) -> StateSignature:
        """A signature from an operator's parameters: ``aggregates`` as specs give
        them (``{"out": (function, column)}``), ``settings`` with any values
        (kept as text)."""
        return cls(
            kind,
            tuple(keys),
            tuple(Computed(out, func, col) for out, (func, col) in (aggregates or {}).items()),
            tuple(columns),
            tuple((name, str(value)) for name, value in (settings or {}).items()),
        )

    # -- recorded as JSON ------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "keys": list(self.keys),
            "functions": [[f.output, f.function, f.column] for f in self.functions],
            "columns": [list(c) for c in self.columns],
            "settings": [list(s) for s in self.settings],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateSignature:
        """The signature :meth:`to_json` gave (:class:`GraphError` if it is not one)."""
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            return cls(
                str(data["kind"]),
                tuple(str(k) for k in data["keys"]),
                tuple(Computed(str(o), str(f), None if c is None else str(c)) for o, f, c in data["functions"]),
                tuple((str(n), str(t)) for n, t in data["columns"]),
                tuple((str(n), str(v)) for n, v in data["settings"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GraphError(
                f"the recorded state signature {data!r} cannot be read ({exc}); it was written by another "
                "version of Falkirk or damaged: run the pipeline with the Falkirk that wrote it, or start a new "
                "storage root"
            ) from exc

    # -- comparing -------------------------------------------------------------------

    def differences(self, old: StateSignature) -> list[str]:
        """What changed from ``old`` (the recorded signature) to this one, one phrase
        per change, e.g. ``aggregate 'sx' was sum of 'x', is now sum of 'y'``;
        empty when the stored state means the same to both. The state's columns
        are compared only when keys and functions are the same (they follow from
        them otherwise, and would only repeat the change)."""
        if old.kind != self.kind:
            return [f"kind was {old.kind}, is now {self.kind}"]
        found: list[str] = []
        if old.keys != self.keys:
            found.append(f"key columns were {list(old.keys)}, are now {list(self.keys)}")
        found += _changes("aggregate", _by_name(old.functions), _by_name(self.functions), Computed.describe)
        found += _changes("setting", dict(old.settings), dict(self.settings), str)
        if not found:
            found += _changes("state column", dict(old.columns), dict(self.columns), str)
        return found


def _by_name(functions: Sequence[Computed]) -> dict[str, Computed]:
    return {f.output: f for f in functions}


def _changes(what: str, old: Mapping[str, Any], new: Mapping[str, Any], show: Any) -> list[str]:
    """Phrases for the entries of ``new`` that are new or differ from ``old``'s, then
    for those removed (in the order each mapping has them)."""
    found = []
    for name, value in new.items():
        if name not in old:
            found.append(f"{what} {name!r} ({show(value)}) is new")
        elif old[name] != value:
            found.append(f"{what} {name!r} was {show(old[name])}, is now {show(value)}")
    found += [f"{what} {name!r} ({show(value)}) was removed" for name, value in old.items() if name not in new]
    return found
