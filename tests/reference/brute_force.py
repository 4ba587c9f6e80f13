"""Brute-force reference solver for Falkirk rollback scenarios.

Written independently from ``src/falkirk`` and only from ``docs/scenarios.md``
(plus sections 3.1-3.6 of the Falkirk Wheel paper).  It is meant to be slow and
obviously correct:

* every assignment f(p) in F*(p) = [∅] + listed checkpoints is enumerated;
* for each, the greatest notification frontier assignment f_n is computed by the
  naive iteration f_n := f, then f_n(p) := f_n(p) ∩ f(p) ∩ ⋂_d φ(d)(f_n(src d))
  (all processors updated simultaneously) until nothing changes;
* the five constraints of section 3.5 are checked directly;
* the maximal consistent assignments are those not strictly below (pointwise ⊆)
  another consistent one.

Public API
----------
``solve_all(scenario, *, ambiguous_recorded="union") -> BruteForceResult``
``check(scenario, output, *, ambiguous_recorded="union", result=None) -> list[str]``

Internal representation
-----------------------
A :class:`Domain` is ``kind`` in {"epoch", "product", "seq"}; an epoch is handled
as a depth-1 lexicographic tuple domain.  Times are tuples: ``(3,)`` for epoch 3,
``(1, inf)`` for a product time, ``("e1", 4)`` for a sequence-number time.  A
:class:`Frontier` is either ⊤ or the frozenset of its maximal times (a canonical
form: two frontiers are equal as sets of times iff they are equal as objects).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

INF = float("inf")
MAX_ASSIGNMENTS = 200_000
PROJECTION_KINDS = ("identity", "loop_entry", "loop_exit", "feedback", "recorded")
AMBIGUOUS_RULES = ("union", "last", "error")

# ---------------------------------------------------------------------------
# Time domains
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    kind: str  # "epoch" | "product" | "seq"
    order: str = "lexicographic"  # "product" | "lexicographic" (epoch: lexicographic)
    depth: int = 1  # tuple length (epoch: 1; seq: unused)

    @property
    def total(self) -> bool:
        return self.kind == "epoch" or (
            self.kind == "product" and (self.order == "lexicographic" or self.depth == 1)
        )

    def leq(self, a: tuple, b: tuple) -> bool:
        if self.kind == "seq":
            return a[0] == b[0] and a[1] <= b[1]
        if self.order == "product":
            return all(x <= y for x, y in zip(a, b))
        return a <= b  # Python tuple comparison is lexicographic; inf > every int

    def describe(self) -> str:
        if self.kind == "product":
            return f"product(order={self.order}, depth={self.depth})"
        return self.kind


def parse_domain(raw: Any) -> Domain:
    if raw == "epoch" or raw == {"kind": "epoch"}:
        return Domain("epoch", "lexicographic", 1)
    if raw == "seq" or raw == {"kind": "seq"}:
        return Domain("seq", "product", 0)
    if raw == "product":
        return Domain("product", "product", 2)
    if raw == "lexicographic":
        return Domain("product", "lexicographic", 2)
    if isinstance(raw, dict) and raw.get("kind") == "product":
        unknown = set(raw) - {"kind", "order", "depth"}
        if unknown:
            raise ValueError(f"unknown product domain keys {sorted(unknown)}")
        order = raw.get("order", "product")
        depth = raw.get("depth", 2)
        if order not in ("product", "lexicographic"):
            raise ValueError(f"bad product order {order!r}")
        if not _is_nat(depth) or depth < 1:
            raise ValueError(f"bad product depth {depth!r}")
        return Domain("product", order, depth)
    raise ValueError(f"bad domain {raw!r}")


def _is_nat(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _is_inf(x: Any) -> bool:
    if isinstance(x, float):
        return x == INF
    return x in ("inf", "Infinity")


def _coord(x: Any, allow_inf: bool) -> float | int:
    if _is_nat(x):
        return x
    if allow_inf and _is_inf(x):
        return INF
    if isinstance(x, float) and x.is_integer() and x >= 0:
        # json may hand us 3.0; accept integral floats
        return int(x)
    raise ValueError(f"bad time coordinate {x!r}")


def parse_time(dom: Domain, raw: Any) -> tuple:
    if dom.kind == "epoch":
        return (_coord(raw, allow_inf=False),)
    if dom.kind == "product":
        if not isinstance(raw, (list, tuple)) or len(raw) != dom.depth:
            raise ValueError(f"bad {dom.describe()} time {raw!r}")
        return tuple(_coord(x, allow_inf=True) for x in raw)
    if not isinstance(raw, (list, tuple)) or len(raw) != 2 or not isinstance(raw[0], str):
        raise ValueError(f"bad seq time {raw!r}")
    return (raw[0], _coord(raw[1], allow_inf=True))


def time_to_json(dom: Domain, t: tuple) -> Any:
    if dom.kind == "epoch":
        return t[0]
    return list(t)


def time_sort_key(t: tuple):
    return t


# ---------------------------------------------------------------------------
# Frontiers
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Frontier:
    domain: Domain
    top: bool
    gens: frozenset = frozenset()  # maximal times; empty + not top = ∅

    @property
    def empty(self) -> bool:
        return not self.top and not self.gens

    def __repr__(self) -> str:
        return f"Frontier({frontier_to_json(self)!r})"


def top(dom: Domain) -> Frontier:
    return Frontier(dom, True)


def empty(dom: Domain) -> Frontier:
    return Frontier(dom, False, frozenset())


def make(dom: Domain, times: Iterable[tuple]) -> Frontier:
    """↓times, in canonical form (maximal times only)."""
    ts = set()
    for t in times:
        if dom.kind != "seq" and dom.order == "lexicographic":
            # every coordinate after an inf is inf (they add nothing)
            t = list(t)
            for i, x in enumerate(t):
                if x == INF:
                    t[i:] = [INF] * (len(t) - i)
                    break
            t = tuple(t)
        ts.add(t)
    # a time with all coordinates unbounded covers everything: that is ⊤
    if dom.kind != "seq" and any(all(x == INF for x in t) for t in ts):
        return top(dom)
    maximal = frozenset(t for t in ts if not any(u != t and dom.leq(t, u) for u in ts))
    return Frontier(dom, False, maximal)


def parse_frontier(dom: Domain, raw: Any) -> Frontier:
    if raw == "top":
        return top(dom)
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"bad frontier {raw!r}")
    return make(dom, (parse_time(dom, t) for t in raw))


def frontier_to_json(f: Frontier) -> Any:
    if f.top:
        return "top"
    return [time_to_json(f.domain, t) for t in sorted(f.gens, key=time_sort_key)]


def contains(f: Frontier, t: tuple) -> bool:
    """t ∈ f (downward-closure membership)."""
    if f.top:
        return True
    return any(f.domain.leq(t, g) for g in f.gens)


def subset(a: Frontier, b: Frontier) -> bool:
    """a ⊆ b.  For finitely generated down-sets (also with inf coordinates) this is
    'every maximal time of a lies below some maximal time of b'."""
    _same_domain(a, b)
    if b.top:
        return True
    if a.top:
        return False
    return all(contains(b, t) for t in a.gens)


def meet(a: Frontier, b: Frontier) -> Frontier:
    """a ∩ b.  ↓x ∩ ↓y = ↓min(x, y) (componentwise for the product order, the
    smaller one for total orders, same-edge minimum or nothing for seq)."""
    dom = _same_domain(a, b)
    if a.top:
        return b
    if b.top:
        return a
    out = []
    for x in a.gens:
        for y in b.gens:
            if dom.kind == "seq":
                if x[0] == y[0]:
                    out.append((x[0], min(x[1], y[1])))
            elif dom.order == "product":
                out.append(tuple(min(p, q) for p, q in zip(x, y)))
            else:
                out.append(min(x, y))
    return make(dom, out)


def join(a: Frontier, b: Frontier) -> Frontier:
    dom = _same_domain(a, b)
    if a.top or b.top:
        return top(dom)
    return make(dom, list(a.gens) + list(b.gens))


def _same_domain(a: Frontier, b: Frontier) -> Domain:
    if a.domain != b.domain:
        raise ValueError(f"domain mismatch: {a.domain.describe()} vs {b.domain.describe()}")
    return a.domain


# ---------------------------------------------------------------------------
# Projection functions (non-recorded kinds; φ(⊤) = ⊤ and φ(∅) = ∅)
# ---------------------------------------------------------------------------


def _depth(dom: Domain) -> int:
    return 1 if dom.kind == "epoch" else dom.depth


def _lex_predecessor_downset(s: tuple) -> tuple | None:
    """Greatest tuple u (coordinates may be inf) with ↓lex u = {t : t <lex s}, for a
    finite tuple s of naturals; None when that set is empty (s is all zeros)."""
    for i in range(len(s) - 1, -1, -1):
        if s[i] > 0:
            return s[:i] + (s[i] - 1,) + (INF,) * (len(s) - i - 1)
    return None


def apply_projection_function(kind: str, src: Domain, dst: Domain, f: Frontier) -> Frontier:
    if kind == "recorded":
        raise ValueError("recorded has no projection function")
    if f.top:
        return top(dst)
    if f.empty:
        return empty(dst)
    if kind == "identity":
        return Frontier(dst, False, f.gens)
    if kind == "loop_entry":
        # every iteration of the times in f: each maximal m becomes [*m, inf]
        return make(dst, ((*m, INF) for m in f.gens))
    if kind == "loop_exit":
        # the times t all of whose iterations [*t, c] are in f
        if src.order == "product":
            # infinitely many c need a single generator with an unbounded last coordinate
            return make(dst, (m[:-1] for m in f.gens if m[-1] == INF))
        (m,) = f.gens  # lexicographic: exactly one maximal time
        if m[-1] == INF:
            return make(dst, [m[:-1]])  # (t, c) <=lex (m', inf) for all c iff t <=lex m'
        pred = _lex_predecessor_downset(m[:-1])  # need t <lex m' strictly
        return make(dst, [] if pred is None else [pred])
    if kind == "feedback":
        return make(dst, ((*m[:-1], m[-1] + 1) for m in f.gens))
    raise ValueError(f"unknown projection kind {kind!r}")


def _check_projection_domains(name: str, kind: str, src: Domain, dst: Domain) -> None:
    bad = f"edge {name}: projection {kind} from {src.describe()} to {dst.describe()}"
    if kind == "identity":
        if src != dst:
            raise ValueError(bad + ": identity needs the same domain at both ends")
    elif kind == "feedback":
        if src != dst or src.kind != "product":
            raise ValueError(bad + ": feedback needs the same product domain")
    elif kind == "loop_entry":
        if src.kind == "seq" or dst.kind != "product" or dst.depth != _depth(src) + 1:
            raise ValueError(bad + ": loop_entry goes from depth k to product depth k+1")
        if _depth(src) >= 2 and src.order != dst.order:
            raise ValueError(bad + ": unsupported order change across loop_entry")
    elif kind == "loop_exit":
        if src.kind != "product" or dst.kind == "seq" or src.depth != _depth(dst) + 1:
            raise ValueError(bad + ": loop_exit goes from product depth k+1 to depth k")
        if _depth(dst) >= 2 and src.order != dst.order:
            raise ValueError(bad + ": unsupported order change across loop_exit")
    elif kind != "recorded":
        raise ValueError(f"edge {name}: unknown projection {kind!r}")


# ---------------------------------------------------------------------------
# Scenario model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    name: str
    src: str
    dst: str
    kind: str


@dataclass
class Checkpoint:
    """One element of F*(p) with its metadata Ξ(p, f), defaults applied."""

    frontier: Frontier
    notifications: Frontier
    delivered: dict  # input edge -> Frontier (p's domain)
    projected: dict  # output edge -> Frontier (dst's domain), effective φ(e)(f)
    discarded: dict  # output edge -> Frontier (dst's domain)
    logged: dict  # output edge -> tuple of times (dst's domain)
    listed_index: int  # 0 for the implicit ∅, k for checkpoints[p][k-1]


class Model:
    def __init__(self, scenario: dict, ambiguous_recorded: str = "union"):
        if ambiguous_recorded not in AMBIGUOUS_RULES:
            raise ValueError(f"ambiguous_recorded must be one of {AMBIGUOUS_RULES}")
        self.ambiguous_recorded = ambiguous_recorded
        if not isinstance(scenario, dict):
            raise ValueError("scenario must be a dict")
        unknown = set(scenario) - {"processors", "edges", "checkpoints"}
        if unknown:
            raise ValueError(f"unknown scenario keys {sorted(unknown)}")
        procs = scenario.get("processors")
        if not isinstance(procs, dict) or not procs:
            raise ValueError("scenario needs a non-empty 'processors' map")
        self.procs: list[str] = list(procs)
        self.domain: dict[str, Domain] = {}
        for p, spec in procs.items():
            if not isinstance(spec, dict) or "domain" not in spec:
                raise ValueError(f"processor {p}: needs a domain")
            self.domain[p] = parse_domain(spec["domain"])

        self.edges: dict[str, Edge] = {}
        for name, spec in (scenario.get("edges") or {}).items():
            if not isinstance(spec, dict) or "src" not in spec or "dst" not in spec:
                raise ValueError(f"edge {name}: needs src and dst")
            src, dst = spec["src"], spec["dst"]
            if src not in self.domain or dst not in self.domain:
                raise ValueError(f"edge {name}: unknown endpoint")
            kind = spec.get("projection", "identity")
            _check_projection_domains(name, kind, self.domain[src], self.domain[dst])
            self.edges[name] = Edge(name, src, dst, kind)
        self.inputs = {p: [e for e in self.edges.values() if e.dst == p] for p in self.procs}
        self.outputs = {p: [e for e in self.edges.values() if e.src == p] for p in self.procs}

        cps = scenario.get("checkpoints") or {}
        for p in cps:
            if p not in self.domain:
                raise ValueError(f"checkpoints for unknown processor {p}")
        self.listed: dict[str, list[Checkpoint]] = {}
        self.options: dict[str, list[Checkpoint]] = {}
        for p in self.procs:
            raw_list = cps.get(p, [])
            if not isinstance(raw_list, list):
                raise ValueError(f"checkpoints[{p}] must be a list")
            listed = [
                self._parse_checkpoint(p, raw, i + 1, i == len(raw_list) - 1)
                for i, raw in enumerate(raw_list)
            ]
            for i, a in enumerate(listed):
                for b in listed[i + 1 :]:
                    if a.frontier == b.frontier:
                        raise ValueError(f"checkpoints[{p}]: frontier listed twice")
                    if subset(b.frontier, a.frontier):
                        raise ValueError(f"checkpoints[{p}]: not in increasing order")
            self.listed[p] = listed
            self.options[p] = [self._empty_checkpoint(p), *listed]
        self._phi_cache: dict = {}

    # -- checkpoints ---------------------------------------------------------

    def _empty_checkpoint(self, p: str) -> Checkpoint:
        dom = self.domain[p]
        return Checkpoint(
            frontier=empty(dom),
            notifications=empty(dom),
            delivered={e.name: empty(dom) for e in self.inputs[p]},
            projected={e.name: empty(self.domain[e.dst]) for e in self.outputs[p]},
            discarded={e.name: empty(self.domain[e.dst]) for e in self.outputs[p]},
            logged={e.name: () for e in self.outputs[p]},
            listed_index=0,
        )

    def _edge_map(self, p: str, raw: Any, fieldname: str, allowed: list[Edge]) -> dict:
        """The entries of a per-edge metadata map that name edges in `allowed`.

        `delivered` may also name an edge that is not in the graph at all (an external
        input): its value is parsed (checked) in p's domain, then dropped, as it has no
        sender.  Any other edge name that is not in `allowed` is an error."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise ValueError(f"checkpoint of {p}: {fieldname} must be a map")
        allowed_names = {e.name for e in allowed}
        out = {}
        for name, value in raw.items():
            if name in allowed_names:
                out[name] = value
            elif name in self.edges:
                raise ValueError(
                    f"checkpoint of {p}: {fieldname} names edge {name} of the wrong direction"
                )
            elif fieldname == "delivered":
                parse_frontier(self.domain[p], value)  # external input: checked, constrains nothing
            else:
                raise ValueError(f"checkpoint of {p}: {fieldname} names unknown edge {name}")
        return out

    def _parse_checkpoint(self, p: str, raw: Any, index: int, is_last: bool) -> Checkpoint:
        dom = self.domain[p]
        if not isinstance(raw, dict) or "frontier" not in raw:
            raise ValueError(f"checkpoint of {p}: needs a frontier")
        unknown = set(raw) - {
            "frontier",
            "notifications",
            "delivered",
            "projected",
            "discarded",
            "logged",
        }
        if unknown:
            raise ValueError(f"checkpoint of {p}: unknown keys {sorted(unknown)}")
        if raw["frontier"] == "top" and not is_last:
            raise ValueError(f"checkpoint of {p}: 'top' must be listed last")
        f = parse_frontier(dom, raw["frontier"])
        if f.empty:
            raise ValueError(f"checkpoint of {p}: ∅ is never listed")

        if "notifications" in raw:
            notifications = parse_frontier(dom, raw["notifications"])
        else:
            notifications = empty(dom) if dom.kind == "seq" else f

        dl = self._edge_map(p, raw.get("delivered"), "delivered", self.inputs[p])
        delivered = {}
        for e in self.inputs[p]:
            if e.name in dl:
                delivered[e.name] = parse_frontier(dom, dl[e.name])
            elif dom.kind == "seq":
                delivered[e.name] = _seq_part(f, e.name)
            else:
                delivered[e.name] = f

        pr = self._edge_map(p, raw.get("projected"), "projected", self.outputs[p])
        ds = self._edge_map(p, raw.get("discarded"), "discarded", self.outputs[p])
        lg = self._edge_map(p, raw.get("logged"), "logged", self.outputs[p])
        projected, discarded, logged = {}, {}, {}
        for e in self.outputs[p]:
            ddom = self.domain[e.dst]
            if e.name in pr:
                projected[e.name] = parse_frontier(ddom, pr[e.name])
            elif e.kind == "recorded":
                # Nothing stored: ∅ is safe, except at ⊤, which every projection maps
                # to ⊤ (a processor that has not failed keeps everything it sent).
                projected[e.name] = top(ddom) if f.top else empty(ddom)
            else:
                projected[e.name] = apply_projection_function(e.kind, dom, ddom, f)
            if e.name in ds:
                discarded[e.name] = parse_frontier(ddom, ds[e.name])
            else:
                discarded[e.name] = projected[e.name]
            times = lg.get(e.name, [])
            if not isinstance(times, (list, tuple)):
                raise ValueError(f"checkpoint of {p}: logged[{e.name}] must be a list of times")
            logged[e.name] = tuple(parse_time(ddom, t) for t in times)
        return Checkpoint(f, notifications, delivered, projected, discarded, logged, index)

    # -- φ ---------------------------------------------------------------------

    def phi(self, edge: Edge, f: Frontier) -> Frontier:
        """φ(edge)(f) for a frontier f of src(edge): the checkpoint's (possibly explicit)
        projected value if f is a listed checkpoint, ∅ for ∅, otherwise the projection
        function, or for `recorded` the projected value of the greatest listed
        checkpoint contained in f (∅ if none)."""
        key = (edge.name, f)
        if key not in self._phi_cache:
            self._phi_cache[key] = self._phi(edge, f)
        return self._phi_cache[key]

    def _phi(self, edge: Edge, f: Frontier) -> Frontier:
        dst = self.domain[edge.dst]
        if f.empty:
            return empty(dst)
        for c in self.listed[edge.src]:
            if c.frontier == f:
                return c.projected[edge.name]
        if edge.kind != "recorded":
            return apply_projection_function(edge.kind, self.domain[edge.src], dst, f)
        contained = [c for c in self.listed[edge.src] if subset(c.frontier, f)]
        greatest = [c for c in contained if all(subset(d.frontier, c.frontier) for d in contained)]
        if greatest:
            return greatest[0].projected[edge.name]
        if not contained:
            return empty(dst)
        maximal = [
            c
            for c in contained
            if not any(d is not c and subset(c.frontier, d.frontier) for d in contained)
        ]
        if self.ambiguous_recorded == "error":
            raise ValueError(
                f"edge {edge.name}: no greatest checkpoint of {edge.src} inside {frontier_to_json(f)}"
            )
        if self.ambiguous_recorded == "last":
            return maximal[-1].projected[edge.name]  # last in listed (increasing) order
        out = empty(dst)
        for c in maximal:
            out = join(out, c.projected[edge.name])
        return out

    # -- constraints -------------------------------------------------------------

    def greatest_fn(self, choice: dict[str, Checkpoint]) -> dict[str, Frontier]:
        # Evaluate f_n(p) = f(p) ∩ ⋂ φ(d)(f_n(src d)) from f_n = f until stable; with a
        # monotone φ this descends to the greatest fixed point. A non-monotone φ may
        # oscillate: then also intersect with the previous value, which must converge.
        for keep_old in (False, True):
            fn = {p: choice[p].frontier for p in self.procs}
            for _ in range(10 * len(self.procs) + 10 if not keep_old else 100_000):
                new = {}
                for p in self.procs:
                    x = meet(fn[p], choice[p].frontier) if keep_old else choice[p].frontier
                    for d in self.inputs[p]:
                        x = meet(x, self.phi(d, fn[d.src]))
                    new[p] = x
                if new == fn:
                    return fn
                fn = new
        raise RuntimeError("notification frontier iteration did not converge")

    def violations(self, choice: dict[str, Checkpoint], fn: dict[str, Frontier]) -> list[str]:
        out = []
        for e in self.edges.values():
            cs, cd = choice[e.src], choice[e.dst]
            if not subset(cs.discarded[e.name], cd.frontier):
                out.append(
                    f"constraint 1: D̄({e.name}, f({e.src})) = {frontier_to_json(cs.discarded[e.name])} "
                    f"⊄ f({e.dst}) = {frontier_to_json(cd.frontier)}"
                )
            img = self.phi(e, cs.frontier)
            if not subset(cd.delivered[e.name], img):
                out.append(
                    f"constraint 2: M̄({e.name}, f({e.dst})) = {frontier_to_json(cd.delivered[e.name])} "
                    f"⊄ φ({e.name})(f({e.src})) = {frontier_to_json(img)}"
                )
        for p in self.procs:
            if not subset(fn[p], choice[p].frontier):
                out.append(
                    f"constraint 3: f_n({p}) = {frontier_to_json(fn[p])} ⊄ f({p}) = {frontier_to_json(choice[p].frontier)}"
                )
            if not subset(choice[p].notifications, fn[p]):
                out.append(
                    f"constraint 4: N̄({p}, f({p})) = {frontier_to_json(choice[p].notifications)} "
                    f"⊄ f_n({p}) = {frontier_to_json(fn[p])}"
                )
        for e in self.edges.values():
            img = self.phi(e, fn[e.src])
            if not subset(fn[e.dst], img):
                out.append(
                    f"constraint 5: f_n({e.dst}) = {frontier_to_json(fn[e.dst])} "
                    f"⊄ φ({e.name})(f_n({e.src})) = {frontier_to_json(img)}"
                )
        return out

    def resend(self, choice: dict[str, Checkpoint]) -> dict[str, list[tuple]]:
        out = {}
        for e in self.edges.values():
            logged = choice[e.src].logged[e.name]
            target = choice[e.dst].frontier
            out[e.name] = sorted({t for t in logged if not contains(target, t)}, key=time_sort_key)
        return out


