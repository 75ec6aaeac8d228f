"""Arm health: set-up errors set an arm aside, transient ones cool it down; neither is evidence of skill."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import VERIFY, acr, calls

from acr_cli.domain import Arm
from acr_cli.health.errors import SETUP, TRANSIENT, Problem, classify
from acr_cli.health.state import COOL_BASE_S, HealthBook
from acr_cli.memory import Memory

OPENCODE3 = "opencode:moonshotai/kimi-k2.5,opencode:zhipuai/glm-5,opencode:deepseek/deepseek-v3.2"


def attempts_per_task(home: Path) -> list[int]:
    db = sqlite3.connect(home / "data" / "memory.sqlite")
    return [n for (n,) in db.execute("SELECT COUNT(a.id) FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id"
                                     " GROUP BY t.id ORDER BY t.rowid")]


@pytest.mark.parametrize("agent,text,kind", [
    ("claude", "Not logged in · Please run /login", SETUP),
    ("claude", "Failed to authenticate. API Error: 401 invalid x-api-key", SETUP),
    ("codex", "unexpected status 401 Unauthorized", SETUP),
    ("codex", "You exceeded your current quota, please check your plan and billing details", SETUP),
    ("codex", "The model `gpt-9` does not exist or you do not have access to it.", SETUP),
    ("opencode", "Request failed with status 429 insufficient_quota", SETUP),
    ("codex", "exceeded retry limit, last status: 429 Too Many Requests", TRANSIENT),
    ("claude", "API Error: 529 Overloaded", TRANSIENT),
    ("opencode", "Request failed with status 503", TRANSIENT),
    ("claude", "read ECONNRESET", TRANSIENT),
    ("codex", "/usr/bin/env: ‘node’: No such file or directory", SETUP),  # npm's CLIs without Node.js
    ("claude", "/home/u/.local/bin/claude: bad interpreter (#!/opt/node18/bin/node not found)", SETUP),
])
def test_errors_are_classified_from_the_clis_own_words(agent, text, kind):
    assert classify(agent, "m", text).kind == kind


@pytest.mark.parametrize("agent,text,what", [  # the CLIs' words (tests/fakes/fakeagent.py's error modes)
    ("claude", "Failed to authenticate. API Error: 403 Your API key does not have permission to use the specified "
               "resource.", "access refused (403)"),
    ("claude", "There's an issue with the selected model (m). It may not exist or you may not have access to it.",
     "unknown model"),
    ("codex", "Project `proj_acr` does not have access to model `m`", "access refused (403)"),
])
def test_an_error_about_the_model_sets_aside_that_model_only(agent, text, what):
    problem = classify(agent, "m", text)
    assert (problem.kind, problem.what, problem.model_only) == (SETUP, what, True)


def test_a_model_set_aside_leaves_the_agents_other_models(tmp_path):
    mem = Memory.open(tmp_path / "m.sqlite")
    book = HealthBook(mem, scope_of=lambda a, m: a, fingerprint_of=lambda a, m: "fp")
    book.record(Arm("codex", "gpt-9"), classify("codex", "gpt-9", "The model `gpt-9` does not exist"))
    assert list(book.of([Arm("codex", "gpt-9"), Arm("codex", "gpt-5.4")])) == ["codex:gpt-9"]
    book.record(Arm("codex", "gpt-5.4"), classify("codex", "gpt-5.4", "unexpected status 401 Unauthorized"))
    assert sorted(book.of([Arm("codex", "gpt-9"), Arm("codex", "gpt-5.4")])) == ["codex:gpt-5.4", "codex:gpt-9"]
    mem.close()


def test_an_error_that_is_neither_is_left_to_the_router():
    assert classify("codex", "m", "codex: unexpected argument '--frobnicate'") is None


def test_four_runs_with_a_provider_answering_401(project, fakes_on_path, scenario, acr_home):
    """The issue's scenario: the opencode arms answer 401; acr learns it once, then starts with a ready arm."""
    log = scenario({"match": {"agent": "opencode"}, "error": "401"},
                   {"match": {"agent": "codex"}, "write": {"calc.py": "def add(a, b):\n    return a + b\n"}})
    for _ in range(4):
        r = acr("run", "fix add", "--verify", VERIFY, "--arms", OPENCODE3 + ",codex:gpt-5.4", "--max-attempts", "4",
                cwd=project)
        assert r.returncode == 0, r.stderr
        (project / "calc.py").write_text("def add(a, b):\n    return a * b\n")
    assert attempts_per_task(acr_home) == [4, 1, 1, 1]
    assert [c["agent"] for c in calls(log)].count("opencode") == 3  # each provider refused once, never again
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", OPENCODE3 + ",codex:gpt-5.4", "--json", cwd=project)
    skipped = json.loads(r.stdout)["skipped"]
    assert len(skipped) == 3 and all("set aside" in s["reason"] and "opencode auth login" in s["reason"]
                                     for s in skipped)


def test_a_set_up_error_is_not_evidence_of_skill_and_its_zero_cost_is_not_a_price(project, fakes_on_path, scenario,
                                                                                    acr_home):
    scenario({"match": {"agent": "claude"}, "error": "401"},
             {"match": {"agent": "codex"}, "cost": None, "tokens": [1000, 100]})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "claude:claude-sonnet-4-6,codex:gpt-5.4", "--json",
            cwd=project)
    out = json.loads(r.stdout)
    assert [a["verdict"] for a in out["attempts"]] == ["error", "passed"]
    assert out["attempts"][0]["problem"] == "setup" and "set aside" in out["attempts"][0]["health"]
    shown = json.loads(acr("memory", "show", "--json", cwd=project).stdout)["kinds"]
    claude = next(k for k in shown if k["model"] == "claude-sonnet-4-6" and k["attempts"])
    assert claude["judged"] == 0 and claude["mean_cost_usd"] is None  # no verdict, no price from an error's $0
    assert claude["health"]["state"] == "set_aside" and "claude" in claude["health"]["fix"]
    text = acr("memory", "show", cwd=project).stdout
    assert "claude:claude-sonnet-4-6 is set aside" in " ".join(text.split())


