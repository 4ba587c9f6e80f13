"""A restart's recovery in plain words (issue 33: the paper's notation only, before)."""

from __future__ import annotations

from falkirk.coordinator.story import recovery_in_words


def test_keyed_processors_name_their_checkpoints_and_the_epochs_computed_again() -> None:
    frontier = {"events": 7, "parse": 7, "user_totals": 5, "sessions": 6, "out": 7}
    said = recovery_in_words(frontier, {"user_totals", "sessions"}, 7, {"by_user.out>user_totals": [6, 7]})
    assert said == (
        "sessions restarts from its checkpoint at epoch 6; user_totals restarts from its checkpoint at epoch 5, "
        "so epochs 6-7 are computed again (by_user.out>user_totals re-sent from its log); nothing committed is written twice"
    )


def test_the_plain_cases() -> None:
    assert recovery_in_words({"a": 0}, set(), None, {}) == "nothing was committed before: the pipeline starts at its first epoch"
    assert recovery_in_words({"a": 4, "b": 4}, {"b"}, 4, {}) == "every processor stands at the last committed epoch (4): nothing is computed again"
    assert recovery_in_words({"a": 3, "agg": 0}, {"agg"}, 4, {}) == (
        "agg restarts from an empty state (it had no checkpoint), so epochs 1-4 are computed again; nothing committed is written twice"
    )
    assert recovery_in_words({"a": 3, "b": 4}, set(), 4, {}) == "a resumes after epoch 3, so epoch 4 is computed again; nothing committed is written twice"
