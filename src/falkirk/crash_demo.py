"""``falkirk demo``: the clickstream example killed mid-run, recovered, verified.

1. generate click files (with some malformed rows) into a work directory;
2. run ``examples/clickstream.py`` and SIGKILL it in the middle of an epoch (after a
   sink has written, before the epoch commits: the worst moment for exactly-once);
3. start it again with the same arguments: it recovers through the Falkirk Wheel
   solver (its choices and reasons are printed) and finishes;
4. compare the whole output - every row of the output and dead-letter tables - with
   one plain Spark batch job over the same input.

The command sits above both :mod:`falkirk.demo` (the pipeline the example runs) and
:mod:`falkirk.testing` (the input generator and the batch references it verifies
against), which is why it is not in :mod:`falkirk.demo`: that package imports nothing
from :mod:`falkirk.testing`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from falkirk.testing.clickstream import (
    batch_output,
    batch_rejected,
    expected_rejections,
    write_input,
)
from falkirk.testing.verify import differences

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"


def _run(args: list[str], crash: str | None, verbose: bool = False) -> tuple[int, float]:
    env = dict(os.environ)
    env.pop("FALKIRK_CRASH_AT", None)
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    started = time.perf_counter()
    extra = ["-v"] if verbose else []  # the example logs its recovery in the paper's notation (INFO)
    proc = subprocess.run([sys.executable, str(EXAMPLE), *args, "--progress", *extra], env=env, check=False)
    return proc.returncode, time.perf_counter() - started


def main(workdir: str | None = None, files: int = 12, sessions_per_file: int = 400, kill_epoch: int = 7, verbose: bool = False) -> int:
    """Run the demo; returns 0 when the recovered result is verified. ``verbose``: the
    runs log at INFO (the recovery's decisions in the paper's notation too)."""
    work = Path(workdir or tempfile.mkdtemp(prefix="falkirk-demo-"))
    inp, out, state, rej = (str(work / n) for n in ("input", "output", "state", "rejected"))
    rows = write_input(inp, files=files, sessions_per_file=sessions_per_file, users=200, seed=42)
    print(f"== input: {files} CSV files, {rows} rows (some malformed) in {inp}")
    args = ["--input", inp, "--output", out, "--storage", state, "--rejected", rej]
    print(f"\n== run 1: will be killed with SIGKILL during epoch {kill_epoch} (after its sink write, before its commit)")
    code, secs = _run(args, crash=f"sink.written:{2 * kill_epoch}", verbose=verbose)
    print(f"-- run 1 ended with exit status {code} ({'killed by SIGKILL' if code == -9 else 'not killed'}) after {secs:.1f} s")
    print("\n== run 2: same arguments; what its recovery chose, in plain words, below ('recovered: ...')")
    code, secs = _run(args, crash=None, verbose=verbose)
    print(f"-- run 2 exited {code} after {secs:.1f} s")
    if code != 0:
        return 1
    print("\n== verification against one plain Spark batch job over the same input")
    from falkirk.spark import spark_session

    spark = spark_session()
    table, rejected = pd.read_parquet(out), pd.read_parquet(rej)
    problems = differences(table, batch_output(spark, inp), name="output")
    problems += differences(rejected, batch_rejected(spark, inp), name="rejected")
    duplicates = int(table.duplicated(["user_id", "epoch"]).sum())
    must_reject = expected_rejections(inp)
    print(f"output rows: {len(table)} (one per user per epoch in which the user's stats changed); "
          f"epochs: {table['epoch'].nunique() if len(table) else 0}; duplicate (user_id, epoch) rows: {duplicates}")
    print(f"rejected rows: {len(rejected)} (a plain-Python count of invalid lines: {must_reject})")
    for problem in problems[:10]:
        print(f"  difference: {problem}")
    ok = not problems and duplicates == 0 and len(rejected) == must_reject
    verdict = "PASS - every output row exactly once after a SIGKILL" if ok else "FAIL"
    print(f"\nverdict: {verdict}  (work directory: {work})")
    return 0 if ok else 1
