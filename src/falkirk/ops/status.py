"""What a storage root holds, read from the root alone (``falkirk status``, ``falkirk inspect``).

Works on a running pipeline and on a stopped one: the metadata database is opened
read-only (SQLite lets a reader in next to the running driver), the pipeline's
description recorded at its start (:mod:`falkirk.execution.description`) says what
the processors are, and the recovery solver is run on the committed Ξ records
exactly as a restart would run it, so ``recovery`` is the plan a driver started now
would follow, with the solver's explanation of every frontier. Needs no Spark.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

from falkirk.control.domains import tick
from falkirk.graph.edge_id import EdgeId
from falkirk.ops.transactions import in_doubt
from falkirk.recovery import CheckpointMeta, Topology, solve
from falkirk.recovery.codec import checkpoint_to_json
from falkirk.recovery.scenario import parse_scenario
from falkirk.storage import LocalFileSystem, MetaStore, QuarantineUnit, StorageError
from falkirk.storage.evidence import check_metadata
from falkirk.storage.filesystem import StoredFile, is_uri, local_path
from falkirk.storage.identity import LAST_FAILURE, recorded
from falkirk.storage.lock import LOCK_NAME, RootLock
from falkirk.storage.published import META_DIR, default_metadata_dir
from falkirk.storage.schema import DB_NAME
from falkirk.time import frontier_to_json
from falkirk.time.ticks import Tick


def open_root(storage: str, metadata_dir: str | None = None) -> MetaStore:
    """The root's metadata, read-only. A URI root's database is read from
    ``metadata_dir``, the driver's local working copy (see ``Engine``). A local
    root whose metadata is missing or empty while it holds committed data raises
    :class:`~falkirk.storage.CorruptStorageError`, as a start would
    (:mod:`falkirk.storage.evidence`)."""
    if is_uri(storage) and not storage.startswith("file://"):
        if metadata_dir is None:
            raise StorageError(
                f"{storage} is a URI root: pass --metadata-dir, the local directory where its driver keeps "
                "the metadata database (Engine(metadata_dir=...), by default under ~/.cache/falkirk)"
            )
        return MetaStore(metadata_dir, read_only=True, root=storage)
    local = local_path(storage) or storage if storage.startswith("file:") else storage
    if not (Path(local) / DB_NAME).exists() and (Path(local) / META_DIR).is_dir():
        # An engine given a file: URI runs it as a URI root: the database is its working copy.
        found = metadata_dir or _working_copy(local)
        if found is None:
            raise StorageError(
                f"{storage} is run as a URI root, whose metadata database is its driver's working copy: pass "
                "--metadata-dir (the Engine's metadata_dir=; by default under ~/.cache/falkirk, none found there)"
            )
        return MetaStore(found, read_only=True, root=storage)
    if not Path(local).is_dir():
        raise StorageError(f"{local} is not a directory: no pipeline has run with this storage root")
    check_metadata(LocalFileSystem(), str(Path(local).absolute()), Path(local), local=True)
    return MetaStore(local, read_only=True)


def _working_copy(local: str) -> str | None:
    """The default working copy of the metadata of ``file:`` root ``local``, under
    any spelling of its URI an engine may have been given (None: there is none)."""
    local = str(Path(local).absolute())
    for spelling in (f"file:{local}", f"file://{local}"):
        candidate = default_metadata_dir(spelling.rstrip("/"))
        if (candidate / DB_NAME).is_file():
            return str(candidate)
    return None


#: A lock file holds a short JSON record; more is never read.
LOCK_READ_LIMIT = 4096


def driver_holding(storage: str) -> str | None:
    """Who holds the root's lock (a running driver), or None. Never touches the lock
    itself (a probe could make a starting driver find it taken): on Linux the kernel's
    table of locks (``/proc/locks``) says whether any process holds it; elsewhere, whether
    the process the lock file names is alive on this host."""
    path = Path(storage.removeprefix("file://")) / LOCK_NAME
    try:  # as the lock itself opens it: never through a link, never a FIFO or device
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"{path} is not a lock file Falkirk wrote ({exc.strerror}): remove it") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StorageError(f"{path} is not a regular file: remove it (a driver writes a new lock file)")
        recorded = os.read(fd, LOCK_READ_LIMIT)
    finally:
        os.close(fd)
    held = _flock_held(st)
    if held is None:  # no /proc/locks: judge by the recorded process
        try:
            owner = json.loads(recorded or b"{}")
        except ValueError:
            owner = {}
        held = isinstance(owner, dict) and owner.get("host") == socket.gethostname() and _alive(owner.get("pid"))
    return RootLock.describe_owner(recorded) if held else None


def _flock_held(st: os.stat_result) -> bool | None:
    """Whether some process holds a ``flock`` on the file ``st`` describes, from
    ``/proc/locks`` (None where there is no such table)."""
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(line.split()[1:2] == ["FLOCK"] and device in line.split() for line in table.splitlines())


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _files(files: tuple[StoredFile, ...] | list[StoredFile]) -> int:
    return sum(f.size for f in files)


def status(storage: str, metadata_dir: str | None = None, dsns: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything ``falkirk status`` shows, as JSON-ready data (see the module docstring).

    Keys: ``storage``, ``pipeline``, ``identity``, ``global_checkpoints``, ``driver``
    (the lock holder or None), ``epoch`` (the epoch of the latest commit),
    ``processors`` (per processor: kind, policy, inputs, ``frontier`` = latest
    committed rollback point, ``rollback_points``, ``last_checkpoint`` and keyed
    ``checkpoints`` kept with their bytes, ``logs`` kept with their bytes, ``sink_epochs``
    committed and kept, ``sink_range`` = first and last epoch ever committed),
    ``position`` per source (its latest offsets) and ``input`` (what of its input a
    recovery may still read: :func:`input_needs`), ``recovery`` (the solver's ``frontiers`` and
    per-processor ``why``) and ``in_doubt`` (per PostgreSQL sink, its prepared
    transactions: :func:`falkirk.ops.transactions.in_doubt`; ``dsns``: sink -> DSN
    to reach its database with, instead of the recorded one)."""
    store = open_root(storage, metadata_dir)
    try:
        description = store.description()
        if description is None:
            raise StorageError(
                f"{storage} has no pipeline description (written by a Falkirk older than the status "
                "command); run the pipeline once with this version and ask again"
            )
        topology = parse_scenario(description["topology"]).topology
        stored = store.checkpoints(topology)
        processors: dict[str, Any] = {}
        last = 0
        for name, info in description["processors"].items():
            # A loop processor's rollback points are (epoch, iteration) ticks; its
            # frontier is the last epoch it holds whole.
            finite = [tick(s.meta.frontier) for s in stored[name] if not s.meta.frontier.is_top]
            frontier = max((t.epochs_done for t in finite), default=0)
            last = max(last, frontier)
            states = store.state_files(name)
            logs = {out: store.logs(out) for out in _outputs(topology, name)}
            processors[name] = {
                **info,
                "frontier": frontier,
                "rollback_points": [t.to_json() for t in finite],
                "last_checkpoint": states[-1][0].to_json() if states else None,
                "checkpoints": {"count": len(states), "bytes": sum(_files(f) for _, _, f in states)},
                "logs": {
                    "count": sum(len(v) for v in logs.values()),
                    "bytes": sum(_files(f) for v in logs.values() for f in v.values()),
                },
            }
            if info["sink"]:
                commits = store.sink_commits(name)
                processors[name]["sink_epochs"] = sorted(commits)
                processors[name]["sink_range"] = store.sink_ranges().get(name)
            if info["source"]:
                processors[name]["position"] = store.position(name)
                processors[name]["input"] = input_needs(store.offsets(name), processors[name]["position"])
        recovery: dict[str, Any]
        if any(stored.values()):
            plan = solve(topology, {p: [s.meta for s in ss] for p, ss in stored.items()})
            recovery = {
                "frontiers": _strict(plan.to_json()["frontiers"]),
                "why": {p: str(e) for p, e in plan.explanations.items()},
                "table": plan.table(),
            }
        else:
            recovery = {"frontiers": {}, "why": {}, "table": "nothing committed yet: a start begins at epoch 1"}
        for (name, _), record in store.quarantined().items():
            if name in processors:
                aside = processors[name].setdefault("set_aside", {"rows": 0, "epochs": 0, "in_table": 0})
                if record.unit is QuarantineUnit.FILE:
                    aside["files"] = aside.get("files", 0) + len(record.reasons)
                    aside["epochs"] += 1
                    continue
                aside["rows"] += max(record.rows, 0)
                aside["epochs"] += 1
                aside["in_table"] += max(record.rows, 0) if record.files else 0
        committed = store.committed_epoch()
        identity = recorded(store)
        return {
            "storage": storage,
            "pipeline": description["pipeline"],
            "identity": str(identity) if identity is not None else None,
            "global_checkpoints": description["global_checkpoints"],
            "driver": driver_holding(storage) if not is_uri(storage) or storage.startswith("file://") else None,
            "epoch": committed if committed is not None else last,
            "processors": processors,
            "recovery": recovery,
            "in_doubt": [d.to_json() for d in in_doubt(description, identity, dsns)] if identity is not None else [],
            "partitions": store.fact("state_partitions"),
            "history": description.get("history", []),
        }
    finally:
        store.close()


