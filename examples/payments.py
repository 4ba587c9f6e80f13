"""Payments with bad values in them, processed exactly once: the bad rows set aside.

    python examples/payments.py --input IN --output OUT --storage STATE [--on-error dead_letter|stop]

Processes every CSV file in IN (header ``user,amount,ts``; ``ts`` like
``2026-11-26 10:15:00``, UTC) in file-name order, one file per epoch. ``amount`` is
cast to BIGINT and ``ts`` to TIMESTAMP under Spark's ANSI mode inside a ``map``: a
value that cannot be cast raises there. Writes three Parquet tables:

* ``OUT/totals``: ``user, epoch, n, total`` - per user, the running count and sum of
  the amounts of every good row so far, one row per user changed in an epoch;
* ``OUT/windows``: ``user, window_start, window_end, n, total`` - 10-minute tumbling
  event-time windows on ``ts`` (watermark 5 minutes), each written once when it
  closes; the end of the input closes every open window;
* ``OUT/errors``: ``user, amount, ts`` as read, ``processor``, ``reason`` - every row
  whose ``amount`` or ``ts`` cannot be cast, exactly once (``--on-error dead_letter``,
  the default).

With ``--on-error stop`` a bad row stops the run with exit code 2 and one line naming
the processor, the epoch, the file and the value. Killed at any moment and started
again with the same arguments, it ends with exactly the result of an uninterrupted
run. Exits 0 once all input present at start is processed and committed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from falkirk.demo.payments import build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="directory of CSV files (user,amount,ts)")
    parser.add_argument("--output", required=True, help="directory of the totals, windows and errors tables")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument(
        "--on-error", choices=("dead_letter", "stop"), default="dead_letter",
        help="what a row that cannot be cast does: go to OUT/errors (default) or stop the run",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions (INFO); on an error, its whole trace (the JVM's too)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.input, args.output, on_error=args.on_error)
        report = Engine(pipeline, args.storage).run(finish=True)
    except (FalkirkError, RunAbandoned) as exc:
        return failed("payments", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
