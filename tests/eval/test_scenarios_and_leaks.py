"""The scenario suite and the leak sweep on the real embedded engine, through the service and MCP."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from atlas_mcp.eval import leaks, scenario_suite
from atlas_mcp.eval.harness import scratch_service


@pytest.fixture(scope="module")
def populated():
    with scratch_service() as (service, clock):
        stored = scenario_suite.populate(service, clock, scenario_suite.load(), clock())
        yield service, stored


def test_scenario_suite_meets_its_target():
    with scratch_service() as (service, clock):
        result = scenario_suite.run(service, clock)
    overall = result.groups["all"]
    print("\nscenarios:", {k: round(v, 3) for k, v in overall.items()}, *result.failures, sep="\n  ")
    assert overall["n"] == sum(len(t["questions"]) for t in scenario_suite.load()["tenants"].values())
    assert overall["R@5"] >= 0.95
    # The first place too, at today's level (docs/quality.md, "Scenario suite"): a ranking
    # change that costs it shows here instead of drifting unnoticed. 35 of 41 on the suite's
    # fixed clock (at the wall-clock time it moved between 0.805 and 0.854 over the day before
    # the length prior left pools of a few events alone: events embed their date and time).
    assert overall["Hit@1"] >= 0.85
    assert result.groups["paraphrase"]["Hit@1"] >= 0.75
    # Rules that must hold question by question, not just on average.
    for kind in ("supersession", "decay", "same-turn"):
        assert result.groups[kind]["R@5"] == 1.0, kind


def test_the_suite_runs_on_its_own_clock_whatever_the_time():
    """Two runs whose clocks start a few hours apart rank every question the same: the suite
    sets its fixed ``now`` (events embed their date and time, so the wall clock moved ties)."""
    rankings = []
    for start in (datetime(2026, 1, 5, 3, 17, tzinfo=UTC), datetime(2027, 6, 1, 21, 40, tzinfo=UTC)):
        with scratch_service() as (service, clock):
            clock.set(start)
            rankings.append([r.ranked for r in scenario_suite.run(service, clock).questions])
    assert rankings[0] == rankings[1]


def test_a_forbidden_superseded_fact_fails_its_question():
    suite = scenario_suite.load()
    question = next(q for q in suite["tenants"]["sarah"]["questions"] if q.get("forbid"))
    assert scenario_suite.broken_rule(question, (question["expect"][0], *question["forbid"]))
    assert scenario_suite.broken_rule(question, (question["expect"][0], "other")) is None


def test_no_memory_leaks_to_another_user_over_mcp(populated):
    service, stored = populated
    report = leaks.sweep(service, stored)
    users = {m.user_id for m in stored if m.user_id}
    assert report.tenants == len(users) == 3
    assert report.queries == 2 * report.memories * (len(users) - 1)
    assert report.leaks == ()


def test_the_sweep_reports_what_it_is_shown(populated):
    # Label one of Sarah's memories as James's: asking as Sarah now returns a "James" id, which
    # the sweep must flag, so the zero above means something.
    service, stored = populated
    relabelled = [dataclasses.replace(m, user_id="james") if m.key == "s-hub" else m for m in stored]
    report = leaks.sweep(service, relabelled)
    assert report.leaks
    assert {(leak.asked_as, leak.owner) for leak in report.leaks} == {("sarah", "james")}