def inspect(storage: str, what: str, metadata_dir: str | None = None) -> dict[str, Any]:
    """The Ξ records and files behind an epoch (``what`` is a number) or a processor
    (``what`` is its name): ``{"epoch"|"processor": ..., "records": [...], "files": [...]}``."""
    store = open_root(storage, metadata_dir)
    try:
        description = store.description()
        if description is None:
            raise StorageError(f"{storage} has no pipeline description; run the pipeline once with this version")
        topology = parse_scenario(description["topology"]).topology
        stored = store.checkpoints(topology)
        if what.lstrip("-").isascii() and what.lstrip("-").isdigit():
            epoch = int(what)
            if epoch < 1:
                raise StorageError(f"epoch {epoch}: epochs are numbered from 1")
            records, files = [], []
            for p, ss in stored.items():
                for s in ss:
                    if not s.meta.frontier.is_top and tick(s.meta.frontier).epoch == epoch:
                        records.append({"processor": p, **_record(s.meta)})
            for p in description["processors"]:
                files += [_file("state", p, f) for t, _, fs in store.state_files(p) if t.epoch == epoch for f in fs]
                if description["processors"][p]["sink"]:
                    files += [_file("sink", p, f) for f in store.sink_commits(p).get(epoch, ())]
            for out in {o for p in description["processors"] for o in _outputs(topology, p)}:
                files += [_file("log", out, f) for t, fs in store.logs(out).items() if t.epoch == epoch for f in fs]
            offsets = {s: store.offsets(s).get(epoch) for s, i in description["processors"].items() if i["source"]}
            if not records and not files and all(v is None for v in offsets.values()):
                raise StorageError(
                    f"epoch {epoch} has no records kept in {storage}: it was never committed, or its records "
                    "were collected as garbage once no recovery could need them (falkirk status lists what is kept)"
                )
            return {"epoch": epoch, "records": records, "files": files, "offsets": offsets}
        if what not in description["processors"]:
            raise StorageError(f"no processor {what!r} in pipeline {description['pipeline']!r}: {sorted(description['processors'])}")
        records = [_record(s.meta) for s in stored[what]]
        files = [_file(f"state {_time(t)} ({kind})", what, f) for t, kind, fs in store.state_files(what) for f in fs]
        for out in _outputs(topology, what):
            files += [_file(f"log {_time(t)}", out, f) for t, fs in store.logs(out).items() for f in fs]
        return {"processor": what, **description["processors"][what], "records": records, "files": files}
    finally:
        store.close()


def _strict(value: Any) -> Any:
    """``value`` with every ∞ (a loop frontier's iteration) as ``"inf"``: strict JSON,
    which the scenario format reads back."""
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    return value


def _time(t: Tick) -> str:
    """``epoch 3``, or ``epoch 3 iteration 5`` / ``epoch 3 all iterations`` in a loop."""
    if t.step is None:
        return f"epoch {t.epoch}"
    return f"epoch {t.epoch} " + ("all iterations" if t.is_whole else f"iteration {t.step}")


def _outputs(topology: Topology, processor: str) -> list[str]:
    """The outputs (``processor.port``, what logs are kept under) of ``processor``."""
    return sorted({EdgeId.parse(e.name).output for e in topology.outputs(processor)})


def _record(meta: CheckpointMeta) -> dict[str, Any]:
    return {"frontier": frontier_to_json(meta.frontier), "xi": checkpoint_to_json(meta)}


def _file(kind: str, owner: str, f: StoredFile) -> dict[str, Any]:
    return {"kind": kind, "of": owner, "path": f.path, "bytes": f.size, "sha256": f.sha256}


def input_needs(kept: dict[int, Any], position: Any) -> dict[str, Any]:
    """What of a source's input a recovery may still read, from the offsets the root
    keeps (``kept``, by epoch: the root forgets an epoch's offsets once no rollback can
    replay it) and its ``position``. ``reread``: the epochs a recovery may read again,
    with their files for a file source. ``safe_before``: every consumed file whose name
    sorts before it is read by no recovery (safe to delete or archive); None with
    nothing to re-read: every file up to ``last`` is. Files not consumed yet
    (sorting after ``last``) are still to be read."""
    reread = {e: o for e, o in sorted(kept.items()) if o}
    files = {e: [f[0] for f in o.get("files", [])] for e, o in reread.items() if isinstance(o, dict)}
    first = next((names[0] for names in files.values() if names), None)
    last = position.get("last") if isinstance(position, dict) else None
    return {"reread": {str(e): files.get(e, []) for e in reread}, "safe_before": first, "last": last}


