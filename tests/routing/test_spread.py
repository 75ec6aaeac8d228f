"""How much a group's parent counts as its prior: read from how memory's own groups differ."""

from __future__ import annotations

import random

import pytest

from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, Feedback, TaskState
from acr_cli.memory import Memory
from acr_cli.memory.aggregates import Chains, GroupCache
from acr_cli.routing import spread
from acr_cli.routing.learned import N_HIER, LearnedPolicy

ARMS = ("a", "b")


def chains(rates_of, n_groups: int, tasks_per_group: int, seed: int = 5) -> Chains:
    """Tasks under ``all`` in ``n_groups`` projects; in project g, arm x passes with ``rates_of(g)[x]``."""
    rng = random.Random(seed)
    ch = Chains("all")
    for g in range(n_groups):
        rates = rates_of(g, rng)
        for _ in range(tasks_per_group):
            ch.add_task(("all", f"project=p{g}"), {x: [1, float(rng.random() < rates[x])] for x in ARMS})
    return ch


def worth(ch: Chains) -> float:
    return spread.worths(ch.tasks, ch.sums, ARMS, N_HIER, 1)[0]


def test_projects_that_differ_make_the_parent_worth_little_and_alike_ones_much():
    differ = chains(lambda g, rng: {"a": 0.9, "b": 0.1} if g % 2 else {"a": 0.1, "b": 0.9}, 12, 15)
    alike = chains(lambda g, rng: {"a": 0.7, "b": 0.4}, 12, 15)
    assert worth(differ) < 2
    assert worth(alike) > 2 * N_HIER


def test_the_estimate_finds_a_known_spread():
    # every project's rates drawn from a Beta worth 4 observations around 0.6 and 0.3
    def beta(mean: float, m: float, rng: random.Random) -> float:
        return rng.betavariate(mean * m, (1 - mean) * m)

    ch = chains(lambda g, rng: {"a": beta(0.6, 4, rng), "b": beta(0.3, 4, rng)}, 200, 30)
    assert 2.5 < worth(ch) < 6.5


def test_without_groups_to_compare_the_default_stands_and_deeper_levels_inherit():
    one = chains(lambda g, rng: {"a": 0.9, "b": 0.1}, 1, 30)
    assert worth(one) == pytest.approx(N_HIER)
    assert worth(Chains("all")) == pytest.approx(N_HIER)
    differ = chains(lambda g, rng: {"a": 0.9, "b": 0.1} if g % 2 else {"a": 0.1, "b": 0.9}, 12, 15)
    # the level of similar tasks below a project has no groups of its own: it departs as projects do
    two = spread.worths(differ.tasks, differ.sums, ARMS, N_HIER, 2)
    assert two[1] == two[0] < 2


def test_groups_that_agree_by_luck_do_not_make_the_parent_worth_everything():
    # two projects where arm a passed once and failed once each: they agree better than their noise
    # lets groups agree (a negative spread estimate), which is luck, not a parent worth 999 tasks
    ch = Chains("all")
    for g in range(2):
        for passed in (1.0, 0.0):
            ch.add_task(("all", f"project=p{g}"), {"a": [1, passed]})
    assert N_HIER <= worth(ch) <= 2 * N_HIER


def test_groups_that_show_nothing_do_not_count_as_evidence():
    differ = chains(lambda g, rng: {"a": 0.9, "b": 0.1} if g % 2 else {"a": 0.1, "b": 0.9}, 4, 10)
    before = worth(differ)
    for g in range(30):  # thirty more projects where only arm c was tried, and it always passed
        differ.add_task(("all", f"project=q{g}"), {"c": [1, 1.0]})
    assert spread.worths(differ.tasks, differ.sums, (*ARMS, "c"), N_HIER, 1)[0] == pytest.approx(before)


def first_choice_after_luck(tmp_path, projects_differ: bool) -> str:
    """Memory holds 12 projects, then a new project whose 2 tasks went against the usual order
    (arm a failed, arm b passed); which arm does the router try first on the new project's next task?"""
    arms = [Arm("fake", "a", 1.0, 1.0, prior=(("default", 0.5),)), Arm("fake", "b", 1.0, 1.0, prior=(("default", 0.5),))]
    mem = Memory.open(tmp_path / "memory.sqlite")
    rng = random.Random(11)

    def task(project: str, a_passes: bool, b_passes: bool) -> None:
        groups = ("all", "kind=bug_fix", f"kind=bug_fix/project={project}")
        tid = mem.begin_task(source="live", kind="bug_fix", groups=groups, prompt=None)
        for seq, (arm, ok) in enumerate(((arms[0], a_passes), (arms[1], b_passes)), 1):
            mem.add_attempt(tid, seq, Decision(arm, "test"),
                            Feedback(arm, "passed" if ok else "failed", score=float(ok), cost_usd=0.01))
        mem.finish_task(tid, passed=a_passes or b_passes, score=float(a_passes or b_passes), cost_usd=0.02,
                        final_arm=arms[1].id)

    for g in range(12):
        if projects_differ:  # two of three projects favour a, the rest b, and strongly
            pa, pb = (0.9, 0.1) if g % 3 else (0.1, 0.9)
        else:
            pa, pb = 0.65, 0.4
        for _ in range(10):
            task(f"p{g}", rng.random() < pa, rng.random() < pb)
    for _ in range(2):
        task("new", False, True)
    policy = LearnedPolicy(arms, GroupCache(mem, "live"))
    ctx = Context("fix it", "bug_fix", project="new",
                  groups=("all", "kind=bug_fix", "kind=bug_fix/project=new"))
    choice = policy.next(ctx, TaskState()).arm.model
    mem.close()
    return choice


def test_a_project_learns_from_its_few_tasks_when_projects_differ_not_when_they_agree(tmp_path):
    """Where a user's projects differ, two tasks of a new project are enough to follow them;
    where every project agrees, the same two tasks are luck and the usual order stands."""
    assert first_choice_after_luck(tmp_path / "differ", projects_differ=True) == "b"
    assert first_choice_after_luck(tmp_path / "agree", projects_differ=False) == "a"
