"""``acr bench replay ... --race N``: a task's first step races several arms, every one of them paid."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

import pytest
from conftest import REPO, acr

TINY = REPO / "bench" / "examples" / "tiny"
LAMBDA = 0.1


def replay(*args: str) -> dict:
    r = acr("bench", "replay", *args, "--json")
    assert r.returncode == 0, r.stderr
    return {row["policy"]: row for row in json.loads(r.stdout)["results"]}


def cells() -> dict[str, list[dict]]:
    by_task = defaultdict(list)
    for line in (TINY / "results.jsonl").read_text().splitlines():
        cell = json.loads(line)
        by_task[cell["task_id"]].append(cell)
    return by_task


def test_a_race_of_every_arm_pays_them_all_and_scores_the_best(tmp_path):
    """The tiny folder has three arms (some missing on some tasks): a race of 3 starts every arm a task has,
    so its cost, regret, steps and time follow from the file alone."""
    rows = replay(str(TINY), "-P", "learned", "--race", "3", "--memory", str(tmp_path / "m.db"))
    race = rows["learned race=3"]
    tasks = cells()
    cost = sum(c["cost_usd"] for cs in tasks.values() for c in cs)
    regret = 0.0
    for cs in tasks.values():
        oracle = max(c["resolved"] - LAMBDA * c["cost_usd"] for c in cs)
        reward = max(c["resolved"] for c in cs) - LAMBDA * sum(c["cost_usd"] for c in cs)
        regret += oracle - reward
    assert race["cost_usd"] == pytest.approx(cost)
    assert race["cum_regret"] == pytest.approx(regret)
    assert race["avg_steps"] == pytest.approx(30 / 12)
    assert race["races"] == 12
    assert race["hours"] == pytest.approx(sum(c["duration_s"] for cs in tasks.values() for c in cs) / 3600)
    assert race["wait_hours"] == pytest.approx(sum(max(c["duration_s"] for c in cs) for cs in tasks.values()) / 3600)
    # escalation beside it: the same policy without a race, its waiting its hours
    assert "races" not in rows["learned"] and rows["learned"]["cost_usd"] < cost
    # memory learned from every raced attempt: each is recorded, the winner last
    db = sqlite3.connect(tmp_path / "m.db")
    run = db.execute("select id from runs where policy = 'learned race=3'").fetchone()[0]
    recorded = db.execute("select count(*), sum(a.cost_usd) from attempts a join tasks t on t.id = a.task_id "
                          "where t.source = ?", (f"bench:tiny:{run}",)).fetchone()
    assert recorded[0] == 30 and recorded[1] == pytest.approx(cost)


def test_a_race_of_two_then_escalation_when_both_fail(tmp_path):
    """Two of three arms raced; where both fail, the third is tried after them within max attempts."""
    rows = replay(str(TINY), "-P", "learned", "--race", "2", "--memory", str(tmp_path / "m.db"))
    db = sqlite3.connect(tmp_path / "m.db")
    run = db.execute("select id from runs where policy = 'learned race=2'").fetchone()[0]
    attempts = defaultdict(list)
    for task, seq, verdict, model in db.execute(
            "select a.task_id, a.seq, a.verdict, a.model from attempts a join tasks t on t.id = a.task_id "
            "where t.source = ? order by a.task_id, a.seq", (f"bench:tiny:{run}",)):
        attempts[task].append((verdict, model))
    assert len(attempts) == 12 and all(len(tried) >= 2 for tried in attempts.values())
    escalated = [tried for tried in attempts.values() if len(tried) > 2]
    assert escalated  # some task had both raced arms fail ...
    assert all(v != "passed" for tried in escalated for v, _ in tried[:2])  # ... and only those escalate
    assert rows["learned race=2"]["races"] == 12


def test_the_plan_races_when_time_is_worth_money_and_not_when_it_is_free():
    free = replay(str(TINY), "-P", "learned", "--race", "2")["learned race<=2"]
    dear = replay(str(TINY), "-P", "learned", "--race", "2", "--time-weight", "1")["learned race<=2"]
    assert free["races"] == 0
    assert dear["races"] > 0
    assert dear["wait_hours"] < dear["hours"]


@pytest.mark.parametrize("args, message", [
    (("--race", "1"), "at least 2 arms"),
    (("--race", "2", "--protocol", "single"), "cascade protocol only"),
])
def test_a_race_that_cannot_be_replayed_is_refused(args, message):
    r = acr("bench", "replay", str(TINY), "-P", "learned", *args)
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr
