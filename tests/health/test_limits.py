"""Usage limits: each CLI's limit answer holds every arm of that login until the reset, the run falls through to
the next arm at once, and the arm comes back by itself after the reset. Set-up errors and limits are not counted
against max_attempts (a bounded number a task). Arms on a plan cost $0 for routing and budgets."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import VERIFY, acr, calls

from acr_cli.pricing import catalog_price

CLAUDE2 = "claude:claude-sonnet-4-6,claude:claude-opus-4-6"


def cascade(*arms: str) -> list[str]:
    """Options that try ``arms`` in this order."""
    return ["--arms", ",".join(arms), "--policy", "cascade:" + ",".join(arms)]


def run_json(project: Path, *args: str, **kw) -> dict:
    r = acr("run", "fix add", "--verify", "true", "--yes", "--json", *args, cwd=project, **kw)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def utc(iso: str) -> datetime:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


@pytest.mark.parametrize("mode", ["usage_limit", "usage_limit_legacy"])
def test_a_claude_limit_holds_every_claude_arm_until_its_reset_and_the_run_goes_on_at_once(
        mode, project, fakes_on_path, scenario, acr_home):
    reset = int(time.time()) + 2 * 3600
    log = scenario({"match": {"agent": "claude"}, "error": mode, "resets_at": reset})
    out = run_json(project, *cascade(*CLAUDE2.split(","), "codex:gpt-5.4"))
    assert out["verdict"] == "passed"
    assert [(a["agent"], a["verdict"], a["problem"]) for a in out["attempts"]] == [
        ("claude", "error", "limit"), ("codex", "passed", None)]
    assert utc(out["attempts"][0]["held_until"]) == datetime.fromtimestamp(reset, timezone.utc)
    # the other claude arm (same login) is not tried in this run: held, skipped at once
    assert [(s["model"], "held until" in s["reason"]) for s in out["skipped"]] == [("claude-opus-4-6", True)]
    assert (out["attempts_counted"], out["attempts_free"]) == (1, 1)
    # later runs do not try claude either, and say until when
    out = run_json(project, *cascade(*CLAUDE2.split(","), "codex:gpt-5.4"))
    assert [a["agent"] for a in out["attempts"]] == ["codex"]
    assert [c["agent"] for c in calls(log)].count("claude") == 1
    route = json.loads(acr("route", "fix add", "--json", *cascade(*CLAUDE2.split(","), "codex:gpt-5.4"),
                           cwd=project).stdout)
    held = {c["model"]: c for c in route["cannot_run"]}
    assert set(held) == {"claude-sonnet-4-6", "claude-opus-4-6"}
    assert utc(held["claude-opus-4-6"]["held_until"]) == datetime.fromtimestamp(reset, timezone.utc)
    # local time, as people read it; a reset within a minute is shown as the next minute, never before it
    shown = reset if reset % 60 == 0 else reset - reset % 60 + 60
    clock = datetime.fromtimestamp(shown).strftime("%H:%M")
    text = acr("route", "fix add", *cascade(*CLAUDE2.split(","), "codex:gpt-5.4"), cwd=project).stdout
    assert f"held until {clock} (usage limit)" in text
    doctor = json.loads(acr("doctor", "--json", cwd=project).stdout)
    claude = [a for a in doctor["profile"]["arms"] if a["agent"] == "claude"]
    assert claude and all(a["health"]["state"] == "held" and utc(a["health"]["until"]).timestamp() == reset
                          for a in claude)
    assert f"held until {clock} (usage limit)" in acr("doctor", cwd=project).stdout


def test_a_healthy_claude_runs_rate_limit_event_holds_nothing(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "claude"}})  # the fake prints the event with status "allowed", as claude does
    for _ in range(2):
        out = run_json(project, *cascade("claude:claude-sonnet-4-6", "codex:gpt-5.4"))
        assert [a["agent"] for a in out["attempts"]] == ["claude"]
    assert len(calls(log)) == 2


@pytest.mark.parametrize("hours", [3, 30])  # later today ("try again at 3:04 PM") and another day (with its date)
def test_a_codex_limit_is_held_until_the_time_it_names(hours, project, fakes_on_path, scenario, acr_home):
    reset = int(time.time()) + hours * 3600
    scenario({"match": {"agent": "codex"}, "error": "usage_limit", "resets_at": reset})
    out = run_json(project, *cascade("codex:gpt-5.4", "codex:gpt-5.5", "claude:claude-sonnet-4-6"))
    assert [(a["agent"], a["problem"]) for a in out["attempts"]] == [("codex", "limit"), ("claude", None)]
    assert out["attempts"][0]["detail"].startswith("You've hit your usage limit.")
    # codex names the minute, in the machine's local time
    assert utc(out["attempts"][0]["held_until"]) == datetime.fromtimestamp(reset - reset % 60, timezone.utc)
    assert [s["model"] for s in out["skipped"]] == ["gpt-5.5"]


def test_an_opencode_limit_holds_that_provider_only_until_the_reset_in_its_zone(project, fakes_on_path, scenario,
                                                                              acr_home):
    reset = int(time.time()) + 5 * 3600
    log = scenario({"match": {"agent": "opencode", "model": "zai-coding-plan/glm-5"}, "error": "usage_limit",
                    "resets_at": reset},
                   {"match": {"agent": "opencode"}})
    out = run_json(project, *cascade("opencode:zai-coding-plan/glm-5", "opencode:zai-coding-plan/glm-4.7",
                                     "opencode:moonshotai/kimi-k2.5"))
    assert "usage quota" in out["attempts"][0]["detail"]  # the provider wrote the reset in UTC+8
    assert utc(out["attempts"][0]["held_until"]) == datetime.fromtimestamp(reset, timezone.utc)
    assert [a["model"] for a in out["attempts"]] == ["zai-coding-plan/glm-5", "moonshotai/kimi-k2.5"]
    assert [s["model"] for s in out["skipped"]] == ["zai-coding-plan/glm-4.7"]  # same provider login
    assert [c["model"] for c in calls(log)] == ["zai-coding-plan/glm-5", "moonshotai/kimi-k2.5"]


def test_opencodes_silent_retry_is_ended_by_the_watchdog_and_the_run_goes_on(project, fakes_on_path, scenario,
                                                                             acr_home, tmp_path):
    scenario({"match": {"agent": "opencode"}, "error": "silent_retry"})
    prof = tmp_path / "quick.yaml"
    prof.write_text("extends: balanced\nsettings: {model_silence: 2, timeout: 120}\n")
    started = time.monotonic()
    out = run_json(project, "--profile", str(prof), *cascade("opencode:moonshotai/kimi-k2.5", "codex:gpt-5.4"))
    assert time.monotonic() - started < 60  # not acr's 120 s timeout: the 2 s watchdog
    first = out["attempts"][0]
    assert (first["verdict"], first["problem"]) == ("error", "limit") and "model_silence" in first["detail"]
    assert [a["agent"] for a in out["attempts"]] == ["opencode", "codex"] and out["verdict"] == "passed"
    held = utc(first["held_until"]).timestamp() - time.time()
    assert 3000 < held <= 3600  # no reset time given: the documented fallback, an hour
    assert "no reset time ahead given" in first["health"]


def test_opencodes_silent_retry_on_a_logged_usage_limit_ends_at_once_with_its_reset(project, fakes_on_path, scenario,
                                                                                    acr_home):
    reset = int(time.time()) + 3 * 3600
    scenario({"match": {"agent": "opencode"}, "error": "silent_retry", "resets_at": reset})
    started = time.monotonic()
    out = run_json(project, *cascade("opencode:zai-coding-plan/glm-5", "opencode:zai-coding-plan/glm-4.7",
                                     "codex:gpt-5.4"))  # the default watchdog: 150 s of silence
    assert time.monotonic() - started < 60  # ended on opencode's log line, not on the silence
    first = out["attempts"][0]
    assert (first["verdict"], first["problem"]) == ("error", "limit") and "usage quota" in first["detail"]
    assert utc(first["held_until"]) == datetime.fromtimestamp(reset, timezone.utc)  # written in UTC+8
    assert [a["agent"] for a in out["attempts"]] == ["opencode", "codex"] and out["verdict"] == "passed"
    assert [s["model"] for s in out["skipped"]] == ["zai-coding-plan/glm-4.7"]


def test_a_held_login_is_tried_again_by_itself_after_the_reset(project, fakes_on_path, scenario, acr_home):
    reset = int(time.time()) + 10
    log = scenario({"match": {"agent": "claude", "call": 1}, "error": "usage_limit", "resets_at": reset},
                   {"match": {"agent": "claude"}})
    arms = cascade("claude:claude-sonnet-4-6", "codex:gpt-5.4")
    assert [a["agent"] for a in run_json(project, *arms)["attempts"]] == ["claude", "codex"]
    assert [a["agent"] for a in run_json(project, *arms)["attempts"]] == ["codex"]  # held
    time.sleep(max(reset - time.time(), 0) + 1.5)
    out = run_json(project, *arms)  # after the reset, no `acr doctor --reset` needed
    assert [(a["agent"], a["verdict"]) for a in out["attempts"]] == [("claude", "passed")]
    assert [c["agent"] for c in calls(log)] == ["claude", "codex", "codex", "claude"]


def test_a_reset_already_past_holds_the_login_for_the_fallback_hour(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "claude"}, "error": "usage_limit_legacy", "resets_at": int(time.time()) - 600})
    out = run_json(project, *cascade("claude:claude-sonnet-4-6", "claude:claude-opus-4-6", "codex:gpt-5.4"))
    assert [a["agent"] for a in out["attempts"]] == ["claude", "codex"]  # not every claude arm, one by one
    assert 3500 < utc(out["attempts"][0]["held_until"]).timestamp() - time.time() <= 3600
    assert "no reset time ahead given" in out["attempts"][0]["health"]


def test_the_issues_scenario_opencode_answering_401_for_every_provider(project, fakes_on_path, scenario, acr_home):
    """The default profile, opencode refused everywhere: the set-up errors do not use up the three attempts."""
    scenario({"match": {"agent": "opencode"}, "error": "401"},
             {"write": {"calc.py": "def add(a, b):\n    return a + b\n"}})
    r = acr("run", "add tests for add", "--verify", VERIFY, "--yes", "--json", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["verdict"] == "passed", out["stop_reason"]
    opencode = [a for a in out["attempts"] if a["agent"] == "opencode"]
    assert len(opencode) >= 3 and all(a["problem"] == "setup" and not a["counted"] for a in opencode)
    assert out["attempts"][-1]["agent"] in ("codex", "claude") and out["attempts_counted"] == 1
    text = acr("run", "add tests for add", "--verify", VERIFY, "--yes", cwd=project, env={"ACR_HOME": str(acr_home) + "2"})
    assert "never reached a model, not counted" in text.stdout


SIX = ["opencode:moonshotai/kimi-k2.5", "opencode:zhipuai/glm-5", "opencode:deepseek/deepseek-v3.2",
       "opencode:alibaba/qwen3-max", "opencode:minimax/MiniMax-M2.7", "opencode:openrouter/qwen/qwen3-coder"]


def test_at_most_five_set_up_errors_a_task_are_free(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "opencode"}, "error": "401"}, {"match": {"agent": "codex"}})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--json", "--max-attempts", "1",
            *cascade(*SIX, "codex:gpt-5.4"), cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["verdict"] == "failed"
    assert (out["attempts_free"], out["attempts_counted"], out["attempts_free_max"]) == (5, 1, 5)
    assert [a["counted"] for a in out["attempts"]] == [False] * 5 + [True]  # the sixth counts: max attempts reached
    assert "max attempts (1) reached" in out["stop_reason"] and "codex" not in [c["agent"] for c in calls(log)]
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 6  # every attempt is recorded


PLAN_PROFILE = """extends: balanced
arms:
  - {agent: claude, model: claude-sonnet-4-6, price: {input: 3, output: 15}, billing: plan}
  - {agent: codex, model: gpt-5.4, price: {input: 2.5, output: 15}}
