"""Connected components of a growing graph, kept up to date by label propagation in a
loop (``examples/components.py``).

Edges ``src,dst`` (non-negative integers, undirected, self-loops allowed) arrive as CSV
files, one file per epoch. Every vertex carries a label, the smallest vertex id known
to be connected to it; when an epoch adds edges, only the labels the new edges can
lower change, and the change spreads along the graph iteration by iteration until no
label moves (a fixed point) - an incremental computation inside an ``iterate`` loop,
never a recomputation from scratch. The output has one row per vertex per epoch in
which its component changed or the vertex first appeared.

The dataflow::

    edges ─ lines ─ check ─┬─ undirected ─ [enter seeds ─ arrivals ─ propagate ─┬─ spread ─┐
                           │                        ▲                          │          │
                           │                        └─ proposals (feedback) ◄──┼──────────┘
                           │                                                   └─ changed ─ leave changes] ─ per_epoch ─ output
                           └─ rejected ─ dead_letter

Inside the loop times are ``(epoch, iteration)``. ``propagate`` keeps each vertex's
label and neighbours (``stateful``, vectorized) and is checkpointed eagerly
(:class:`~falkirk.graph.EagerCheckpoint`): after every iteration its changed vertices
and the rows it sent are persisted and committed as the rollback point ↓(e, i), so a
crash in the middle of a long epoch resumes from its last iteration. Everything else
persists nothing: the sources re-read their files, and the stateless steps re-run.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import EagerCheckpoint, Pipeline, Policy, Stream
from falkirk.graph.loops import MAX_ITERATIONS
from falkirk.io import FileSource, ParquetTableSink

OUTPUT_COLUMNS = ("vertex", "component", "epoch")
HEADER = "src,dst"
#: Line ends: \r\n, \n or a lone \r (Java regex; Python's ``re`` reads it the same).
LINE_END = "\r\n|\r|\n"
#: "No neighbour" / "no label" in the loop's rows (ids are non-negative). Not null:
#: pandas would turn a long column with nulls into floats, which cannot hold every id.
NONE = -1
REJECTED_COLUMNS = ("raw", "reason")
ARRIVALS = "vertex long, neighbor long, label long"
STATE = "component long, neighbors array<long>"
SENT = "vertex long, label long, tell boolean"
_DIGITS = r"^[0-9]+\z"  # Java regex: \z, not $, which also matches before a final \r


def lines(df: DataFrame, header: str = HEADER) -> DataFrame:
    """One row per line of each file (read whole), without empty lines and without the
    first line if it is the header (``src,dst``, any case, spaces or a byte-order mark
    around it; any other first line is data): ``raw`` and its comma-separated
    ``fields``."""
    numbered = df.select(F.posexplode(F.split(F.col("value"), LINE_END)).alias("n", "raw"))
    bare = F.lower(F.trim(F.regexp_replace(F.col("raw"), "^\ufeff", "")))
    kept = numbered.filter(~((F.col("n") == 0) & (bare == header)) & (F.col("raw") != ""))
    return kept.select("raw", F.split(F.col("raw"), ",", -1).alias("fields"))


def check(df: DataFrame, names: tuple[str, ...] = ("src", "dst")) -> DataFrame:
    """Exactly ``len(names)`` fields, each plain decimal digits that fit in 64 bits:
    ``raw``, the fields (as strings) named ``names``, and ``reason``."""
    count = F.size("fields")
    values = [F.get(F.col("fields"), k) for k in range(len(names))]
    reason = F.when(F.col("raw").contains("\ufffd"), F.lit("not valid UTF-8"))
    reason = reason.when(
        count != len(names), F.concat(F.lit(f"expected {len(names)} fields ({','.join(names)}), got "), count.cast("string"))
    )
    for name, value in zip(names, values, strict=True):
        reason = reason.when(~value.rlike(_DIGITS), F.lit(f"{name} is not a non-negative integer"))
        reason = reason.when(value.try_cast("long").isNull(), F.lit(f"{name} does not fit in 64 bits"))
    return df.select("raw", *[v.alias(n) for n, v in zip(names, values, strict=True)], reason.alias("reason"))


def undirected(df: DataFrame) -> DataFrame:
    """Each edge as arrivals at both ends (``neighbor`` the other end); a self-loop
    only makes its vertex appear (no neighbour)."""
    s, d = F.col("src").cast("long"), F.col("dst").cast("long")
    none = F.lit(NONE).cast("long")
    pairs = F.when(s == d, F.array(F.struct(s.alias("vertex"), none.alias("neighbor")))).otherwise(
        F.array(F.struct(s.alias("vertex"), d.alias("neighbor")), F.struct(d.alias("vertex"), s.alias("neighbor")))
    )
    return df.select(F.explode(pairs).alias("a")).select("a.vertex", "a.neighbor", none.alias("label"))


def propagate(rows: pd.DataFrame, state: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One iteration at the vertices of one partition (``stateful(vectorized=True)``).

    ``rows``: arrivals - a new neighbour (``neighbor``) or a label a neighbour proposes
    (``label``), each :data:`NONE` when absent. A vertex seen for the first time takes
    its own id as its label. A vertex whose label drops (or that appears) reports it
    (``tell`` false) and tells all its neighbours; one that keeps its label tells only
    its new neighbours."""
    stored = {int(v): (int(c), [int(n) for n in ns]) for v, c, ns in state[["vertex", "component", "neighbors"]].itertuples(index=False)}
    added: dict[int, list[int]] = {}
    proposed: dict[int, int] = {}
    for v, n, label in rows[["vertex", "neighbor", "label"]].itertuples(index=False):
        v = int(v)
        known = added.setdefault(v, [])
        if n != NONE and int(n) != v:
            known.append(int(n))
        if label != NONE:
            proposed[v] = min(int(label), proposed.get(v, int(label)))
    out: list[tuple[int, int, bool]] = []
    new_state: list[tuple[int, int, list[int]]] = []
    for v, fresh in added.items():
        old = stored.get(v)
        neighbors = old[1] if old else []
        seen = set(neighbors)
        new = [n for n in dict.fromkeys(fresh) if n not in seen]
        label = min(old[0] if old else v, proposed.get(v, v))
        all_neighbors = neighbors + new
        if old is None or label < old[0]:
            out.append((v, label, False))
            out += [(n, label, True) for n in all_neighbors]
        else:
            out += [(n, label, True) for n in new]
        new_state.append((v, label, all_neighbors))
    for v in stored.keys() - added.keys():  # (not reached: state comes only for keys with rows)
        new_state.append((v, *stored[v]))
    sent = pd.DataFrame(out, columns=["vertex", "label", "tell"])
    kept = pd.DataFrame(new_state, columns=["vertex", "component", "neighbors"])
    return sent, kept


