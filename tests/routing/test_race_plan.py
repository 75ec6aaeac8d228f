"""The race plan's choice, on explicit numbers: when a race beats escalation, and what it is expected to cost."""

import pytest

from acr_cli.domain import Arm
from acr_cli.routing import race
from acr_cli.routing.base import Ranked
from acr_cli.routing.latent import Latent, Phi_inv


def ranked(*arms):
    """(model, pass chance, USD, seconds) each, in the policy's order."""
    return [Ranked(Arm("a", m), mean=p, cost=c, duration=s) for m, p, c, s in arms]


THREE = ranked(("x", 0.6, 0.5, 600), ("y", 0.55, 0.5, 600), ("z", 0.5, 0.5, 600))


def test_no_race_when_time_is_not_weighed():
    plan = race.plan_race(THREE, 3, cost_weight=0.1, time_weight=0.0)
    assert plan.arms == ()
    assert plan.options[1].reward > plan.options[2].reward > plan.options[3].reward


def test_the_race_grows_with_time_weight():
    sizes = [race.plan_race(THREE, 3, cost_weight=0.1, time_weight=tw).size for tw in (0.0, 0.1, 0.5)]
    assert sizes == [0, 2, 3]


def test_figures_of_a_race_of_two_independent_arms():
    plan = race.plan_race(THREE, 2, cost_weight=0.1, time_weight=0.2)
    assert plan.arms == ("a:x", "a:y")
    assert plan.p_any == pytest.approx(1 - 0.4 * 0.45)
    assert plan.usd == pytest.approx(1.0)  # a replay pays both arms, pass or fail
    assert plan.minutes == pytest.approx(10.0)
    assert not plan.joint
    # escalation: x, then y if x failed, then z if both failed
    seq = plan.options[1]
    assert seq.p_pass == pytest.approx(1 - 0.4 * 0.45 * 0.5)
    assert seq.usd == pytest.approx(0.5 * (1 + 0.4 + 0.4 * 0.45))
    assert seq.reward == pytest.approx(seq.p_pass - 0.1 * (seq.usd + 0.2 * 10 * (1 + 0.4 + 0.18)))


def test_a_live_race_pays_losers_half_when_one_passes():
    plan = race.plan_race(THREE, 2, cost_weight=0.1, time_weight=0.2, loser_share=race.LIVE_FIRST)
    p_any = 1 - 0.4 * 0.45
    assert plan.usd == pytest.approx((1 - p_any) * 1.0 + p_any * (0.5 + 0.5 * 0.5))


def test_never_a_race_when_the_first_arm_is_near_certain():
    sure = ranked(("x", 0.99, 0.5, 600), ("y", 0.6, 0.5, 600), ("z", 0.6, 0.5, 600))
    for tw in (0.0, 0.2, 5.0):
        assert race.plan_race(sure, 3, cost_weight=0.1, time_weight=tw).arms == ()


def test_a_race_counts_the_cost_of_every_raced_arm():
    cheap_second = ranked(("x", 0.5, 0.1, 600), ("y", 0.5, 0.1, 600))
    dear_second = ranked(("x", 0.5, 0.1, 600), ("y", 0.5, 3.0, 600))
    assert race.plan_race(cheap_second, 2, cost_weight=0.1, time_weight=0.05).arms == ("a:x", "a:y")
    dear = race.plan_race(dear_second, 2, cost_weight=0.1, time_weight=0.05)
    assert dear.arms == ()
    assert dear.options[2].usd == pytest.approx(3.1)


def test_the_latent_ease_races_less_than_independence():
    latent = Latent(0.5)
    rows = ranked(("x", 0.5, 0.5, 600), ("y", 0.5, 0.5, 600))
    for r in rows:
        r.probit = (Phi_inv(0.5), 0.01)
    joint = race.forced(rows, 2, latent=latent)
    independent = race.forced(rows, 2)
    assert joint.joint and not independent.joint
    assert independent.p_any == pytest.approx(0.75)
    assert 0.5 < joint.p_any < 0.75  # a task hard for one arm is likely hard for the other


def test_one_arm_or_n_below_two_is_no_race():
    assert race.plan_race(THREE[:1], 3, cost_weight=0.1, time_weight=1.0).arms == ()
    assert race.plan_race(THREE, 1, cost_weight=0.1, time_weight=1.0).arms == ()
    assert race.forced(THREE, 1).arms == ()


@pytest.mark.parametrize("given, ask", [(3, race.RaceAsk(3)), ("2", race.RaceAsk(2)), (1, None), (0, None),
                                        ("auto", race.RaceAsk(3, auto=True)), ("AUTO:4", race.RaceAsk(4, auto=True))])
