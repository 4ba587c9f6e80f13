"""``falkirk demo``: the clickstream example killed mid-run, recovered, verified.

1. generate click files (with some malformed rows) into a work directory;
2. run ``examples/clickstream.py`` and SIGKILL it in the middle of an epoch (after a
   sink has written, before the epoch commits: the worst moment for exactly-once);
3. start it again with the same arguments: it recovers through the Falkirk Wheel
   solver (its choices and reasons are printed) and finishes;
4. compare the output with one plain Spark batch job over the same input.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from falkirk.demo.clickstream import batch_stats, expected_rejections, latest_stats, write_input

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "clickstream.py"


def _run(args: list[str], crash: str | None) -> tuple[int, float]:
    env = dict(os.environ)
    env.pop("FALKIRK_CRASH_AT", None)
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(EXAMPLE), *args, "--progress", "-v"], env=env, check=False)
    return proc.returncode, time.perf_counter() - started


def main(workdir: str | None = None, files: int = 12, sessions_per_file: int = 400, kill_epoch: int = 7) -> int:
    """Run the demo; returns 0 when the recovered result is verified."""
    work = Path(workdir or tempfile.mkdtemp(prefix="falkirk-demo-"))
    inp, out, state, rej = (str(work / n) for n in ("input", "output", "state", "rejected"))
    rows = write_input(inp, files=files, sessions_per_file=sessions_per_file, users=200, seed=42)
    print(f"== input: {files} CSV files, {rows} rows (some malformed) in {inp}")
    args = ["--input", inp, "--output", out, "--storage", state, "--rejected", rej]
    print(f"\n== run 1: will be killed with SIGKILL during epoch {kill_epoch} (after its sink write, before its commit)")
    code, secs = _run(args, crash=f"sink.written:{2 * kill_epoch}")
    print(f"-- run 1 ended with exit status {code} ({'killed by SIGKILL' if code == -9 else 'not killed'}) after {secs:.1f} s")
    print("\n== run 2: same arguments; recovery below (INFO lines 'recovery ...')")
    code, secs = _run(args, crash=None)
    print(f"-- run 2 exited {code} after {secs:.1f} s")
    if code != 0:
        return 1
    print("\n== verification against one plain Spark batch job over the same input")
    from falkirk.spark import spark_session

    expected = batch_stats(spark_session(), inp)
    got = latest_stats(out)
    table = pd.read_parquet(out)
    duplicates = int(table.duplicated(["user_id", "epoch"]).sum())
    merged = expected.merge(got, on="user_id", how="outer", suffixes=("_batch", "_stream"), indicator=True)
    wrong = merged[
        (merged["_merge"] != "both")
        | (merged["sessions_batch"] != merged["sessions_stream"])
        | ((merged["max_duration_batch"] - merged["max_duration_stream"]).abs() > 1e-9)
        | ((merged["avg_duration_batch"] - merged["avg_duration_stream"]).abs() > 1e-9)
    ]
    rejected, must_reject = len(pd.read_parquet(rej)), expected_rejections(inp)
    print(f"users: {len(expected)} in the batch result, {len(got)} in the stream; differing: {len(wrong)}")
    print(f"duplicate (user_id, epoch) rows: {duplicates}; rejected rows: {rejected} (expected {must_reject})")
    ok = len(wrong) == 0 and duplicates == 0 and rejected == must_reject
    print(f"\nverdict: {'PASS - exactly-once result after a SIGKILL' if ok else 'FAIL'}  (work directory: {work})")
    return 0 if ok else 1