"""


def test_an_arm_on_a_plan_costs_nothing_for_routing_and_budgets(project, fakes_on_path, scenario, acr_home, tmp_path):
    scenario({"match": {"agent": "claude"}, "cost": 0.25, "tokens": [20000, 3000]})
    prof = tmp_path / "plan.yaml"
    prof.write_text(PLAN_PROFILE)
    route = json.loads(acr("route", "fix add", "--json", "--profile", str(prof), cwd=project).stdout)
    costs = {o["model"]: o["expected_cost"] for o in route["order"]}
    assert costs["claude-sonnet-4-6"] == 0 and costs["gpt-5.4"] > 0
    # a budget no API arm fits in: the plan arm still runs
    out = run_json(project, "--profile", str(prof), "--max-cost", "0.0001")
    a = out["attempts"][0]
    assert (a["agent"], a["verdict"], a["cost_usd"], a["cost_source"]) == ("claude", "passed", 0.0, "plan")
    assert a["api_cost_usd"] == 0.25 and (a["tokens_in"], a["tokens_out"]) == (20000, 3000)  # still recorded
    assert out["cost_usd"] == 0
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT tokens_in, cost_usd, cost_source FROM attempts").fetchone() == (20000, 0.0, "plan")
    spend = json.loads(acr("spend", "--json", cwd=project).stdout)["total"]  # what the plan saved, at API prices
    assert (spend["cost_usd"], spend["plan_attempts"]) == (0, 1)
    assert spend["plan_saved_usd"] == pytest.approx(catalog_price("claude", "claude-sonnet-4-6", 20000, 3000))
    assert spend["plan_saved_usd"] > 0 and "plans saved ~$" in acr("spend", cwd=project).stdout
    shown = acr("run", "fix add", "--verify", "true", "--yes", "--profile", str(prof), cwd=project).stderr
    assert "$0 (plan; $0.25 at API prices)" in shown
    # the same arm billed per token is refused by that budget before anything runs
    prof.write_text(PLAN_PROFILE.replace(", billing: plan", ""))
    r = acr("run", "fix add", "--verify", "true", "--yes", "--profile", str(prof), "--max-cost", "0.0001", cwd=project)
    assert r.returncode == 2 and "--max-cost" in r.stderr


def test_billing_must_be_api_or_plan(project, tmp_path, acr_home):
    prof = tmp_path / "bad.yaml"
    prof.write_text(PLAN_PROFILE.replace("billing: plan", "billing: monthly"))
    r = acr("route", "fix add", "--profile", str(prof), cwd=project)
    assert r.returncode == 2 and "billing" in r.stderr and "plan" in r.stderr and "Traceback" not in r.stderr


NOW = datetime(2026, 11, 28, 3, 0, tzinfo=timezone.utc)  # 11:00 in Shanghai


@pytest.mark.parametrize("text,expected", [
    ("Claude AI usage limit reached|1762952400", datetime(2025, 11, 12, 13, 0, tzinfo=timezone.utc)),
    ("You've hit your limit · resets 2pm (Asia/Shanghai)", datetime(2026, 11, 28, 6, 0, tzinfo=timezone.utc)),
    ("You've hit your limit · resets 10:30am (Asia/Shanghai)",  # already past there today: tomorrow's
     datetime(2026, 11, 29, 2, 30, tzinfo=timezone.utc)),
    # claude 2.1.197 names the window that ran out, and the date of a reset more than a day ahead
    ("You've hit your session limit · resets 4pm (UTC)", datetime(2026, 11, 28, 16, 0, tzinfo=timezone.utc)),
    ("You've hit your weekly limit · resets Dec 2, 2:33pm (Asia/Shanghai)",
     datetime(2026, 12, 2, 6, 33, tzinfo=timezone.utc)),
    ("You've hit your Opus limit · resets Jan 2, 2027, 2pm (Europe/Paris)",
     datetime(2027, 1, 2, 13, 0, tzinfo=timezone.utc)),
    ("You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 days "
     "17 hours 14 minutes.", datetime(2026, 11, 30, 20, 14, tzinfo=timezone.utc)),
    ('{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_at":1777936568,'
     '"resets_in_seconds":13872}}', datetime.fromtimestamp(1777936568, timezone.utc)),
    ("You have exceeded the 5-hour usage quota. It will reset at 2026-07-30 16:11:46 +0800 CST.",
     datetime(2026, 7, 30, 8, 11, 46, tzinfo=timezone.utc)),
    ("You've hit your usage limit. Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), or "
     "try again at Jul 5th, 2027 8:19 PM.", datetime(2027, 7, 5, 20, 19).astimezone().astimezone(timezone.utc)),
])
def test_each_clis_reset_time_is_read_with_its_time_zone(text, expected):
    from acr_cli.health import limits

    assert limits.is_limit(text) and limits.reset_time(text, NOW) == expected


@pytest.mark.parametrize("text", ["exceeded retry limit, last status: 429 Too Many Requests",
                                  "You exceeded your current quota, please check your plan and billing details.",
                                  "API Error: 429 rate_limit_error: This request would exceed your rate limit"])
def test_a_rate_limit_or_an_empty_balance_is_not_a_plans_usage_limit(text):
    from acr_cli.health import limits
    from acr_cli.health.errors import LIMIT, classify

    assert not limits.is_limit(text) and classify("codex", "m", text).kind != LIMIT
