"""Self-checks of the brute-force reference (tests/reference/brute_force.py).

Every expected answer below is derived by hand from docs/scenarios.md; the comments
give the derivation.  Notation: ↓3 = {0,1,2,3}, P = f(p), "(k)" = constraint k.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .brute_force import (
    INF,
    Domain,
    Model,
    apply_projection_function,
    check,
    contains,
    frontier_to_json,
    make,
    meet,
    parse_frontier,
    solve_all,
    subset,
)
from .generate import DOMAINS, random_scenario, scenarios

EPOCH = Domain("epoch", "lexicographic", 1)
PROD2 = Domain("product", "product", 2)
LEX2 = Domain("product", "lexicographic", 2)
LEX3 = Domain("product", "lexicographic", 3)
SEQ = Domain("seq", "product", 0)


def F(dom, raw):
    return parse_frontier(dom, raw)


def J(dom, raw):
    """parse then print: the canonical output form of a frontier"""
    return frontier_to_json(F(dom, raw))


def frontiers_of(result):
    return result.consistent_frontiers


# ---------------------------------------------------------------------------
# frontiers
# ---------------------------------------------------------------------------


def test_epoch_frontier_membership():
    f = F(EPOCH, [3])  # ↓3 = {0,1,2,3}
    assert all(contains(f, (t,)) for t in range(4))
    assert not contains(f, (4,))
    assert J(EPOCH, [1, 3, 2]) == [3]  # 1 and 2 are below 3: redundant
    assert J(EPOCH, []) == [] and J(EPOCH, "top") == "top"
    with pytest.raises(ValueError):
        F(EPOCH, ["inf"])  # an epoch is a non-negative int


def test_product_frontier_normal_form_and_subset():
    # [0,1] <= [1,2] componentwise: redundant; [2,0] is incomparable with [1,2]
    assert J(PROD2, [[1, 2], [0, 1], [2, 0]]) == [[1, 2], [2, 0]]
    # "inf" and float inf are the same unbounded coordinate; output uses float inf
    assert J(PROD2, [[3, "inf"]]) == [[3, INF]] == J(PROD2, [[3, INF]])
    # ↓[3,inf] holds every iteration of epochs 0..3
    assert subset(F(PROD2, [[3, 100]]), F(PROD2, [[3, "inf"]]))
    assert not subset(F(PROD2, [[4, 0]]), F(PROD2, [[3, "inf"]]))
    assert not subset(F(PROD2, [[3, "inf"]]), F(PROD2, [[3, 100], [2, 200]]))
    # an all-unbounded time is every time: ⊤
    assert J(PROD2, [["inf", "inf"]]) == "top"
    assert J(PROD2, [["inf", 3]]) == [[INF, 3]]


def test_lexicographic_frontier_normal_form_and_subset():
    # total order: one maximal time; [1,5] <lex [2,0]
    assert J(LEX2, [[1, 5], [2, 0]]) == [[2, 0]]
    # coordinates after an inf are inf
    assert J(LEX3, [[3, "inf", 2]]) == [[3, INF, INF]]
    assert J(LEX2, [["inf", 0]]) == "top"
    # lex ↓[2,inf] = {(a,b): a <= 2} is strictly inside ↓[3,0] = {a < 3} ∪ {(3,0)}
    assert subset(F(LEX2, [[2, "inf"]]), F(LEX2, [[3, 0]]))
    assert not subset(F(LEX2, [[3, 0]]), F(LEX2, [[2, "inf"]]))
    # lex ↓[3,5] contains (2, 100) (not so in the product order)
    assert contains(F(LEX2, [[3, 5]]), (2, 100))
    assert not contains(F(PROD2, [[3, 5]]), (2, 100))


def test_meets():
    # ↓{[3,1],[1,3]} ∩ ↓[2,2] = ↓{min([3,1],[2,2]), min([1,3],[2,2])} = ↓{[2,1],[1,2]}
    assert frontier_to_json(meet(F(PROD2, [[3, 1], [1, 3]]), F(PROD2, [[2, 2]]))) == [
        [1, 2],
        [2, 1],
    ]
    # lexicographic: the smaller of the two
    assert frontier_to_json(meet(F(LEX2, [[3, 1]]), F(LEX2, [[2, 9]]))) == [[2, 9]]
    # seq: per common edge, the smaller count
    m = meet(F(SEQ, [["e1", 4], ["e2", 7]]), F(SEQ, [["e1", 2], ["e3", 1]]))
    assert frontier_to_json(m) == [["e1", 2]]
    assert frontier_to_json(meet(F(EPOCH, "top"), F(EPOCH, [2]))) == [2]


def test_seq_frontier():
    f = F(SEQ, [["e2", 7], ["e1", 4], ["e1", 2]])
    assert frontier_to_json(f) == [["e1", 4], ["e2", 7]]  # (e1,2) <= (e1,4): dropped; sorted
    assert contains(f, ("e1", 3)) and not contains(f, ("e1", 5)) and not contains(f, ("e3", 0))


# ---------------------------------------------------------------------------
# projection functions (spec table)
# ---------------------------------------------------------------------------


def proj(kind, src, dst, raw):
    return frontier_to_json(apply_projection_function(kind, src, dst, F(src, raw)))


def test_identity_function():
    assert proj("identity", PROD2, PROD2, [[1, 2], [2, 0]]) == [[1, 2], [2, 0]]


def test_loop_entry_function():
    # each maximal m becomes [*m, inf]
    assert proj("loop_entry", EPOCH, LEX2, [3]) == [[3, INF]]
    assert proj("loop_entry", EPOCH, PROD2, [3]) == [[3, INF]]
    p3 = Domain("product", "product", 3)
    assert proj("loop_entry", PROD2, p3, [[1, 2], [2, 0]]) == [[1, 2, INF], [2, 0, INF]]
    assert proj("loop_entry", EPOCH, LEX2, "top") == "top"
    assert proj("loop_entry", EPOCH, LEX2, []) == []


def test_loop_exit_function():
    # the spec's three examples
    assert proj("loop_exit", LEX2, EPOCH, [[3, 5]]) == [
        2
    ]  # (3, 6) is missing, all of (2, *) present
    assert proj("loop_exit", LEX2, EPOCH, [[3, "inf"]]) == [3]
    assert proj("loop_exit", PROD2, EPOCH, [[3, 5]]) == []  # no epoch has all iterations
    # product order: only generators with an unbounded iteration survive
    assert proj("loop_exit", PROD2, EPOCH, [[1, "inf"], [3, 5]]) == [1]
    assert proj("loop_exit", LEX2, EPOCH, [[0, 5]]) == []  # nothing below epoch 0
    # lexicographic depth 3 -> 2: {(a,b): (a,b) <lex (3,0)} = {a <= 2} = ↓lex[2, inf]
    assert proj("loop_exit", LEX3, LEX2, [[3, 0, 7]]) == [[2, INF]]
    assert proj("loop_exit", LEX3, LEX2, [[3, 4, 7]]) == [[3, 3]]
    assert proj("loop_exit", LEX3, LEX2, [[3, 4, "inf"]]) == [[3, 4]]
    assert proj("loop_exit", LEX2, EPOCH, "top") == "top"


def test_feedback_function():
    assert proj("feedback", LEX2, LEX2, [[1, 3]]) == [[1, 4]]  # the spec's example
    assert proj("feedback", PROD2, PROD2, [[0, 2], [3, 0]]) == [[0, 3], [3, 1]]
    assert proj("feedback", PROD2, PROD2, [[1, "inf"]]) == [[1, INF]]  # inf + 1 = inf
    assert proj("feedback", PROD2, PROD2, []) == []


# ---------------------------------------------------------------------------
# whole scenarios, one per domain / projection kind
# ---------------------------------------------------------------------------


def test_epoch_identity_chain():
    sc = {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q"}},  # identity by default
        "checkpoints": {
            "p": [{"frontier": [2]}, {"frontier": "top"}],
            "q": [{"frontier": [1]}, {"frontier": [2]}, {"frontier": [3]}],
        },
    }
    # all defaults: D̄(e,P) = φ(P) = P, M̄(e,Q) = Q, so (1) P ⊆ Q and (2) Q ⊆ P: P = Q.
    # Common options of p and q: ∅ and ↓2.  f_n = f works (N̄ = f).
    r = solve_all(sc)
    assert r.total_assignments == 3 * 4
    assert frontiers_of(r) == [{"p": [], "q": []}, {"p": [2], "q": [2]}]
    assert r.unique
    assert r.output == {
        "frontiers": {"p": [2], "q": [2]},
        "notification_frontiers": {"p": [2], "q": [2]},
        "resend": {"e": []},
    }
    assert check(sc, r.output) == []


EPOCH_LOGGING = {
    "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
    "edges": {"e": {"src": "p", "dst": "q", "projection": "identity"}},
    "checkpoints": {
        "p": [
            {"frontier": [2], "discarded": {"e": []}, "logged": {"e": [1, 2]}},
            {"frontier": "top", "discarded": {"e": []}, "logged": {"e": [4, 0, 1, 2, 3, 3]}},
        ],
        "q": [{"frontier": [1]}],
    },
}


def test_epoch_logging_and_resend():
    # p logs everything (D̄ = ∅) so (1) never binds; (2) Q ⊆ P.  q's only non-empty option ↓1.
    # consistent: (∅,∅), (↓2,∅), (↓2,↓1), (⊤,∅), (⊤,↓1); maximum (⊤, ↓1).
    # f_n(p) = ⊤ (no inputs), N̄(p,⊤) = ⊤ ⊆ ⊤; f_n(q) = ↓1 ∩ φ(e)(⊤) = ↓1.
    # resend: L(e, ⊤) \ ↓1 = {4,0,1,2,3} \ {0,1} = [2,3,4], sorted, without repeats.
    r = solve_all(EPOCH_LOGGING)
    assert len(r.consistent) == 5 and r.unique
    assert r.output == {
        "frontiers": {"p": "top", "q": [1]},
        "notification_frontiers": {"p": "top", "q": [1]},
        "resend": {"e": [2, 3, 4]},
    }
    assert check(EPOCH_LOGGING, r.output) == []


def test_check_reports_problems():
    sc = EPOCH_LOGGING
    good = solve_all(sc).output

    def variant(**kw):
        out = json.loads(json.dumps(good))
        for k, v in kw.items():
            out[k].update(v)
        return out

    def has(problems, text):
        return any(text in p for p in problems)

    assert has(check(sc, variant(resend={"e": [2, 3]})), "resend[e]")
    assert has(check(sc, variant(resend={"e": [4, 3, 2]})), "format: resend[e]")
    probs = check(sc, variant(notification_frontiers={"q": []}))
    assert has(probs, "constraint 4") and has(probs, "notification_frontiers[q]")
    # (↓2, ↓1) is consistent but below (⊤, ↓1); its resend is L(e,↓2) \ ↓1 = [2]
    probs = check(
        sc, variant(frontiers={"p": [2]}, notification_frontiers={"p": [2]}, resend={"e": [2]})
    )
    assert len(probs) == 1 and has(probs, "not maximal")
    # p = ∅, q = ↓1 violates (2): M̄(e, ↓1) = ↓1 ⊄ φ(e)(∅) = ∅, and f_n(q) ⊄ φ(e)(f_n(p))
    probs = check(
        sc, variant(frontiers={"p": []}, notification_frontiers={"p": []}, resend={"e": []})
    )
    assert (
        has(probs, "constraint 2") and has(probs, "constraint 5") and has(probs, "not consistent")
    )
    assert has(check(sc, variant(frontiers={"q": [2]})), "not ∅ or a listed checkpoint")
    out = variant()
    del out["frontiers"]["q"]
    assert has(check(sc, out), "missing")


def test_notification_frontiers_figure5():
    # Figure 5 pattern, epochs, identity edges q -e2-> r -e3-> x.  q failed with nothing
    # (absent from checkpoints: only ∅).  r got nothing from q at ↓1 (M̄ = ∅), received no
    # notification (N̄ = ∅) and logged its output (D̄ = ∅).  x got a notification for 1.
    sc = {
        "processors": {
            "q": {"domain": "epoch"},
            "r": {"domain": "epoch"},
            "x": {"domain": "epoch"},
        },
        "edges": {"e2": {"src": "q", "dst": "r"}, "e3": {"src": "r", "dst": "x"}},
        "checkpoints": {
            "r": [
                {
                    "frontier": [1],
                    "notifications": [],
                    "delivered": {"e2": []},
                    "discarded": {"e3": []},
                    "logged": {"e3": [1, 0]},
                }
            ],
            "x": [{"frontier": [1]}],
        },
    }
    # (1) and (2) allow q=∅, r=↓1, x=↓1.  But f_n(q) = ∅, so f_n(r) ⊆ φ(e2)(∅) = ∅ and
    # f_n(x) ⊆ φ(e3)(f_n(r)) = ∅, while (4) needs N̄(x, ↓1) = ↓1 ⊆ f_n(x): x must be ∅.
    # consistent: r ∈ {∅, ↓1}, x = ∅.  resend e3 = L(e3, ↓1) \ f(x) = [0, 1].
    r = solve_all(sc)
    assert frontiers_of(r) == [{"q": [], "r": [], "x": []}, {"q": [], "r": [1], "x": []}]
    assert r.output == {
        "frontiers": {"q": [], "r": [1], "x": []},
        "notification_frontiers": {"q": [], "r": [], "x": []},
        "resend": {"e2": [], "e3": [0, 1]},
    }
    # if x had not received the notification, x could keep ↓1 (f_n(x) = ∅ is fine) and
    # nothing is re-sent: L(e3, ↓1) = {0, 1} ⊆ ↓1
    sc["checkpoints"]["x"][0]["notifications"] = []
    r = solve_all(sc)
    assert r.output == {
        "frontiers": {"q": [], "r": [1], "x": [1]},
        "notification_frontiers": {"q": [], "r": [], "x": []},
        "resend": {"e2": [], "e3": []},
    }


def _loop_scenario(order):
    return {
        "processors": {
            "a": {"domain": "epoch"},
            "h": {"domain": {"kind": "product", "order": order}},
            "b": {"domain": "epoch"},
        },
        "edges": {
            "e1": {"src": "a", "dst": "h", "projection": "loop_entry"},
            "fb": {"src": "h", "dst": "h", "projection": "feedback"},
            "e2": {"src": "h", "dst": "b", "projection": "loop_exit"},
        },
        "checkpoints": {
            "a": [
                {"frontier": [3], "discarded": {"e1": []}},
                {"frontier": "top", "discarded": {"e1": []}},
            ],
            "h": [
                {"frontier": [[1, "inf"]]},
                {"frontier": [[2, 3]], "discarded": {"fb": []}, "logged": {"fb": [[2, 4]]}},
            ],
            "b": [{"frontier": [1]}, {"frontier": [2]}],
        },
    }


def test_mixed_loop_lexicographic():
    # a (epoch) -e1 loop_entry-> h (lex product) -fb feedback-> h -e2 loop_exit-> b (epoch).
    # a logs e1, so (1) on e1 holds; (2) on e1: H ⊆ loop_entry(A): A=↓3 gives ↓[3,inf] ⊇ both
    #   h checkpoints, A=∅ allows only H=∅.
    # fb at H=↓[1,inf]: D̄ = feedback(↓[1,inf]) = ↓[1,inf] ⊆ H; at ↓[2,3] h logged fb: D̄ = ∅.
    #   (2) on fb: H ⊆ feedback(H) always.
    # e2: φ = loop_exit: lex ↓[1,inf] -> ↓1; lex ↓[2,3] -> ↓1 (epoch 2 lacks (2,4)).
    #   (1) D̄ = ↓1 ⊆ B and (2) B ⊆ ↓1: B = ↓1 whenever H ≠ ∅, B = ∅ when H = ∅.
    # consistent: H=∅: 3 (A any); H≠∅: A ∈ {↓3, ⊤}, 2 x 2 = 4.  Total 7.
    # maximum (⊤, ↓[2,3], ↓1); f_n(h) = ↓[2,3] ∩ loop_entry(⊤) ∩ feedback(↓[2,3]) = ↓[2,3];
    # f_n(b) = ↓1 ∩ loop_exit(↓[2,3]) = ↓1.  resend fb = {(2,4)} \ ↓[2,3] = [[2,4]].
    sc = _loop_scenario("lexicographic")
    r = solve_all(sc)
    assert len(r.consistent) == 7 and r.unique
    assert r.output == {
        "frontiers": {"a": "top", "h": [[2, 3]], "b": [1]},
        "notification_frontiers": {"a": "top", "h": [[2, 3]], "b": [1]},
        "resend": {"e1": [], "fb": [[2, 4]], "e2": []},
    }
    assert check(sc, r.output) == []


def test_mixed_loop_product_order_two_maxima():
    # Same graph, product order.  ↓[1,inf] and ↓[2,3] are now incomparable (a listed
    # order compatible with ⊆).  loop_exit(↓[1,inf]) = ↓1 but loop_exit(↓[2,3]) = ∅, so
    # H=↓[1,inf] forces B=↓1 and H=↓[2,3] forces B=∅: two maximal rollbacks
    # (⊤, ↓[1,inf], ↓1) and (⊤, ↓[2,3], ∅), neither ⊆ the other.
    sc = _loop_scenario("product")
    r = solve_all(sc)
    assert not r.unique
    assert sorted(map(json.dumps, r.maximal_outputs)) == sorted(
        map(
            json.dumps,
            [
                {
                    "frontiers": {"a": "top", "h": [[1, INF]], "b": [1]},
                    "notification_frontiers": {"a": "top", "h": [[1, INF]], "b": [1]},
                    "resend": {"e1": [], "fb": [], "e2": []},
                },
                {
                    "frontiers": {"a": "top", "h": [[2, 3]], "b": []},
                    "notification_frontiers": {"a": "top", "h": [[2, 3]], "b": []},
                    "resend": {"e1": [], "fb": [[2, 4]], "e2": []},
                },
            ],
        )
    )
    for out in r.maximal_outputs:
        assert check(sc, out, result=r) == []
    # "inf" spelled as a string in an output is a format problem (the spec says Infinity)
    (with_inf,) = [o for o in r.maximal_outputs if o["frontiers"]["b"] == [1]]
    bad = json.loads(json.dumps(with_inf))
    for key in ("frontiers", "notification_frontiers"):
        bad[key]["h"] = [[x if x != INF else "inf" for x in t] for t in bad[key]["h"]]
    assert bad["frontiers"]["h"] == [[1, "inf"]]
    assert [p[:7] for p in check(sc, bad, result=r)] == ["format:", "format:"]


def test_product_order_two_maxima_and_check():
    sc = {
        "processors": {"p": {"domain": "product"}, "q": {"domain": "product"}},
        "edges": {"e": {"src": "p", "dst": "q"}},
        "checkpoints": {
            "p": [{"frontier": [[2, 0]]}, {"frontier": [[0, 2]]}],
            "q": [{"frontier": [[2, 0]]}, {"frontier": [[0, 2]]}],
        },
    }
    # defaults give P ⊆ Q and Q ⊆ P: consistent (∅,∅), (A,A), (B,B); A, B incomparable
    r = solve_all(sc)
    assert len(r.consistent) == 3 and len(r.maximal) == 2 and not r.unique
    for t in ([[2, 0]], [[0, 2]]):
        out = {
            "frontiers": {"p": t, "q": t},
            "notification_frontiers": {"p": t, "q": t},
            "resend": {"e": []},
        }
        assert check(sc, out, result=r) == []
    mixed = {
        "frontiers": {"p": [[2, 0]], "q": [[0, 2]]},
        "notification_frontiers": {"p": [[2, 0]], "q": [[0, 2]]},
        "resend": {"e": []},
    }
    probs = check(sc, mixed, result=r)
    assert any("constraint 1" in p for p in probs) and any("constraint 2" in p for p in probs)
    zero = {
        "frontiers": {"p": [], "q": []},
        "notification_frontiers": {"p": [], "q": []},
        "resend": {"e": []},
    }
    assert [p[:11] for p in check(sc, zero, result=r)] == ["not maximal"]


def test_product_order_notification_meet():
    sc = {
        "processors": {
            p: {"domain": {"kind": "product", "order": "product", "depth": 2}} for p in "spq"
        },
        "edges": {"e0": {"src": "s", "dst": "p"}, "e1": {"src": "p", "dst": "q"}},
        "checkpoints": {
            "s": [
                {
                    "frontier": [[3, 1], [1, 3]],
                    "discarded": {"e0": []},
                    "logged": {"e0": [[0, 0], [3, 1], [4, 0]]},
                }
            ],
            "p": [
                {
                    "frontier": "top",
                    "notifications": [[1, 1]],
                    "delivered": {"e0": [[1, 1]]},
                    "discarded": {"e1": []},
                    "logged": {"e1": [[2, 2], [3, 3], [1, 1], [3, 3]]},
                }
            ],
            "q": [{"frontier": [[2, 2]], "notifications": [[2, 1], [1, 2]]}],
        },
    }
    # S = ↓{[3,1],[1,3]}.  p=⊤ needs (2) ↓[1,1] ⊆ S: s = S.  q=↓[2,2] needs (2) ↓[2,2] ⊆ P: p = ⊤.
    # consistent: (∅,∅,∅), (S,∅,∅), (S,⊤,∅), (S,⊤,Q): 4.
    # f_n: s = S; p = ⊤ ∩ S = S (N̄ = ↓[1,1] ⊆ S); q = ↓[2,2] ∩ S = ↓{[2,1],[1,2]} ⊇ N̄(q).
    # resend e0: f(p) = ⊤, nothing; e1: {[1,1],[2,2],[3,3]} \ ↓[2,2] = [[3,3]].
    r = solve_all(sc)
    assert len(r.consistent) == 4 and r.unique
    assert r.output == {
        "frontiers": {"s": [[1, 3], [3, 1]], "p": "top", "q": [[2, 2]]},
        "notification_frontiers": {
            "s": [[1, 3], [3, 1]],
            "p": [[1, 3], [3, 1]],
            "q": [[1, 2], [2, 1]],
        },
        "resend": {"e0": [], "e1": [[3, 3]]},
    }
    # with the default N̄(q, ↓[2,2]) = ↓[2,2] ⊄ f_n(q), q must roll back to ∅
    del sc["checkpoints"]["q"][0]["notifications"]
    assert solve_all(sc).output["frontiers"] == {"s": [[1, 3], [3, 1]], "p": "top", "q": []}


def test_product_loop_exit_in_scenario():
    sc = {
        "processors": {"h": {"domain": "product"}, "b": {"domain": "epoch"}},
        "edges": {"e": {"src": "h", "dst": "b", "projection": "loop_exit"}},
        "checkpoints": {
            "h": [{"frontier": [[1, "inf"], [3, 5]]}],
            "b": [{"frontier": [1]}, {"frontier": [3]}],
        },
    }
    # φ(e)(↓{[1,inf],[3,5]}) = ↓1 (only [1,inf] has all iterations): D̄ = ↓1 ⊆ B ⊆ ↓1 = φ: B = ↓1
    r = solve_all(sc)
    assert frontiers_of(r) == [{"h": [], "b": []}, {"h": [[1, INF], [3, 5]], "b": [1]}]
    assert r.output["notification_frontiers"] == {"h": [[1, INF], [3, 5]], "b": [1]}


def test_seq_recorded_figure7a():
    def upto(e, n):
        return [[e, i] for i in range(1, n + 1)]

    sc = {
        "processors": {"p": {"domain": "seq"}, "q": {"domain": "seq"}, "r": {"domain": "seq"}},
        "edges": {
            "e1": {"src": "p", "dst": "q", "projection": "recorded"},
            "e2": {"src": "q", "dst": "r", "projection": "recorded"},
        },
        "checkpoints": {
            "p": [
                {
                    "frontier": [["in", 5]],
                    "projected": {"e1": [["e1", 3]]},
                    "discarded": {"e1": []},
                    "logged": {"e1": upto("e1", 3)},
                },
                {
                    "frontier": "top",
                    "projected": {"e1": [["e1", 6]]},
                    "discarded": {"e1": []},
                    "logged": {"e1": upto("e1", 6)},
                },
            ],
            "q": [
                {
                    "frontier": [["e1", 2]],
                    "projected": {"e2": [["e2", 1]]},
                    "discarded": {"e2": []},
                },
                {
                    "frontier": [["e1", 4]],
                    "projected": {"e2": [["e2", 2]]},
                    "discarded": {"e2": []},
                },
            ],
            "r": [{"frontier": [["e2", 1]]}, {"frontier": "top", "delivered": {"e2": [["e2", 2]]}}],
        },
    }
    # Everything is logged (D̄ = ∅), seq notifications default to ∅ so (4) is trivial.
    # (2) on e1: M̄(e1, Q) = Q's part on e1 = Q ⊆ projected(e1, P): P=∅ -> Q=∅; P=↓(in,5) ->
    #   ↓(e1,3): Q ∈ {∅, ↓(e1,2)}; P=⊤ -> ↓(e1,6): any Q.
    # (2) on e2: M̄(e2, R): ↓(e2,1) at R1 (default), ↓(e2,2) at ⊤ (explicit) ⊆ projected(e2, Q):
    #   Q=∅ -> R=∅; Q=↓(e1,2) -> ↓(e2,1): R ∈ {∅, R1}; Q=↓(e1,4) -> ↓(e2,2): any R.
    # consistent: 1 (P=∅) + 3 (P=↓(in,5)) + 6 (P=⊤) = 10; maximum (⊤, ↓(e1,4), ⊤).
    # f_n(q) = ↓(e1,4) ∩ ↓(e1,6); f_n(r) = ⊤ ∩ projected(e2, ↓(e1,4)) = ↓(e2,2).
    # resend e1: L(e1, ⊤) \ ↓(e1,4) = (e1,5), (e1,6).
    r = solve_all(sc)
    assert len(r.consistent) == 10 and r.unique
    assert r.output == {
        "frontiers": {"p": "top", "q": [["e1", 4]], "r": "top"},
        "notification_frontiers": {"p": "top", "q": [["e1", 4]], "r": [["e2", 2]]},
        "resend": {"e1": [["e1", 5], ["e1", 6]], "e2": []},
    }
    assert check(sc, r.output) == []


def test_recorded_at_a_frontier_that_is_not_a_checkpoint():
    sc = {
        "processors": {"s": {"domain": "epoch"}, "p": {"domain": "epoch"}, "q": {"domain": "seq"}},
        "edges": {
            "e1": {"src": "s", "dst": "p", "projection": "identity"},
            "e2": {"src": "p", "dst": "q", "projection": "recorded"},
        },
        "checkpoints": {
            "s": [{"frontier": [1], "discarded": {"e1": []}}],
            "p": [
                {"frontier": [0], "projected": {"e2": [["e2", 2]]}},
                {"frontier": [2], "projected": {"e2": [["e2", 5]]}},
                {
                    "frontier": "top",
                    "notifications": [1],
                    "delivered": {"e1": [1]},
                    "projected": {"e2": [["e2", 7]]},
                    "discarded": {"e2": []},
                },
            ],
            "q": [{"frontier": [["e2", 2]]}, {"frontier": [["e2", 5]]}, {"frontier": [["e2", 7]]}],
        },
    }
    # p=↓2 needs (2) ↓2 ⊆ f(s) ⊆ ↓1: never.  p=↓0 needs S=↓1 and Q = ↓(e2,2) (D̄ = projected).
    # p=⊤ needs S=↓1 and allows any Q ⊆ ↓(e2,7).  consistent: (∅,∅,∅), (↓1,∅,∅),
    # (↓1,↓0,↓(e2,2)), (↓1,⊤,Q) for 4 Q's: 7.  Maximum (↓1, ⊤, ↓(e2,7)).
    # f_n(p) = ⊤ ∩ f_n(s) = ↓1 (⊇ N̄(p,⊤) = ↓1).  ↓1 is not a listed checkpoint of p: the
    # greatest listed one inside it is ↓0, projected ↓(e2,2): f_n(q) = ↓(e2,7) ∩ ↓(e2,2).
    r = solve_all(sc)
    assert len(r.consistent) == 7 and r.unique
    assert r.output == {
        "frontiers": {"s": [1], "p": "top", "q": [["e2", 7]]},
        "notification_frontiers": {"s": [1], "p": [1], "q": [["e2", 2]]},
        "resend": {"e1": [], "e2": []},
    }
    m = Model(sc)
    e2 = m.edges["e2"]
    assert frontier_to_json(m.phi(e2, F(EPOCH, [1]))) == [["e2", 2]]
    assert frontier_to_json(m.phi(e2, F(EPOCH, [3]))) == [["e2", 5]]  # greatest inside ↓3 is ↓2
    assert frontier_to_json(m.phi(e2, F(EPOCH, [2]))) == [["e2", 5]]  # listed
    assert frontier_to_json(m.phi(e2, F(EPOCH, "top"))) == [["e2", 7]]  # listed ⊤


def test_recorded_without_projected_is_empty_below_top_and_top_at_top():
    sc = {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q", "projection": "recorded"}},
        "checkpoints": {"p": [{"frontier": [1]}, {"frontier": "top"}], "q": [{"frontier": [2]}]},
    }
    # φ(e)(⊤) = ⊤ = D̄(e, ⊤): p keeps ⊤ only if q does, and q failed. At ↓1 nothing is
    # stored: φ = D̄ = ∅, so p keeps ↓1 while q must go to ∅ ((2): ↓2 ⊄ ∅).
    r = solve_all(sc)
    assert r.output["frontiers"] == {"p": [1], "q": []}
    # q with nothing delivered and no notifications can keep ↓2
    sc["checkpoints"]["q"] = [{"frontier": [2], "delivered": {"e": []}, "notifications": []}]
    assert solve_all(sc).output["frontiers"] == {"p": [1], "q": [2]}
    # both alive: nothing rolls back
    sc["checkpoints"]["q"].append({"frontier": "top"})
    assert solve_all(sc).output["frontiers"] == {"p": "top", "q": "top"}


def test_explicit_projected_overrides_identity_at_its_checkpoint():
    sc = {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q"}},
        "checkpoints": {
            "p": [{"frontier": [3], "projected": {"e": [1]}}],
            "q": [{"frontier": [1]}, {"frontier": [3]}],
        },
    }
    # at ↓3, φ(e) = ↓1 (override), D̄ defaults to it: ↓1 ⊆ Q ⊆ ↓1.  Without the override q = ↓3.
    r = solve_all(sc)
    assert r.output == {
        "frontiers": {"p": [3], "q": [1]},
        "notification_frontiers": {"p": [3], "q": [1]},
        "resend": {"e": []},
    }
    m = Model(sc)
    assert frontier_to_json(m.phi(m.edges["e"], F(EPOCH, [3]))) == [1]  # the listed frontier
    assert frontier_to_json(m.phi(m.edges["e"], F(EPOCH, [2]))) == [2]  # elsewhere: the function


def test_ambiguous_recorded_rules():
    sc = {
        "processors": {"p": {"domain": "product"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q", "projection": "recorded"}},
        "checkpoints": {
            "p": [
                {"frontier": [[2, 0]], "projected": {"e": [3]}},
                {"frontier": [[0, 2]], "projected": {"e": [1]}},
            ]
        },
    }
    x = F(PROD2, [[2, 0], [0, 2]])  # contains both checkpoints, neither is greatest
    assert frontier_to_json(Model(sc).phi(Model(sc).edges["e"], x)) == [3]  # union ↓3 ∪ ↓1
    m = Model(sc, "last")
    assert frontier_to_json(m.phi(m.edges["e"], x)) == [1]  # last listed: ↓[0,2]
    m = Model(sc, "error")
    with pytest.raises(ValueError):
        m.phi(m.edges["e"], x)


def test_seq_defaults():
    sc = {
        "processors": {"p": {"domain": "seq"}, "q": {"domain": "seq"}},
        "edges": {
            "a": {"src": "p", "dst": "q", "projection": "recorded"},
            "b": {"src": "p", "dst": "q", "projection": "recorded"},
        },
        "checkpoints": {
            "p": [
                {
                    "frontier": "top",
                    "projected": {"a": [["a", 3]], "b": [["b", 1]]},
                    "discarded": {"a": [], "b": []},
                }
            ],
            "q": [
                {"frontier": [["a", 3], ["b", 2]]},
                {"frontier": [["a", 3], ["b", 5]], "delivered": {"b": [["b", 1]]}},
            ],
        },
    }
    m = Model(sc)
    q1 = m.listed["q"][0]
    # seq: notifications default ∅, delivered default is f's part on the edge
    assert frontier_to_json(q1.notifications) == []
    assert frontier_to_json(q1.delivered["a"]) == [["a", 3]]
    assert frontier_to_json(q1.delivered["b"]) == [["b", 2]]
    # q1 violates (2) on b ((b,2) not projected); q2 delivered only (b,1): consistent
    r = solve_all(sc)
    assert r.output["frontiers"] == {"p": "top", "q": [["a", 3], ["b", 5]]}
    # f_n(q) = Q ∩ φ(a)(⊤) ∩ φ(b)(⊤) = Q ∩ ↓(a,3) ∩ ↓(b,1) = ∅: times on different edges are
    # incomparable, so with two recorded inputs (5) forces f_n = ∅ (harmless: N̄ defaults to ∅)
    assert r.output["notification_frontiers"]["q"] == []


def test_defaults_discarded_is_projected_and_notifications_is_f():
    sc = {
        "processors": {
            "p": {"domain": "epoch"},
            "q": {"domain": {"kind": "product", "order": "lexicographic"}},
        },
        "edges": {"e": {"src": "p", "dst": "q", "projection": "loop_entry"}},
        "checkpoints": {
            "p": [{"frontier": [2]}, {"frontier": "top", "projected": {"e": [[1, 1]]}}]
        },
    }
    m = Model(sc)
    c2, ctop = m.listed["p"]
    assert frontier_to_json(c2.notifications) == [2]
    assert frontier_to_json(c2.projected["e"]) == [[2, INF]]
    assert frontier_to_json(c2.discarded["e"]) == [[2, INF]]
    assert frontier_to_json(ctop.notifications) == "top"
    assert frontier_to_json(ctop.discarded["e"]) == [[1, 1]]  # defaults to the explicit projected
    # q can only be ∅; p=↓2 discards ↓[2,inf] ⊄ ∅, p=⊤ discards ↓[1,1] ⊄ ∅: p = ∅
    assert solve_all(sc).output["frontiers"] == {"p": [], "q": []}


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _two(cp, dom_q="epoch", proj="identity"):
    return {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": dom_q}},
        "edges": {"e": {"src": "p", "dst": "q", "projection": proj}},
        "checkpoints": {"p": cp},
    }


@pytest.mark.parametrize(
    "sc",
    [
        _two([{"frontier": "top"}, {"frontier": [1]}]),  # top not last
        _two([{"frontier": []}]),  # ∅ is never listed
        _two([{"frontier": [1]}, {"frontier": [1]}]),  # listed twice
        _two([{"frontier": [2]}, {"frontier": [1]}]),  # not increasing
        _two([], dom_q="product"),  # identity across domains
        _two([], dom_q={"kind": "product", "depth": 3}, proj="loop_entry"),  # depth 1 -> 3
        _two([], proj="warp"),
        _two([{"frontier": [1], "discarded": {"e": [[1, 2]]}}]),  # not an epoch time
        _two([{"frontier": [1], "delivered": {"e": [1]}}]),  # e is an output of p
        _two([{"frontier": [1], "delivered": {"feed": [[1, 2]]}}]),  # external input: still checked
        _two([{"frontier": [1], "discarded": {"nope": [1]}}]),  # not an edge
    ],
)
def test_rejects_bad_scenarios(sc):
    with pytest.raises(ValueError):
        solve_all(sc)


def test_external_delivered_entry_constrains_nothing():
    # p is a source: "feed" is no edge of the graph, so M̄(feed, ↓3) = ↓3 has no sender and
    # no constraint; with the defaults p keeps its checkpoint ↓3 ... and q (↓3 = P) too.
    sc = _two([{"frontier": [3], "delivered": {"feed": [3]}}])
    sc["checkpoints"]["q"] = [{"frontier": [3]}]
    assert solve_all(sc).output["frontiers"] == {"p": [3], "q": [3]}


def test_refuses_too_many_assignments():
    sc = {
        "processors": {f"p{i}": {"domain": "epoch"} for i in range(7)},
        "edges": {},
        "checkpoints": {f"p{i}": [{"frontier": [k]} for k in range(6)] for i in range(7)},
    }  # 7^7 = 823543 > 200000
    with pytest.raises(ValueError):
        solve_all(sc)


def test_all_empty_trivial_scenario():
    sc = {"processors": {"p": {"domain": "seq"}}, "edges": {}}
    r = solve_all(sc)
    assert r.output == {"frontiers": {"p": []}, "notification_frontiers": {"p": []}, "resend": {}}


# ---------------------------------------------------------------------------
# generated scenarios
# ---------------------------------------------------------------------------


def _empty_output(model):
    return {
        "frontiers": {p: [] for p in model.procs},
        "notification_frontiers": {p: [] for p in model.procs},
        "resend": {e: [] for e in model.edges},
    }


def _selfcheck(sc, chains):
    sc = json.loads(json.dumps(sc))  # must survive JSON
    r = solve_all(sc)
    # the all-empty rollback is always consistent ...
    zero = tuple(0 for _ in r.model.procs)
    assert any(a.key() == zero for a in r.consistent)
    assert not [
        p for p in check(sc, _empty_output(r.model), result=r) if not p.startswith("not maximal")
    ]
    # ... every maximal output is accepted, also after a JSON round trip
    assert r.maximal
    for out in r.maximal_outputs:
        assert check(sc, json.loads(json.dumps(out)), result=r) == []
    # ... maximal ones are pairwise incomparable and dominate every consistent assignment
    for a in r.consistent:
        assert any(
            all(subset(a.frontiers[p], m.frontiers[p]) for p in r.model.procs) for m in r.maximal
        )
    # spec: chains with growing recorded projections => unique greatest rollback
    if chains:
        assert r.unique
    return r


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("chains", [True, False])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_scenarios_hypothesis(domain, chains, data):
    _selfcheck(data.draw(scenarios(domain, chains=chains)), chains)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("chains", [True, False])
def test_generated_scenarios_seeds(domain, chains):
    for seed in range(60):
        _selfcheck(random_scenario(random.Random(seed), domain, chains=chains), chains)


def _epoch_universe():
    return (
        [make(EPOCH, [])] + [make(EPOCH, [(k,)]) for k in range(6)] + [parse_frontier(EPOCH, "top")]
    )


def test_epoch_fn_and_consistency_by_enumerating_fn():
    """For epoch scenarios every f_n below f is one of ∅, ↓0..↓5, ⊤ (times are 0..4), so
    the notification frontiers can be enumerated too: check that f is consistent iff
    some f_n satisfies (3)-(5) (with (1), (2)), and that the iteration's f_n is the
    greatest f_n satisfying (3) and (5) (φ is monotone for chains)."""
    U = _epoch_universe()
    checked = 0
    for seed in range(120):
        sc = random_scenario(random.Random(seed), "epoch", chains=True)
        m = Model(sc)
        if len(m.procs) > 4:
            continue
        r = solve_all(sc)
        consistent = {a.key() for a in r.consistent}
        for combo in itertools.product(*(range(len(m.options[p])) for p in m.procs)):
            choice = {p: m.options[p][i] for p, i in zip(m.procs, combo)}
            below = [[u for u in U if subset(u, choice[p].frontier)] for p in m.procs]
            sols35 = []
            for fn_t in itertools.product(*below):
                fn = dict(zip(m.procs, fn_t))
                if all(subset(fn[e.dst], m.phi(e, fn[e.src])) for e in m.edges.values()):
                    sols35.append(fn)
            greatest = [
                g for g in sols35 if all(all(subset(h[p], g[p]) for p in m.procs) for h in sols35)
            ]
            assert len(greatest) == 1
            assert greatest[0] == m.greatest_fn(choice)
            ok = not any(
                v.startswith(("constraint 1", "constraint 2"))
                for v in m.violations(choice, greatest[0])
            )
            ok = ok and any(
                all(subset(choice[p].notifications, fn[p]) for p in m.procs) for fn in sols35
            )
            assert ok == (combo in consistent)
            checked += 1
    assert checked > 500
