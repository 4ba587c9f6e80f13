"""Property tests of the solver and the monitor against an independent brute force.

``tests/reference`` enumerates every assignment f(p) ∈ F*(p), computes the greatest
notification frontiers for each and checks the constraints of section 3.5 directly;
it shares no code with ``falkirk.recovery``. Scenarios come from its random generator
over all three domains and the mixed epoch/loop/sequence-number graphs.

(a) every solver output satisfies all constraints;
(b) with chains (totally ordered choices per processor) no processor can be moved to
    its next available frontier with the constraints still holding, and the output
    is exactly the brute force's unique maximum;
(c) adding an available checkpoint never lowers any processor's frontier;
(d) the monitor's low-watermarks never decrease and always equal a from-scratch solve.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falkirk.recovery import CheckpointMeta, Monitor, parse_scenario, solve, violations
from tests.reference.brute_force import check, solve_all
from tests.reference.generate import DOMAINS, random_scenario, scenarios

PROPERTY_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def run(doc: dict[str, Any]) -> dict[str, Any]:
    scenario = parse_scenario(doc)
    return solve(scenario.topology, scenario.available).to_json()


@pytest.mark.parametrize("domain", DOMAINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_b_output_is_the_unique_greatest_consistent_rollback(domain: str, data: st.DataObject) -> None:
    doc = data.draw(scenarios(domain, chains=True))
    scenario = parse_scenario(doc)
    plan = solve(scenario.topology, scenario.available)
    out = plan.to_json()
    # (a) consistent, checked by our own constraint checker and by the reference's.
    full = {
        p: [CheckpointMeta.initial(scenario.topology, p), *[m for m in ms if not m.frontier.is_empty]]
        for p, ms in {p: scenario.available.get(p, ()) for p in scenario.topology.processors}.items()
    }
    assert violations(scenario.topology, full, plan.checkpoints, plan.notification_frontiers) == []
    assert check(doc, out) == []
    # (b) equal to the unique maximum found by enumeration, hence no processor can move up.
    reference = solve_all(doc)
    assert reference.unique
    assert out == reference.output
    assert not plan.ambiguous
    consistent = {a.key() for a in reference.consistent}
    chosen = reference.chosen.indices
    for p, index in chosen.items():
        if index < len(doc.get("checkpoints", {}).get(p, [])):
            moved = dict(chosen, **{p: index + 1})
            assert tuple(moved[q] for q in sorted(moved)) not in consistent or moved == chosen


@pytest.mark.parametrize("domain", DOMAINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_partial_orders_give_a_consistent_maximal_rollback(domain: str, data: st.DataObject) -> None:
    doc = data.draw(scenarios(domain, chains=False))
    scenario = parse_scenario(doc)
    plan = solve(scenario.topology, scenario.available)
    reference = solve_all(doc)
    if plan.warnings:  # non-monotone recorded values: consistent, maybe not maximal
        assert not any(p.startswith("(") for p in check(doc, plan.to_json(), result=reference))
        return
    assert check(doc, plan.to_json(), result=reference) == []
    assert plan.ambiguous == (not reference.unique)


@pytest.mark.parametrize("domain", DOMAINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_c_adding_a_checkpoint_never_lowers_a_frontier(domain: str, data: st.DataObject) -> None:
    doc = data.draw(scenarios(domain, chains=True))
    removable = [
        (p, k)
        for p, entries in doc.get("checkpoints", {}).items()
        for k, entry in enumerate(entries)
        if entry["frontier"] != "top"
    ]
    if not removable:
        return
    p, k = data.draw(st.sampled_from(removable))
    fewer = copy.deepcopy(doc)
    del fewer["checkpoints"][p][k]
    with_it, without_it = parse_scenario(doc), parse_scenario(fewer)
    more = solve(with_it.topology, with_it.available).frontiers
    less = solve(without_it.topology, without_it.available).frontiers
    for q in more:
        assert less[q] <= more[q], (q, less[q], more[q])


@pytest.mark.parametrize("domain", DOMAINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_d_monitor_low_watermarks_rise_and_match_a_fresh_solve(domain: str, data: st.DataObject) -> None:
    doc = data.draw(scenarios(domain, chains=True))
    scenario = parse_scenario(doc)
    persisted = [
        m for ms in scenario.available.values() for m in ms if not m.frontier.is_top and not m.frontier.is_empty
    ]
    order = data.draw(st.permutations(persisted))
    monitor = Monitor(scenario.topology)
    fed: dict[str, list[CheckpointMeta]] = {p: [] for p in scenario.topology.processors}
    previous = monitor.low_watermarks
    for meta in order:
        monitor.add(meta)
        fed[meta.processor].append(meta)
        fresh = solve(
            scenario.topology,
            {p: sorted(ms, key=lambda m: len([o for o in ms if o.frontier < m.frontier])) for p, ms in fed.items()},
        ).frontiers
        now = monitor.low_watermarks
        assert now == dict(fresh)
        for p in now:
            assert previous[p] <= now[p]
        previous = now


def test_generated_corpus_agrees_with_brute_force() -> None:
    """A fixed-seed sweep (fast, deterministic) on top of the hypothesis runs."""
    rng = random.Random(20261122)
    for i in range(400):
        doc = random_scenario(rng, DOMAINS[i % len(DOMAINS)], chains=True)
        assert run(doc) == solve_all(doc).output, doc


@pytest.mark.parametrize("domain", DOMAINS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_e_nothing_failed_means_nothing_rolls_back(domain: str, data: st.DataObject) -> None:
    """(e) When no processor failed (each lists its live state ⊤ last, with default
    metadata), the answer is ⊤ everywhere, whatever the projections and stored values:
    φ(⊤) = ⊤ for every projection, so no default at ⊤ can make φ non-monotone."""
    doc = copy.deepcopy(data.draw(scenarios(domain, chains=data.draw(st.booleans()))))
    checkpoints = doc.setdefault("checkpoints", {})
    for p in doc["processors"]:
        entries = [e for e in checkpoints.get(p, []) if e["frontier"] != "top"]
        checkpoints[p] = [*entries, {"frontier": "top"}]
    out = run(doc)
    assert all(f == "top" for f in out["frontiers"].values()), out["frontiers"]
    assert solve_all(doc).output["frontiers"] == out["frontiers"]
