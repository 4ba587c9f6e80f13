"""A Spark standalone cluster on this machine, from the pip ``pyspark`` package.

For tests, the bench and users trying Falkirk on a cluster before they have one::

    python -m falkirk.spark.standalone start --workers 3 --cores 1 --memory 1g
    FALKIRK_SPARK_MASTER=spark://127.0.0.1:7077 python examples/clickstream.py ...
    python -m falkirk.spark.standalone stop

A master and N workers, each its own JVM on 127.0.0.1 with its own cores, memory and
work directory (under ``--dir``, by default ``clusters/<port>`` in Falkirk's cache,
see :mod:`falkirk.storage.permissions`). Their process ids and logs are kept there:
``stop`` (and :meth:`Cluster.stop`) end every process the cluster started,
executors included; ``kill-worker I`` SIGKILLs worker I and its executors (a machine
lost).

Who may use it: the cluster's folder must be this user's and writable by nobody
else (a planted one is refused), its files are private, and ``stop`` signals only
processes that are this user's and this cluster's JVMs (a planted ``cluster.json``
naming other processes kills nothing). Every JVM of the cluster authenticates with
a secret generated at start (``spark.authenticate``), kept private in
``clusters/<port>/secret`` in the cache, where a driver given only
``FALKIRK_SPARK_MASTER=spark://127.0.0.1:<port>`` finds it
(:func:`falkirk.spark.session.spark_session`); the daemons get it in their
environment, never on a command line, so other users of the machine can neither
submit work to the cluster nor join it. Executors run the driver's Python interpreter
(``spark.pyspark.python``, set by :func:`falkirk.spark.session.spark_session`): on
this machine that is the same virtualenv, with ``falkirk`` installed. On a cluster
of several machines give executors the environment with ``spark.archives`` (see the
docs/how-to/cluster.md).

Nothing here imports pyspark's Python API: the cluster's processes are the JVM's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from falkirk.storage.permissions import cache_dir, trusted

STATE_FILE = "cluster.json"
#: The shared secret of a cluster's JVMs, in :func:`home`.
SECRET_FILE = "secret"
#: A standalone master on this machine (the only kind whose secret Falkirk keeps).
LOCAL_MASTER = re.compile(r"spark://(?:127\.0\.0\.1|localhost):(\d+)")


class ClusterError(RuntimeError):
    """The cluster could not be started, reached or stopped; the message says why."""


def spark_home() -> Path:
    """The pip pyspark package directory (it holds ``bin/spark-class`` and the jars)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed in this Python; run scripts/bootstrap.sh")
    return Path(spec.origin).parent