def test_the_race_setting_reads_n_or_auto(given, ask):
    assert race.parse_ask(given) == ask


@pytest.mark.parametrize("given", ["auto:1", "fast", -1, "2.5", True])
def test_a_race_setting_that_is_neither_n_nor_auto_is_refused(given):
    with pytest.raises(ValueError, match="auto:M"):
        race.parse_ask(given)


def test_a_forced_race_is_cut_by_max_attempts_and_the_budget_from_its_end():
    weights = {"cost_weight": 0.1, "time_weight": 0.0}
    assert race.choose(THREE, race.RaceAsk(3), max_attempts=2, budget=None, **weights).plan.arms == ("a:x", "a:y")
    cut = race.choose(THREE, race.RaceAsk(3), max_attempts=None, budget=1.2, **weights)
    assert cut.plan.arms == ("a:x", "a:y") and "a race of 3 pays every raced arm: ~$1.500" in cut.note
    alone = race.choose(THREE, race.RaceAsk(3), max_attempts=None, budget=0.7, **weights)
    assert alone.plan.arms == () and alone.note.endswith("no race, one arm at a time")
    assert race.choose(THREE, race.RaceAsk(3), max_attempts=None, budget=1.5, **weights).note is None


def test_auto_races_only_what_fits_the_budget():
    timed = {"cost_weight": 0.1, "time_weight": 1.0}
    free = race.choose(THREE, race.RaceAsk(3, auto=True), max_attempts=None, budget=None, **timed)
    assert free.plan.size == 3 and free.planner is None
    cut = race.choose(THREE, race.RaceAsk(3, auto=True), max_attempts=None, budget=1.0, **timed)
    assert cut.plan.arms == ("a:x", "a:y") and "a race of 3" in cut.note


def route_race(project, *args, race: str = "auto:2"):
    from conftest import acr

    r = acr("route", "fix the add function in calc.py", "--race", race, *args, cwd=project)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_route_shows_the_race_plan(project, fakes_on_path, scenario, tmp_path):
    """`acr route --race auto:N`: no race while memory knows no durations (time cannot be saved); once attempts are
    timed and a minute is worth much, the two arms are raced, with P(at least one passes) and their cost."""
    import json
    import os
    from pathlib import Path

    from conftest import VERIFY, acr

    plain = json.loads(route_race(project, "--json"))["race"]
    assert plain["arms"] == [] and plain["expected_minutes"] is None
    assert plain["expected_reward"]["1"] > plain["expected_reward"]["2"]
    assert "race (--race auto:2): none: escalating one arm at a time" in route_race(project, "--explain")
    scenario({"sleep": 0.3})  # both arms change nothing: the run fails after trying both
    failed = acr("run", "fix the add function in calc.py", "--max-attempts", "2", "--verify", VERIFY, cwd=project)
    assert failed.returncode != 0
    config = Path(os.environ["ACR_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("time_weight = 600\n")  # USD a minute: a second is worth $10
    routed = json.loads(route_race(project, "--json"))
    timed = routed["race"]
    first_two = [f"{o['agent']}:{o['model']}" for o in routed["order"][:2]]
    assert timed["arms"] == first_two
    assert timed["expected_minutes"] > 0 and timed["expected_reward"]["2"] > timed["expected_reward"]["1"]
    assert 0 < timed["p_any"] < 1 and timed["joint"]
    shown = route_race(project, "--explain")
    assert f"race (--race auto:2): start {', '.join(first_two)} at once: P(at least one passes)" in shown


def test_route_race_n_shows_the_forced_race_beside_what_the_plan_would_choose(project, fakes_on_path):
    """`--race N` is the user's request: exactly the first N arms that can run, shown with its figures and,
    beside it, the plan's own choice (here no race: nothing is timed yet), so the user sees what forcing costs."""
    import json

    shown = json.loads(route_race(project, "--json", race="3"))
    order = [f"{o['agent']}:{o['model']}" for o in shown["order"]]
    race = shown["race"]
    assert race["ask"] == "3" and race["forced"] and race["arms"] == order[:3]
    assert 0 < race["p_any"] < 1 and race["expected_cost"] > 0
    assert race["planner"] == {"arms": [], "p_any": 0.0, "expected_cost": 0.0, "expected_minutes": None}
    assert race["expected_reward"]["1"] > race["expected_reward"]["3"]
    text = route_race(project, "--explain", race="3")
    assert f"race (--race 3): start {', '.join(order[:3])} at once" in text
    assert "the plan (--race auto:3) would not race" in text and "race of 3" in text
