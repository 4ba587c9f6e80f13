"""Runs the clickstream pipeline with chosen policies (a subprocess for crash tests).

    python clickstream_runner.py IN OUT STATE REJ SESSIONS STATS

SESSIONS and STATS name a policy: ``eager``, ``lazy:K``, ``log``, ``stateless``,
``history``.
"""

from __future__ import annotations

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
from falkirk.runtime import Engine


def policy(spec: str) -> Policy:
    name, _, arg = spec.partition(":")
    if name == "lazy":
        return LazyCheckpoint(every=int(arg or 2), compact_every=2)
    return {"eager": EagerCheckpoint(compact_every=3), "log": LogOutputs(), "stateless": Stateless(), "history": FullHistory()}[name]


if __name__ == "__main__":
    inp, out, state, rej, sessions, stats = sys.argv[1:7]
    pipeline = build_pipeline(inp, out, rej, sessions_policy=policy(sessions), stats_policy=policy(stats))
    Engine(pipeline, state).run()
