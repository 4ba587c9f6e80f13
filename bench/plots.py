"""PNG plots of a benchmark run (matplotlib, no display needed)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def draw(out: Path, results: list[dict[str, Any]], summary: list[dict[str, Any]], costs: list[dict[str, Any]], timelines: dict[str, Any]) -> None:
    if summary:
        throughput(out / "throughput.png", summary)
    if costs:
        epoch_cost(out / "epoch_cost.png", costs)
    if timelines:
        recovery(out / "recovery_timeline.png", timelines)


def throughput(path: Path, summary: list[dict[str, Any]]) -> None:
    workloads = sorted({s["workload"] for s in summary})
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4), squeeze=False)
    for ax, workload in zip(axes[0], workloads):
        rows = [s for s in summary if s["workload"] == workload]
        ax.barh([s["config"] for s in rows], [s["median_records_per_second"] for s in rows], color="#4878a8")
        ax.invert_yaxis()
        ax.set_title(f"{workload}: records/s (median)")
        ax.set_xlabel("records per second")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def epoch_cost(path: Path, costs: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for system in sorted({c["system"] for c in costs}):
        keys = sorted({c["keys"] for c in costs if c["system"] == system})
        med = [statistics.median(c["median_epoch_seconds"] for c in costs if c["system"] == system and c["keys"] == k) for k in keys]
        ax.plot(keys, med, marker="o", label=system)
    ax.set_xscale("log")
    ax.set_xlabel("keys of state")
    ax.set_ylabel("seconds per epoch (median)")
    ax.set_title("keyed operator, fixed epoch size")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def recovery(path: Path, timelines: dict[str, Any]) -> None:
    """Committed output rows per second around the SIGKILL (t = 0)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for system, (killed_at, commits) in sorted(timelines.items()):
        bins: dict[int, int] = {}
        for c in commits:
            second = int(c.seen - killed_at) if c.seen >= killed_at else int(c.seen - killed_at) - 1
            bins[second] = bins.get(second, 0) + c.rows
        if not bins:
            continue
        xs = list(range(min(bins), max(bins) + 1))
        ax.step(xs, [bins.get(x, 0) for x in xs], where="post", label=system)
    ax.axvline(0, color="red", linestyle="--", label="SIGKILL")
    ax.set_xlabel("seconds since SIGKILL")
    ax.set_ylabel("output rows committed per second")
    ax.set_title("W2: output around a SIGKILL and restart")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