def _seq_part(f: Frontier, edge: str) -> Frontier:
    """The part of a sequence-number frontier on one input edge."""
    if f.top:
        return Frontier(f.domain, False, frozenset({(edge, INF)}))
    return Frontier(f.domain, False, frozenset(t for t in f.gens if t[0] == edge))


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass
class Assignment:
    """A consistent rollback: f, its greatest f_n, and the resend it implies."""

    model: Model = field(repr=False)
    indices: dict  # p -> index into [∅] + checkpoints[p]
    frontiers: dict  # p -> Frontier
    notification_frontiers: dict  # p -> Frontier
    resend: dict  # edge -> sorted list of times (internal tuples)

    def key(self) -> tuple:
        return tuple(self.indices[p] for p in self.model.procs)

    def output(self) -> dict:
        m = self.model
        return {
            "frontiers": {p: frontier_to_json(self.frontiers[p]) for p in m.procs},
            "notification_frontiers": {
                p: frontier_to_json(self.notification_frontiers[p]) for p in m.procs
            },
            "resend": {
                e.name: [time_to_json(m.domain[e.dst], t) for t in self.resend[e.name]]
                for e in m.edges.values()
            },
        }


@dataclass
class BruteForceResult:
    model: Model = field(repr=False)
    total_assignments: int  # |∏ F*(p)|
    consistent: list  # list[Assignment], in enumeration order
    maximal: list  # list[Assignment], the maximal consistent ones

    @property
    def unique(self) -> bool:
        """True iff exactly one maximal consistent assignment exists (it is then the maximum)."""
        return len(self.maximal) == 1

    @property
    def chosen(self) -> Assignment:
        return self.maximal[0]

    @property
    def output(self) -> dict:
        """Output dict (spec format) of the chosen maximal assignment ``maximal[0]``."""
        return self.chosen.output()

    @property
    def maximal_outputs(self) -> list:
        return [a.output() for a in self.maximal]

    @property
    def consistent_frontiers(self) -> list:
        """Each consistent assignment as {p: JSON frontier}."""
        return [
            {p: frontier_to_json(a.frontiers[p]) for p in self.model.procs} for a in self.consistent
        ]


