"""Join payments to orders and keep per-customer totals, exactly once.

    python examples/orders.py --orders DIR --payments DIR --output OUT --storage STATE --rejected REJ

Reads the CSV files of DIR (orders: ``order_id,customer_id,amount_cents,ts``;
payments: ``payment_id,order_id,amount_cents,ts``) in name order, one file of each per
epoch (a directory with fewer files contributes nothing to later epochs). A payment
belongs to the order with its order id, whether it arrives before or after it.
Writes to the Parquet dataset OUT one row per customer per epoch in which the
customer's figures changed: ``customer_id, orders, ordered_cents, paid_cents,
open_orders, epoch``; invalid rows of both inputs go to REJ with their raw fields, the
``input`` they came from and a ``reason``. Killed at any moment and started again with
the same arguments, it produces exactly the result of an uninterrupted run. Exits 0
once all input present at start is processed and committed.

Shapes: two sources; ``join`` (payments to orders); the orders stream read twice
(fan-out: the join and the order events); ``union`` of order and payment events, and
of both inputs' rejected rows. Policies: sources, checks and stateless steps persist
nothing (a replay re-reads the input exactly); the join is eagerly checkpointed (its
state, every order and every unmatched payment, is never rebuilt by replaying all
input, and its logged output keeps recovery downstream of it); the per-order state
and the per-customer aggregate are lazily checkpointed every 3 epochs, at the same
epochs (the first does not log its output, so the second can only keep a checkpoint
the first also has). Details: ``falkirk.demo.orders``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from falkirk.demo.orders import build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", required=True, help="directory of order CSV files")
    parser.add_argument("--payments", required=True, help="directory of payment CSV files")
    parser.add_argument("--output", required=True, help="Parquet dataset of per-customer figures")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--rejected", required=True, help="Parquet dataset of invalid rows")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions (INFO); on an error, its whole trace (the JVM's too)")
    parser.add_argument("--progress", action="store_true", help="show progress per epoch off a terminal too (a terminal shows a live line anyway)")
    parser.add_argument("--ui", metavar="HOST:PORT", help="serve the live dashboard, /api/status and /metrics there (off by default)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.orders, args.payments, args.output, args.rejected)
        report = Engine(pipeline, args.storage, progress=True if args.progress else None, ui=args.ui).run()
    except (FalkirkError, RunAbandoned) as exc:
        return failed("orders", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
