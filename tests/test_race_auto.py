"""How many arms race: one answer for `acr route` and `acr run` (--race N forces, --race auto lets the plan
choose), the race setting at every level, the budget a race pays, and cancelled losers as no evidence.

Through the real CLI, git, a real SQLite memory and the fake agents; memory learns durations and costs from
real runs of the fake agents before the plan is asked."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import BAD, GOOD, VERIFY, acr

FAILING, FAST, SLOW = "opencode:moonshotai/kimi-k2.5", "codex:gpt-5.4", "claude:claude-opus-4-6"
ARMS = f"{FAILING},{FAST},{SLOW}"
# the profile narrowed to the three arms by the `arms` setting, routed by the learned policy (--arms would try
# them in the order given: no pass chance to weigh)
ONLY = f"arms = {json.dumps(ARMS.split(','))}\n"
ASK = "make add return the sum"  # the request routed; memory is taught on another one (no "failed lately")


def arm_ids(rows) -> list[str]:
    return [f"{r['agent']}:{r['model']}" for r in rows]


def teach(project: Path, scenario, acr_home: Path, sleep: float = 0.5) -> None:
    """Memory times every arm and learns its cost: one run where all three fail after ``sleep`` seconds."""
    settings(acr_home, ONLY)
    scenario({"match": {"agent": "opencode"}, "sleep": sleep, "write": {"calc.py": BAD}},
             {"match": {"agent": "codex"}, "sleep": sleep, "write": {"calc.py": BAD}},
             {"match": {"agent": "claude"}, "sleep": sleep, "cost": 0.02, "write": {"calc.py": BAD}})
    r = acr("run", "fix the add function", "--kind", "bug_fix", "--verify", VERIFY, cwd=project)
    assert r.returncode == 1, r.stderr
    assert (project / "calc.py").read_text() != BAD  # rolled back


def settings(acr_home: Path, text: str) -> None:
    """The user's config.toml: ``text`` after the `arms` setting of :data:`ONLY`."""
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(ONLY + (text if text != ONLY else ""))


def route(project: Path, *args: str) -> dict:
    r = acr("route", ASK, "--kind", "bug_fix", "--json", *args, cwd=project)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def run(project: Path, *args: str, code: int = 1):
    r = acr("run", ASK, "--kind", "bug_fix", "--verify", VERIFY, "--json", *args, cwd=project)
    assert r.returncode == code, r.stderr
    return json.loads(r.stdout), r.stderr


def raced(out: dict) -> list[str]:
    """The arms a run raced, in the plan's order (attempts are recorded in the order they end)."""
    if out["race"] is None:
        return []
    by_seq = {a["seq"]: f"{a['agent']}:{a['model']}" for a in out["attempts"]}
    return [by_seq[s] for s in out["race"]["attempts"]]


def all_fail(scenario) -> None:
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}},
             {"match": {"agent": "codex"}, "write": {"calc.py": BAD}},
             {"match": {"agent": "claude"}, "write": {"calc.py": BAD}})


def test_race_auto_runs_the_race_route_shows_when_time_is_worth_money(project, fakes_on_path, scenario, acr_home):
    teach(project, scenario, acr_home)
    # USD a minute: a second arm's pass chance is worth more than the seconds a race might add (the arms take
    # about as long), less than the minute escalating to it would
    settings(acr_home, "time_weight = 30\n")
    shown = route(project, "--race", "auto")["race"]
    assert shown["ask"] == "auto" and not shown["forced"] and shown["planner"] is None
    assert len(shown["arms"]) >= 2 and shown["expected_minutes"] > 0, shown
    assert shown["expected_reward"][str(len(shown["arms"]))] > shown["expected_reward"]["1"]
    all_fail(scenario)
    out, _ = run(project, "--race", "auto")
    assert sorted(raced(out)) == sorted(shown["arms"])  # the same arms, the same k
    assert [a["seq"] for a in out["attempts"]][:len(shown["arms"])] == out["race"]["attempts"]


def test_race_auto_escalates_one_arm_at_a_time_when_route_says_no_race(project, fakes_on_path, scenario, acr_home):
    teach(project, scenario, acr_home)
    settings(acr_home, "time_weight = 0\n")  # waiting is free: a race only pays for arms escalation may not need
    shown = route(project, "--race", "auto")
    assert shown["race"]["arms"] == [] and shown["race"]["expected_reward"]["1"] > shown["race"]["expected_reward"]["2"]
    all_fail(scenario)
    out, err = run(project, "--race", "auto")
    assert out["race"] is None and "--race auto: no race, escalating one arm at a time is expected to do better" in err
    assert arm_ids(out["attempts"])[0] == arm_ids(shown["order"])[0]


def test_race_n_races_exactly_the_first_n_even_where_the_plan_would_not(project, fakes_on_path, scenario, acr_home):
    teach(project, scenario, acr_home)
    settings(acr_home, "time_weight = 0\n")
    shown = route(project, "--race", "2")
    first_two = arm_ids(shown["order"])[:2]
    assert shown["race"]["forced"] and shown["race"]["arms"] == first_two
    assert shown["race"]["planner"]["arms"] == []  # what forcing overrides: the plan would not race
    all_fail(scenario)
    out, _ = run(project, "--race", "2")
    assert raced(out) and sorted(raced(out)) == sorted(first_two)