@dataclass
class Cluster:
    """A running standalone cluster: its master's URL, web UI and processes."""

    directory: Path
    port: int
    webui_port: int
    master_pid: int
    worker_pids: list[int] = field(default_factory=list)
    #: The JVMs' shared secret (see the module docstring); not shown.
    secret: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        """``spark://127.0.0.1:<port>``: the master to give ``FALKIRK_SPARK_MASTER``."""
        return f"spark://127.0.0.1:{self.port}"

    def save(self) -> None:
        state = {"port": self.port, "webui_port": self.webui_port, "master_pid": self.master_pid, "worker_pids": self.worker_pids}
        _write_private(self.directory / STATE_FILE, json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> Cluster:
        """The cluster started with ``directory`` (:class:`ClusterError` if none, or
        if its state file is not this user's alone)."""
        path = directory / STATE_FILE
        if path.exists() and not trusted(path):
            raise ClusterError(
                f"{path} is not this user's, or others may write it or its folder: it was not written by a cluster "
                "you started (remove it, or give the cluster's own --dir)"
            )
        try:
            state = json.loads(path.read_text())
            port = int(state["port"])
            pids = [int(p) for p in state["worker_pids"]]
            return cls(directory, port, int(state["webui_port"]), int(state["master_pid"]), pids, secret_of(f"spark://127.0.0.1:{port}") or "")
        except (OSError, ValueError, KeyError) as exc:
            raise ClusterError(f"no cluster was started with directory {directory} ({exc})") from exc

    def status(self) -> dict[str, object]:
        """The master's view (its web UI's JSON): workers alive, cores, applications."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as r:
                return json.loads(r.read().decode())  # type: ignore[no-any-return]
        except OSError as exc:
            raise ClusterError(f"the master's web UI on 127.0.0.1:{self.webui_port} does not answer ({exc})") from exc
        except ValueError as exc:  # an empty or partial page while the master starts
            raise ClusterError(f"the master's web UI on 127.0.0.1:{self.webui_port} answered without JSON ({exc})") from exc

    def alive_workers(self) -> int:
        alive = self.status().get("aliveworkers", 0)
        return int(alive) if isinstance(alive, (int, str)) else 0

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker ``index`` and every executor it launched (as when its machine
        dies); returns the process ids killed."""
        pid = self.worker_pids[index]
        if not self._ours(pid, index):
            raise ClusterError(f"process {pid} is not worker {index} of the cluster in {self.directory}")
        killed = [*_descendants(pid), pid]
        for p in killed:
            _signal(p, signal.SIGKILL)
        return killed

    def add_worker(self, cores: int, memory: str) -> int:
        """Start one more worker (a machine joining); returns its index."""
        self.worker_pids.append(_start_worker(self, len(self.worker_pids), cores, memory))
        self.save()
        return len(self.worker_pids) - 1

    def stop(self) -> None:
        """End every process the cluster started (executors, workers, master): only
        those that are still this cluster's JVMs (:meth:`_ours`); a process id reused
        since, or named by a planted state file, is left alone."""
        named = [(pid, i) for i, pid in enumerate(self.worker_pids)] + [(self.master_pid, None)]
        ours = [pid for pid, index in named if self._ours(pid, index)]
        for pid in ours:
            for p in [*_descendants(pid), pid]:
                _signal(p, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for pid in ours:
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if alive(pid):
                _signal(pid, signal.SIGKILL)
        (self.directory / STATE_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if (home(self.port) / SECRET_FILE).read_text() == self.secret:
                (home(self.port) / SECRET_FILE).unlink()

    def _ours(self, pid: int, worker: int | None) -> bool:
        """Whether ``pid`` is this user's process and this cluster's master (``worker``
        None) or worker ``worker``: its command line names the class and the
        cluster's port or the worker's work directory."""
        try:
            if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
                return False
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        if worker is None:
            wanted = [b"org.apache.spark.deploy.master.Master", b"--port", str(self.port).encode()]
        else:
            wanted = [b"org.apache.spark.deploy.worker.Worker", b"--work-dir", str(self.directory / f"worker-{worker}").encode()]
        return all(w in args for w in wanted)


def home(port: int) -> Path:
    """The cluster's folder at a known place, private (``clusters/<port>`` in the
    cache): its secret, and its work and logs unless ``directory`` says otherwise."""
    return cache_dir("clusters", str(port))


def secret_of(master: str) -> str | None:
    """The secret of the standalone cluster ``master`` (``spark://127.0.0.1:<port>``)
    that :func:`start` started on this machine, or None (another master; no such
    cluster; a secret file that is not this user's alone, which is not used)."""
    match = LOCAL_MASTER.fullmatch(master)
    if match is None:
        return None
    path = cache_dir().joinpath("clusters", match.group(1), SECRET_FILE)
    if not trusted(path) or os.lstat(path).st_mode & 0o077:  # others may read it: not a secret
        return None
    return path.read_text().strip() or None


def _own_folder(path: Path) -> Path:
    """``path`` as the cluster's folder: created private, or an existing one that is
    a real folder of this user's that nobody else may write (else someone could
    plant the logs, the state file or the processes' work)."""
    if not path.exists() and not path.is_symlink():
        path.mkdir(parents=True, mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ClusterError(
            f"{path} is not a folder of this user's that only this user may write (a link, another user's, or "
            "group- or world-writable): give the cluster a folder of your own with --dir"
        )
    return path


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` afresh, mode 0600, never through a link planted there."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def start(
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "1g",
    port: int = 7077,
    directory: str | os.PathLike[str] | None = None,
    timeout: float = 120.0,
) -> Cluster:
    """Start a master on ``127.0.0.1:port`` and ``workers`` workers, each with
    ``cores`` cores and ``memory``, and wait until all have registered."""
    if workers < 1 or cores < 1:
        raise ClusterError(f"a cluster needs at least one worker with one core, got {workers} workers of {cores} cores")
    if _port_open(port):
        raise ClusterError(f"127.0.0.1:{port} is in use (a cluster runs there already? stop it, or give another --port)")
    where = _own_folder(Path(directory) if directory is not None else home(port))
    secret = secrets.token_hex(32)
    _write_private(home(port) / SECRET_FILE, secret)
    webui = _free_port()
    try:
        master = _spawn(
            where, "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)],
            secret,
        )  # fmt: skip
    except BaseException:
        (home(port) / SECRET_FILE).unlink(missing_ok=True)
        raise
    cluster = Cluster(where, port, webui, master)
    cluster.secret = secret
    cluster.save()
    try:
        _wait(lambda: _port_open(port) and _port_open(webui), timeout, f"the master on 127.0.0.1:{port}", where / "master.log")
        for i in range(workers):
            cluster.worker_pids.append(_start_worker(cluster, i, cores, memory))
            cluster.save()
        _wait(lambda: cluster.alive_workers() >= workers, timeout, f"{workers} workers to register", where / "worker-0.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_worker(cluster: Cluster, index: int, cores: int, memory: str) -> int:
    work = cluster.directory / f"worker-{index}"
    work.mkdir(mode=0o700, exist_ok=True)
    secret = cluster.secret or secret_of(cluster.url)
    if secret is None:
        raise ClusterError(f"the secret of the cluster at {cluster.url} is missing from {home(cluster.port)}; restart the cluster")
    return _spawn(
        cluster.directory, f"worker-{index}",
        ["org.apache.spark.deploy.worker.Worker", cluster.url, "--host", "127.0.0.1", "--cores", str(cores),
         "--memory", memory, "--work-dir", str(work), "--webui-port", str(_free_port())],
        secret,
    )  # fmt: skip


def _spawn(directory: Path, name: str, args: list[str], secret: str) -> int:
    spark = spark_home()
    env = {**os.environ, "SPARK_HOME": str(spark), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(directory)}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    # The secret in the environment (readable by this user only), not on the command line.
    env["_SPARK_AUTH_SECRET"] = secret
    env["SPARK_DAEMON_JAVA_OPTS"] = f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} -Dspark.authenticate=true".strip()
    if shutil.which("java") is None and "JAVA_HOME" not in env:
        raise ClusterError("no Java runtime: run scripts/bootstrap.sh (it installs openjdk-17-jre-headless)")
    try:
        fd = os.open(directory / f"{name}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # ELOOP: a link planted in the cluster's folder
        raise ClusterError(f"cannot open {directory / f'{name}.log'} for the {name}'s log ({exc}); remove it") from exc
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(
            [str(spark / "bin" / "spark-class"), *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc.pid


def _wait(ready, timeout: float, what: str, log: Path) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except ClusterError:
            pass
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}; {log}:\n{tail}")
        time.sleep(0.3)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), deepest first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[int] = []

    def walk(p: int) -> None:
        for c in children.get(p, []):
            walk(c)
            out.append(c)

    walk(pid)
    return out


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie - killed, not yet reaped - does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A Spark standalone cluster on 127.0.0.1, from the pip pyspark.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start", help="start a master and workers; prints the master URL")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--cores", type=int, default=1, help="cores per worker")
    up.add_argument("--memory", default="1g", help="memory per worker (e.g. 1g, 1536m)")
    for p in (up, sub.add_parser("stop", help="stop every process of the cluster"), sub.add_parser("status", help="the master's view, as JSON")):
        p.add_argument("--port", type=int, default=7077, help="the master's port (default 7077)")
        p.add_argument("--dir", default=None, help="the cluster's directory (default: clusters/PORT in Falkirk's cache)")
    kill = sub.add_parser("kill-worker", help="SIGKILL one worker and its executors")
    kill.add_argument("index", type=int)
    kill.add_argument("--port", type=int, default=7077)
    kill.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    directory = Path(args.dir) if args.dir else home(args.port)
    try:
        if args.command == "start":
            cluster = start(args.workers, cores=args.cores, memory=args.memory, port=args.port, directory=directory)
            print(cluster.url)
        elif args.command == "stop":
            Cluster.load(directory).stop()
        elif args.command == "status":
            print(json.dumps(Cluster.load(directory).status(), indent=1))
        else:
            print(" ".join(str(p) for p in Cluster.load(directory).kill_worker(args.index)))
    except ClusterError as exc:
        print(f"falkirk.spark.standalone: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
