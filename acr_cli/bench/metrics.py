"""The paper's metrics, computed from the attempts a replay recorded in memory.

Per task: score = best attempt's score; cost = every attempt's cost;
reward = score - lambda * cost; oracle = best single-model reward (recorded
with the task). Over a run:

* ``avg_perf`` = mean score x 100; ``cost_usd`` = total; ``perf_per_dollar`` = avg_perf / cost_usd
* ``cum_regret`` = sum of (oracle - reward)
* ``racc`` = share of tasks whose final model (the last attempt's) is the oracle's model
* ``apply_ok`` = share of tasks whose final attempt changed the repository (OOD), x 100, among the
  tasks where that is recorded; None where none is (ID2919's files have no such column)
* ``avg_steps`` = attempts per task; ``escalations`` = tasks where the most expensive
  arm was tried after a failed attempt (the paper's "escalate to the premium model")
* ``hours`` = the time every attempt took, in hours (None when no attempt records one)
"""

from __future__ import annotations

from typing import Any

from acr_cli.memory.store import Memory


def compute(memory: Memory, source: str, cost_weight: float, premium: str | None) -> dict[str, Any]:
    tasks = memory.task_results(source)
    n = len(tasks)
    if n == 0:
        return {"n": 0}
    attempts = memory.attempts_of(source)
    by_task: dict[str, list[dict]] = {}
    for a in attempts:
        by_task.setdefault(a["task_id"], []).append(a)
    total_score = total_cost = regret = 0.0
    racc = applied = known_apply = steps = escalations = 0
    curve = []
    tin = tout = 0.0
    seconds, timed = 0.0, False
    for t in tasks:
        att = by_task.get(t["id"], [])
        score = max((a["score"] or 0.0 for a in att), default=0.0)
        cost = sum(a["cost_usd"] or 0.0 for a in att)
        reward = score - cost_weight * cost
        regret += (t["oracle_reward"] if t["oracle_reward"] is not None else reward) - reward
        curve.append(regret)
        total_score += score
        total_cost += cost
        steps += len(att)
        for a in att:
            if a.get("duration_s"):
                seconds += a["duration_s"]
                timed = True
        tin += t["tokens_in"] or 0
        tout += t["tokens_out"] or 0
        if att:
            final = att[-1]
            racc += final["model"] == t["oracle_arm"]
            if final["apply_ok"] is not None:
                known_apply += 1
                applied += bool(final["apply_ok"])
            if premium and any(a["model"] == premium and i > 0 and att[i - 1]["verdict"] != "passed"
                               for i, a in enumerate(att)):
                escalations += 1
    avg_perf = 100.0 * total_score / n
    return {
        "n": n,
        "avg_perf": avg_perf,
        "cum_regret": regret,
        "cost_usd": total_cost,
        "perf_per_dollar": avg_perf / total_cost if total_cost else None,
        "racc": racc / n,
        "apply_ok": 100.0 * applied / known_apply if known_apply else None,  # of the tasks it is known for
        "avg_steps": steps / n,
        "escalations": escalations,
        "tokens_in": int(tin),
        "tokens_out": int(tout),
        "hours": seconds / 3600 if timed else None,  # time the attempts took (results that record it)
        "curve": curve,
    }
