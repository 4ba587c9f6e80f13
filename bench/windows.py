"""Event-time windows: what checkpointing them costs, and what a failure costs.

    .venv/bin/python bench/windows.py --runs 3 --epochs 12 --rows 4000 --words 2000 --fail-after 9

The workload is ``examples/windowed_counts.py``'s query (word counts per tumbling
window of 60 s, watermark delay 30 s; event times advance 10 s per epoch and arrive
up to 40 s out of order) over the same seeded input in every run, in one Spark
session, ``max_in_flight=1``. The window processor ``counts`` takes, interleaved in
every round:

* ``none`` - ``Stateless``: nothing persisted (the baseline);
* ``lazy`` - ``LazyCheckpoint(every=5)``; ``eager`` - ``EagerCheckpoint()``;
* ``cec-open`` - ``ContinuousEventualCheckpoint()`` with no target: ``G_open`` rows only;
* ``cec-q<Q>`` - with ``extent_target=Q`` (log rows a recovery reads);
* ``cec-u<U>`` - with ``replay_target=U`` (input rows a recovery replays);
* ``cec-cp<P>`` - ``replay_target`` of the first ``--u`` value, G_check rows in every
  P-th epoch only (``check_period=P``).

For each: wall time and overhead against ``none`` in its round, mean epoch time
(the paper's response time: a window's result waits for its epoch), G_check rows
written; then the same run with ``counts`` failing in-process after ``--fail-after``
(its state lost, recovered in place): the extent read (log rows), the eventual
checkpoint's load time, the input rows replayed and the replay's time. Medians over
``--runs`` rounds: ``bench/results/windows.csv`` and the plots
``bench/results/windows_*.png`` (the CEC paper's Figures 5-9 trends).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.in_process import run_failing_once
from bench.tables import medians, print_medians, show, write_csv
from falkirk.demo.windowed import build_pipeline
from falkirk.graph import (
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    LazyCheckpoint,
    Policy,
    Stateless,
    Tumbling,
)
from falkirk.runtime import Engine
from falkirk.spark import spark_session
from falkirk.testing.windowed import write_input

SHAPE = Tumbling(60)
DELAY = 30


def configs(qs: list[int], us: list[int], cps: list[int]) -> dict[str, Callable[[], Policy]]:
    out: dict[str, Callable[[], Policy]] = {
        "none": Stateless,
        "lazy": lambda: LazyCheckpoint(every=5),
        "eager": EagerCheckpoint,
        "cec-open": ContinuousEventualCheckpoint,
    }
    for q in qs:
        out[f"cec-q{q}"] = lambda q=q: ContinuousEventualCheckpoint(extent_target=q)  # type: ignore[misc]
    for u in us:
        out[f"cec-u{u}"] = lambda u=u: ContinuousEventualCheckpoint(replay_target=u)  # type: ignore[misc]
    for cp in cps:
        out[f"cec-cp{cp}"] = lambda cp=cp: ContinuousEventualCheckpoint(replay_target=us[0], check_period=cp)  # type: ignore[misc]
    return out


def run_once(spark: Any, files: Path, policy: Policy, fail_after: int | None) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="falkirk-bench-windows-"))
    try:
        pipeline = build_pipeline(str(files), str(work / "out"), SHAPE, DELAY, policy)
        seen: dict[str, float] = {}

        def before_failure(engine: Engine) -> None:
            described = engine.state.operators["counts"].describe()  # type: ignore[attr-defined]
            seen.update({f"before_{k}": v for k, v in described.items() if isinstance(v, (int, float))})

        engine, report, seconds = run_failing_once(
            spark, pipeline, work / "state", "counts", fail_after, finish=True, before_failure=before_failure
        )
        info = engine.state.operators["counts"].describe()  # type: ignore[attr-defined]
        return {
            "seconds": seconds,
            "epoch_s": statistics.mean(report.epoch_seconds) if report.epoch_seconds else 0.0,
            "checkpoint_mb": report.checkpoint_bytes / 1e6,
            "g_check_rows": float(info.get("g_check_rows", 0) + seen.get("before_g_check_rows", 0)),
            "extent_rows": float(info.get("recovered_extent_rows", 0)) if fail_after else float(seen.get("before_extent_rows", 0)),
            "ec_load_s": float(info.get("restore_seconds", 0)),
            "replayed_rows": float(info.get("replayed_rows", 0)) if fail_after else 0.0,
            "catch_up_s": float(info.get("catch_up_seconds", 0)),
            "replayed_mb": sum(b for _, _, b, _ in report.caught_up) / 1e6,
            "rollback_s": sum(report.recovery_seconds),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--rows", type=int, default=4000, help="rows per epoch")
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--fail-after", type=int, default=9)
    parser.add_argument("--q", default="4000,16000", help="extent targets (log rows)")
    parser.add_argument("--u", default="8000,24000", help="replay targets (input rows)")
    parser.add_argument("--cp", default="1,2,4", help="check periods (epochs)")
    parser.add_argument("--configs", default=None, help="a comma-separated subset")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results") / "windows.csv"))
    parser.add_argument("--scaling", default=None, help="only measure epoch time against open windows, e.g. 1000,100000")
    args = parser.parse_args()
    if args.scaling:
        spark = spark_session()
        scaling(spark, [int(x) for x in args.scaling.split(",")])
        scaling(spark, [int(x) for x in args.scaling.split(",")])  # a second round: medians are of both
        return
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    table = configs(ints(args.q), ints(args.u), ints(args.cp))
    names = args.configs.split(",") if args.configs else list(table)
    spark = spark_session()
    files = Path(tempfile.mkdtemp(prefix="falkirk-bench-words-"))
    write_input(files, epochs=args.epochs, rows=args.rows, seed=3, words=args.words, spread=40, step=10)
    run_once(spark, files, Stateless(), None)  # warm-up
    rows: list[dict[str, Any]] = []
    for r in range(args.runs):
        base = 0.0
        for name in names:
            plain = run_once(spark, files, table[name](), None)
            failing = run_once(spark, files, table[name](), args.fail_after)
            base = plain["seconds"] if name == "none" else base
            row = {"round": r, "config": name, **{k: v for k, v in plain.items() if k not in ("replayed_rows", "replayed_mb")}}
            row["overhead"] = plain["seconds"] / base - 1 if base else 0.0
            row.update({f"fail_{k}": failing[k] for k in ("extent_rows", "ec_load_s", "replayed_rows", "replayed_mb", "catch_up_s", "rollback_s")})
            rows.append(row)
            show(row)
    write_csv(rows, args.out)
    found = medians(rows, names, (k for k in rows[0] if k not in ("round", "config")))
    print_medians(found, width=12)
    plot(found, Path(args.out).parent)
    shutil.rmtree(files, ignore_errors=True)


def scaling(spark: Any, sizes: list[int], epochs: int = 8, rows: int = 300) -> list[dict[str, float]]:
    """Epoch time against open windows: a first epoch opens ``size`` windows (one
    per word, in a window that stays open), then ``epochs`` small epochs touch a few
    words each. Flat means an epoch costs its own rows, not the open state."""
    out = []
    for size in sizes:
        files = Path(tempfile.mkdtemp(prefix="falkirk-bench-scaling-"))
        (files / "e00000.csv").write_text("ts,word\n" + "".join(f"{i % 50},w{i}\n" for i in range(size)))
        for e in range(1, epochs + 1):
            (files / f"e{e:05d}.csv").write_text("ts,word\n" + "".join(f"{60 + e * 5 + i % 5},v{i % 40}\n" for i in range(rows)))
        work = Path(tempfile.mkdtemp(prefix="falkirk-bench-scaling-run-"))
        try:
            pipeline = build_pipeline(str(files), str(work / "out"), Tumbling(1_000_000), DELAY, ContinuousEventualCheckpoint())
            report = Engine(pipeline, work / "state", spark=spark, max_in_flight=1).run()
            later = report.epoch_seconds[1:]
            out.append({"open_windows": float(size), "median_epoch_s": statistics.median(later), "first_epoch_s": report.epoch_seconds[0]})
            print(f"open_windows={size} median_epoch_s={out[-1]['median_epoch_s']:.3f} first_epoch_s={out[-1]['first_epoch_s']:.3f}", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(files, ignore_errors=True)
    return out


def plot(medians: dict[str, dict[str, float]], out: Path) -> None:
    """The CEC paper's trends: overhead per policy; extent, EC-load time and replay
    against Q and against U; epoch time and extent against CP."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    base = ["none", "lazy", "eager", "cec-open"]
    shown = [n for n in base if n in medians]
    axes[0][0].bar(shown, [medians[n]["overhead"] * 100 for n in shown], color="#6a9fd4")
    axes[0][0].set_title("throughput overhead vs none (%)")
    for row, prefix, label in ((0, "cec-q", "Q (extent target, log rows)"), (1, "cec-u", "U (replay target, input rows)")):
        names = sorted((n for n in medians if n.startswith(prefix)), key=lambda n: int(n[len(prefix):]))
        xs = [int(n[len(prefix):]) for n in names]
        if not xs:
            continue
        ax = axes[row][1]
        ax.plot(xs, [medians[n]["fail_extent_rows"] for n in names], "o-", label="extent read (rows)")
        ax.plot(xs, [medians[n]["fail_replayed_rows"] for n in names], "s-", label="input replayed (rows)")
        ax.plot(xs, [medians[n]["g_check_rows"] for n in names], "^-", label="G_check rows written")
        ax.set_xlabel(label)
        ax.legend(fontsize=8)
        ax2 = axes[row][2]
        ax2.plot(xs, [medians[n]["fail_ec_load_s"] for n in names], "o-", label="EC load (s)")
        ax2.plot(xs, [medians[n]["fail_catch_up_s"] for n in names], "s-", label="replay (s)")
        ax2.set_xlabel(label)
        ax2.legend(fontsize=8)
    cps = sorted((n for n in medians if n.startswith("cec-cp")), key=lambda n: int(n[6:]))
    if cps:
        ax = axes[1][0]
        xs = [int(n[6:]) for n in cps]
        ax.plot(xs, [medians[n]["epoch_s"] for n in cps], "o-", label="mean epoch time (s)")
        ax.set_xlabel("CP (check period, epochs)")
        ax3 = ax.twinx()
        ax3.plot(xs, [medians[n]["fail_extent_rows"] for n in cps], "s--", color="#d4826a", label="extent at failure (rows)")
        ax.legend(loc="upper left", fontsize=8)
        ax3.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "windows_cec.png", dpi=110)


if __name__ == "__main__":
    main()