def solve_all(scenario: dict, *, ambiguous_recorded: str = "union") -> BruteForceResult:
    model = Model(scenario, ambiguous_recorded)
    procs = model.procs
    total = math.prod(len(model.options[p]) for p in procs)
    if total > MAX_ASSIGNMENTS:
        raise ValueError(f"{total} assignments exceed the brute-force limit of {MAX_ASSIGNMENTS}")
    pos = {p: i for i, p in enumerate(procs)}

    # constraints 1 and 2 only depend on the two endpoints of an edge: tabulate them
    pair_ok = {}
    for e in model.edges.values():
        table = {}
        for i, cs in enumerate(model.options[e.src]):
            for j, cd in enumerate(model.options[e.dst]):
                if e.src == e.dst and i != j:
                    continue
                ok1 = subset(cs.discarded[e.name], cd.frontier)
                ok2 = subset(cd.delivered[e.name], model.phi(e, cs.frontier))
                table[(i, j)] = ok1 and ok2
        pair_ok[e.name] = (pos[e.src], pos[e.dst], table)

    consistent = []
    for combo in itertools.product(*(range(len(model.options[p])) for p in procs)):
        if not all(table[(combo[a], combo[b])] for a, b, table in pair_ok.values()):
            continue
        choice = {p: model.options[p][combo[pos[p]]] for p in procs}
        fn = model.greatest_fn(choice)
        if model.violations(choice, fn):
            continue
        consistent.append(
            Assignment(
                model=model,
                indices={p: combo[pos[p]] for p in procs},
                frontiers={p: choice[p].frontier for p in procs},
                notification_frontiers=fn,
                resend=model.resend(choice),
            )
        )

    # pointwise ⊆ between options of one processor, by index
    leq = {
        p: [[subset(a.frontier, b.frontier) for b in model.options[p]] for a in model.options[p]]
        for p in procs
    }

    def below(a: Assignment, b: Assignment) -> bool:
        return all(leq[p][a.indices[p]][b.indices[p]] for p in procs)

    maxima: list[Assignment] = []
    for a in consistent:
        if any(below(a, m) for m in maxima):
            continue
        maxima = [m for m in maxima if not below(m, a)]
        maxima.append(a)
    return BruteForceResult(model, total, consistent, maxima)


