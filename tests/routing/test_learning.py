"""The learned router changes its mind as evidence in memory changes (live learning)."""

from __future__ import annotations

import json

from conftest import acr
from shared import TWO_EQUAL_ARMS as PROFILE

from acr_cli.context import classify
from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.memory import Memory


def first_choice(profile, project) -> str:
    r = acr("route", "update the README with install steps", "--profile", str(profile), "--project", str(project),
            "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["context"]["kind"] == "docs"
    return out["order"][0]["agent"] + ":" + out["order"][0]["model"]


def record(home, project, winner: Arm, loser: Arm, n: int) -> None:
    mem = Memory.open(home / "data" / "memory.sqlite")
    ctx = classify("update the README with install steps", project)
    for _ in range(n):
        tid = mem.begin_task(source="live", kind=ctx.kind, groups=ctx.groups, prompt=ctx.prompt)
        for seq, (arm, verdict) in enumerate(((loser, "failed"), (winner, "passed")), 1):
            mem.add_attempt(tid, seq, Decision(arm, "test"),
                            Feedback(arm, verdict, score=float(verdict == "passed"), cost_usd=0.05))
        mem.finish_task(tid, passed=True, score=1.0, cost_usd=0.1, final_arm=winner.id)
    mem.close()


def test_routing_follows_the_evidence_and_turns_back(tmp_path, acr_home, fakes_on_path):
    profile = tmp_path / "two.yaml"
    profile.write_text(PROFILE)
    project = tmp_path / "proj"
    project.mkdir()
    a, b = Arm("codex", "m-a"), Arm("claude", "m-b")
    # no evidence: the two are equal, and the posterior draw (seeded by the request and the memory) picks
    # one; asked again on the same memory, acr route answers alike (acr run would follow that plan)
    assert first_choice(profile, project) == first_choice(profile, project)
    record(acr_home, project, winner=b, loser=a, n=5)
    assert first_choice(profile, project) == b.id
    record(acr_home, project, winner=a, loser=b, n=12)
    assert first_choice(profile, project) == a.id
