"""The Figure 1 demo's reference and input generator (:mod:`falkirk.demo.figure1` holds
the pipeline): :func:`expected` computes all three outputs of the application in
plain Python, independent of Spark and of the pipeline; :func:`write_input`
generates links and queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

import pandas as pd

from falkirk.demo.figure1 import (
    LINKS_HEADER,
    MAX_BYTES,
    QUERIES_HEADER,
    RESPONSE_COLUMNS,
    STATS_COLUMNS,
)
from falkirk.testing.components import component, input_files, parsed, union
from falkirk.time.ticks import SEQ_BLOCK


@dataclass(frozen=True)
class Expected:
    responses: pd.DataFrame  # qid, vertex, bytes, component, asked, epoch
    stats: pd.DataFrame  # seq, qid, vertex, asked, epoch
    rejected: pd.DataFrame  # source, raw (reasons are Spark's wording)


def expected(links_dir: str, queries_dir: str, *, batch_every: int = 3) -> Expected:
    """The three outputs the application must produce for these inputs."""
    parent: dict[int, int] = {}
    totals: dict[int, int] = {}
    dirty: set[int] = set()
    table: dict[int, int] = {}
    asked_so_far: dict[int, int] = {}
    responses: list[tuple[object, ...]] = []
    stats: list[tuple[int, ...]] = []
    bad: list[tuple[str, str]] = []
    pairs = zip_longest(input_files(links_dir), input_files(queries_dir))
    for epoch, (links_file, queries_file) in enumerate(pairs, start=1):
        for line, values in parsed(links_file, LINKS_HEADER, 3) if links_file else []:
            if values is None or values[2] > MAX_BYTES:
                bad.append(("links", line))
                continue
            src, dst, nbytes = values
            union(parent, src, dst)
            for v in {src, dst}:
                totals[v] = totals.get(v, 0) + nbytes
                dirty.add(v)
        if epoch % batch_every == 0:
            table.update({v: totals[v] for v in dirty})
            dirty.clear()
        valid: list[tuple[int, int]] = []
        for line, values in parsed(queries_file, QUERIES_HEADER, 2) if queries_file else []:
            if values is None:
                bad.append(("queries", line))
            else:
                valid.append((values[0], values[1]))
        for k, (qid, vertex) in enumerate(sorted(valid), start=1):
            asked_so_far[vertex] = asked_so_far.get(vertex, 0) + 1
            comp = component(parent, vertex) if vertex in parent else None
            responses.append((qid, vertex, table.get(vertex), comp, asked_so_far[vertex], epoch))
            stats.append(((epoch - 1) * SEQ_BLOCK + k, qid, vertex, asked_so_far[vertex], epoch))
    return Expected(
        pd.DataFrame(responses, columns=[*RESPONSE_COLUMNS, "epoch"]).astype(
            {"qid": "int64", "vertex": "int64", "bytes": "Int64", "component": "Int64", "asked": "int64", "epoch": "int64"}
        ),
        pd.DataFrame(stats, columns=[*STATS_COLUMNS, "epoch"]).astype("int64"),
        pd.DataFrame(bad, columns=["source", "raw"]),
    )


def write_input(directory: str | Path, *, epochs: int, links: int, queries: int, vertices: int, seed: int) -> tuple[Path, Path]:
    """Random links and queries (``links/`` and ``queries/`` under ``directory``), with
    a few invalid lines of each kind; returns the two directories."""
    import random

    rng = random.Random(seed)
    root = Path(directory)
    link_dir, query_dir = root / "links", root / "queries"
    link_dir.mkdir(parents=True, exist_ok=True)
    query_dir.mkdir(parents=True, exist_ok=True)
    bad_links = ["1,2", "1,2,x", "1,-2,5", f"1,2,{MAX_BYTES + 1}", "a,b,c"]
    bad_queries = ["7", "x,1", "1,2,3", "-1,4"]
    qid = 0
    for e in range(epochs):
        rows = []
        for _ in range(links):
            a = rng.randrange(vertices)
            b = a if rng.random() < 0.05 else rng.randrange(vertices)
            rows.append(f"{a},{b},{rng.randrange(1, 5000)}")
        rows.insert(rng.randrange(len(rows) + 1), rng.choice(bad_links))
        (link_dir / f"links-{e:04d}.csv").write_text(LINKS_HEADER + "\n" + "\n".join(rows) + "\n")
        asks = []
        for _ in range(queries):
            qid += rng.randrange(1, 4)
            asks.append(f"{qid},{rng.randrange(vertices + 5)}")  # some vertices no link names
        rng.shuffle(asks)
        asks.insert(rng.randrange(len(asks) + 1), rng.choice(bad_queries))
        (query_dir / f"queries-{e:04d}.csv").write_text(QUERIES_HEADER + "\n" + "\n".join(asks) + "\n")
    return link_dir, query_dir
