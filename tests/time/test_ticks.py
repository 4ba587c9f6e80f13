"""Ticks: a processor's position as one totally ordered time (an epoch, an iteration of
a loop, a record of a sequence-number region). Properties: ticks and frontiers convert
both ways; ordinals order ticks as the lexicographic order does;
``previous`` is the greatest tick below; message times are what the projections fix
(never less: a D̄ built from them never claims less was discarded than φ); a tick is a
value that never compares with a raw int or tuple."""

from __future__ import annotations

import pickle

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
from falkirk.time.ticks import LOOP, SEQ_BLOCK, SEQ_LABEL, Tick

E = EpochDomain()
loop_ticks = st.builds(Tick, st.integers(1, 50), st.one_of(st.integers(0, 60), st.just(INF)))
epoch_ticks = st.builds(Tick, st.integers(0, 50))


@given(loop_ticks)
def test_a_loop_tick_and_its_frontier_convert_both_ways(t: Tick) -> None:
    assert Tick.of_frontier(t.frontier_in(LOOP)) == t


@given(epoch_ticks)
def test_an_epoch_tick_and_its_frontier_convert_both_ways(t: Tick) -> None:
    assert Tick.of_frontier(t.frontier_in(E)) == t


@given(st.one_of(loop_ticks, epoch_ticks))
def test_a_tick_survives_json_pickle_and_its_raw_time(t: Tick) -> None:
    assert Tick.from_json(t.to_json()) == t and pickle.loads(pickle.dumps(t)) == t
    assert Tick.of_time(t.as_time) == t  # what operators and the run report see, and back
    assert hash(Tick.from_json(t.to_json())) == hash(t)


def test_the_json_form_is_the_persisted_one() -> None:
    """``tick_json`` as it was before ticks were values: metadata written by older
    versions reads back unchanged."""
    assert Tick(3).to_json() == 3
    assert Tick(3, 5).to_json() == [3, 5]
    assert Tick(3, INF).to_json() == [3, "inf"]
    assert str(Tick(3, INF)) == "(3, inf)" and str(Tick(4)) == "4"  # as the logs print it


def test_start_ticks_are_the_empty_frontier() -> None:
    assert Tick.start(LOOP).frontier_in(LOOP) == Frontier.empty(LOOP)
    assert Tick.start(E).frontier_in(E) == Frontier.empty(E)
    assert Tick.of_frontier(Frontier.empty(LOOP)) == Tick(0, INF) and Tick(0, INF).ordinal == 0


@given(loop_ticks, loop_ticks)
def test_ordinals_follow_the_lexicographic_order(a: Tick, b: Tick) -> None:
    assert (a.ordinal < b.ordinal) == (a.frontier_in(LOOP) < b.frontier_in(LOOP)) == (a < b)
    assert (a.ordinal == b.ordinal) == (a == b)
    assert sorted([a, b]) == sorted([a, b], key=lambda t: t.ordinal)


@pytest.mark.parametrize(
    "tick, raw", [(Tick(3), 3), (Tick(3, INF), (3, INF)), (Tick(3, 0), (3, 0)), (Tick(3), 3.0), (Tick(3), None)]
)
def test_a_tick_never_compares_with_a_raw_time(tick: Tick, raw: object) -> None:
    """A comparison or a lookup that mixes a tick with its raw form is a bug that
    decides what a rollback keeps: it raises instead of answering False."""
    with pytest.raises(TypeError):
        _ = tick == raw
    with pytest.raises(TypeError):
        _ = tick < raw  # type: ignore[operator]
    if raw is not None:
        with pytest.raises(TypeError):
            _ = raw in {tick: "files"}
        with pytest.raises(TypeError):
            _ = tick in {raw: "files"}


def test_ticks_of_different_shapes_do_not_compare() -> None:
    with pytest.raises(TypeError):
        _ = Tick(3) < Tick(3, INF)
    with pytest.raises(TypeError):
        _ = Tick(3) == Tick(3, 0)


@pytest.mark.parametrize("epoch, step", [(-1, None), (1, -1), (1, 1.5), (True, None), ("1", None)])
def test_a_malformed_tick_is_refused(epoch: object, step: object) -> None:
    with pytest.raises(TimeError):
        Tick(epoch, step)  # type: ignore[arg-type]


@given(loop_ticks)
def test_epochs_done_is_what_the_loop_exit_keeps(t: Tick) -> None:
    exit_ = projection_for("loop_exit", LOOP, E)
    kept = exit_(t.frontier_in(LOOP))
    if t.epochs_done == 0:  # ↓0 holds only epoch 0, which never has events: nothing
        assert kept <= Frontier.down(E, [0])
    else:
        assert Tick(t.epochs_done).frontier_in(E) == kept
    assert Tick.whole(t.epoch, LOOP).epochs_done == t.epoch


@given(st.builds(Tick, st.integers(1, 50), st.integers(0, 60)))
def test_previous_is_the_greatest_tick_below(t: Tick) -> None:
    before = t.previous()
    if before is None:
        assert t == Tick(1, 0)
        return
    assert before.ordinal < t.ordinal and before < t
    below = before.frontier_in(LOOP)
    assert t.frontier_in(LOOP) > below
    step = int(t.step or 0)
    between = [Tick(t.epoch, step - 1)] if step > 0 else []
    between += [Tick.all_of(t.epoch - 1)] if t.epoch > 1 else []
    assert not any(below < u.frontier_in(LOOP) < t.frontier_in(LOOP) for u in between)


