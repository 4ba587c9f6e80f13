"""The live dashboard, end to end: a pipeline runs with ``Engine(ui=...)`` while the
tests read ``/api/status`` and ``/metrics`` over HTTP and load the page in Debian's
headless Chromium (through its ChromeDriver): the graph shows every processor, the
figures move while epochs commit, an in-process failure shows up as a recovery with
the solver's reasons, and screenshots are saved and checked."""

from __future__ import annotations

import html
import json
import os
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from falkirk.graph import EagerCheckpoint, GraphError, LazyCheckpoint, LogOutputs, Pipeline
from falkirk.io import MemorySink, keyed_generator
from falkirk.observe.address import parse_address
from falkirk.runtime import Engine

PROCESSORS = {"src", "double", "eager", "lazy", "out_eager", "out_lazy"}
METRICS = [
    "falkirk_epochs_committed_total",
    'falkirk_records_total{processor="eager"}',
    "falkirk_epoch_seconds_bucket",
    "falkirk_checkpoint_seconds_bucket",
    'falkirk_checkpoint_bytes{processor="eager"}',
    "falkirk_recovery_seconds_count",
    "falkirk_garbage_collected_bytes_total",
    "falkirk_end_to_end_latency_seconds_bucket",
]


class Running:
    """An engine running in a thread with its dashboard on a free port; each epoch
    waits ``pause`` seconds so that a test sees it in progress; ``agg`` fails once
    after epoch 4."""

    def __init__(self, spark: SparkSession, root: Path, epochs: int = 28, pause: float = 0.2) -> None:
        p = Pipeline("dash")
        self.epochs = epochs
        self.sinks = {"out_eager": MemorySink(), "out_lazy": MemorySink()}
        src = p.source("src", keyed_generator(batches=epochs, rows_per_batch=200, keys=20, seed=5))
        logged = src.map("double", lambda df: df.withColumn("value", df["value"] * 2), policy=LogOutputs())
        logged.aggregate("eager", "key", {"n": ("count", None)}, policy=EagerCheckpoint()).sink("out_eager", self.sinks["out_eager"])
        logged.aggregate("lazy", "key", {"s": ("sum", "value")}, policy=LazyCheckpoint(every=4)).sink("out_lazy", self.sinks["out_lazy"])
        failed: list[int] = []

        def on_epoch(epoch: int, _s: float, _r: object) -> None:
            if epoch == 4 and not failed:
                failed.append(epoch)
                self.engine.fail("lazy")
            time.sleep(pause)

        self.engine = Engine(p, root, spark=spark, ui="127.0.0.1:0", on_epoch=on_epoch)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while self.engine.dashboard is None or not self.engine.dashboard.ready.is_set():
            assert time.monotonic() < deadline and self.thread.is_alive(), f"no dashboard: {self.error}"
            time.sleep(0.05)
        self.url = self.engine.dashboard.url

    def _run(self) -> None:
        try:
            self.engine.run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return response.read().decode()

    def get_metrics_after_stop(self) -> str:
        from prometheus_client import generate_latest

        assert self.engine.telemetry is not None
        return generate_latest(self.engine.telemetry.registry).decode()

    def status(self) -> dict:
        return json.loads(self.get("/api/status"))

    def wait_for(self, predicate, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            assert self.thread.is_alive(), f"the run ended: {self.error!r}"
            s = self.status()
            if predicate(s):
                return s
            assert time.monotonic() < deadline, f"timed out; last status: {s}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.thread.join(timeout=300)
        assert not self.thread.is_alive() and self.error is None, self.error


@pytest.fixture
def running(spark: SparkSession, tmp_path: Path) -> Iterator[Running]:
    r = Running(spark, tmp_path / "state")
    yield r
    r.stop()
    r.engine.close()


def test_status_json_and_metrics_while_a_pipeline_runs(running: Running) -> None:
    first = running.wait_for(lambda s: s["epoch"] >= 2)
    assert first["pipeline"] == "dash" and isinstance(first["epoch"], int)
    assert set(first["processors"]) == PROCESSORS
    eager = first["processors"]["eager"]
    assert eager["policy"] == "EagerCheckpoint" and isinstance(eager["records_per_second"], float)
    assert eager["last_checkpoint"] is not None and eager["state_bytes"] > 0
    later = running.wait_for(lambda s: s["epoch"] >= first["epoch"] + 2)
    assert later["processors"]["src"]["records"] > first["processors"]["src"]["records"]
    assert later["processors"]["src"]["records_per_second"] > 0
    recovered = running.wait_for(lambda s: s["last_recovery"] is not None)
    assert recovered["last_recovery"]["kind"] == "rollback"
    assert set(recovered["last_recovery"]["why"]) == PROCESSORS
    assert any(e["kind"] == "failure" for e in recovered["timeline"])
    assert any(e["kind"] == "checkpoint" for e in recovered["timeline"])
    metrics = running.get("/metrics")
    for name in METRICS:
        assert name in metrics, name
    svg = html.unescape(running.get("/api/graph.svg"))
    assert all(f'id="proc-{p}"' in svg for p in PROCESSORS)
    running.stop()  # the run's end: every count has arrived, replays counted once
    assert running.engine.telemetry is not None
    final = running.engine.telemetry.status()["processors"]
    assert final["src"]["records"] == final["double"]["records"] == running.epochs * 200
    for sink, upstream in (("out_eager", "eager"), ("out_lazy", "lazy")):
        written = sum(len(rows) for rows in running.sinks[sink].epochs.values())
        # exact, and an epoch replayed after the failure is not counted twice
        assert final[sink]["records"] == final[upstream]["records"] == written
    assert final["lazy"]["frontier"] <= final["lazy"]["epoch"] == running.epochs  # lazy: rollback points every 4th
    metrics = running.get_metrics_after_stop()
    assert f'falkirk_records_total{{processor="src"}} {float(running.epochs * 200)}' in metrics


@pytest.mark.skipif(shutil.which("chromedriver") is None and not os.environ.get("CI"), reason="needs Debian's chromium-driver: bash scripts/bootstrap.sh --browser")
def test_the_page_in_a_real_browser(running: Running, tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1300", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(running.url)
        for p in PROCESSORS:  # the graph draws every processor, shaded by policy
            node = driver.find_element(By.ID, f"proc-{p}")
            assert node.find_element(By.TAG_NAME, "path").get_attribute("fill") not in (None, "none")
        epoch = lambda: int(driver.find_element(By.ID, "epoch").text or -1)  # noqa: E731
        deadline = time.monotonic() + 60
        while epoch() < 1:
            assert time.monotonic() < deadline, "the page never showed an epoch"
            time.sleep(0.2)
        seen = epoch()
        shot1 = tmp_path / "dashboard-1.png"
        driver.save_screenshot(str(shot1))
        deadline = time.monotonic() + 60
        while epoch() <= seen + 1:  # the values update while the pipeline runs
            assert time.monotonic() < deadline, "the page's epoch did not move"
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while not driver.find_elements(By.CSS_SELECTOR, "#recovery table tbody tr"):
            assert time.monotonic() < deadline, "the recovery never showed"
            time.sleep(0.2)
        rows = driver.find_elements(By.CSS_SELECTOR, "#recovery table tbody tr")
        assert {r.find_elements(By.TAG_NAME, "td")[0].text for r in rows} == PROCESSORS
        live = driver.find_element(By.ID, "proc-eager").find_elements(By.TAG_NAME, "text")[-1].text
        assert live.startswith("epoch ") and "rows/s" in live
        assert len(driver.find_elements(By.CSS_SELECTOR, "#processors tbody tr")) == len(PROCESSORS)
        shot2 = tmp_path / "dashboard-2.png"
        driver.save_screenshot(str(shot2))
        keep = os.environ.get("FALKIRK_SCREENSHOT")  # docs/dashboard.png is made this way
        if keep:
            shutil.copy(shot2, keep)
    finally:
        driver.quit()
    for shot in (shot1, shot2):
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert (width, height) == (1400, 1300) or width >= 1000
        assert len(data) > 30_000  # a drawn page, not a blank one (a blank 1400x1300 PNG is ~10 KB)
    assert shot1.read_bytes() != shot2.read_bytes()


def test_ui_addresses() -> None:
    assert parse_address("8050") == ("127.0.0.1", 8050)
    assert parse_address("0.0.0.0:9000", allow_remote=True) == ("0.0.0.0", 9000)
    assert parse_address("0.0.0.0:9000", token="a-token-of-24-characters") == ("0.0.0.0", 9000)
    with pytest.raises(GraphError, match="reachable from other machines"):
        parse_address("0.0.0.0:9000")
    assert parse_address("[::1]:0") == ("::1", 0)
    with pytest.raises(GraphError, match="HOST:PORT"):
        parse_address("localhost:http")
    with pytest.raises(GraphError, match="in brackets"):
        parse_address("::1")
    with pytest.raises(GraphError, match="not an address of this machine or a name that resolves"):
        parse_address("nosuchhost.invalid:0")


def test_counts_through_a_self_join_and_a_self_union_and_a_restart_recovery(spark: SparkSession, tmp_path: Path) -> None:
    """Observed row counts on an output read twice in one Spark plan (a stream merged
    with itself, and joined with a map of itself), and a restart's recovery in the
    telemetry."""
    def pipeline() -> Pipeline:
        p = Pipeline("self")
        src = p.source("src", keyed_generator(batches=4, rows_per_batch=30, keys=5, seed=2))
        both = src.union("twice", src)
        renamed = src.map("renamed", lambda df: df.withColumnRenamed("value", "other"))
        joined = src.join("pairs", renamed, on="key", policy=EagerCheckpoint())
        both.aggregate("n_union", "key", {"n": ("count", None)}, policy=EagerCheckpoint()).sink("o1", MemorySink())
        joined.aggregate("n_join", "key", {"n": ("count", None)}, policy=EagerCheckpoint()).sink("o2", MemorySink())
        return p

    root = tmp_path / "state"
    Engine(pipeline(), root, spark=spark).run(max_epochs=2)  # then "crashes": a restart recovers
    engine = Engine(pipeline(), root, spark=spark, ui="127.0.0.1:0")
    engine.run()
    assert engine.telemetry is not None and engine.dashboard is not None
    url = engine.dashboard.url
    with urllib.request.urlopen(url + "/api/status", timeout=10) as response:  # still up after run() returned
        status = json.loads(response.read())
    assert status["run_ended"] == "finished" and status["timeline"][-1]["detail"] == "run finished"
    engine.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/api/status", timeout=5)
    assert status["epoch"] == 4
    assert status["last_recovery"]["kind"] == "restart"
    assert status["last_recovery"]["frontiers"]["n_union"] == 2, status["last_recovery"]
    counted = status["processors"]
    assert counted["src"]["records"] == 2 * 30  # epochs 3 and 4 in this run
    assert counted["twice"]["records"] == 2 * 60
    assert counted["o1"]["records"] == counted["n_union"]["records"] == 2 * 5  # 5 keys, both epochs


def test_edges_from_ports_other_than_out_are_labelled_with_the_port() -> None:
    from falkirk.control.domains import topology
    from falkirk.execution.description import describe
    from falkirk.observe.dashboard import graph_dot

    p = Pipeline("ports")
    valid, rejected = p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1, seed=1)).validate("check", lambda df: df)
    valid.sink("good", MemorySink())
    rejected.sink("bad", MemorySink())
    dot = graph_dot(describe(p, None, topology(p)))
    assert '"check" -> "bad" [label="rejected"' in dot and '"check" -> "good" [label="valid"' in dot
    assert '"src" -> "check";' in dot  # the usual output: no label