def test_a_set_aside_arm_comes_back_when_its_credentials_change(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "claude"}, "error": "401"})
    arms = ["--arms", "claude:claude-sonnet-4-6"]
    acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project)
    r = acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project)
    assert r.returncode == 2 and "set aside" in r.stderr and len(calls(log)) == 1  # not tried again
    assert "no arm of the plan can run here" in r.stderr and attempts_per_task(acr_home) == [1]  # no empty task
    r = acr("route", "fix", *arms, cwd=project)
    assert r.returncode == 2 and "cannot run now" in r.stdout and "acr doctor" in r.stderr
    acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project, env={"ANTHROPIC_API_KEY": "sk-ant-a-new-key-0000000000"})
    assert len(calls(log)) == 2  # a new key: tried again


def test_a_transient_error_cools_the_arm_down_and_it_comes_back(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "codex"}, "error": "rate_limit"},
                   {"match": {"agent": "claude"}})
    arms = ["--arms", "codex:gpt-5.4,claude:claude-sonnet-4-6"]
    r = acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project)
    assert r.returncode == 0 and "cooling down until" in r.stderr
    r = acr("run", "fix", "--verify", "true", "--yes", *arms, "--json", cwd=project)
    assert json.loads(r.stdout)["skipped"][0]["agent"] == "codex"
    assert [c["agent"] for c in calls(log)] == ["codex", "claude", "claude"]
    mem = Memory.open(acr_home / "data" / "memory.sqlite")
    book = HealthBook(mem)
    codex = Arm("codex", "gpt-5.4")
    later = datetime.now(timezone.utc) + timedelta(seconds=COOL_BASE_S + 5)
    assert codex.id in book.of([codex]) and codex.id not in book.of([codex], now=later)  # the cooldown expires
    mem.close()


def test_cooldowns_grow_with_errors_in_a_row_and_reset_after_an_attempt_that_ran(tmp_path):
    mem = Memory.open(tmp_path / "m.sqlite")
    book = HealthBook(mem, scope_of=lambda a, m: a, fingerprint_of=lambda a, m: "fp")
    arm = Arm("codex", "gpt-5.4")
    t0 = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
    waits = []
    for i in range(3):
        h = book.record(arm, Problem(TRANSIENT, "rate limited (429)"), now=t0)
        waits.append((datetime.strptime(h.until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) - t0).seconds)
    assert waits == [60, 120, 240]
    book.ran(arm)
    h = book.record(arm, Problem(TRANSIENT, "rate limited (429)"), now=t0)
    assert h.errors == 1
    mem.close()


def test_a_set_up_error_sets_the_whole_credential_scope_aside(tmp_path):
    mem = Memory.open(tmp_path / "m.sqlite")
    book = HealthBook(mem, scope_of=lambda a, m: a, fingerprint_of=lambda a, m: "fp")
    book.record(Arm("claude", "claude-opus-4-6"), Problem(SETUP, "not logged in", "log in"))
    blocked = book.of([Arm("claude", "claude-sonnet-4-6"), Arm("codex", "gpt-5.4")])
    assert list(blocked) == ["claude:claude-sonnet-4-6"] and blocked["claude:claude-sonnet-4-6"].fix == "log in"
    assert book.reset() == 1 and not book.of([Arm("claude", "claude-sonnet-4-6")])
    mem.close()


def test_doctor_shows_a_set_aside_arm_and_reset_brings_it_back(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "claude"}, "error": "401"})
    arms = ["--arms", "claude:claude-sonnet-4-6"]
    acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project)
    out = json.loads(acr("doctor", "--json", cwd=project).stdout)
    claude = [a for a in out["profile"]["arms"] if a["agent"] == "claude"]
    assert claude and all(a["health"]["state"] == "set_aside" for a in claude)
    assert "set aside" in " ".join(acr("doctor", cwd=project).stdout.split())
    assert out["profile"]["readiness"]["held"] == len(claude)  # not counted as ready
    one = project / "claude-only.yaml"  # a profile whose every arm is set aside: nothing can run, doctor exits 1
    one.write_text("description: one\narms:\n  - {agent: claude, model: claude-sonnet-4-6, price: {input: 3, output: 15}}\n")
    alone = acr("doctor", "--profile", str(one), cwd=project)
    assert alone.returncode == 1 and "0 of 1 arms ready" in alone.stdout and "no arm of this profile is ready" in alone.stdout
    r = acr("doctor", "--reset", cwd=project)
    assert "forgot the health of 1" in r.stdout
    acr("run", "fix", "--verify", "true", "--yes", *arms, cwd=project)
    assert len(calls(log)) == 2


def test_an_arm_without_a_profile_price_is_priced_from_the_catalog(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "codex"}, "cost": None, "tokens": [3800, 150]})
    r = acr("run", "fix", "--verify", "true", "--yes", "--arms", "codex:gpt-5.5", "--json", cwd=project)  # in no profile
    attempt = json.loads(r.stdout)["attempts"][0]
    assert attempt["cost_source"] == "catalog"
    assert attempt["cost_usd"] == pytest.approx((3800 * 5 + 150 * 30) / 1e6)  # the catalog's gpt-5.5 rates
    r = acr("run", "fix", "--verify", "true", "--yes", "--arms", "codex:no-such-model-9", "--json", cwd=project)
    assert json.loads(r.stdout)["attempts"][0]["cost_source"] == "unknown"