# ---------------------------------------------------------------------------
# Checking a candidate output
# ---------------------------------------------------------------------------


def _canon_json(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_canon_json(y) for y in x]
    return x


def check(
    scenario: dict,
    output: dict,
    *,
    ambiguous_recorded: str = "union",
    result: BruteForceResult | None = None,
) -> list[str]:
    """Problems with a candidate solver output; [] means it is a consistent, maximal
    rollback, with the greatest notification frontiers and the right resend, written
    in the spec's output format."""
    if result is None:
        result = solve_all(scenario, ambiguous_recorded=ambiguous_recorded)
    model = result.model
    problems: list[str] = []
    if not isinstance(output, dict):
        return ["output is not a dict"]
    for key in ("frontiers", "notification_frontiers", "resend"):
        if not isinstance(output.get(key), dict):
            problems.append(f"output lacks a '{key}' map")
    if problems:
        return problems
    extra = set(output) - {"frontiers", "notification_frontiers", "resend"}
    if extra:
        problems.append(f"output has unexpected keys {sorted(extra)}")

    f_out, fn_out, rs_out = output["frontiers"], output["notification_frontiers"], output["resend"]
    for name, mp, universe in (
        ("frontiers", f_out, model.procs),
        ("notification_frontiers", fn_out, model.procs),
        ("resend", rs_out, list(model.edges)),
    ):
        missing = [k for k in universe if k not in mp]
        unknown = [k for k in mp if k not in universe]
        if missing:
            problems.append(f"{name}: missing {missing}")
        if unknown:
            problems.append(f"{name}: unknown {unknown}")
    if any(p not in f_out or p not in fn_out for p in model.procs):
        return problems

    # parse
    choice: dict[str, Checkpoint] = {}
    fn: dict[str, Frontier] = {}
    for p in model.procs:
        dom = model.domain[p]
        try:
            fp = parse_frontier(dom, f_out[p])
        except (ValueError, TypeError) as exc:
            problems.append(f"frontiers[{p}]: unparsable ({exc})")
            continue
        try:
            fn[p] = parse_frontier(dom, fn_out[p])
        except (ValueError, TypeError) as exc:
            problems.append(f"notification_frontiers[{p}]: unparsable ({exc})")
        match = [c for c in model.options[p] if c.frontier == fp]
        if not match:
            problems.append(f"frontiers[{p}] = {f_out[p]!r} is not ∅ or a listed checkpoint of {p}")
            continue
        choice[p] = match[0]
        if _canon_json(f_out[p]) != frontier_to_json(fp):
            problems.append(
                f"format: frontiers[{p}] = {f_out[p]!r}, canonical form is {frontier_to_json(fp)!r}"
            )
        if p in fn and _canon_json(fn_out[p]) != frontier_to_json(fn[p]):
            problems.append(
                f"format: notification_frontiers[{p}] = {fn_out[p]!r}, canonical form is {frontier_to_json(fn[p])!r}"
            )
    if len(choice) != len(model.procs) or len(fn) != len(model.procs):
        return problems

    # the five constraints, for the candidate's own f and f_n
    problems.extend(model.violations(choice, fn))

    key = tuple(choice[p].listed_index for p in model.procs)
    by_key = {a.key(): a for a in result.consistent}
    if key in by_key:
        ref = by_key[key]
        if not any(a.key() == key for a in result.maximal):
            bigger = next(
                m
                for m in result.maximal
                if all(subset(choice[p].frontier, m.frontiers[p]) for p in model.procs)
            )
            problems.append(
                "not maximal: the consistent rollback "
                f"{ {p: frontier_to_json(bigger.frontiers[p]) for p in model.procs} } is pointwise ⊇ and different"
            )
        for p in model.procs:
            if fn[p] != ref.notification_frontiers[p]:
                problems.append(
                    f"notification_frontiers[{p}] = {frontier_to_json(fn[p])!r}, greatest is "
                    f"{frontier_to_json(ref.notification_frontiers[p])!r}"
                )
    else:
        problems.append(
            "the frontier assignment is not consistent (no notification frontiers satisfy 3-5)"
        )

    # resend
    expected = model.resend(choice)
    for e in model.edges.values():
        if e.name not in rs_out:
            continue
        want = [time_to_json(model.domain[e.dst], t) for t in expected[e.name]]
        got = rs_out[e.name]
        if not isinstance(got, (list, tuple)):
            problems.append(f"resend[{e.name}] is not a list")
            continue
        if _canon_json(got) != want:
            try:
                parsed = [parse_time(model.domain[e.dst], t) for t in got]
            except (ValueError, TypeError):
                parsed = None
            if parsed is not None and sorted(set(parsed), key=time_sort_key) == expected[e.name]:
                problems.append(f"format: resend[{e.name}] = {got!r}, canonical form is {want!r}")
            else:
                problems.append(f"resend[{e.name}] = {got!r}, expected {want!r}")
    return problems
