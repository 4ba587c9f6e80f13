"""Checkpoint-chain kinds and the chain walk (falkirk.recovery.chain), without Spark:
the persisted strings round-trip exactly, anything else is refused, and the walk
picks the entries each kind of restore reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.exceptions import FalkirkError
from falkirk.recovery.chain import Base, Cec, ChainEntry, ChainKind, Delta, entries_to_restore
from falkirk.recovery.exceptions import ChainError, RecoveryError


@pytest.mark.parametrize(("text", "kind"), [("base", Base()), ("delta", Delta()), ("cec:12", Cec(12)), ("cec:0", Cec(0)), ("cec:1", Cec(1))])
def test_the_persisted_strings_round_trip(text: str, kind: ChainKind) -> None:
    assert ChainKind.parse(text) == kind
    assert str(kind) == text
    assert str(ChainKind.parse(text)) == text


def test_cec_carries_its_start_as_an_int() -> None:
    kind = ChainKind.parse("cec:12")
    assert isinstance(kind, Cec) and kind.start == 12 and isinstance(kind.start, int)


@given(st.integers(min_value=0, max_value=10**12))
def test_every_cec_start_round_trips(start: int) -> None:
    assert ChainKind.parse(str(Cec(start))) == Cec(start)
    assert str(Cec(start)) == f"cec:{start}"


def test_kinds_are_values() -> None:
    assert Base() == Base() and Delta() == Delta() and Cec(3) == Cec(3)
    assert Base() != Delta() and Cec(3) != Cec(4) and Cec(3) != Base()
    assert len({Base(), Base(), Delta(), Cec(3), Cec(3), Cec(4)}) == 4


@pytest.mark.parametrize(
    "text",
    ["", "Base", "BASE", " base", "base ", "full", "deltas", "cec:", "cec:x", "cec:-1", "cec:+5", "cec: 5", "cec:05", "cec:1x", "cec:1_000", "cec:١٢", "cec12", "CEC:12"],
)
def test_an_unknown_kind_is_refused_with_a_falkirk_error(text: str) -> None:
    with pytest.raises(ChainError, match="Falkirk writes only 'base', 'delta' and 'cec:<epoch>'") as caught:
        ChainKind.parse(text)
    assert isinstance(caught.value, RecoveryError) and isinstance(caught.value, FalkirkError)
    assert isinstance(caught.value, ValueError)  # as the errors it replaced were
    assert "new storage root" in str(caught.value)


def test_the_abstract_kind_has_no_string() -> None:
    with pytest.raises(NotImplementedError):
        str(ChainKind())


def test_an_entry_parses_its_kind() -> None:
    assert ChainEntry.parse((4, "cec:2", ["f"])) == ChainEntry(4, Cec(2), ["f"])
    with pytest.raises(ChainError):
        ChainEntry.parse((4, "snapshot", []))


# -- the walk ----------------------------------------------------------------------------


def chain(*entries: tuple[int, str]) -> list[tuple[int, str, list[str]]]:
    """A chain whose entry of version v holds the one file ``"<v>"``."""
    return [(v, kind, [str(v)]) for v, kind in entries]


def versions(read: list[ChainEntry[str]]) -> list[int]:
    return [e.version for e in read]


def test_base_and_the_deltas_after_it() -> None:
    c = chain((1, "base"), (2, "delta"), (3, "delta"), (4, "base"), (5, "delta"), (6, "delta"))
    assert versions(entries_to_restore(c, 6)) == [4, 5, 6]
    assert versions(entries_to_restore(c, 5)) == [4, 5]
    assert versions(entries_to_restore(c, 3)) == [1, 2, 3]
    assert entries_to_restore(c, 3)[0].kind == Base() and {e.kind for e in entries_to_restore(c, 3)[1:]} == {Delta()}
    assert [f for e in entries_to_restore(c, 6) for f in e.files] == ["4", "5", "6"]


def test_a_base_alone_is_the_only_entry() -> None:
    c = chain((1, "base"), (2, "delta"), (3, "base"))
    assert versions(entries_to_restore(c, 3)) == [3]
    assert versions(entries_to_restore(c, 1)) == [1]


def test_a_version_between_entries_is_restored_as_of_the_entry_before_it() -> None:
    c = chain((2, "base"), (5, "delta"), (9, "delta"), (12, "base"))
    assert versions(entries_to_restore(c, 4)) == [2]
    assert versions(entries_to_restore(c, 7)) == [2, 5]
    assert versions(entries_to_restore(c, 11)) == [2, 5, 9]
    assert versions(entries_to_restore(c, 100)) == [12]


def test_entries_after_the_version_are_never_read() -> None:
    c = chain((1, "base"), (2, "delta"), (3, "base"), (4, "delta"))
    assert versions(entries_to_restore(c, 2)) == [1, 2]


def test_a_missing_base_raises() -> None:
    with pytest.raises(ChainError, match="no base checkpoint at or before epoch 3"):
        entries_to_restore(chain((2, "delta"), (3, "delta"), (4, "base")), 3)
    with pytest.raises(ChainError, match="no base checkpoint at or before epoch 1"):
        entries_to_restore(chain((2, "base")), 1)  # only entries after the version
    with pytest.raises(ValueError, match="no base checkpoint"):  # what callers caught before
        entries_to_restore(chain((1, "delta")), 1)


def test_an_empty_chain_raises() -> None:
    with pytest.raises(ChainError, match="no base checkpoint at or before epoch 5"):
        entries_to_restore([], 5)


def test_cec_reads_the_entries_from_its_start() -> None:
    c = chain((3, "cec:1"), (4, "cec:2"), (5, "cec:2"), (6, "cec:5"), (7, "cec:5"))
    assert versions(entries_to_restore(c, 5)) == [3, 4, 5]  # T=2, but the entries before 3 are gone
    assert versions(entries_to_restore(c, 7)) == [5, 6, 7]
    assert versions(entries_to_restore(c, 6)) == [5, 6]
    assert versions(entries_to_restore(c, 4)) == [3, 4]
    assert entries_to_restore(c, 7)[-1].kind == Cec(5)


def test_cec_whose_start_is_its_own_epoch_reads_one_entry() -> None:
    c = chain((1, "cec:1"), (2, "cec:2"), (3, "cec:2"))
    assert versions(entries_to_restore(c, 2)) == [2]


def test_cec_needs_the_entry_of_the_version_itself() -> None:
    c = chain((1, "cec:1"), (2, "cec:1"), (4, "cec:2"))
    with pytest.raises(ChainError, match="no CEC log entry for epoch 3"):
        entries_to_restore(c, 3)


def test_mixed_kinds_are_refused() -> None:
    with pytest.raises(ChainError, match="mixes policies"):
        entries_to_restore(chain((1, "base"), (2, "cec:1"), (3, "delta")), 3)
    with pytest.raises(ChainError, match="mixes policies"):
        entries_to_restore(chain((1, "base"), (2, "cec:1")), 2)


def test_an_unknown_kind_anywhere_in_the_chain_is_refused() -> None:
    with pytest.raises(ChainError, match="'snapshot'"):
        entries_to_restore(chain((1, "base"), (2, "delta"), (9, "snapshot")), 2)
