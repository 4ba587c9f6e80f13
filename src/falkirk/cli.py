"""The ``falkirk`` command.

* ``falkirk solve SCENARIO.json`` - the consistent rollback of a scenario
  (docs/scenarios.md) as a readable table with the reason for every frontier;
  ``--json`` prints ``{"frontiers", "notification_frontiers", "resend"}`` instead.
* ``falkirk demo`` - the clickstream example, killed mid-run with SIGKILL, recovered
  and verified against one Spark batch job;
* ``falkirk scenarios`` - solves the bundled paper scenarios (examples/scenarios/);
* ``falkirk warm-up`` - builds the JVM's class-data sharing archive (once per
  installation; Spark sessions then start ~3 s faster, see falkirk.warmup);
* ``falkirk verify STORAGE [TABLE ...]`` - checks every committed file of a storage
  root against the size and SHA-256 its commit recorded, and each given table of its
  ParquetTableSinks against the epochs the root committed to it: every committed
  epoch there (or pending release), every file as its checksum sidecar records. Prints
  a ``damaged:`` line per missing epoch, torn sidecar or damaged file and exits 1;
  ``note:`` lines (an epoch written past the last commit) are not damage; a TABLE no
  sink of the root writes is an error (falkirk.ops.verify);
* ``falkirk status STORAGE [--json]`` - a running or stopped pipeline from its storage
  root alone: processors, policies, committed epochs, frontiers, checkpoints and logs
  kept, the plan a recovery started now would follow (and why), the driver holding it;
* ``falkirk inspect STORAGE EPOCH|PROCESSOR`` - the Ξ records and files behind an
  epoch or a processor (JSON);
* ``falkirk state STORAGE PROCESSOR [--at EPOCH|SAVEPOINT] [--output DIR]`` - a keyed
  processor's state as a table (falkirk.ops.state_table): shown, or written as Parquet;
* ``falkirk resolve STORAGE --identity OLD`` - commits or rolls back the in-doubt
  transactions a root left under an old identity (``falkirk status`` lists them), as
  its next run would its own;
* ``falkirk fork STORAGE`` - gives a copied root an identity of its own (refused while
  the old identity has in-doubt transactions).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from falkirk.exceptions import FalkirkError
from falkirk.recovery import load_scenario, solve
from falkirk.recovery.scenario import dumps_plan

logger = logging.getLogger("falkirk")

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def _solve(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    plan = solve(scenario.topology, scenario.available)
    if args.json:
        print(dumps_plan(plan.to_json()))
        if plan.ambiguous:
            print(
                "falkirk: several maximal consistent rollbacks exist (some F*(p) is not a "
                "chain); printed one of them",
                file=sys.stderr,
            )
        for warning in plan.warnings:
            print(f"falkirk: warning: {warning}", file=sys.stderr)
    else:
        print(plan.table())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from falkirk.crash_demo import main as run_demo

    try:
        return run_demo(args.workdir, files=args.files, verbose=args.verbose)
    except KeyboardInterrupt:  # Ctrl-C reaches the example too, which stops cleanly
        print("falkirk demo: interrupted", file=sys.stderr)
        return 130


def _scenarios(args: argparse.Namespace) -> int:
    directory = Path(args.scenarios)
    files = sorted(directory.glob("*.json"))
    if not files:
        raise FalkirkError(f"no scenario files (*.json) in {directory}")
    for path in files:
        scenario = load_scenario(path)
        notes = path.with_suffix(".md")
        print(f"== {path.stem} ==")
        if notes.exists():
            print(notes.read_text(encoding="utf-8").strip())
        print()
        print(solve(scenario.topology, scenario.available).table())
        print()
    return 0


def _warm_up(args: argparse.Namespace) -> int:
    from falkirk import warmup

    print("falkirk: building the JVM's class-data sharing archive (once; about a minute on two cores if not built yet)...", file=sys.stderr, flush=True)
    started = time.monotonic()
    built = warmup.build()
    print(f"falkirk: class-data sharing archive: {built or 'none (Spark starts without it)'} ({time.monotonic() - started:.0f} s)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from falkirk.ops.verify import verify
    from falkirk.storage.filesystem import is_uri

    print(f"falkirk: checking every committed file of {args.storage} against its size and SHA-256...", file=sys.stderr, flush=True)
    spark = None
    if any(is_uri(path) for path in (args.storage, *args.tables)):  # Hadoop filesystems are reached through Spark's JVM
        from falkirk.spark import spark_session

        spark = spark_session()
    report = verify(args.storage, args.tables, spark)
    for note in report.notes:
        print(f"note: {note}")
    for problem in report.problems:
        print(f"damaged: {problem}")
    state = f"{len(report.problems)} damaged" if report.problems else "all intact"
    print(f"falkirk: checked {report.checked} committed files: {state}")
    return 1 if report.problems else 0


def _dsns(pairs: list[str] | None) -> dict[str, str]:
    """``--dsn SINK=DSN`` options as a dict; ``SINK=env:NAME`` reads the DSN from the
    environment variable ``NAME`` (a password on a command line is visible to every
    user of the machine)."""
    import os

    from falkirk.redact import check_dsn, redact_dsn

    found = {}
    for pair in pairs or []:
        sink, eq, dsn = pair.partition("=")
        if not eq or not sink or not dsn:
            raise FalkirkError(f"--dsn takes SINK=DSN or SINK=env:NAME (a PostgreSQL sink's name and its database), got {redact_dsn(pair)!r}")
        if dsn.startswith("env:"):
            name = dsn[len("env:") :]
            if not os.environ.get(name):
                raise FalkirkError(f"--dsn {sink}=env:{name}: the environment variable {name} is not set")
            dsn = os.environ[name]
        try:
            check_dsn(dsn, f"--dsn {sink}")
        except ValueError as exc:
            raise FalkirkError(str(exc)) from None
        found[sink] = dsn
    return found


def _status(args: argparse.Namespace) -> int:
    import json

    from falkirk.ops.status import render, status

    report = status(args.storage, args.metadata_dir, _dsns(args.dsn))
    print(json.dumps(report, indent=2, default=str) if args.json else render(report))
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from falkirk.ops.transactions import resolve

    done = resolve(args.storage, args.identity, _dsns(args.dsn), dry_run=args.dry_run)
    for r in done:
        print(f"{'would ' if args.dry_run else ''}{r.verb} {r.name} (sink {r.sink}, epoch {r.epoch}): {r.why}")
    print(f"falkirk: {len(done)} transactions of identity {args.identity} {'to resolve' if args.dry_run else 'resolved'}")
    return 0


def _fork(args: argparse.Namespace) -> int:
    from falkirk.ops.transactions import fork

    old, new = fork(args.storage, _dsns(args.dsn))
    print(f"falkirk: storage root {args.storage} now has identity {new} (was {old}); its sinks still write to the same tables")
    return 0


def _savepoints(args: argparse.Namespace) -> int:
    import json

    from falkirk.ops.savepoints import drop, listing, render

    if args.drop:
        drop(args.storage, args.drop)
        print(f"savepoint {args.drop!r} dropped")
        return 0
    found = listing(args.storage)
    print(json.dumps(found, indent=2) if args.json else render(found, args.storage))
    return 0


def _savepoint(args: argparse.Namespace) -> int:
    from falkirk.ops.savepoints import existing_cut

    print(existing_cut(args.storage))
    return 0


def _state(args: argparse.Namespace) -> int:
    from falkirk.ops.state_table import read_state_at, write_state
    from falkirk.spark import spark_session

    at = int(args.at) if args.at is not None and args.at.isdigit() else args.at
    spark = spark_session(app="falkirk-state")
    if args.output:
        where = write_state(spark, args.storage, args.processor, args.output, at)
        print(f"falkirk: wrote the state of {where.describe()} to {args.output} (Parquet)")
        return 0
    rows, where = read_state_at(spark, args.storage, args.processor, at)
    print(f"falkirk: the state of {where.describe()}: {rows.count()} rows")
    rows.show(args.rows, truncate=False)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    import json

    from falkirk.ops.status import inspect, last_failure, quarantine

    if args.what == "failure":
        print(last_failure(args.storage, args.metadata_dir))
        return 0
    found = quarantine(args.storage, args.metadata_dir) if args.what == "quarantine" else inspect(args.storage, args.what, args.metadata_dir)
    print(json.dumps(found, indent=2, default=str))
    return 0


#: What ``falkirk --help`` says first (plain text: the module docstring is reST).
DESCRIPTION = (
    "Falkirk runs PySpark pipelines as exactly-once streams that recover from any crash. These "
    "commands look after a pipeline's storage root (its state and metadata): what it holds, "
    "whether it is intact, what a recovery would do."
)
EPILOG = "Run 'falkirk COMMAND --help' for a command's arguments. Start with 'falkirk demo', or 'falkirk status STORAGE' for a pipeline of yours."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="falkirk", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine decides (INFO), the recovery in the paper's notation too")
    sub = parser.add_subparsers(dest="command", required=True)
    p_solve = sub.add_parser(
        "solve", help="choose consistent rollback frontiers for a scenario (docs/scenarios.md)"
    )
    p_solve.add_argument("scenario", help="scenario JSON file")
    p_solve.add_argument("--json", action="store_true", help="print the result as JSON")
    p_solve.set_defaults(run=_solve)
    p_demo = sub.add_parser(
        "demo", help="run the clickstream example, SIGKILL it mid-run, recover, verify against a batch job"
    )
    p_demo.add_argument("--workdir", help="where input, output and state go (default: a new temp dir)")
    p_demo.add_argument("--files", type=int, default=12, help="input files = epochs (default: %(default)s)")
    p_demo.set_defaults(run=_demo)
    p_sc = sub.add_parser("scenarios", help="solve the bundled paper scenarios and explain them")
    p_sc.add_argument(
        "--scenarios", default=str(SCENARIO_DIR), help="directory of scenario files (default: %(default)s)"
    )
    p_sc.set_defaults(run=_scenarios)
    p_warm = sub.add_parser("warm-up", help="build the JVM class-data sharing archive (faster Spark starts)")
    p_warm.set_defaults(run=_warm_up)
    p_verify = sub.add_parser(
        "verify", help="check every committed file of a storage root against its recorded size and SHA-256"
    )
    p_verify.add_argument("storage", help="the storage root (a directory or a Hadoop URI)")
    p_verify.add_argument("tables", nargs="*", help="tables of the root's ParquetTableSinks to check against the epochs it committed to them")
    p_verify.set_defaults(run=_verify)
    p_status = sub.add_parser(
        "status", help="what a storage root holds and what a recovery started now would choose"
    )
    p_status.add_argument("storage", help="the storage root")
    p_status.add_argument("--json", action="store_true", help="print the status as JSON")
    p_status.add_argument("--metadata-dir", help="a URI root's local metadata copy (Engine(metadata_dir=...))")
    dsn_help = "SINK=DSN or SINK=env:NAME (the DSN in environment variable NAME: better than a password on the command line): reach PostgreSQL sink SINK's database with it (default: the recorded one, without password; libpq's PGPASSWORD or ~/.pgpass give it)"
    p_status.add_argument("--dsn", action="append", metavar="SINK=DSN", help=dsn_help)
    p_status.set_defaults(run=_status)
    p_resolve = sub.add_parser(
        "resolve", help="resolve in-doubt transactions a root left under an old identity (as its next run would its own)"
    )
    p_resolve.add_argument("storage", help="the storage root (local; no driver may run on it)")
    p_resolve.add_argument("--identity", required=True, help="the old identity (falkirk status lists those with in-doubt transactions)")
    p_resolve.add_argument("--dsn", action="append", metavar="SINK=DSN", help=dsn_help)
    p_resolve.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    p_resolve.set_defaults(run=_resolve)
    p_fork = sub.add_parser("fork", help="give a copied storage root an identity of its own (a fork, not a restore)")
    p_fork.add_argument("storage", help="the copied storage root (local; no driver may run on it)")
    p_fork.add_argument("--dsn", action="append", metavar="SINK=DSN", help=dsn_help)
    p_fork.set_defaults(run=_fork)
    p_sps = sub.add_parser("savepoints", help="the savepoints of a storage root (a changed pipeline starts from one)")
    p_sps.add_argument("storage", help="the storage root (local)")
    p_sps.add_argument("--drop", metavar="NAME", help="delete savepoint NAME (garbage collection never does)")
    p_sps.add_argument("--json", action="store_true", help="print them as JSON")
    p_sps.set_defaults(run=_savepoints)
    p_sp = sub.add_parser("savepoint", help="name the savepoint at a stopped pipeline's last committed epoch (a clean stop with a savepoint takes one)")
    p_sp.add_argument("storage", help="the storage root (local)")
    p_sp.set_defaults(run=_savepoint)
    p_state = sub.add_parser("state", help="a keyed processor's state as a table: shown, or written as Parquet")
    p_state.add_argument("storage", help="the storage root (local)")
    p_state.add_argument("processor", help="a keyed processor (aggregate, stateful, lookup, window, join, buffer)")
    p_state.add_argument("--at", metavar="EPOCH|SAVEPOINT", help="an epoch with a checkpoint or a savepoint's name (default: what a restart would restore)")
    p_state.add_argument("--output", metavar="DIR", help="write it as Parquet to DIR (a new directory) instead of showing it")
    p_state.add_argument("--rows", type=int, default=20, help="how many rows to show (default 20)")
    p_state.set_defaults(run=_state)
    p_inspect = sub.add_parser("inspect", help="the Ξ records and files behind an epoch or a processor, or the rows set aside")
    p_inspect.add_argument("storage", help="the storage root")
    p_inspect.add_argument("what", help="an epoch number, a processor name, 'quarantine' (the rows processors set aside) or 'failure' (the last run-time error, whole)")
    p_inspect.add_argument("--metadata-dir", help="a URI root's local metadata copy (Engine(metadata_dir=...))")
    p_inspect.set_defaults(run=_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.run(args))
    except FalkirkError as exc:
        print(f"falkirk: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
