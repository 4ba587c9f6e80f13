"""Random scenario generator (scenario JSON dicts, docs/scenarios.md format).

``random_scenario(rng, domain, *, chains=True)`` for domain in
``DOMAINS = ("epoch", "product", "lexicographic", "seq", "mixed")`` and the
hypothesis strategy ``scenarios(domain, chains=True)``.

With ``chains=True`` every F*(p) is a strictly increasing chain and every explicit
``projected`` value of a recorded edge grows (non-strictly) along it, so by the
spec the greatest rollback is unique.  With ``chains=False`` the listed frontiers
are arbitrary distinct frontiers (listed in an order compatible with ⊆, as the spec
requires "increasing order") and recorded projections are arbitrary.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from .brute_force import (
    INF,
    Domain,
    Frontier,
    _seq_part,
    apply_projection_function,
    empty,
    join,
    make,
    meet,
    parse_domain,
    subset,
    top,
)

DOMAINS = ("epoch", "product", "lexicographic", "seq", "mixed")
MAX_TIME = 4
MAX_EDGES = 7


# ---------------------------------------------------------------------------
# random times and frontiers (internal representation)
# ---------------------------------------------------------------------------


def _rand_time(rng: random.Random, dom: Domain, seq_edges: list[str], *, allow_inf: bool) -> tuple:
    if dom.kind == "epoch":
        return (rng.randint(0, MAX_TIME),)
    if dom.kind == "seq":
        return (rng.choice(seq_edges), rng.randint(0, MAX_TIME))
    while True:
        t = tuple(
            INF if allow_inf and rng.random() < 0.2 else rng.randint(0, MAX_TIME)
            for _ in range(dom.depth)
        )
        if not all(x == INF for x in t):
            return t


def _rand_frontier(rng: random.Random, dom: Domain, seq_edges: list[str]) -> Frontier:
    """A random non-empty frontier other than ⊤."""
    while True:
        k = 1 if dom.total else rng.choice([1, 1, 2, 2, 3])
        f = make(dom, [_rand_time(rng, dom, seq_edges, allow_inf=True) for _ in range(k)])
        if not f.top and not f.empty:
            return f


def _linear_extension(fs: list[Frontier]) -> list[Frontier]:
    rest, out = list(fs), []
    while rest:
        m = next(f for f in rest if not any(g != f and subset(g, f) for g in rest))
        rest.remove(m)
        out.append(m)
    return out


def _rand_frontiers(
    rng: random.Random, dom: Domain, seq_edges: list[str], k: int, chains: bool
) -> list[Frontier]:
    out: list[Frontier] = []
    if chains:
        for _ in range(k):
            for _attempt in range(10):
                g = _rand_frontier(rng, dom, seq_edges)
                if out:
                    g = join(out[-1], g)
                if not g.top and (not out or g != out[-1]):
                    out.append(g)
                    break
            else:
                break
        return out
    for _ in range(k):
        for _attempt in range(10):
            g = _rand_frontier(rng, dom, seq_edges)
            if g not in out:
                out.append(g)
                break
    return _linear_extension(out)


# ---------------------------------------------------------------------------
# JSON encoding, with the accepted spellings of an unbounded coordinate mixed in
# ---------------------------------------------------------------------------


def _coord_json(rng: random.Random, x):
    if x == INF:
        return rng.choice(["inf", "inf", INF])
    return x


def _time_json(rng: random.Random, dom: Domain, t: tuple):
    if dom.kind == "epoch":
        return t[0]
    if dom.kind == "seq":
        return [t[0], t[1]]
    return [_coord_json(rng, x) for x in t]


def _frontier_json(rng: random.Random, f: Frontier):
    if f.top:
        return "top"
    ts = sorted(f.gens)
    rng.shuffle(ts)
    return [_time_json(rng, f.domain, t) for t in ts]


# ---------------------------------------------------------------------------
# graphs
# ---------------------------------------------------------------------------


def _product_domain_json(rng: random.Random, order: str, depth: int):
    if order == "product" and depth == 2 and rng.random() < 0.3:
        return "product"
    d = {"kind": "product", "order": order}
    if depth != 2 or rng.random() < 0.5:
        d["depth"] = depth
    return d


def _graph(rng: random.Random, domain: str):
    """Returns (processors {name: domain JSON}, edges [(src, dst, kind)])."""
    n = rng.randint(2, 5)
    edges: list[tuple[str, str, str]] = []
    if domain in ("epoch", "seq"):
        names = [f"p{i}" for i in range(n)]
        procs = {p: domain for p in names}
        for i in range(n):
            for j in range(i + 1, n):
                if rng.random() < 0.45:
                    if domain == "epoch":
                        kind = "identity" if rng.random() < 0.8 else "recorded"
                    else:
                        kind = "recorded"
                    edges.append((names[i], names[j], kind))
        if domain == "seq" and rng.random() < 0.3:  # a cycle of recorded edges
            i = rng.randrange(n)
            j = rng.randrange(i + 1)
            edges.append((names[i], names[j], "recorded"))
    elif domain in ("product", "lexicographic"):
        order = domain
        depth = 2 if rng.random() < 0.8 else 3
        names = [f"p{i}" for i in range(n)]
        procs = {p: _product_domain_json(rng, order, depth) for p in names}
        for i in range(n):
            for j in range(n):
                if i < j and rng.random() < 0.4:
                    edges.append(
                        (names[i], names[j], "identity" if rng.random() < 0.85 else "recorded")
                    )
                elif j <= i and rng.random() < 0.12:
                    # every cycle goes through a feedback edge
                    edges.append((names[i], names[j], "feedback"))
    elif domain == "mixed":
        order = rng.choice(["product", "lexicographic"])
        loop_dom = _product_domain_json(rng, order, 2)
        procs = {"a0": "epoch", "h0": loop_dom}
        edges.append(("a0", "h0", "loop_entry"))
        budget = n - 2
        last = "h0"
        if budget and rng.random() < 0.5:
            procs["h1"] = loop_dom
            edges += [("h0", "h1", "identity"), ("h1", "h0", "feedback")]
            last = "h1"
            budget -= 1
        else:
            edges.append(("h0", "h0", "feedback"))
        if budget and rng.random() < 0.7:
            procs["b0"] = "epoch"
            edges.append((last, "b0", "loop_exit"))
            budget -= 1
        k = 0
        while budget:
            epochs = [p for p, d in procs.items() if d == "epoch"]
            seqs = [p for p, d in procs.items() if d == "seq"]
            if rng.random() < 0.6:
                s = f"s{k}"
                src = rng.choice(epochs + seqs)
                procs[s] = "seq"
                edges.append((src, s, "recorded"))
            else:
                s = f"c{k}"
                procs[s] = "epoch"
                edges.append(
                    (rng.choice(epochs), s, rng.choice(["identity", "identity", "recorded"]))
                )
            k += 1
            budget -= 1
    else:
        raise ValueError(f"unknown domain {domain!r}")
    if len(edges) > MAX_EDGES:
        edges = [edges[i] for i in sorted(rng.sample(range(len(edges)), MAX_EDGES))]
    return procs, edges


# ---------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------


def random_scenario(rng: random.Random, domain: str, *, chains: bool = True) -> dict:
    procs_json, edge_list = _graph(rng, domain)
    dom = {p: parse_domain(d) for p, d in procs_json.items()}
    edges = {}
    for i, (s, d, kind) in enumerate(edge_list):
        spec = {"src": s, "dst": d}
        if kind != "identity" or rng.random() < 0.5:
            spec["projection"] = kind
        edges[f"e{i}"] = (s, d, kind, spec)
    inputs = {p: [e for e, (s, d, k, _) in edges.items() if d == p] for p in dom}
    outputs = {p: [e for e, (s, d, k, _) in edges.items() if s == p] for p in dom}

    def seq_edges_of(p: str) -> list[str]:
        return inputs[p] or [f"in_{p}"]

    def dst_edges(e: str) -> list[str]:
        # times of messages on e, in dst's domain: a sequence-number receiver numbers them on e
        return [e]

    def rand_dst_frontier(e: str) -> Frontier:
        return _rand_frontier(rng, dom[edges[e][1]], dst_edges(e))

    checkpoints = {}
    for p in dom:
        failed = rng.random() < 0.5
        k = rng.randint(0, 3)
        frontiers = _rand_frontiers(rng, dom[p], seq_edges_of(p), k, chains)
        if not failed:
            frontiers.append(top(dom[p]))
        prev_projected = {e: empty(dom[edges[e][1]]) for e in outputs[p]}
        entries = []
        for f in frontiers:
            entry = {"frontier": _frontier_json(rng, f)}
            seq = dom[p].kind == "seq"

            def sub(x: Frontier, p: str = p) -> Frontier:
                """a random frontier inside x (maybe x itself, maybe ∅)"""
                r = rng.random()
                if r < 0.25:
                    return x
                if r < 0.4:
                    return empty(x.domain)
                return meet(x, _rand_frontier(rng, x.domain, seq_edges_of(p)))

            if rng.random() < 0.5:
                n = sub(f)
                if seq and n.top:
                    n = meet(n, _rand_frontier(rng, dom[p], seq_edges_of(p)))
                entry["notifications"] = _frontier_json(rng, n)
            delivered = {}
            for d in inputs[p]:
                if rng.random() < 0.5:
                    if seq:
                        # inside f's part on edge d (the default), finite
                        x = meet(_seq_part(f, d), make(dom[p], [(d, rng.randint(0, MAX_TIME))]))
                    else:
                        x = sub(f)
                    delivered[d] = _frontier_json(rng, x)
            if not inputs[p] and rng.random() < 0.3:
                # an external input (a source's feed): checked, constrains nothing
                x = meet(f, _rand_frontier(rng, dom[p], seq_edges_of(p))) if seq else sub(f)
                delivered[f"in_{p}"] = _frontier_json(rng, x)
            if delivered:
                entry["delivered"] = delivered
            projected, discarded, logged = {}, {}, {}
            for e in outputs[p]:
                _src, dst, kind, _ = edges[e]
                ddom = dom[dst]
                if kind == "recorded":
                    prev = prev_projected[e]
                    if chains:
                        if prev.empty and rng.random() < 0.4:
                            eff = prev  # omitted: ∅
                        else:
                            eff = prev if rng.random() < 0.3 else join(prev, rand_dst_frontier(e))
                            if eff.top:
                                eff = prev
                            projected[e] = _frontier_json(rng, eff)
                    else:
                        if rng.random() < 0.3:
                            eff = empty(ddom)
                        else:
                            eff = rand_dst_frontier(e)
                            projected[e] = _frontier_json(rng, eff)
                    prev_projected[e] = eff
                else:
                    eff = apply_projection_function(kind, dom[p], ddom, f)
                r = rng.random()
                if r < 0.4:
                    pass  # discarded defaults to projected
                elif r < 0.65:
                    discarded[e] = []  # logs everything
                elif r < 0.9 or not chains:
                    x = eff if eff.empty else meet(eff, rand_dst_frontier(e))
                    if rng.random() < 0.15:
                        x = rand_dst_frontier(e)  # e.g. a processor sending "into the future"
                    if ddom.kind == "seq" and x.top:
                        x = rand_dst_frontier(e)
                    discarded[e] = _frontier_json(rng, x)
                else:
                    discarded[e] = (
                        _frontier_json(rng, eff) if not (ddom.kind == "seq" and eff.top) else []
                    )
                if rng.random() < 0.5:
                    ts = [
                        _rand_time(rng, ddom, dst_edges(e), allow_inf=False)
                        for _ in range(rng.randint(0, 3))
                    ]
                    logged[e] = [_time_json(rng, ddom, t) for t in ts]
            if projected:
                entry["projected"] = projected
            if discarded:
                entry["discarded"] = discarded
            if logged:
                entry["logged"] = logged
            entries.append(entry)
        if entries or rng.random() < 0.5:
            checkpoints[p] = entries

    return {
        "processors": {p: {"domain": d} for p, d in procs_json.items()},
        "edges": {e: spec for e, (_, _, _, spec) in edges.items()},
        "checkpoints": checkpoints,
    }


def scenarios(domain: str | None = None, chains: bool = True):
    """Hypothesis strategy of scenario dicts (domain None: any of DOMAINS)."""
    doms = st.sampled_from(DOMAINS) if domain is None else st.just(domain)
    return st.tuples(st.randoms(use_true_random=False), doms).map(
        lambda rd: random_scenario(rd[0], rd[1], chains=chains)
    )
