"""Per-user totals from a Redis stream into a PostgreSQL table, exactly once.

    python examples/redis_to_postgres.py --redis URL --stream NAME --group GROUP --pg DSN --table TABLE --storage STATE [--idle-exit SECONDS]

Credentials are better given in the environment than on the command line (which
other users of the machine can read in ``/proc``): ``FALKIRK_REDIS_URL``,
``FALKIRK_PG_DSN`` and ``FALKIRK_PAIR_DSN`` stand for ``--redis``, ``--pg`` and
``--pair`` (an option given wins).

Reads the entries of Redis stream NAME through consumer group GROUP. An entry needs
fields ``user_id`` (a non-empty string) and ``amount`` (an integer, possibly
negative); other entries go to the stream ``NAME:dead`` with their fields, their
``id`` and a ``reason``, exactly once. TABLE (created if absent: ``user_id text
primary key, total bigint not null, events bigint not null, epoch bigint not
null``) holds per user the sum of the valid amounts and the number of valid
entries, upserted each epoch in one prepared transaction (two-phase commit) that is
committed only when no recovery can take the epoch back. Exits 0 once no new entry
has arrived for ``--idle-exit`` seconds (default 5) and everything read is
committed, released and acknowledged. Killed at any moment and started again with
the same arguments, it ends with exactly the totals of an uninterrupted run.
Pipeline and policies: ``falkirk.demo.redis_postgres``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from falkirk.demo.redis_postgres import build_pipeline
from falkirk.exceptions import FalkirkError
from falkirk.runtime import Engine, RunAbandoned, exit_code, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    redis_url, pg_dsn = os.environ.get("FALKIRK_REDIS_URL"), os.environ.get("FALKIRK_PG_DSN")
    parser.add_argument("--redis", required=redis_url is None, default=redis_url, help="Redis URL, e.g. redis://127.0.0.1:6379/0 (or FALKIRK_REDIS_URL)")
    parser.add_argument("--stream", required=True, help="the stream to read")
    parser.add_argument("--group", required=True, help="the consumer group (this pipeline's own)")
    parser.add_argument("--pg", required=pg_dsn is None, default=pg_dsn, help="PostgreSQL connection string (or FALKIRK_PG_DSN)")
    parser.add_argument("--table", required=True, help="the table of per-user totals")
    parser.add_argument("--storage", required=True, help="Falkirk storage root (state and metadata)")
    parser.add_argument("--idle-exit", type=float, default=5.0, help="exit after this many seconds without new entries")
    parser.add_argument("--max-entries", type=int, default=10_000, help="at most this many entries per epoch (default 10000)")
    parser.add_argument("--retry-seconds", type=float, default=60.0, help="how long PostgreSQL may be unreachable before the pipeline stops (default 60)")
    parser.add_argument("--pair", metavar="DSN", default=os.environ.get("FALKIRK_PAIR_DSN"), help="PostgreSQL database shared with the other driver of a driver pair (or FALKIRK_PAIR_DSN)")
    parser.add_argument("--pair-name", help="the driver pair's name (default: the pipeline's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log recovery decisions (INFO); on an error, its whole trace (the JVM's too)")
    parser.add_argument("--progress", action="store_true", help="show progress per epoch off a terminal too (a terminal shows a live line anyway)")
    parser.add_argument("--ui", metavar="HOST:PORT", help="serve the live dashboard, /api/status and /metrics there (off by default)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        pipeline = build_pipeline(args.redis, args.stream, args.group, args.pg, args.table, args.max_entries, args.retry_seconds)
        engine = Engine(pipeline, args.storage, progress=True if args.progress else None, ui=args.ui, pair=args.pair, pair_name=args.pair_name)
        report = engine.run(idle_timeout=args.idle_exit, poll_interval=0.2)
    except (FalkirkError, RunAbandoned) as exc:
        return failed("redis_to_postgres", exc, args.verbose)
    return exit_code(report.stopped)


if __name__ == "__main__":
    sys.exit(main())
