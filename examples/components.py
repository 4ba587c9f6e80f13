"""Connected components of a growing graph, exactly once, by label propagation in a loop.

    python examples/components.py --edges DIR --output OUT --storage STATE --rejected REJ

Reads the CSV files of DIR (header ``src,dst``; non-negative integers; an undirected
edge; self-loops allowed) in name order, one file per epoch. Writes to the Parquet
dataset OUT one row per vertex per epoch in which its component changed or the vertex
first appeared: ``vertex, component, epoch``, where ``component`` is the smallest
vertex id of its connected component over all edges of the epochs so far. Any other
line goes to REJ with its ``raw`` text and a ``reason``, exactly once (empty lines are
skipped). The components are kept up to date incrementally: inside an ``iterate``
loop whose times are ``(epoch, iteration)``, labels spread from the new edges until no
label changes; each iteration's changes are checkpointed as that logical time. Killed
at any moment and started again with the same arguments, it produces exactly the
result of an uninterrupted run. Exits 0 once all input present at start is processed
and committed. Details: ``falkirk.demo.components``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from falkirk.demo.components import build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", required=True, help="directory of edge CSV files (src,dst)")
    parser.add_argument("--output", required=True, help="Parquet dataset of component changes")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--rejected", required=True, help="Parquet dataset of invalid lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions and iterations (INFO); on an error, its whole trace (the JVM's too)")
    parser.add_argument("--progress", action="store_true", help="show progress per epoch off a terminal too (a terminal shows a live line anyway)")
    parser.add_argument("--ui", metavar="HOST:PORT", help="serve the live dashboard, /api/status and /metrics there (off by default)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.edges, args.output, args.rejected)
        report = Engine(pipeline, args.storage, progress=True if args.progress else None, ui=args.ui).run()
    except (FalkirkError, RunAbandoned) as exc:
        return failed("components", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
