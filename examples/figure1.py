"""The Falkirk Wheel paper's Figure 1: four fault-tolerance regimes in one dataflow.

    python examples/figure1.py --links DIR --queries DIR --responses OUT --stats STATS \\
        --rejected REJ --storage STATE [--batch-every N] [--explain]

Link records (CSV ``src,dst,bytes``) feed a batch table of total bytes per vertex,
re-computed every N epochs (batch regime: re-run from its logged input after a
failure) and the connected components of the link graph, updated incrementally in a
loop (lazy checkpoints). Queries (CSV ``qid,vertex``) are joined with both; per-query
statistics are committed eagerly, in a sequence-number region, before each response
is written. One file of each input per epoch, in name order. Outputs (Parquet):
RESPONSES ``qid, vertex, bytes, component, asked, epoch``, STATS ``seq, qid, vertex,
asked, epoch``, REJ ``source, raw, reason``. Killed at any moment and started again
with the same arguments, it ends with exactly the result of an uninterrupted run.
``--explain`` prints, after the run, what a failure in each regime would roll back.
Details: ``falkirk.demo.figure1``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from falkirk.demo.figure1 import build_pipeline, explain
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", required=True, help="directory of link CSV files (src,dst,bytes)")
    parser.add_argument("--queries", required=True, help="directory of query CSV files (qid,vertex)")
    parser.add_argument("--responses", required=True, help="Parquet dataset of answered queries")
    parser.add_argument("--stats", required=True, help="Parquet dataset of per-query statistics")
    parser.add_argument("--rejected", required=True, help="Parquet dataset of invalid lines")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--batch-every", type=int, default=3, help="epochs between runs of the batch computation (default 3)")
    parser.add_argument("--explain", action="store_true", help="print what a failure in each regime would roll back")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions, iterations and chunks (INFO); on an error, its whole trace (the JVM's too)")
    parser.add_argument("--progress", action="store_true", help="show progress per epoch off a terminal too (a terminal shows a live line anyway)")
    args = parser.parse_args(argv)
    if args.batch_every < 1:
        parser.error("--batch-every must be at least 1")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.links, args.queries, args.responses, args.stats, args.rejected, batch_every=args.batch_every)
        report = Engine(pipeline, args.storage, progress=True if args.progress else None).run()
        if args.explain:
            for regime, lines in explain(pipeline, args.storage).items():
                print(f"a failure in the {regime} regime: " + "\n".join(lines))
    except (FalkirkError, RunAbandoned) as exc:
        return failed("figure1", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