def test_a_race_over_the_budget_drops_arms_from_its_end_and_says_so(project, fakes_on_path, scenario, acr_home):
    teach(project, scenario, acr_home)
    costs = [o["expected_cost"] for o in route(project)["order"]]
    assert len(costs) == 3 and all(c and c > 0 for c in costs), costs  # memory knows what each arm costs
    settings(acr_home, f"max_cost = {sum(costs) - min(costs) / 2!r}\n")  # any two fit together, not all three
    routed = route(project, "--race", "3")
    order, shown = arm_ids(routed["order"]), routed["race"]
    assert shown["arms"] == order[:2] and "a race of 3 pays every raced arm" in shown["note"]
    all_fail(scenario)
    out, err = run(project, "--race", "3")
    assert sorted(raced(out)) == sorted(order[:2])
    assert "a race of 3 pays every raced arm" in err and f"racing 2: {', '.join(order[:2])}" in err


def test_the_race_setting_takes_n_or_auto_in_config_profile_and_a_trusted_project_file(
        project, fakes_on_path, scenario, acr_home, tmp_path):
    settings(acr_home, 'race = "auto:2"\n')
    assert route(project)["race"]["ask"] == "auto:2"  # route shows the setting's race without the flag
    assert route(project, "--race", "1").get("race") is None  # the flag overrides it: no race
    settings(acr_home, "")
    prof = tmp_path / "racing.yaml"
    prof.write_text("extends: balanced\nsettings:\n  race: 2\n")
    assert route(project, "--profile", str(prof))["race"]["ask"] == "2"
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: balanced\nsettings:\n  race: fast\n")
    r = acr("route", ASK, "--profile", str(bad), cwd=project)
    assert r.returncode == 2 and "race" in r.stderr and "auto" in r.stderr and "Traceback" not in r.stderr
    r = acr("config", "set", "race", "auto:1", cwd=project)
    assert r.returncode == 2 and "auto:M" in r.stderr
    assert acr("config", "set", "race", "auto", cwd=project).returncode == 0
    assert route(project)["race"]["ask"] == "auto"


def test_an_untrusted_project_file_may_not_race_a_trusted_one_may(project, fakes_on_path, scenario, acr_home):
    """Racing multiplies spend: like `arms`, `policy` and `time_weight`, only a trusted .acr.toml sets it."""
    (project / ".acr.toml").write_text("race = 2\n")
    r = acr("route", ASK, "--arms", ARMS, "--json", cwd=project)
    assert r.returncode == 0 and "race = 2 (it runs several paid arms at once)" in r.stderr
    assert json.loads(r.stdout).get("race") is None
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": GOOD}},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    out, _ = run(project, "--arms", f"{FAILING},{FAST}", code=0)
    assert out["race"] is None and len(out["attempts"]) == 1
    (project / "calc.py").write_text(BAD.replace("-", "*"))
    assert acr("trust", cwd=project).returncode == 0
    assert route(project)["race"]["ask"] == "2"
    out, _ = run(project, "--arms", f"{FAILING},{FAST}", code=0)
    assert out["race"] is not None and len(out["race"]["attempts"]) == 2


def test_a_loser_stopped_by_the_winner_is_no_evidence_about_its_skill(project, fakes_on_path, scenario, acr_home,
                                                                     tmp_path):
    """A cancelled loser counts neither as a failure nor as a pass, nor as a price or a duration: what memory
    and the learned policy say of its arm is what they say when it never ran."""
    scenario({"match": {"agent": "codex"}, "sleep": 1, "write": {"calc.py": GOOD}},
             {"match": {"agent": "claude"}, "sleep": 40, "write": {"calc.py": GOOD}})
    raced_memory, alone_memory = tmp_path / "raced.sqlite", tmp_path / "alone.sqlite"
    r = acr("run", ASK, "--verify", VERIFY, "--arms", f"{FAST},{SLOW}", "--race", "2", "--json",
            "--memory", str(raced_memory), cwd=project)
    assert r.returncode == 0, r.stderr
    assert {a["agent"]: a["verdict"] for a in json.loads(r.stdout)["attempts"]} == {"codex": "passed",
                                                                                   "claude": "cancelled"}
    (project / "calc.py").write_text(BAD.replace("-", "*"))
    r = acr("run", ASK, "--verify", VERIFY, "--arms", FAST, "--memory", str(alone_memory), cwd=project)
    assert r.returncode == 0, r.stderr

    def claude(memory: Path) -> dict:
        shown = acr("memory", "show", "--json", "--memory", str(memory), cwd=project)
        assert shown.returncode == 0, shown.stderr
        rows = json.loads(shown.stdout)["kinds"]
        return next(k for k in rows if f"{k['agent']}:{k['model']}" == SLOW and k["attempts"] is not None)

    def routed(memory: Path) -> dict:
        got = acr("route", ASK, "--json", "--memory", str(memory), cwd=project)  # the learned policy, every arm
        assert got.returncode == 0, got.stderr
        return {f"{o['agent']}:{o['model']}": o for o in json.loads(got.stdout)["order"]}

    after_race, never_ran = claude(raced_memory), claude(alone_memory)
    assert after_race["attempts"] == 1 and after_race["judged"] == 0 and after_race["passed"] == 0
    assert after_race["pass_rate"] is None
    # nor about its price or speed: it ran a part of its run
    assert after_race["mean_duration_s"] is None and after_race["mean_cost_usd"] is None
    assert after_race["posterior_mean"] == never_ran["posterior_mean"]
    assert routed(raced_memory)[SLOW]["mean"] == routed(alone_memory)[SLOW]["mean"]
    assert routed(raced_memory)[SLOW]["attempts"] == 0
