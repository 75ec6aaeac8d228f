"""What acr's live runs cost: totals per day, week, month, arm, agent, project or kind (``acr spend``).

Read from the attempts of live tasks (benchmark replays are not money spent). A period is the local
calendar day, ISO week (``2026-W48``) or month of when the task started, in this machine's time zone.
Per arm or agent, a task "passed" means an attempt of that arm passed it (each task counts once per
arm); per period, project or kind, a task passed when its run did. An attempt whose cost is unknown
(the agent reported none and no price was known) adds nothing to the money and is counted in
``unknown_cost``, so a total that misses some is said to. An attempt of an arm on a plan (``billing: plan``,
recorded at $0) adds what its tokens would have cost at the catalog's API prices to ``plan_saved_usd`` (an
estimate: not the profile's prices, which a memory does not keep; a model the catalog lacks adds nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

BY = ("day", "week", "month", "arm", "agent", "project", "kind")


@dataclass
class Line:
    key: str
    tasks: set[str] = field(default_factory=set)
    passed: set[str] = field(default_factory=set)
    attempts: int = 0
    cost_usd: float = 0.0
    unknown_cost: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    plan_attempts: int = 0
    plan_saved_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        cost = round(self.cost_usd, 6)
        return {"key": self.key, "tasks": len(self.tasks), "passed": len(self.passed), "attempts": self.attempts,
                "cost_usd": cost, "unknown_cost": self.unknown_cost, "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out,
                "passed_per_usd": round(len(self.passed) / cost, 3) if cost > 0 else None,
                "plan_attempts": self.plan_attempts, "plan_saved_usd": round(self.plan_saved_usd, 6)}


def _local(stamp: str) -> datetime:
    return datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).astimezone()


def _key(by: str, row: Any) -> str:
    if by in ("day", "week", "month"):
        when = _local(row["created_at"])
        if by == "day":
            return when.strftime("%Y-%m-%d")
        if by == "month":
            return when.strftime("%Y-%m")
        year, week, _ = when.isocalendar()
        return f"{year}-W{week:02d}"
    if by == "arm":
        return f"{row['agent']}:{row['model']}"
    return str(row[by] or "-")


def rows(memory: Any, since: str | None) -> list[Any]:
    """Every attempt of a live task started at or after ``since`` (an ISO time, UTC), with its task's fields."""
    where, params = "t.source = 'live'", []
    if since:
        where += " AND t.created_at >= ?"
        params.append(since)
    return memory.db.execute(
        "SELECT t.id AS task_id, t.created_at, t.project, t.kind, t.passed AS task_passed, a.agent, a.model, "
        "a.verdict, a.cost_usd, a.cost_source, a.tokens_in, a.tokens_out FROM attempts a JOIN tasks t ON t.id = a.task_id "
        f"WHERE {where} ORDER BY t.created_at, a.seq", params).fetchall()


def totals(records: Iterable[Any], by: str) -> tuple[list[Line], Line]:
    """The lines (ordered: periods oldest first, the rest most expensive first) and the grand total."""
    lines: dict[str, Line] = {}
    total = Line("total")
    per_arm = by in ("arm", "agent")
    for r in records:
        line = lines.setdefault(_key(by, r), Line(_key(by, r)))
        for target in (line, total):
            target.tasks.add(r["task_id"])
            target.attempts += 1
            if r["cost_usd"] is None:
                target.unknown_cost += 1
            else:
                target.cost_usd += float(r["cost_usd"])
            target.tokens_in += int(r["tokens_in"] or 0)
            target.tokens_out += int(r["tokens_out"] or 0)
            if r["cost_source"] == "plan":
                target.plan_attempts += 1
                target.plan_saved_usd += _api_price(r)
        if (r["verdict"] == "passed") if per_arm else r["task_passed"] == 1:
            line.passed.add(r["task_id"])
        if r["task_passed"] == 1:
            total.passed.add(r["task_id"])
    ordered = sorted(lines.values(), key=(lambda x: x.key) if by in ("day", "week", "month")
                     else (lambda x: (-x.cost_usd, x.key)))
    return ordered, total


def _api_price(r: Any) -> float:
    """What an attempt on a plan would have cost at the catalog's API prices ($0 when the catalog cannot say)."""
    from acr_cli.pricing import catalog_price

    return catalog_price(r["agent"], r["model"], r["tokens_in"], r["tokens_out"]) or 0.0
