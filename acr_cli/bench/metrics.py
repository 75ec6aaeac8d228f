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

from dataclasses import dataclass, field
from typing import Any

from acr_cli.memory.store import Memory


def compute(memory: Memory, source: str, cost_weight: float, premium: str | None) -> dict[str, Any]:
    tasks = memory.task_results(source)
    n = len(tasks)
    if n == 0:
        return {"n": 0}
    by_task: dict[str, list[dict]] = {}
    for a in memory.attempts_of(source):
        by_task.setdefault(a["task_id"], []).append(a)
    tally = _Tally()
    for t in tasks:
        tally.add(t, by_task.get(t["id"], []), cost_weight, premium)
    return tally.figures(n)


@dataclass
class _Tally:
    """The running sums over a run's tasks, in stream order (the regret curve is one point per task)."""

    total_score: float = 0.0
    total_cost: float = 0.0
    regret: float = 0.0
    racc: int = 0
    applied: int = 0
    known_apply: int = 0
    steps: int = 0
    escalations: int = 0
    curve: list[float] = field(default_factory=list)
    tin: float = 0.0
    tout: float = 0.0
    seconds: float = 0.0
    timed: bool = False

    def add(self, t: dict, att: list[dict], cost_weight: float, premium: str | None) -> None:
        """One task (``t``) and its attempts in order."""
        score = max((a["score"] or 0.0 for a in att), default=0.0)
        cost = sum(a["cost_usd"] or 0.0 for a in att)
        reward = score - cost_weight * cost
        self.regret += (t["oracle_reward"] if t["oracle_reward"] is not None else reward) - reward
        self.curve.append(self.regret)
        self.total_score += score
        self.total_cost += cost
        self.steps += len(att)
        for a in att:
            if a.get("duration_s"):
                self.seconds += a["duration_s"]
                self.timed = True
        self.tin += t["tokens_in"] or 0
        self.tout += t["tokens_out"] or 0
        if att:
            self._add_final(t, att, premium)

    def _add_final(self, t: dict, att: list[dict], premium: str | None) -> None:
        """What the task's final attempt counts for (right model, patch applied), and whether it escalated."""
        final = att[-1]
        self.racc += final["model"] == t["oracle_arm"]
        if final["apply_ok"] is not None:
            self.known_apply += 1
            self.applied += bool(final["apply_ok"])
        if premium and any(a["model"] == premium and i > 0 and att[i - 1]["verdict"] != "passed"
                           for i, a in enumerate(att)):
            self.escalations += 1

    def figures(self, n: int) -> dict[str, Any]:
        """The run's metrics over its ``n`` tasks."""
        avg_perf = 100.0 * self.total_score / n
        return {
            "n": n,
            "avg_perf": avg_perf,
            "cum_regret": self.regret,
            "cost_usd": self.total_cost,
            "perf_per_dollar": avg_perf / self.total_cost if self.total_cost else None,
            "racc": self.racc / n,
            # of the tasks it is known for
            "apply_ok": 100.0 * self.applied / self.known_apply if self.known_apply else None,
            "avg_steps": self.steps / n,
            "escalations": self.escalations,
            "tokens_in": int(self.tin),
            "tokens_out": int(self.tout),
            "hours": self.seconds / 3600 if self.timed else None,  # time the attempts took (results that record it)
            "curve": self.curve,
        }
