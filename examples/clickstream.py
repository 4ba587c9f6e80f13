"""Sessionize click events and keep per-user session stats, exactly once.

    python examples/clickstream.py --input IN --output OUT --storage STATE --rejected REJ

Processes every CSV file in IN (header ``sess_id,user_id,ts,event``) in file-name
order, one file per epoch; writes per-user stats to the Parquet dataset OUT (one row
per user per epoch in which the user's stats changed) and invalid rows with a
``reason`` to REJ. Killed at any moment and started again with the same arguments,
it resumes and produces exactly the result of an uninterrupted run. Exits 0 once all
input present at start is processed and committed. With ``--global-checkpoints K``
the whole pipeline takes aligned barrier checkpoints every K epochs (Wallaroo)
instead of its per-processor policies; the output is the same. With
``--replicated`` (on a cluster: ``FALKIRK_SPARK_MASTER=spark://...``) every block of
state is kept on two executors, so the loss of one executor rolls nothing back.
With ``--pair postgresql://...`` this driver is one of a driver pair: start a second
one on another storage root (another host) with the same arguments otherwise; both
process every epoch, one copy of each epoch reaches OUT and REJ, and either may be
killed without stalling the output (a restarted one catches up from the other).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from falkirk.demo.clickstream import build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.graph import GlobalCheckpoints
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="directory of CSV files")
    parser.add_argument("--output", required=True, help="Parquet dataset of per-user stats")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--rejected", required=True, help="Parquet dataset of invalid rows")
    parser.add_argument("--files-per-epoch", type=int, default=1)
    parser.add_argument(
        "--global-checkpoints", type=int, metavar="K", default=None,
        help="aligned barrier checkpoints of the whole pipeline every K epochs (Wallaroo) instead of per-processor policies",
    )
    parser.add_argument("--replicated", action="store_true", help="keep two copies of the state on different executors (a cluster of 2+ executors)")
    parser.add_argument("--pair", metavar="DSN", default=os.environ.get("FALKIRK_PAIR_DSN"), help="PostgreSQL database shared with the other driver of a driver pair (or FALKIRK_PAIR_DSN, better: not on the command line)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions (INFO); on an error, its whole trace (the JVM's too)")
    parser.add_argument("--progress", action="store_true", help="show progress per epoch off a terminal too (a terminal shows a live line anyway)")
    parser.add_argument("--ui", metavar="HOST:PORT", help="serve the live dashboard, /api/status and /metrics there (off by default)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        checkpoints = GlobalCheckpoints(every=args.global_checkpoints) if args.global_checkpoints is not None else None
        pipeline = build_pipeline(args.input, args.output, args.rejected, files_per_epoch=args.files_per_epoch, checkpoints=checkpoints)
        engine = Engine(pipeline, args.storage, progress=True if args.progress else None, ui=args.ui, replicas=2 if args.replicated else 1, pair=args.pair)
        report = engine.run()
    except (FalkirkError, RunAbandoned) as exc:
        return failed("clickstream", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
