"""Passwords never leave the process in clear (issue 30, finding 1): a run of
``examples/redis_to_postgres.py`` against a Redis and a PostgreSQL that ask for
passwords, given in the environment, logging at INFO with its dashboard on; then its
failures (a wrong port, a wrong password). Every line it printed, every page it
served, ``falkirk status`` and ``inspect``, the metadata it wrote, and the reprs of
its sources and sinks are searched for the passwords."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import redis

from falkirk.io.postgres import PostgresSink
from falkirk.io.redis_streams import RedisStreamSink, RedisStreamSource
from falkirk.redact import redact_dsn, redact_url, where_dsn
from falkirk.testing.services import PostgresServer, RedisServer, free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "redis_to_postgres.py"


def run_example(env: dict[str, str], args: list[str], port: int | None = None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The example's output, and the pages its dashboard served while it ran."""
    full = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pages: list[str] = []
    if port is not None:
        deadline = time.monotonic() + 120
        while not pages and proc.poll() is None and time.monotonic() < deadline:
            try:
                for path in ("/", "/api/status", "/metrics/", "/api/graph.svg"):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                        pages.append(response.read().decode(errors="replace"))
            except OSError:
                pages.clear()
                time.sleep(0.3)
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), pages


def test_no_password_in_any_message_log_page_or_record(redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path) -> None:
    secrets = [redis_server.password, postgres_server.password]
    stream, table, root = f"s{uuid.uuid4().hex[:6]}", f"t_{uuid.uuid4().hex[:6]}", tmp_path / "state"
    r = redis.Redis.from_url(redis_server.url)
    for i in range(20):
        r.xadd(stream, {"user_id": f"u{i % 3}", "amount": str(i)} if i % 7 else {"user_id": "", "amount": "x"})
    env = {"FALKIRK_REDIS_URL": redis_server.url, "FALKIRK_PG_DSN": postgres_server.dsn}
    port = free_port()
    common = ["--stream", stream, "--group", "g", "--table", table, "--storage", str(root)]
    done, pages = run_example(env, [*common, "-v", "--progress", "--idle-exit", "6", "--ui", f"127.0.0.1:{port}"], port)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(pages) == 4 and json.loads(pages[1])["pipeline"], "the dashboard served every page"
    said = [done.stdout, done.stderr, *pages]

    # Failures: a server that is not there, and a wrong password.
    wrong_port = redis_server.url.replace(f":{redis_server.port}/", f":{free_port()}/")
    failed, _ = run_example({**env, "FALKIRK_REDIS_URL": wrong_port}, [*common, "--idle-exit", "0"])
    assert failed.returncode != 0
    bad_pg = postgres_server.dsn.replace(f":{postgres_server.port}/", f":{free_port()}/")
    quick = ["--idle-exit", "0", "--retry-seconds", "1"]  # not a minute of retries per failure
    failed_pg, _ = run_example({**env, "FALKIRK_PG_DSN": bad_pg}, [*common[:-1], str(tmp_path / "fresh"), *quick])
    assert failed_pg.returncode == 2 and "127.0.0.1:" in failed_pg.stderr, failed_pg.stderr[-2000:]
    kv = f"host=127.0.0.1 port={postgres_server.port} user=postgres password={postgres_server.password} dbname=nosuchdb"
    failed_kv, _ = run_example({**env, "FALKIRK_PG_DSN": kv}, [*common[:-1], str(tmp_path / "fresh2"), *quick])
    assert failed_kv.returncode == 2, failed_kv.stderr[-2000:]
    said += [failed.stdout, failed.stderr, failed_pg.stdout, failed_pg.stderr, failed_kv.stdout, failed_kv.stderr]

    for command in (["status", str(root), "--json"], ["status", str(root)], ["inspect", str(root), "1"]):
        shown = subprocess.run([sys.executable, "-m", "falkirk.cli", *command], capture_output=True, text=True, env={**os.environ, "PGPASSWORD": postgres_server.password})
        assert shown.returncode == 0, shown.stderr
        said += [shown.stdout, shown.stderr]
    status = json.loads(subprocess.run([sys.executable, "-m", "falkirk.cli", "status", str(root), "--json"], capture_output=True, text=True).stdout)
    assert status["in_doubt"][0]["where"] == f"127.0.0.1:{postgres_server.port}/postgres"
    said.append(b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file()).decode(errors="replace"))

    said += [
        repr(PostgresSink(postgres_server.dsn, "t", key=("k",))),
        repr(PostgresSink(kv, "t", key=("k",))),
        repr(RedisStreamSource(redis_server.url, "s", "g")),
        repr(RedisStreamSink(redis_server.url + "?password=" + redis_server.password, "s")),
        redact_dsn(postgres_server.dsn + "?password=" + postgres_server.password),
        where_dsn(kv),
        redact_url("redis://user:" + redis_server.password + "@h/0"),
    ]
    for text in said:
        for secret in secrets:
            assert secret not in text, f"a password in: {text[max(0, text.find(secret) - 300):text.find(secret) + 100]}"