def test_previous_of_an_epoch_and_of_a_whole_epoch() -> None:
    assert Tick(3).previous() == Tick(2) and Tick(1).previous() is None
    with pytest.raises(TimeError):
        Tick(3, INF).previous()


@given(loop_ticks, st.sampled_from(["identity", "feedback"]))
def test_a_message_time_within_a_loop_is_at_least_what_phi_fixes(t: Tick, kind: str) -> None:
    phi = projection_for(kind, LOOP, LOOP)
    assert phi(t.frontier_in(LOOP)) <= phi.latest_message(t).frontier_in(LOOP)


@given(loop_ticks)
def test_the_exit_message_time_covers_every_iteration_sent(t: Tick) -> None:
    """Out of a loop, (e, i) may have sent rows of epoch e: D̄ must hold e, though
    φ(↓(e, i)) holds only the epochs before e (the paper's D̄ = φ shortcut would lose
    those rows)."""
    exit_ = projection_for("loop_exit", LOOP, E)
    assert exit_.latest_message(t) == Tick(t.epoch)
    assert exit_(t.frontier_in(LOOP)) <= exit_.latest_message(t).frontier_in(E)


@given(st.integers(1, 50))
def test_into_a_loop_an_epoch_becomes_its_first_iteration(e: int) -> None:
    entry = projection_for("loop_entry", E, LOOP)
    assert entry.latest_message(Tick(e)) == Tick(e, 0)
    assert Tick(e, 0).frontier_in(LOOP) <= entry(Tick(e).frontier_in(E))


def test_a_projection_refuses_a_tick_of_the_wrong_shape() -> None:
    """Dispatch is by the projection's type; a tick from the wrong domain is refused."""
    with pytest.raises(TimeError):
        projection_for("loop_exit", LOOP, E).latest_message(Tick(3))
    with pytest.raises(TimeError):
        projection_for("feedback", LOOP, LOOP).latest_message(Tick(3))
    with pytest.raises(TimeError):
        EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK).latest_message(Tick(3, 1))
    with pytest.raises(TimeError):
        projection_for("empty", E, E).latest_message(Tick(3))


# -- sequence-number regions -------------------------------------------------------------

seq_ticks = st.builds(Tick, st.integers(1, 50), st.one_of(st.integers(1, SEQ_BLOCK - 2), st.just(INF)))
S = SeqDomain()


@given(seq_ticks)
def test_a_region_tick_and_its_frontier_convert_both_ways(t: Tick) -> None:
    f = t.frontier_in(S)
    assert f.maxima == ((SEQ_LABEL, t.seq_number),)
    assert Tick.of_frontier(f) == t


@given(seq_ticks, seq_ticks)
def test_sequence_numbers_and_ordinals_follow_the_ticks(a: Tick, b: Tick) -> None:
    assert (a < b) == (a.seq_number < b.seq_number) == (a.ordinal < b.ordinal)
    assert a.frontier_in(S).contains(b.time_in(S)) == (b <= a)


@given(st.integers(1, 50), st.integers(1, 1000))
def test_epoch_e_owns_its_block_of_numbers(e: int, k: int) -> None:
    """Section 3.2's translator: all of epoch e's k records are in φ(↓e), none in φ(↓(e-1))."""
    into = EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK)
    record = (SEQ_LABEL, Tick(e, k).seq_number)
    assert into(Frontier.down(E, [e])).contains(record)
    assert not into(Tick(e - 1).frontier_in(E)).contains(record)
    assert Tick.of_seq_number(Tick(e, k).seq_number) == Tick(e, k)
    assert Tick.of_seq_number(e * SEQ_BLOCK) == Tick(e, INF)


@given(seq_ticks)
def test_out_of_a_region_only_whole_epochs_count(t: Tick) -> None:
    """The translator back: φ(↓(seq, n)) holds the epochs whole at n, and is exactly what
    a regroup at tick t has sent (its latest message), so its D̄ is never less than φ."""
    out = SeqToEpoch(SEQ_LABEL, block=SEQ_BLOCK)
    fixed = out(t.frontier_in(S))
    assert fixed == out.latest_message(t).frontier_in(E)
    assert fixed == Tick(t.epochs_done).frontier_in(E)


@given(st.integers(0, 50))
def test_into_a_region_an_epoch_is_all_its_numbers(e: int) -> None:
    into = EpochToSeq(SEQ_LABEL, block=SEQ_BLOCK)
    assert into.latest_message(Tick(e)).frontier_in(S) == into(Tick(e).frontier_in(E))


@given(seq_ticks, seq_ticks)
def test_region_projections_are_monotone(a: Tick, b: Tick) -> None:
    lo, hi = sorted([a, b])
    out = SeqToEpoch(SEQ_LABEL, block=SEQ_BLOCK)
    assert out(lo.frontier_in(S)).issubset(out(hi.frontier_in(S)))
    assert lo.frontier_in(S).issubset(hi.frontier_in(S))


def test_a_region_tick_outside_the_block_is_refused() -> None:
    with pytest.raises(TimeError):
        _ = Tick(1, SEQ_BLOCK - 1).seq_number
    with pytest.raises(TimeError):
        Tick.of_frontier(Frontier.down(S, [["other", 3]]))
