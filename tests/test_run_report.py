"""What ``print(engine.run())`` shows: a few lines, not every field (issue 33)."""

from __future__ import annotations

from falkirk.runtime import RunReport


def test_a_plain_run_is_one_line_and_a_recovered_one_says_what_it_resumed_from() -> None:
    plain = RunReport(epochs=[1, 2, 3], seconds=12.34)
    assert str(plain) == "3 epochs committed (epochs 1-3) in 12.3 s"
    report = RunReport(
        epochs=[6, 7],
        checkpoints=[("agg", 6, "base"), ("agg", 7, "delta")],
        checkpoint_bytes=5 * 1024 * 1024,
        recovered={"agg": 5, "src": 0, "out": 5},
        recovery_seconds=[1.25],
        set_aside=[("parse", 6, 2), ("parse", 7, 1)],
        stopped="SIGINT",
        seconds=30.0,
    )
    assert str(report).splitlines() == [
        "2 epochs committed (epochs 6-7) in 30.0 s; stopped by SIGINT",
        "checkpoints: 2 written (5.0 MB), the last agg at epoch 7 (delta)",
        "recovered in 1.2 s: resumed with agg at epoch 5, out at epoch 5",
        "set aside: 3 bad row(s) or file(s) (parse epoch 6, parse epoch 7); falkirk inspect STORAGE quarantine lists them",
    ]
    assert len(repr(report)) > len(str(report))  # every field is still there for tests and tools


def test_a_counted_run_says_its_rows_and_rate() -> None:
    counted = RunReport(epochs=[1, 2], seconds=4.0, records=12000)
    assert str(counted) == "2 epochs committed (epochs 1-2), 12,000 input rows in 4.0 s (3,000 rows/s)"
    assert str(RunReport(epochs=[1], seconds=16.4, records=6)) == "1 epoch committed (epoch 1), 6 input rows in 16.4 s (0.4 rows/s)"


def test_a_run_with_nothing_new_says_so_and_one_stopped_before_its_first_epoch_says_that() -> None:
    assert str(RunReport()) == "no epoch committed (no new input)"
    assert str(RunReport(stopped="SIGINT", seconds=0.8)) == "no epoch committed in 0.8 s; stopped by SIGINT"
