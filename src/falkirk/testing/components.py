"""The components demo's reference and input generator (:mod:`falkirk.demo.components`
holds the pipeline): the same query in plain Python (union-find), independent of
Spark and of the pipeline, and :func:`write_input`. The reading of the input files
(:func:`input_files`, :func:`parsed`) and the union-find (:func:`union`,
:func:`component`) also serve :mod:`falkirk.testing.figure1`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from falkirk.demo.components import HEADER, OUTPUT_COLUMNS


@dataclass(frozen=True)
class Expected:
    output: pd.DataFrame  # vertex, component, epoch
    rejected: pd.DataFrame  # raw


def _fits(field: str) -> bool:
    """Plain decimal digits of a 64-bit value (leading zeros allowed, however many)."""
    digits = field.lstrip("0") or "0"
    return bool(re.fullmatch(r"[0-9]+", field)) and len(digits) <= 19 and int(digits) < 2**63


def _find(parent: dict[int, int], v: int) -> int:
    while parent[v] != v:
        parent[v] = parent[parent[v]]
        v = parent[v]
    return v


def input_files(directory: str) -> list[Path]:
    """The files a source reads, in name order (one per epoch)."""
    return sorted(f for f in Path(directory).iterdir() if f.is_file() and not f.name.startswith((".", "_")))


def parsed(path: Path, header: str, fields: int) -> list[tuple[str, list[int] | None]]:
    """Each line of ``path`` as :func:`lines` and :func:`check` see it: its text, and
    its ``fields`` integers, or None for a line they reject."""
    out: list[tuple[str, list[int] | None]] = []
    for n, raw in enumerate(re.split(rb"\r\n|\r|\n", path.read_bytes())):
        line = raw.decode("utf-8", errors="replace")
        if raw == b"" or (n == 0 and line.removeprefix("\ufeff").strip().lower() == header):
            continue
        values = line.split(",")
        ok = "\ufffd" not in line and len(values) == fields and all(_fits(f) for f in values)
        out.append((line, [int(f) for f in values] if ok else None))
    return out


def union(parent: dict[int, int], a: int, b: int) -> None:
    """Join the sets of ``a`` and ``b`` (the smaller root stays the root: a root is its
    set's minimum)."""
    for v in (a, b):
        parent.setdefault(v, v)
    ra, rb_ = _find(parent, a), _find(parent, b)
    if ra != rb_:
        parent[max(ra, rb_)] = min(ra, rb_)


def component(parent: dict[int, int], v: int) -> int:
    """The smallest vertex of ``v``'s component."""
    return _find(parent, v)


def expected(edges_dir: str) -> Expected:
    """The whole output and dead-letter table the example must produce."""
    parent: dict[int, int] = {}
    last: dict[int, int] = {}
    rows: list[tuple[int, int, int]] = []
    bad: list[str] = []
    for epoch, path in enumerate(input_files(edges_dir), start=1):
        for line, values in parsed(path, HEADER, 2):
            if values is None:
                bad.append(line)
            else:
                union(parent, values[0], values[1])
        for v in parent:
            c = _find(parent, v)
            if last.get(v) != c:
                rows.append((v, c, epoch))
                last[v] = c
    output = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS)).astype("int64")
    return Expected(output, pd.DataFrame({"raw": bad}))


def write_input(directory: str | Path, *, epochs: int, edges_per_epoch: int, vertices: int, seed: int) -> None:
    """Random edges over ``vertices`` vertices (sparse at first, so components merge
    across epochs along long chains), some self-loops and a few invalid lines of each
    kind the contract names."""
    import random

    rng = random.Random(seed)
    bad = ["1", "1,2,3", "a,2", "1,-2", "1, 2", "99999999999999999999,1", ",", "1.5,2"]
    Path(directory).mkdir(parents=True, exist_ok=True)
    for e in range(epochs):
        chunk = []
        for _ in range(edges_per_epoch):
            a = rng.randrange(vertices)
            b = a if rng.random() < 0.05 else rng.randrange(vertices)
            chunk.append(f"{a},{b}")
        for _ in range(max(1, edges_per_epoch // 20)):
            chunk.insert(rng.randrange(len(chunk) + 1), rng.choice(bad))
        (Path(directory) / f"edges-{e:04d}.csv").write_text("src,dst\n" + "\n".join(chunk) + "\n")
