"""Throw-away Redis and PostgreSQL servers on 127.0.0.1, for tests and demos.

Each server runs from the Debian package's binaries (``scripts/bootstrap.sh``
installs ``redis-server`` and ``postgresql``), on a free port of 127.0.0.1, with its
data in a temporary directory (mode 0700) that is removed when it stops, and a random
password made for it (``url`` and ``dsn`` carry it; it is never on a command line:
other local users read those in ``/proc``). PostgreSQL runs as the ``postgres`` user
when started by root (it refuses to run as root), checks passwords with
``scram-sha-256``, and allows prepared transactions (two-phase commit); Redis asks
for the password (``requirepass``).

    with RedisServer() as redis, PostgresServer() as pg:
        print(redis.url, pg.dsn)

Nothing here is used by a running pipeline: these are for trying Falkirk out and
for its test suite, never for production data.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from falkirk.exceptions import FalkirkError


class ServiceError(FalkirkError):
    """A test service could not be started (its binary is missing or it failed)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServiceError(f"{what} exited with {proc.returncode} while starting: {_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise ServiceError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s: {_tail(log)}")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies
    (Linux), so that a killed test run leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-1500:]
    except OSError:
        return "(no log)"


class _Server:
    name = "server"
    stop_signal = signal.SIGTERM

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"falkirk-{self.name}-"))  # 0700
        #: The password the server asks for (random, made for this server).
        self.password = secrets.token_urlsafe(18)
        self.log = self.dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Server:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def _signal_server(self, sig: int) -> None:
        """Send ``sig`` to the server process itself."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and remove its data."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal_server(self.stop_signal)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(_Server):
    """``redis-server`` on 127.0.0.1:``port``, persistence off; ``url`` to connect."""

    name = "redis"

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceError("redis-server is not installed: run scripts/bootstrap.sh (it installs Debian's redis-server)")
        config = self.dir / "redis.conf"  # the password in a file of its own (0600), not on the command line
        config.touch(mode=0o600)
        config.write_text(
            f"bind 127.0.0.1\nport {self.port}\ndir {self.dir}\nsave \"\"\nappendonly no\nprotected-mode yes\n"
            f"daemonize no\nrequirepass {self.password}\n"
        )
        args = [binary, str(config)]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        _wait_for_port(self.port, self.proc, "redis-server", self.log)


def postgres_bin() -> Path | None:
    """The directory of PostgreSQL's server binaries (Debian keeps them off PATH)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


class PostgresServer(_Server):
    """A PostgreSQL cluster on 127.0.0.1:``port`` (user ``postgres``, database
    ``postgres``, password :attr:`password`, checked with ``scram-sha-256``),
    ``max_prepared_transactions`` = ``prepared``; ``dsn`` to connect."""

    name = "postgres"
    stop_signal = signal.SIGINT  # "fast" shutdown: does not wait for clients to leave

    def __init__(self, prepared: int = 64) -> None:
        super().__init__()
        self.prepared = prepared

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self) -> tuple[list[str], dict[str, str]]:
        if os.geteuid() != 0:
            return [], {}
        try:
            pwd.getpwnam("postgres")
        except KeyError as exc:
            raise ServiceError("PostgreSQL refuses to run as root and there is no 'postgres' user: install Debian's postgresql") from exc
        return ["runuser", "-u", "postgres", "--"], {}

    def start(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise ServiceError("PostgreSQL is not installed: run scripts/bootstrap.sh (it installs Debian's postgresql)")
        prefix, _ = self._as_postgres()
        data = self.dir / "data"
        if prefix:
            shutil.chown(self.dir, user="postgres", group="postgres")
        pwfile = self.dir / "password"
        pwfile.touch(mode=0o600)
        pwfile.write_text(self.password + "\n")
        if prefix:
            shutil.chown(pwfile, user="postgres", group="postgres")
        init = subprocess.run(
            [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"],
            capture_output=True,
        )
        pwfile.unlink()
        if init.returncode != 0:
            raise ServiceError(f"initdb failed: {init.stderr.decode(errors='replace')[-1500:]}")
        self._launch(bin_dir, prefix, data, self.log)

    def _launch(self, bin_dir: Path, prefix: list[str], data: Path, log_path: Path) -> None:
        args = [*prefix, str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.dir),
                "-c", "listen_addresses=127.0.0.1", "-c", f"max_prepared_transactions={self.prepared}",
                "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off"]
        with open(log_path, "wb") as log:
            if prefix:
                shutil.chown(log_path, user="postgres", group="postgres")
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        _wait_for_port(self.port, self.proc, "postgres", log_path)
        deadline = time.monotonic() + 30
        while subprocess.run([str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise ServiceError(f"postgres did not accept connections: {_tail(log_path)}")
            time.sleep(0.1)

    def _signal_server(self, sig: int) -> None:
        """The postmaster itself (``runuser``, in front of it when started as root,
        passes SIGINT on as SIGTERM: a "smart" shutdown that waits for every client
        to leave)."""
        try:
            postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            super()._signal_server(sig)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, sig)

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the server the fast way (clients are disconnected; prepared
        transactions survive), wait ``down_seconds``, and start it again on the same
        data and port: what a PostgreSQL restart or fail-over looks like to clients.
        Call it from the main thread: the new server dies with the thread that
        started it (it is started to die with its parent)."""
        bin_dir = postgres_bin()
        if bin_dir is None or self.proc is None:
            raise ServiceError("restart() of a PostgresServer that was never started")
        data = self.dir / "data"
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGINT)
        self.proc.wait(timeout=30)
        time.sleep(down_seconds)
        self._launch(bin_dir, self._as_postgres()[0], data, self.dir / "server-restarted.log")
