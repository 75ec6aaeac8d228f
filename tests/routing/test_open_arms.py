"""The learned router with arms no profile knows: prices it has never seen, many arms, a request that
just failed, exploration that finds a better arm, and worlds whose best policy is known."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import worlds
from conftest import BAD, GOOD, VERIFY, acr, git

from acr_cli.domain import Arm, TaskState
from acr_cli.routing.latent import EXACT_ARMS, Latent, Phi_inv, candidates

# three arms no price list knows (neither this profile nor the price catalog)
UNPRICED = """\
description: three arms without prices
arms:
  - {agent: opencode, model: acme/kimi-x}
  - {agent: codex, model: acme-coder}
  - {agent: claude, model: acme-claude}
"""


def test_arms_without_prices_get_sane_costs_and_a_budget_still_runs(project, fakes_on_path, scenario, tmp_path):
    profile = tmp_path / "unpriced.yaml"
    profile.write_text(UNPRICED)
    scenario({"write": {"calc.py": GOOD}, "tokens": [9000, 400], "cost": 0.012})
    paid = set()  # the arms whose attempt had a cost (codex's fake reports tokens only, and it has no price)
    for _ in range(2):  # two passes of about a cent each
        r = acr("run", "fix the add function", "--verify", VERIFY, "--profile", str(profile), "--json", cwd=project)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["cost_usd"] < 0.02
        paid |= {a["agent"] + ":" + a["model"] for a in out["attempts"] if a["cost_usd"] is not None}
        (project / "calc.py").write_text(BAD)  # the bug again, for the next run
        git(project, "checkout", "--", "calc.py")
    r = acr("route", "fix the add function", "--profile", str(profile), "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    costs = {a["agent"] + ":" + a["model"]: a["expected_cost"] for a in json.loads(r.stdout)["order"]}
    assert len(costs) == 3
    for arm, cost in costs.items():  # never an astronomic figure from a cheap observation: a bound, or unknown
        assert cost is None or 1e-5 <= cost <= 10, (arm, cost)
    assert all(costs[arm] is not None for arm in paid)  # an arm seen with a cost has an estimate now
    r = acr("run", "fix the add function", "--verify", VERIFY, "--profile", str(profile), "--max-cost", "5", "--json",
            cwd=project)
    assert r.returncode == 0, r.stderr  # the budget refuses nothing
    r = acr("profiles", "validate", str(profile))
    assert r.returncode == 0 and "no price for opencode:acme/kimi-x, codex:acme-coder, claude:acme-claude" in r.stderr


def test_a_request_that_just_failed_starts_with_another_arm(project, fakes_on_path, scenario, tmp_path):
    profile = tmp_path / "two.yaml"
    profile.write_text("""\
arms:
  - {agent: codex, model: strong, price: {input: 1, output: 4}, prior: {default: 0.9}, prior_weight: 50}
  - {agent: claude, model: other, price: {input: 1, output: 4}, prior: {default: 0.6}, prior_weight: 50}
