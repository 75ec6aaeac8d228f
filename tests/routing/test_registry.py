"""One table of policies: the same names and errors for `acr run`, a profile and `acr bench replay`;
the matrix-free baselines run live and learn from what memory holds."""

from __future__ import annotations

import json

from conftest import GOOD, VERIFY, acr
from shared import TWO_EQUAL_ARMS

from acr_cli.context import classify
from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.memory import Memory

PROFILE = TWO_EQUAL_ARMS  # codex:m-a and claude:m-b, settings: {policy: learned}
REQUEST = "fix the add function in calc.py"


def first_arm(profile, project, policy: str) -> str:
    r = acr("route", REQUEST, "--profile", str(profile), "--project", str(project), "--policy", policy, "--json")
    assert r.returncode == 0, r.stderr
    order = json.loads(r.stdout)["order"]
    return order[0]["agent"] + ":" + order[0]["model"]


def history(home, project, first: Arm, verdict: str, n: int) -> None:
    """``n`` finished live tasks like REQUEST whose first attempt was ``first`` with ``verdict``."""
    mem = Memory.open(home / "data" / "memory.sqlite")
    ctx = classify(REQUEST, project)
    for _ in range(n):
        tid = mem.begin_task(source="live", kind=ctx.kind, groups=ctx.groups, prompt=ctx.prompt)
        mem.add_attempt(tid, 1, Decision(first, "test"),
                        Feedback(first, verdict, score=float(verdict == "passed"), cost_usd=0.01))
        mem.finish_task(tid, passed=verdict == "passed", score=float(verdict == "passed"), cost_usd=0.01,
                        final_arm=first.id)
    mem.close()


def test_the_bandit_baselines_route_live_from_what_memory_holds(tmp_path, acr_home, project, fakes_on_path):
    profile = tmp_path / "two.yaml"
    profile.write_text(PROFILE)
    a, b = Arm("codex", "m-a"), Arm("claude", "m-b")
    assert first_arm(profile, project, "knn") == a.id  # nothing known: an arm never tried first
    history(acr_home, project, a, "failed", 6)
    history(acr_home, project, b, "passed", 6)
    # a new process each time: what they know comes from memory, not from a previous acr in the same process
    assert first_arm(profile, project, "knn") == b.id
    assert first_arm(profile, project, "linucb") == b.id
    # errors say nothing about skill: a run of them does not turn the bandits away from the arm that passes
    history(acr_home, project, b, "error", 10)
    assert first_arm(profile, project, "linucb") == b.id


def test_a_live_bandit_makes_one_attempt_and_records_it_under_its_name(tmp_path, project, fakes_on_path, scenario,
                                                                      acr_home):
    profile = tmp_path / "two.yaml"
    profile.write_text(PROFILE)
    scenario({"write": {"calc.py": "def add(a, b):\n    return 0\n"}})
    r = acr("run", REQUEST, "--verify", VERIFY, "--profile", str(profile), "--policy", "linucb", "--json",
            cwd=project)
    assert r.returncode == 1, r.stderr  # the one attempt failed and the task ends there
    out = json.loads(r.stdout)
    assert len(out["attempts"]) == 1 and out["attempts"][0]["verdict"] == "failed"
    assert "one attempt per task" in out["stop_reason"]
    scenario({"write": {"calc.py": GOOD}})
    r = acr("run", REQUEST, "--verify", VERIFY, "--profile", str(profile), "--policy", "cascade:claude:m-b,m-a",
            "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert [(x["agent"], x["model"]) for x in json.loads(r.stdout)["attempts"]] == [("claude", "m-b")]
    r = acr("memory", "log", "--json")
    assert [t["attempts"][0]["policy"] for t in json.loads(r.stdout)["tasks"]] == ["cascade:claude:m-b,codex:m-a", "linucb"]


def test_a_policy_that_reads_the_benchmark_is_refused_live_with_the_names_that_work(project, fakes_on_path):
    r = acr("route", REQUEST, "--policy", "oracle", "--project", str(project))
    assert r.returncode == 2
    assert "replays on CodeRouterBench only" in r.stderr and "hindsight" in r.stderr
    assert "learned, fixed, always:ARM, cascade:A1,A2,..., random, linucb, lints, knn" in r.stderr
    r = acr("route", REQUEST, "--policy", "lernd", "--project", str(project))
    assert r.returncode == 2 and "expected one of learned, fixed, always:ARM" in r.stderr
    r = acr("route", REQUEST, "--policy", "always", "--project", str(project))
    assert r.returncode == 2 and "always needs an argument: always:ARM" in r.stderr
    r = acr("route", REQUEST, "--policy", "always:nobody:m-x", "--project", str(project))
    assert r.returncode == 2 and "is not an arm of profile" in r.stderr


def test_a_profile_names_its_policy_with_the_same_grammar(tmp_path, project, fakes_on_path):
    for policy, problem in (("oracle", "replays on CodeRouterBench only"),
                            ("cascade:codex:m-a,codex:m-zz", "'codex:m-zz' is not an arm of profile"),
                            ("knn:5", "takes no argument")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(PROFILE.replace("{policy: learned}", f"{{policy: '{policy}'}}"))
        r = acr("route", REQUEST, "--profile", str(bad), "--project", str(project))
        assert r.returncode == 2, (policy, r.stdout)
        assert "settings.policy" in r.stderr and problem in r.stderr, r.stderr
    good = tmp_path / "good.yaml"
    good.write_text(PROFILE.replace("{policy: learned}", "{policy: 'always:m-b'}"))
    r = acr("route", REQUEST, "--profile", str(good), "--project", str(project), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["policy"] == "always:m-b" and [o["model"] for o in out["order"]] == ["m-b"]