def build_pipeline(
    edges_dir: str, output_dir: str, rejected_dir: str, *, policy: Policy | None = None, max_iterations: int = MAX_ITERATIONS
) -> Pipeline:
    """The query (see the module docstring); ``policy``: ``propagate``'s (default eager).
    An epoch that would need more than ``max_iterations`` iterations (a path that
    long) stops the pipeline with an error rather than write components that are
    not final."""
    p = Pipeline("components")
    text = {"wholetext": "true"}
    raw = p.source("edges", FileSource(edges_dir, "text", "value string", options=text)).map("lines", lines)
    valid, rejected = raw.validate("check", check)
    rejected.map("rejected", lambda df: df.select(*REJECTED_COLUMNS)).sink(
        "dead_letter", ParquetTableSink(rejected_dir, epoch_column=None)
    )
    changes = components_loop(p, valid.map("undirected", undirected), policy or EagerCheckpoint(compact_every=20), max_iterations)
    # Labels only drop: a vertex's last label of the epoch is its smallest.
    changes.map("per_epoch", lambda df: df.groupBy("vertex").agg(F.min("component").alias("component"))).sink(
        "output", ParquetTableSink(output_dir)
    )
    return p


def components_loop(p: Pipeline, arrivals: Stream, policy: Policy, max_iterations: int = MAX_ITERATIONS) -> Stream:
    """The loop ``cc`` of label propagation on ``arrivals`` (see :func:`undirected`),
    with ``propagate`` under ``policy``: the stream of each epoch's label changes
    (``vertex, component``; a vertex may change several times in one epoch)."""
    loop = p.iterate("cc", max_iterations=max_iterations, on_limit="fail")
    proposals = loop.feedback("proposals", schema=ARRIVALS)
    sent = (
        loop.enter("seeds", arrivals)
        .union("arrivals", proposals)
        .stateful(
            "propagate",
            "vertex",
            propagate,
            state_schema=STATE,
            output_schema=SENT,
            policy=policy,
            vectorized=True,
        )
    )
    loop.connect(proposals, sent.map("spread", lambda df: df.filter("tell").select("vertex", F.lit(NONE).cast("long").alias("neighbor"), "label")))
    changes: Stream = loop.leave("changes", sent.map("changed", lambda df: df.filter("NOT tell").select("vertex", F.col("label").alias("component"))))
    return changes


#: What moved to :mod:`falkirk.testing.components` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['Expected', 'component', 'expected', 'input_files', 'parsed', 'union', 'write_input'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.components", _MOVED)
