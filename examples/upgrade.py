"""A pipeline changed while it lives: version 1, a savepoint, version 2 from it.

    python examples/upgrade.py --input DIR --output OUT --storage STATE --version {1,2} [--partitions N] [--savepoint]

Reads the CSV files of DIR (header ``user,amount``; ``amount`` a non-negative
integer) in name order, one file per epoch.

* Version 1 writes ``OUT/totals``: ``user, epoch, n, total`` - per user the running
  count and sum of ``amount``, one row per user changed in an epoch (lazy
  checkpoints, every 3 epochs).
* Version 2 writes the same table with one more column, ``max_amount`` (the
  greatest amount of the user's rows read since the upgrade; null in the rows
  version 1 wrote), checkpoints eagerly, and writes every row with
  ``amount > 1000`` to ``OUT/big``: ``user, epoch, amount``.

``--savepoint`` ends the run with a savepoint once all input present at start is
committed. Version 2 started on a root last run by version 1 upgrades it from that
savepoint (a root without one is refused: run version 1 with ``--savepoint``
first); version 1 started on a root upgraded to version 2 is refused. ``--partitions
N`` sets the number of state partitions (a change rescales the state). ``n`` and
``total`` go on across the upgrade as if there had been none.

Exits 0 once all input present at start is processed and committed, 2 (one line on
stderr) when the run is refused. Killed at any moment and started again with the
same arguments, it ends with exactly the result of an uninterrupted sequence of
the same runs.
"""

from __future__ import annotations

import argparse
import logging
import sys

from falkirk.demo.upgrade import VERSIONS, build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="directory of CSV files (user,amount)")
    parser.add_argument("--output", required=True, help="directory of the totals (and, version 2, big) tables")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--version", required=True, type=int, choices=VERSIONS, help="the pipeline's version")
    parser.add_argument("--partitions", type=int, default=None, help="number of state partitions (default: the root's)")
    parser.add_argument("--savepoint", action="store_true", help="end with a savepoint once the input present at start is committed")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions (INFO); on an error, its whole trace")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.input, args.output, args.version)
        engine = Engine(pipeline, args.storage, parallelism=args.partitions, upgrade=args.version == 2)
        report = engine.run(savepoint=args.savepoint)
    except (FalkirkError, RunAbandoned) as exc:
        return failed("upgrade", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