""")
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": BAD}}, {"write": {"calc.py": GOOD}})

    def first(prompt: str) -> tuple[str, str]:
        r = acr("route", prompt, "--profile", str(profile), "--json", cwd=project)
        assert r.returncode == 0, r.stderr
        top = json.loads(r.stdout)["order"][0]
        return top["agent"] + ":" + top["model"], top["why"]

    assert first("fix the add function")[0] == "codex:strong"
    r = acr("run", "fix the add function", "--verify", VERIFY, "--profile", str(profile), "--max-attempts", "1",
            cwd=project)
    assert r.returncode == 1, r.stderr  # codex failed it, and one attempt was all it had
    arm, why = first("fix the add function")
    assert arm == "claude:other"
    r = acr("route", "fix the add function", "--profile", str(profile), "--explain", cwd=project)
    assert "failed this very request lately: tried after the others" in r.stdout
    assert first("add a subtract function")[0] == "codex:strong"  # another request: as before
    r = acr("run", "fix the add function", "--verify", VERIFY, "--profile", str(profile), "--json", cwd=project)
    assert r.returncode == 0 and [a["agent"] for a in json.loads(r.stdout)["attempts"]] == ["claude"]


def test_route_plans_over_fifty_arms(tmp_path, fakes_on_path):
    lines = ["arms:"] + [f"  - {{agent: {('codex', 'claude', 'opencode')[i % 3]}, model: m{i:02d}, "
                         f"price: {{input: {0.1 + i / 10:.2f}, output: {1 + i}}}}}" for i in range(50)]
    profile = tmp_path / "fifty.yaml"
    profile.write_text("\n".join(lines) + "\n")
    r = acr("route", "fix the failing parser test", "--profile", str(profile), "--json")
    assert r.returncode == 0, r.stderr
    order = json.loads(r.stdout)["order"]
    assert len(order) == 50 and len({a["model"] for a in order}) == 50


def test_the_planner_over_many_arms_is_quick_and_exact_over_few():
    rng = random.Random(5)
    latent = Latent(0.5)
    w0 = latent.pz
    arms = [(rng.uniform(-1.5, 1.0), rng.uniform(0.01, 2.0)) for _ in range(60)]
    qs, cost = [latent.q(mu) for mu, _ in arms], [c for _, c in arms]
    start = time.process_time()
    plan = latent.plan(w0, qs, cost, [0.0] * 60, 0.0, 0.1, force=True)
    assert time.process_time() - start < 5  # (it was 2^60 subsets); never a timing target, only "it ends"
    assert plan and len(set(plan)) == len(plan)
    # with no more arms than the exact plan takes, the candidates are every arm and the plan is unchanged
    few = list(range(EXACT_ARMS))
    assert candidates(w0, qs, [0.1 * c for c in cost], [0.0] * 60, 0.0, few, EXACT_ARMS) == few
    # the candidates of many arms hold the best arm by each measure: here a free sure arm among dear ones
    qs2 = [latent.q(Phi_inv(0.3))] * 20 + [latent.q(Phi_inv(0.95))]
    cost2 = [1.0] * 20 + [0.0]
    assert latent.plan(w0, qs2, cost2, [0.0] * 21, 0.0, 0.1, force=True)[0] == 20


def test_estimates_never_exceed_what_prices_and_tokens_bound(tmp_path):
    from acr_cli.domain import Decision, Feedback
    from acr_cli.memory import Memory
    from acr_cli.memory.aggregates import GroupCache
    from acr_cli.routing.learned import LearnedPolicy

    mem = Memory.open(tmp_path / "m.sqlite")
    known, odd = Arm("codex", "known", 1.0, 4.0), Arm("claude", "unpriced")
    for i in range(3):  # an unpriced arm whose few attempts cost a cent, then one dear one
        tid = mem.begin_task(source="live", kind="bug_fix", groups=("all", "kind=bug_fix"), prompt=f"task {i}")
        mem.add_attempt(tid, 1, Decision(odd, "t"), Feedback(odd, "failed", score=0.0, cost_usd=0.01 if i < 2 else 3.0,
                                                                tokens_in=20_000, tokens_out=500))
        mem.finish_task(tid, passed=False, score=0.0, cost_usd=0.01, final_arm=odd.id)
    policy = LearnedPolicy([known, odd], GroupCache(mem, "live"), typical_tokens=100_000)
    from acr_cli.context import Context

    ranked = {r.arm.id: r.cost for r in policy.rank(Context("fix it", "bug_fix", groups=("all", "kind=bug_fix")),
                                                    TaskState(max_attempts=3))}
    ceiling = max(3.0, 4.0 * 20_500 / 1e6)  # the dearest attempt seen; the dearest price x the most tokens
    assert all(c is not None and 0 < c <= ceiling for c in ranked.values()), ranked
    mem.close()


def _replay(folder: Path, *policies: str, extra: tuple[str, ...] = ()) -> dict:
    args = ["bench", "replay", str(folder), "--json", *extra] + [a for p in policies for a in ("-P", p)]
    r = acr(*args, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_from_a_cold_start_learned_beats_the_best_arm_and_cascade_in_hindsight(tmp_path):
    """24 arms, no priors, no prices anywhere, a world whose generating model is not the router's own:
    what a user with this month's models has."""
    world = worlds.make("stationary", n_arms=24, n_tasks=400, seed=11)
    doc = _replay(world.write(tmp_path / "world"), "learned", extra=("--baselines",))
    rows = {r["policy"]: r["cum_regret"] for r in doc["results"]}
    best, cascade = rows[doc["hindsight"]["arm"]], rows[doc["hindsight"]["cascade"]]
    assert rows["learned"] < 0.8 * min(best, cascade), rows
    assert rows["learned"] < rows["random"] and rows["learned"] < rows["linucb"]


def test_a_strong_arm_arriving_mid_stream_is_found(tmp_path):
    world = worlds.make("arrival", n_arms=12, n_tasks=300, seed=4)
    late = {a.name for a in world.arms if a.arrives}
    assert len(late) == 3
    mem = tmp_path / "replay.sqlite"
    _replay(world.write(tmp_path / "world"), "learned", extra=("--memory", str(mem)))
    import sqlite3

    rows = sqlite3.connect(mem).execute(
        "SELECT t.ref, a.model FROM attempts a JOIN tasks t ON t.id = a.task_id ORDER BY t.rowid, a.seq").fetchall()
    first_try = min(int(ref[1:]) for ref, model in rows if model in late)
    assert first_try - 150 <= 30  # tried within 30 tasks of arriving
    used = sum(1 for ref, model in rows if model in late and int(ref[1:]) >= 250)
    assert used >= 25  # and kept in use: the world's best arms
