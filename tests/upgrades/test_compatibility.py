"""The compatibility table of upgrades (issue 34), change by change: what an upgrade
carries over (and how the old rows become the new state) and what it refuses, with
the reason and what to do."""

from __future__ import annotations

from falkirk.graph.signatures import StateSignature
from falkirk.upgrades.compatibility import NewColumn, Refusal, StateMapping, map_state, widens

TOTALS = StateSignature.of(
    "aggregate", keys=["user"], aggregates={"n": ("count", None), "total": ("sum", "amount")},
    columns=[("user", "string"), ("n__count", "bigint"), ("total__sum", "bigint")],
)  # fmt: skip


def aggregate(**aggregates: tuple[str, str | None]) -> StateSignature:
    columns = [("user", "string"), *[(f"{out}__{func}", "bigint") for out, (func, _) in aggregates.items()]]
    return StateSignature.of("aggregate", keys=["user"], aggregates=aggregates, columns=columns)


def test_nothing_changed_is_carried_over_as_it_is() -> None:
    mapping = map_state("totals", "totals", TOTALS, TOTALS)
    assert isinstance(mapping, StateMapping) and mapping.unchanged and mapping.describe() == []


def test_a_new_aggregate_starts_null_or_from_its_default() -> None:
    new = aggregate(n=("count", None), total=("sum", "amount"), max_amount=("max", "amount"))
    mapping = map_state("totals", "totals", TOTALS, new)
    assert isinstance(mapping, StateMapping)
    assert mapping.added == (NewColumn("max_amount__max", "bigint", None, "aggregate 'max_amount'"),)
    assert mapping.kept == ("user", "n__count", "total__sum")
    assert mapping.describe() == ["aggregate 'max_amount' added (null for the keys held)"]
    given = map_state("totals", "totals", TOTALS, new, defaults={"max_amount": 0})
    assert isinstance(given, StateMapping) and given.added == (NewColumn("max_amount__max", "bigint", 0, "aggregate 'max_amount'"),)


def test_a_widened_column_is_cast_and_a_narrowed_one_refused() -> None:
    old = StateSignature.of("stateful", keys=["k"], columns=[("k", "string"), ("count", "int"), ("score", "float")])
    wider = StateSignature.of("stateful", keys=["k"], columns=[("k", "string"), ("count", "bigint"), ("score", "double")])
    mapping = map_state("s", "s", old, wider)
    assert isinstance(mapping, StateMapping) and dict(mapping.casts) == {"count": "bigint", "score": "double"}
    refused = map_state("s", "s", wider, old)
    assert isinstance(refused, Refusal) and "state column 'count' was bigint, is now int: only widening" in str(refused)
    assert widens("tinyint", "bigint") and not widens("double", "float") and not widens("int", "string")


def test_a_removed_column_needs_drop() -> None:
    fewer = aggregate(n=("count", None))
    refused = map_state("totals", "totals", TOTALS, fewer)
    assert isinstance(refused, Refusal) and "say so with drop=['totals.total']" in str(refused)
    dropped = map_state("totals", "totals", TOTALS, fewer, drop=frozenset({"totals.total"}))
    assert isinstance(dropped, StateMapping) and dropped.dropped == ("total__sum",)


def test_keys_functions_settings_and_kinds_are_refused_with_what_to_do() -> None:
    keys = StateSignature.of("aggregate", keys=["user", "day"], aggregates={"n": ("count", None)}, columns=[("user", "string"), ("day", "string"), ("n__count", "bigint")])
    said = str(map_state("totals", "totals", aggregate(n=("count", None)), keys))
    assert "key columns were ['user'], are now ['user', 'day']" in said and "give the processor another name" in said
    function = str(map_state("totals", "totals", TOTALS, aggregate(n=("count", None), total=("max", "amount"))))
    assert "aggregate 'total' was sum of 'amount', is now max of 'amount'" in function and "add the new one under another name" in function
    kind = map_state("totals", "totals", TOTALS, StateSignature.of("stateful", keys=["user"]))
    assert isinstance(kind, Refusal) and "kind was aggregate, is now stateful" in str(kind)


def test_a_windows_watermark_delay_may_change_its_shape_not() -> None:
    def window(shape: str, delay: str) -> StateSignature:
        return StateSignature.of("window", keys=["k"], settings={"shape": shape, "watermark_delay": delay, "time": "ts"})

    assert isinstance(map_state("w", "w", window("tumbling 10", "5"), window("tumbling 10", "60")), StateMapping)
    shape = map_state("w", "w", window("tumbling 10", "5"), window("tumbling 20", "5"))
    assert isinstance(shape, Refusal) and "setting 'shape' was tumbling 10, is now tumbling 20" in str(shape)


def test_a_renamed_processor_says_so() -> None:
    mapping = map_state("sums", "totals", TOTALS, TOTALS)
    assert isinstance(mapping, StateMapping) and not mapping.unchanged and mapping.describe() == ["renamed from 'totals'"]


def test_a_changed_setting_is_in_the_history() -> None:
    def window(delay: str, ttl: int | None) -> StateSignature:
        settings = {"shape": "tumbling 10", "watermark_delay": delay, "time": "ts"} | ({"ttl": ttl} if ttl else {})
        return StateSignature.of("window", keys=["k"], settings=settings)

    mapping = map_state("w", "w", window("5", 10), window("60", 2))
    assert isinstance(mapping, StateMapping) and mapping.describe() == ["ttl 10 -> 2", "watermark_delay 5 -> 60"]
    given = map_state("w", "w", window("5", None), window("5", 4))
    assert isinstance(given, StateMapping) and given.describe() == ["ttl none -> 4"]
