"""A small pipeline writing to PostgreSQL, run as a subprocess by the root-identity
tests: FileSource (CSV ``k,v``, one file an epoch) -> map -> PostgresSink (append).

    python identity_pipeline.py INPUT ROOT DSN TABLE [--idle SECONDS]
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from falkirk.exceptions import FalkirkError
from falkirk.graph import Pipeline
from falkirk.io import FileSource
from falkirk.io.postgres import PostgresSink
from falkirk.runtime import Engine

NAME = "pgp"
SINK = "pg"


def build_pipeline(inputs: str, dsn: str, table: str) -> Pipeline:
    p = Pipeline(NAME)
    (
        p.source("src", FileSource(inputs, "csv", "k string, v long"))
        .map("double", lambda df: df.withColumn("v2", F.col("v") * 2))
        .sink(SINK, PostgresSink(dsn, table, mode="append"))
    )
    return p


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("inputs", "root", "dsn", "table"):
        parser.add_argument(name)
    parser.add_argument("--idle", type=float, default=0.0, help="run as a service: stop after this many idle seconds")
    args = parser.parse_args()
    try:
        Engine(build_pipeline(args.inputs, args.dsn, args.table), args.root).run(idle_timeout=args.idle)
    except FalkirkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
