"""Ticks: a processor's position as one totally ordered time (an epoch, an iteration of
a loop, a record of a sequence-number region). Properties: ticks and frontiers convert
both ways; ordinals order ticks as the lexicographic order does;
``previous`` is the greatest tick below; message times are what the projections fix
(never less: a D̄ built from them never claims less was discarded than φ)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falkirk.time import (
    INF,
    EpochDomain,
    EpochToSeq,
    Frontier,
    SeqDomain,
    SeqToEpoch,
    TimeError,
    projection_for,
)
from falkirk.time.ticks import (
    LOOP,
    SEQ_BLOCK,
    SEQ_LABEL,
    epochs_done,
    message_time,
    ordinal,
    previous,
    seq_number,
    seq_tick,
    start_tick,
    tick_frontier,
    tick_of,
    tick_time,
    whole,
)

E = EpochDomain()
loop_ticks = st.tuples(st.integers(1, 50), st.one_of(st.integers(0, 60), st.just(INF)))
epoch_ticks = st.integers(0, 50)


@given(loop_ticks)
def test_a_loop_tick_and_its_frontier_convert_both_ways(t: tuple[int, object]) -> None:
    assert tick_of(tick_frontier(LOOP, t)) == t


@given(epoch_ticks)
def test_an_epoch_tick_and_its_frontier_convert_both_ways(t: int) -> None:
    assert tick_of(tick_frontier(E, t)) == t


def test_start_ticks_are_the_empty_frontier() -> None:
    assert tick_frontier(LOOP, start_tick(LOOP)) == Frontier.empty(LOOP)
    assert tick_frontier(E, start_tick(E)) == Frontier.empty(E)
    assert tick_of(Frontier.empty(LOOP)) == (0, INF) and ordinal((0, INF)) == 0


@given(loop_ticks, loop_ticks)
def test_ordinals_follow_the_lexicographic_order(a: tuple[int, object], b: tuple[int, object]) -> None:
    assert (ordinal(a) < ordinal(b)) == (tick_frontier(LOOP, a) < tick_frontier(LOOP, b))
    assert (ordinal(a) == ordinal(b)) == (a == b)


@given(loop_ticks)
def test_epochs_done_is_what_the_loop_exit_keeps(t: tuple[int, object]) -> None:
    exit_ = projection_for("loop_exit", LOOP, E)
    kept = exit_(tick_frontier(LOOP, t))
    if epochs_done(t) == 0:  # ↓0 holds only epoch 0, which never has events: nothing
        assert kept <= Frontier.down(E, [0])
    else:
        assert tick_frontier(E, epochs_done(t)) == kept
    assert epochs_done(whole(t[0], LOOP)) == t[0]


@given(st.tuples(st.integers(1, 50), st.integers(0, 60)))
def test_previous_is_the_greatest_tick_below(t: tuple[int, int]) -> None:
    before = previous(t)
    if before is None:
        assert t == (1, 0)
        return
    assert ordinal(before) < ordinal(t)
    below = tick_frontier(LOOP, before)
    assert tick_frontier(LOOP, t) > below
    assert not any(below < tick_frontier(LOOP, u) < tick_frontier(LOOP, t) for u in [(t[0], t[1] - 1), (t[0] - 1, INF)] if u[0] > 0 and (u[1] == INF or u[1] >= 0))


@given(loop_ticks, st.sampled_from(["identity", "feedback"]))
def test_a_message_time_within_a_loop_is_at_least_what_phi_fixes(t: tuple[int, object], kind: str) -> None:
    phi = projection_for(kind, LOOP, LOOP)
    assert phi(tick_frontier(LOOP, t)) <= tick_frontier(LOOP, message_time(kind, t))


@given(loop_ticks)
def test_the_exit_message_time_covers_every_iteration_sent(t: tuple[int, object]) -> None:
    """Out of a loop, (e, i) may have sent rows of epoch e: D̄ must hold e, though
    φ(↓(e, i)) holds only the epochs before e (the paper's D̄ = φ shortcut would lose
    those rows)."""
    assert message_time("loop_exit", t) == t[0]
    exit_ = projection_for("loop_exit", LOOP, E)
    assert exit_(tick_frontier(LOOP, t)) <= tick_frontier(E, message_time("loop_exit", t))


@given(st.integers(1, 50))
def test_into_a_loop_an_epoch_becomes_its_first_iteration(e: int) -> None:
    assert message_time("loop_entry", e) == (e, 0)
    entry = projection_for("loop_entry", E, LOOP)
    assert tick_frontier(LOOP, (e, 0)) <= entry(tick_frontier(E, e))


# -- sequence-number regions -------------------------------------------------------------

seq_ticks = st.tuples(st.integers(1, 50), st.one_of(st.integers(1, SEQ_BLOCK - 2), st.just(INF)))
S = SeqDomain()


@given(seq_ticks)
def test_a_region_tick_and_its_frontier_convert_both_ways(t: tuple[int, object]) -> None:
    f = tick_frontier(S, t)
    assert f.maxima == ((SEQ_LABEL, seq_number(t)),)
    assert tick_of(f) == t


@given(seq_ticks, seq_ticks)
def test_sequence_numbers_and_ordinals_follow_the_ticks(a: tuple[int, object], b: tuple[int, object]) -> None:
    assert (a < b) == (seq_number(a) < seq_number(b)) == (ordinal(a) < ordinal(b))  # type: ignore[operator]
    assert tick_frontier(S, a).contains(tick_time(S, b)) == (b <= a)  # type: ignore[operator]


@given(st.integers(1, 50), st.integers(1, 1000))
def test_epoch_e_owns_its_block_of_numbers(e: int, k: int) -> None:
    """Section 3.2's translator: all of epoch e's k records are in φ(↓e), none in φ(↓(e-1))."""
    into = EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK)
    record = (SEQ_LABEL, seq_number((e, k)))
    assert into(Frontier.down(E, [e])).contains(record)
    assert not into(tick_frontier(E, e - 1)).contains(record)
    assert seq_tick(seq_number((e, k))) == (e, k) and seq_tick(e * SEQ_BLOCK) == (e, INF)


@given(seq_ticks)
def test_out_of_a_region_only_whole_epochs_count(t: tuple[int, object]) -> None:
    """The translator back: φ(↓(seq, n)) holds the epochs whole at n, and is exactly what
    a regroup at tick t has sent (message_time), so its D̄ is never less than φ."""
    out = SeqToEpoch(SEQ_LABEL, block=SEQ_BLOCK)
    fixed = out(tick_frontier(S, t))
    assert fixed == tick_frontier(E, message_time("seq_to_epoch", t))
    assert fixed == tick_frontier(E, epochs_done(t))


@given(st.integers(0, 50))
def test_into_a_region_an_epoch_is_all_its_numbers(e: int) -> None:
    into = EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK)
    assert tick_frontier(S, message_time("epoch_to_seq", e)) == into(tick_frontier(E, e))


@given(seq_ticks, seq_ticks)
def test_region_projections_are_monotone(a: tuple[int, object], b: tuple[int, object]) -> None:
    lo, hi = sorted([a, b])  # type: ignore[type-var]
    out = SeqToEpoch(SEQ_LABEL, block=SEQ_BLOCK)
    assert out(tick_frontier(S, lo)).issubset(out(tick_frontier(S, hi)))
    assert tick_frontier(S, lo).issubset(tick_frontier(S, hi))


def test_a_region_tick_outside_the_block_is_refused() -> None:
    with pytest.raises(TimeError):
        seq_number((1, SEQ_BLOCK - 1))
    with pytest.raises(TimeError):
        tick_of(Frontier.down(S, [["other", 3]]))
