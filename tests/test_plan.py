"""Planning: the one plan `acr route` shows and `acr run` starts from, and the one answer to "can this arm run".

Built as the commands build it: the real built-in profile, a real SQLite memory file, the fake agent CLIs on
PATH (opencode left out where a test needs a CLI that is not installed)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import FAKES, GOOD, acr, calls

from acr_cli.cli.common import load_profile, open_memory
from acr_cli.domain import Arm
from acr_cli.health.errors import LIMIT, TRANSIENT, Problem
from acr_cli.health.state import HealthBook
from acr_cli.memory import Memory
from acr_cli.plan import RunRequest, plan

ARMS = "opencode:zhipuai/glm-5,claude:claude-sonnet-4-6,codex:gpt-5.4"
VERIFY = "grep -q 'a + b' calc.py"


@pytest.fixture
def no_opencode(tmp_path, monkeypatch) -> Path:
    """PATH with the fake codex and claude, and no opencode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("codex", "claude"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{FAKES / name}" "$@"\n')
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def reset_in(hours: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def remember(memory_file: Path, *, held: str | None = None, cooled: str | None = None) -> None:
    """Write arm health into the memory file as runs do: a usage limit holding ``held``'s login until a reset
    three hours ahead, a rate limit cooling ``cooled`` down."""
    mem = Memory.open(memory_file)
    try:
        book = HealthBook(mem)
        if held:
            agent, model = held.split(":", 1)
            book.record(Arm(agent, model), Problem(LIMIT, "usage limit reached", until=reset_in(3), until_known=True))
        if cooled:
            agent, model = cooled.split(":", 1)
            book.record(Arm(agent, model), Problem(TRANSIENT, "rate limited (429)"))
    finally:
        mem.close()


def make_plan(project: Path, memory_file: Path, **kw):
    return plan(RunRequest("fix the add function in calc.py", project, memory=memory_file, **kw),
                load_profile=load_profile, open_memory=open_memory)


def test_the_plan_keeps_the_order_and_says_why_each_arm_cannot_run(project, no_opencode, tmp_path):
    memory_file = tmp_path / "memory.sqlite"
    remember(memory_file, held="claude:claude-sonnet-4-6", cooled="codex:gpt-5.4")
    made = make_plan(project, memory_file, arms=ARMS + ",claude:claude-opus-4-6")
    try:
        order = made.order()
    finally:
        made.close()
    assert [p.arm.id for p in order] == ARMS.split(",") + ["claude:claude-opus-4-6"]  # --arms: in that order
    why = {p.arm.id: p.blocked for p in order}
    assert why["opencode:zhipuai/glm-5"].reason == "`opencode` is not installed (not found on PATH)"
    assert why["opencode:zhipuai/glm-5"].held_until is None
    # a usage limit holds every arm of that login, until its reset
    for arm in ("claude:claude-sonnet-4-6", "claude:claude-opus-4-6"):
        assert why[arm].reason.startswith("held until ") and why[arm].reason.endswith("usage limit reached")
        assert datetime.fromisoformat(why[arm].held_until.replace("Z", "+00:00")) > datetime.now(timezone.utc)
    assert why["codex:gpt-5.4"].reason.startswith("cooling down until ")
    assert why["codex:gpt-5.4"].reason.endswith("after 1 error(s) in a row: rate limited (429)")
    assert why["codex:gpt-5.4"].held_until is None  # a cool-down is no usage limit


def test_an_arm_nothing_holds_can_run_and_more_arms_than_attempts_may_each_be_tried(project, no_opencode, tmp_path):
    made = make_plan(project, tmp_path / "memory.sqlite", arms=ARMS + ",claude:claude-opus-4-6")
    try:
        assert made.gate.why_not(Arm("codex", "gpt-5.4")) is None
        assert made.gate.why_not(Arm("claude", "claude-opus-4-6")) is None
        assert made.gate.agent_why_not("opencode") == "`opencode` is not installed (not found on PATH)"
        assert made.options["max_attempts"].value == 3 and made.max_attempts == 4  # each arm named may be tried
        assert made.budget_name == "max_cost (from profile balanced)"
    finally:
        made.close()


def test_route_and_run_agree_on_the_order_and_on_why_an_arm_cannot_run(project, no_opencode, scenario, tmp_path,
                                                                       acr_home):
    memory_file = acr_home / "data" / "memory.sqlite"  # the default memory: what both commands open
    memory_file.parent.mkdir(parents=True)
    remember(memory_file, held="claude:claude-sonnet-4-6")
    made = make_plan(project, memory_file, arms=ARMS)
    try:
        blocked = {p.arm.id: p.blocked.reason for p in made.order() if p.blocked}
    finally:
        made.close()
    route = acr("route", "fix the add function in calc.py", "--arms", ARMS, "--json", cwd=project)
    assert route.returncode == 0, route.stderr
    shown = json.loads(route.stdout)
    assert [f"{o['agent']}:{o['model']}" for o in shown["order"]] == ["codex:gpt-5.4"]
    assert {f"{c['agent']}:{c['model']}": c["reason"] for c in shown["cannot_run"]} == blocked
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    run = acr("run", "fix the add function in calc.py", "--arms", ARMS, "--verify", VERIFY, "--json", cwd=project)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert [a["agent"] for a in out["attempts"]] == ["codex"] and [c["agent"] for c in calls(log)] == ["codex"]
    assert {f"{s['agent']}:{s['model']}": s["reason"] for s in out["skipped"]} == blocked  # the same words


def test_the_learned_policy_runs_first_the_arm_route_puts_first(project, fakes_on_path, scenario, acr_home):
    made = make_plan(project, acr_home / "data" / "memory.sqlite")
    try:
        planned = made.order()[0]
    finally:
        made.close()
    assert made.policy.name == "learned" and planned.blocked is None
    route = acr("route", "fix the add function in calc.py", "--json", cwd=project)
    assert route.returncode == 0, route.stderr
    first = json.loads(route.stdout)["order"][0]
    assert (first["agent"], first["model"], first["why"]) == (planned.arm.agent, planned.arm.model, planned.ranked.why)
    scenario({"write": {"calc.py": GOOD}})
    run = acr("run", "fix the add function in calc.py", "--verify", VERIFY, "--json", cwd=project)
    assert run.returncode == 0, run.stderr
    tried = json.loads(run.stdout)["attempts"][0]
    assert (tried["agent"], tried["model"]) == (first["agent"], first["model"])


def test_a_run_whose_plan_has_no_arm_that_can_run_is_refused_with_the_plans_reasons(project, no_opencode, tmp_path):
    from acr_cli.errors import AcrError
    from acr_cli.session import prepare

    memory_file = tmp_path / "memory.sqlite"
    remember(memory_file, held="claude:claude-sonnet-4-6")
    arms = "opencode:zhipuai/glm-5,claude:claude-sonnet-4-6"
    made = make_plan(project, memory_file, arms=arms)
    try:
        reasons = [f"{p.arm.id}: {p.blocked.reason}" for p in made.order()]
    finally:
        made.close()
    req = RunRequest("fix the add function in calc.py", project, verify=VERIFY, arms=arms, memory=memory_file)
    with pytest.raises(AcrError) as refused:
        prepare(req, load_profile=load_profile, open_memory=open_memory)
    assert refused.value.message == f"no arm of the plan can run here ({'; '.join(reasons)}); no agent was run"
    # nothing left behind: the work tree's lock is free for the next run, the tree untouched
    again = prepare(RunRequest("fix it", project, arms="codex:gpt-5.4", memory=memory_file),
                    load_profile=load_profile, open_memory=open_memory)
    again.close()
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"
