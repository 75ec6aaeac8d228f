"""``acr spend``: the money, tokens and passes of live runs, per period, arm, agent or project."""

from __future__ import annotations

import json
from datetime import datetime

from conftest import acr, git

FIXED = "def add(a, b):\n    return a + b\n"
VERIFY = "grep -q 'a + b' calc.py"


def test_spend_adds_up_the_attempts_of_live_runs_per_arm_and_per_day(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": "def add(a, b):\n    return a - b\n"},
              "cost": 0.25, "tokens": [3000, 100]},
             {"match": {"agent": "codex"}, "write": {"calc.py": FIXED}, "cost": 0.05, "tokens": [1000, 50]})
    arms = "claude:claude-sonnet-4-6,codex:gpt-5.4"
    first = acr("run", "fix add", "--arms", arms, "--policy", f"cascade:{arms}", "--verify", VERIFY, "--json",
                cwd=project)
    assert first.returncode == 0, first.stderr
    git(project, "checkout", "-q", "--", "calc.py")
    second = acr("run", "fix add", "--arms", "codex:gpt-5.4", "--verify", VERIFY, "--json", cwd=project)
    assert second.returncode == 0, second.stderr

    runs = [json.loads(first.stdout), json.loads(second.stdout)]
    codex_cost = sum(a["cost_usd"] for r in runs for a in r["attempts"] if a["agent"] == "codex")  # from its prices
    assert codex_cost > 0
    out = json.loads(acr("spend", "--by", "arm", "--json").stdout)
    by_arm = {x["key"]: x for x in out["lines"]}
    assert by_arm["claude:claude-sonnet-4-6"]["cost_usd"] == 0.25 and by_arm["claude:claude-sonnet-4-6"]["passed"] == 0
    codex = by_arm["codex:gpt-5.4"]
    assert (codex["attempts"], codex["passed"], codex["tokens_in"]) == (2, 2, 2000)
    assert abs(codex["cost_usd"] - codex_cost) < 1e-6 and abs(codex["passed_per_usd"] - 2 / codex_cost) < 1e-2
    assert [x["key"] for x in out["lines"]] == ["claude:claude-sonnet-4-6", "codex:gpt-5.4"]  # dearest first
    total = out["total"]
    assert (total["tasks"], total["passed"], total["attempts"]) == (2, 2, 3)
    assert abs(total["cost_usd"] - (0.25 + codex_cost)) < 1e-6

    day = json.loads(acr("spend", "--json").stdout)  # by day, the local calendar
    assert [x["key"] for x in day["lines"]] == [datetime.now().strftime("%Y-%m-%d")]
    assert day["lines"][0]["cost_usd"] == total["cost_usd"] and day["lines"][0]["passed"] == 2
    text = acr("spend", "--by", "agent").stdout
    assert "claude" in text and "$0.25" in text and "total" in text

    later = json.loads(acr("spend", "--since", "2999-01-01", "--json").stdout)
    assert later["lines"] == [] and later["total"]["cost_usd"] == 0


def test_spend_refuses_an_unknown_grouping(acr_home):
    r = acr("spend", "--by", "year")
    assert r.returncode == 2 and "--by 'year'" in r.stderr and "Traceback" not in r.stderr
