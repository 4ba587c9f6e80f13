"""A storage root's identity names its PostgreSQL transactions, whatever path reaches
the root (issue 29, finding 1): a root reached by a symlink, a relative path or copied
whole (``cp -a``) finds and resolves its own in-doubt transactions after a SIGKILL; a
copy started next to its original is refused; ``falkirk fork`` gives a copy its own
identity; ``falkirk status`` lists in-doubt transactions and ``falkirk resolve``
resolves those left under an old identity. Every check compares the whole table with
the input (every row, exactly once) and finds no prepared transaction left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from falkirk.cli import main as cli
from falkirk.io.exceptions import SinkError
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.storage.schema import with_crc
from falkirk.testing.services import PostgresServer
from tests.engine.identity_pipeline import NAME, SINK, build_pipeline

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("identity_pipeline.py")
FILES = 6
ROWS = 5


def write_input(directory: Path, files: int = FILES) -> None:
    directory.mkdir()
    for i in range(1, files + 1):
        (directory / f"f{i:02d}.csv").write_text("".join(f"k{j},{i * 100 + j}\n" for j in range(ROWS)))


def expected(files: int = FILES, first: int = 1) -> list[tuple[Any, ...]]:
    """Every row of the table: file i is epoch i."""
    return sorted((f"k{j}", i * 100 + j, 2 * (i * 100 + j), i) for i in range(first, files + 1) for j in range(ROWS))


def table_rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sorted(conn.execute(f"SELECT k, v, v2, epoch FROM {table}").fetchall())


def prepared(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sorted(r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall())


def identity_of(root: Path) -> str | None:
    store = MetaStore(root, read_only=True)
    try:
        return store.fact("identity")
    finally:
        store.close()


class Case:
    def __init__(self, server: PostgresServer, tmp_path: Path) -> None:
        self.dsn = server.dsn
        self.table = f"t_{uuid.uuid4().hex[:8]}"
        self.tmp = tmp_path
        self.inputs = tmp_path / "in"
        write_input(self.inputs)

    def start(self, root: str | Path, crash: str | None = None, idle: float = 0.0, cwd: Path | None = None,
              table: str | None = None) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
        if crash:
            env["FALKIRK_CRASH_AT"] = crash
        args = [str(self.inputs), str(root), self.dsn, table or self.table, "--idle", str(idle)]
        log = (self.tmp / f"log-{uuid.uuid4().hex[:6]}.txt").open("wb")
        return subprocess.Popen([sys.executable, str(SCRIPT), *args], env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)

    def run(self, root: str | Path, crash: str | None = None, cwd: Path | None = None) -> int:
        proc = self.start(root, crash, cwd=cwd)
        code = proc.wait(timeout=600)
        assert code in (0, -signal.SIGKILL), self.logs()
        if crash:
            assert code == -signal.SIGKILL, f"{crash} was not reached"
        return code

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.tmp.glob("log-*.txt")))

    def check(self, table: str | None = None, first: int = 1) -> None:
        assert table_rows(self.dsn, table or self.table) == expected(first=first), "every row once, no epoch lost"
        assert [g for g in prepared(self.dsn) if f":{SINK}:" in g and NAME in g] == [], "no transaction left in doubt"


@pytest.mark.slow
def test_a_root_reached_by_a_symlink_a_relative_path_or_a_copy_resolves_its_own_transactions(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """A chain of kills, each run recovering from the previous one under another path:
    at ``sink.written`` an epoch is prepared and not committed (it must be rolled back
    and written again); at ``sink.release`` it is committed and not yet COMMIT PREPARED
    (it must be committed, not lost: the review found 25 of 30 rows)."""
    case = Case(postgres_server, tmp_path)
    root = tmp_path / "st_a"
    case.run(root, crash="sink.written:2")
    (tmp_path / "st_link").symlink_to(root)
    case.run(tmp_path / "st_link", crash="sink.release:2")
    case.run(Path("..") / "st_a", crash="sink.written:2", cwd=tmp_path / "in")  # a relative path
    assert not (tmp_path / "in" / "st_a").exists()
    shutil.copytree(root, tmp_path / "st_copy", symlinks=True)  # cp -a: a restore
    case.run(tmp_path / "st_copy", crash="sink.release:1")
    assert case.run(tmp_path / "st_copy") == 0
    case.check()
    assert identity_of(tmp_path / "st_copy") == identity_of(root), "a copy is a restore: same identity"


@pytest.mark.slow
def test_a_copy_next_to_its_original_is_refused_and_a_fork_gets_its_own_identity(
    spark: Any, postgres_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)  # the root records its sink's DSN without it
    case = Case(postgres_server, tmp_path)
    root, copy = tmp_path / "st_a", tmp_path / "st_copy"
    case.run(root, crash="sink.release:2")  # epoch 2 committed, in doubt
    shutil.copytree(root, copy, symlinks=True)
    assert cli(["status", str(root)]) == 0
    assert "in-doubt epochs [2]" in capsys.readouterr().out
    assert cli(["fork", str(copy)]) == 2
    assert "in-doubt transactions of sink 'pg'" in capsys.readouterr().err, "a fork would leave epoch 2 unresolved"

    original = case.start(root, idle=600)  # resolves epoch 2, runs on, holds the lease
    try:
        deadline = time.monotonic() + 120
        while len(table_rows(case.dsn, case.table)) < FILES * ROWS:
            assert original.poll() is None and time.monotonic() < deadline, case.logs()
            time.sleep(0.2)
        before = table_rows(case.dsn, case.table)
        with pytest.raises(SinkError, match="another driver is running storage root identity"):
            Engine(build_pipeline(str(case.inputs), case.dsn, case.table), copy, spark=spark).run()
        assert table_rows(case.dsn, case.table) == before, "the refused copy wrote and rolled back nothing"
        assert cli(["fork", str(copy)]) == 2
        assert "is running against sink 'pg'" in capsys.readouterr().err
    finally:
        original.kill()
        original.wait()
    case.check()

    assert cli(["fork", str(copy)]) == 0
    capsys.readouterr()
    forked = identity_of(copy)
    assert forked is not None and forked != identity_of(root)
    # The fork recovers from the copy's metadata (epochs 1-2 committed) and writes the
    # rest; given a table of its own, it holds exactly epochs 3-6, once.
    other = f"{case.table}_fork"
    Engine(build_pipeline(str(case.inputs), case.dsn, other), copy, spark=spark).run()
    case.check(other, first=3)
    with psycopg.connect(case.dsn, autocommit=True) as conn:
        marks = {p for (p,) in conn.execute("SELECT DISTINCT prefix FROM falkirk.sink_epochs").fetchall()}
    assert f"falkirk:{forked}:{SINK}:" in marks


def _rename_identity(root: Path, identity: str) -> None:
    """What an older Falkirk did when the root was reached by another path: the same
    metadata, recorded under another (path-derived) identity."""
    db = sqlite3.connect(root / "meta.sqlite")
    try:
        (name, raw) = db.execute("SELECT name, description FROM pipeline").fetchone()
        description = {**json.loads(raw), "identity": identity}
        db.execute("DELETE FROM pipeline")
        db.execute("INSERT INTO pipeline VALUES (?, ?, ?)", with_crc(name, json.dumps(description, sort_keys=True)))
        db.execute("DELETE FROM root")
        db.execute("PRAGMA user_version=5")  # a schema-5 root: no root facts
        db.commit()
    finally:
        db.close()


@pytest.mark.slow
def test_roots_written_before_identities_were_recorded(
    spark: Any, postgres_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema-5 root adopts the identity its description holds (its in-doubt epoch
    is committed, not lost); transactions left under another, older name are listed
    by ``falkirk status`` and committed by ``falkirk resolve``."""
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)  # the root records its sink's DSN without it
    case = Case(postgres_server, tmp_path)
    root = tmp_path / "st"
    case.run(root, crash="sink.release:3")
    written = identity_of(root)
    assert written is not None and [g for g in prepared(case.dsn) if written in g] == [f"falkirk:{written}:{SINK}:3"]

    adopted = tmp_path / "adopted"
    shutil.copytree(root, adopted)
    _rename_identity(adopted, written)  # recorded in its description only, as schema 5 did
    Engine(build_pipeline(str(case.inputs), case.dsn, case.table), adopted, spark=spark).run()
    assert identity_of(adopted) == written, "adopted, never a new hash of today's path"
    case.check()

    # The old naming's loss: the same root restarted under another name left epoch 3
    # prepared under the first and committed the rest under the second.
    table2 = f"{case.table}_b"
    case2 = Case.__new__(Case)
    case2.__dict__.update(case.__dict__, table=table2, tmp=tmp_path)
    lost = tmp_path / "lost"
    case2.run(lost, crash="sink.release:3")
    first = identity_of(lost)
    _rename_identity(lost, f"{NAME}.0123456789ab")
    Engine(build_pipeline(str(case.inputs), case.dsn, table2), lost, spark=spark).run()
    assert [r[3] for r in table_rows(case.dsn, table2)].count(3) == 0, "epoch 3 stayed in doubt under the old name"
    assert cli(["status", str(lost)]) == 0
    out = capsys.readouterr().out
    assert f"epochs [3] are in doubt under another identity of this pipeline, {first}" in out and f"--identity {first}" in out
    # Another root of the pipeline, writing another table, has an epoch in doubt too:
    # resolving it from this root is refused (the review rolled it back, losing it).
    case3 = Case.__new__(Case)
    case3.__dict__.update(case.__dict__, table=f"{case.table}_c", tmp=tmp_path)
    other_root = tmp_path / "other"
    case3.run(other_root, crash="sink.release:3")
    other = identity_of(other_root)
    assert cli(["resolve", str(lost), "--identity", str(other)]) == 2
    assert "belongs to another root of this pipeline" in capsys.readouterr().err
    assert f"falkirk:{other}:{SINK}:3" in prepared(case.dsn), "left to its own root"
    case3.run(other_root)  # which resolves it itself
    assert f"falkirk:{other}:{SINK}:3" not in prepared(case.dsn), ("resolved by its own root", case3.logs())
    assert table_rows(case.dsn, case3.table) == expected()
    metadata = (lost / "meta.sqlite").read_bytes()
    assert cli(["resolve", str(lost), "--identity", str(first), "--dry-run"]) == 0
    assert f"would COMMIT PREPARED falkirk:{first}:{SINK}:3" in capsys.readouterr().out
    assert table_rows(case.dsn, table2) != expected(), "a dry run changes nothing"
    assert (lost / "meta.sqlite").read_bytes() == metadata, "not even the metadata (read-only)"
    assert cli(["resolve", str(lost), "--identity", str(first)]) == 0
    assert table_rows(case.dsn, table2) == expected()
    left = [g for g in prepared(case.dsn) if any(str(i) in g for i in (first, other, written, identity_of(lost)))]
    assert left == [], (left, first, other, written, identity_of(lost))


@pytest.mark.slow
def test_a_root_restored_from_an_older_backup_writes_no_epoch_twice(
    spark: Any, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Review: a backup taken after epoch 3, restored after the original committed
    epochs 4-6, replayed them: a rollback's ROLLBACK PREPARED also forgot the marks of
    committed epochs, so 4-6 were written twice. The marks stay now."""
    case = Case(postgres_server, tmp_path)
    root, backup = tmp_path / "st", tmp_path / "backup"
    Engine(build_pipeline(str(case.inputs), case.dsn, case.table), root, spark=spark).run(max_epochs=3)
    shutil.copytree(root, backup)
    Engine(build_pipeline(str(case.inputs), case.dsn, case.table), root, spark=spark).run()
    case.check()
    Engine(build_pipeline(str(case.inputs), case.dsn, case.table), backup, spark=spark).run()
    case.check()
