"""Runs the clickstream pipeline with chosen policies (a subprocess for crash tests).

    python clickstream_runner.py IN OUT STATE REJ SESSIONS STATS

SESSIONS and STATS name a policy: ``eager``, ``lazy:K``, ``log``, ``stateless``,
``history``. IN is a directory of CSV files, or ``gen:B,S,U,SEED`` for the clickstream
generator (B batches of S sessions over U users). A last argument ``vec`` uses the
vectorized sessionizer. With ``FALKIRK_TEST_STANDBY=1`` in the environment the
engine runs as a warm standby and prints ``standby ready`` once it waits for the lock;
``FALKIRK_TEST_LEASE=SECONDS`` sets the lease timeout of a URI root;
``FALKIRK_TEST_PAIR=DSN`` makes the driver a member of a driver pair in that database
(named ``FALKIRK_TEST_PAIR_NAME``); ``FALKIRK_TEST_IDLE=SECONDS`` keeps it running as a
service until no new input has arrived for that long.
"""

from __future__ import annotations

import os
import sys

from falkirk.demo.clickstream import build_pipeline
from falkirk.graph import (
    EagerCheckpoint,
    FullHistory,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.io import clickstream_generator
from falkirk.runtime import Engine


def policy(spec: str) -> Policy:
    name, _, arg = spec.partition(":")
    if name == "lazy":
        return LazyCheckpoint(every=int(arg or 2), compact_every=2)
    return {"eager": EagerCheckpoint(compact_every=3), "log": LogOutputs(), "stateless": Stateless(), "history": FullHistory()}[name]


if __name__ == "__main__":
    inp, out, state, rej, sessions, stats = sys.argv[1:7]
    vectorized = sys.argv[7:] == ["vec"]
    source = None
    if inp.startswith("gen:"):
        b, n, u, seed = (int(x) for x in inp.removeprefix("gen:").split(","))
        source = clickstream_generator(batches=b, sessions_per_batch=n, users=u, seed=seed, bad_fraction=0.05)
    pipeline = build_pipeline(inp, out, rej, sessions_policy=policy(sessions), stats_policy=policy(stats), source=source, vectorized=vectorized)
    standby = os.environ.get("FALKIRK_TEST_STANDBY") == "1"
    lease = float(os.environ.get("FALKIRK_TEST_LEASE", "10"))
    engine = Engine(pipeline, state, lease_timeout=lease, pair=os.environ.get("FALKIRK_TEST_PAIR"), pair_name=os.environ.get("FALKIRK_TEST_PAIR_NAME"))
    idle = float(os.environ.get("FALKIRK_TEST_IDLE", "0"))
    report = engine.run(standby=standby, on_standby=lambda: print("standby ready", flush=True), idle_timeout=idle)
    if report.caught_up_from is not None:
        print(f"caught up from {report.caught_up_from}", flush=True)
