"""Your own history as a benchmark: the live attempts in memory as a sparse task x arm matrix.

A cell is the first attempt of an arm on a task (score = the verifier's
score, or 1/0 for passed/failed; cost = its cost, unknown counted as 0).
Only attempts with a verdict about the arm count (passed, failed, timeout).
"""

from __future__ import annotations

from typing import Any

from acr_cli.bench.matrix import Cell, Matrix, Task
from acr_cli.context import kind_sure
from acr_cli.domain import JUDGED
from acr_cli.memory import shapes
from acr_cli.memory.store import Memory
from acr_cli.profiles import Profile


def load(memory: Memory, profile: Profile | None) -> tuple[Matrix, list[dict[str, Any]]]:
    tasks = memory.tasks(source="live", oldest_first=True)
    cells: dict[str, dict[str, Cell]] = {}
    kept: list[Task] = []
    arms: list[str] = []
    for t in tasks:
        row = _first_cells(t["attempts"])
        arms += [arm for arm in row if arm not in arms]
        if row:
            cells[t["id"]] = row
            kind = t["kind"] or "?"
            kept.append(Task(t["id"], kind, tuple(t["groups"]), {"prompt": t["prompt"]}, kind=kind,
                             prompt=t["prompt"] or "", project=t["project"], kind_sure=_kind_sure(kind, t["context"])))
    prices = {arm: _price(profile, arm) for arm in arms}
    missing = sum(len(arms) - len(cells[t.ref]) for t in kept)
    return Matrix("memory", kept, arms, cells, prices, None, missing), [t for t in tasks if t["id"] in cells]


def _first_cells(attempts: list[dict[str, Any]]) -> dict[str, Cell]:
    """A task's cells: each arm's first attempt with a verdict about the arm, in the order they were made."""
    row: dict[str, Cell] = {}
    for a in attempts:
        arm = f"{a['agent']}:{a['model']}"
        if a["verdict"] not in JUDGED or arm in row:
            continue
        score = a["score"] if a["score"] is not None else float(a["verdict"] == "passed")
        row[arm] = Cell(score, a["cost_usd"] or 0.0, a["tokens_in"], a["tokens_out"],
                        None if a["apply_ok"] is None else bool(a["apply_ok"]))
    return row


def _price(profile: Profile | None, arm: str) -> tuple[float, float]:
    """The arm's (input, output) price from the profile; (0, 0) where it has none."""
    p = profile.arm(arm) if profile else None
    return (p.price_in or 0.0, p.price_out or 0.0) if p and p.price_in is not None else (0.0, 0.0)


def actual(matrix: Matrix, tasks: list[dict[str, Any]], cost_weight: float) -> dict[str, Any]:
    """The regret of the routing you actually did, against the best arm observed on each task."""
    regret = total = cost_sum = 0.0
    racc = steps = 0
    curve = []
    for t in tasks:
        att = t["attempts"]
        score = max((a["score"] if a["score"] is not None else float(a["verdict"] == "passed") for a in att),
                    default=0.0)
        cost = sum(a["cost_usd"] or 0.0 for a in att)
        best, best_arm = matrix.oracle(t["id"], cost_weight)
        regret += best - (score - cost_weight * cost)
        curve.append(regret)
        total += score
        cost_sum += cost
        steps += len(att)
        racc += bool(att) and f"{att[-1]['agent']}:{att[-1]['model']}" == best_arm
    n = len(tasks)
    avg = 100 * total / n if n else 0.0
    return {"policy": "actual", "n": n, "avg_perf": avg, "cum_regret": regret, "cost_usd": cost_sum,
            "perf_per_dollar": avg / cost_sum if cost_sum else None, "racc": racc / n if n else None,
            "apply_ok": None, "avg_steps": steps / n if n else None, "escalations": None, "curve": curve}


def _kind_sure(kind: str, context: str | None) -> float:
    """How sure the recorded kind was when the task ran (records older than the figure: from its reasons)."""
    recorded = shapes.load("context", context) or {}
    sure = recorded.get("kind_sure")
    if isinstance(sure, (int, float)) and 0 <= sure <= 1:
        return float(sure)
    reasons = recorded.get("reasons") or []
    return kind_sure(kind, given=any("given with --kind" in str(r) for r in reasons))