def _render_input(name: str, need: dict[str, Any]) -> str:
    reread = need["reread"]
    if not reread:
        if need["last"] is None:
            return f"input of {name}: nothing consumed yet, or every epoch read may be forgotten"
        return f"input of {name}: no recovery reads any consumed file again: every file up to {need['last']!r} may be deleted or archived"
    epochs = sorted(int(e) for e in reread)
    names = [f for e in epochs for f in reread[str(e)]]
    span = f"epoch {epochs[0]}" if len(epochs) == 1 else f"epochs {epochs[0]}-{epochs[-1]}"
    shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    safe = f"files sorting before {need['safe_before']!r} may be deleted or archived; " if need["safe_before"] else ""
    return f"input of {name}: {safe}a recovery may still read {span}" + (f": {shown} (keep them)" if names else "")


def render(report: dict[str, Any]) -> str:
    """``status`` as text for people."""
    lines = [
        f"pipeline {report['pipeline']} ({report['identity']}) at {report['storage']}",
        f"driver: {report['driver'] or 'none running'}",
        f"last committed epoch: {report['epoch']}",
    ]
    if report["global_checkpoints"]:
        g = report["global_checkpoints"]
        lines.append(f"global checkpoints: every {g['every']} epochs" if g["every"] else f"global checkpoints: every {g['seconds']} s")
    if report.get("partitions"):
        lines.append(f"state partitions: {report['partitions']}")
    for version in report.get("history", []):
        changes = "; ".join(version.get("changes", [])) or "no state changed"
        lines.append(f"version {version['version']}: from savepoint {version['savepoint']} at epoch {version['epoch']} ({changes})")
    lines.append("")
    header = ("processor", "kind", "policy", "frontier", "last ckpt", "ckpts kept", "logs kept")
    rows = [header]
    for name, p in report["processors"].items():
        rows.append((
            name,
            p["kind"],
            p["policy"],
            str(p["frontier"]),
            "-" if p["last_checkpoint"] is None else str(p["last_checkpoint"]),
            f"{p['checkpoints']['count']} ({_bytes(p['checkpoints']['bytes'])})",
            f"{p['logs']['count']} ({_bytes(p['logs']['bytes'])})",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    inputs = [_render_input(name, p["input"]) for name, p in report["processors"].items() if "input" in p]
    lines += ["", *inputs] if inputs else []
    aside = [_render_set_aside(name, p["set_aside"], report["storage"]) for name, p in report["processors"].items() if "set_aside" in p]
    lines += ["", *aside] if aside else []
    lines += ["", "if a driver started now, recovery would choose:", report["recovery"]["table"]]
    lines += _render_in_doubt(report)
    return "\n".join(lines)


def _render_set_aside(name: str, aside: dict[str, Any], storage: str) -> str:
    if aside.get("files"):
        return f"{name} left {aside['files']} late input files unread, in {aside['epochs']} epochs: see falkirk inspect {storage} quarantine"
    where = "its errors output's sink"
    if aside["in_table"]:
        where = f"the quarantine table (falkirk inspect {storage} quarantine)"
        if aside["in_table"] < aside["rows"]:
            where += " and its errors output's sink"
    return f"{name} set aside {aside['rows']} rows it could not process, in {aside['epochs']} epochs: see {where}"


def last_failure(storage: str, metadata_dir: str | None = None) -> str:
    """The last run-time error recorded in the root (``falkirk inspect ROOT failure``):
    where it failed, then its whole trace (passwords masked)."""
    store = open_root(storage, metadata_dir)
    try:
        raw = store.fact(LAST_FAILURE)
    finally:
        store.close()
    if raw is None:
        return f"{storage}: no run-time error recorded"
    detail = json.loads(raw)
    lines = [f"{key}: {detail[key]}" for key in ("processor", "kind", "epoch", "cause", "inputs", "line", "note") if detail.get(key)]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(detail["at"]))
    return "\n".join([f"last run-time error in {storage}, at {when}:", *lines, "", detail["trace"]])


def quarantine(storage: str, metadata_dir: str | None = None, shown: int = 20) -> dict[str, Any]:
    """The rows processors set aside (``falkirk inspect ROOT quarantine``): per
    processor and epoch, how many, why, and (for rows in the root's quarantine table)
    the first ``shown`` of them."""
    import pyarrow.parquet as pq

    store = open_root(storage, metadata_dir)
    try:
        records = []
        for (name, epoch), record in store.quarantined().items():
            entry: dict[str, Any] = {
                "processor": name,
                "epoch": epoch,
                "unit": record.unit.value,
                "rows": record.rows,
                "reasons": sorted(set(record.reasons.values())),
                "where": "quarantine table" if record.files else ("input directory" if record.unit is QuarantineUnit.FILE else "errors output"),
                "files": [f.path for f in record.files],
            }
            paths = [local_path(f.path) if is_uri(f.path) else f.path for f in record.files]
            if paths and all(paths):  # (the rows of a remote root's table are read with Spark)
                rows: list[dict[str, Any]] = []
                for path in paths:
                    rows += pq.read_table(path).to_pylist()[: shown - len(rows)]
                entry["first_rows"] = rows
            records.append(entry)
        return {"storage": storage, "set_aside": records}
    finally:
        store.close()


def _render_in_doubt(report: dict[str, Any]) -> list[str]:
    lines = []
    for doubt in report["in_doubt"]:
        head = f"sink {doubt['sink']} (PostgreSQL at {doubt['where']}): "
        if doubt["error"]:
            lines.append(head + f"in-doubt transactions not checked: {doubt['error']}")
            continue
        mine = doubt["mine"]
        lines.append(
            head + (f"in-doubt epochs {mine}: the next run commits or rolls back each, from the committed metadata"
                    if mine else "no in-doubt transaction")
        )
        for other, epochs in doubt["others"].items():
            lines.append(
                f"  epochs {epochs} are in doubt under another identity of this pipeline, {other}: another "
                "root's (its next run resolves them), or this root's under an older Falkirk, which named "
                f"transactions after the root's path; then `falkirk resolve {report['storage']} --identity {other}` "
                "resolves them (it refuses transactions that wrote another table, or whose driver runs)"
            )
    return ["", *lines] if lines else []


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
