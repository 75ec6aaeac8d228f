"""Reading memory for the commands and reports: tables per kind and arm, tasks with their attempts,
each task's result folded from its attempts, replay runs. (What routing reads is in
:mod:`acr_cli.memory.aggregates`.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from acr_cli.memory import shapes
from acr_cli.memory.base import Base
from acr_cli.memory.sql import ATTEMPT_FIELDS, RUN_FIELDS, SCORE, STATS_COLUMNS, TASK_FIELDS, flag, total
from acr_cli.redact import redact, redact_values


@dataclass
class ArmStats:
    """Aggregates of one arm's attempts within one context group."""

    n: int = 0  # attempts
    n_judged: int = 0  # attempts whose verdict says something about the arm (passed/failed/timeout)
    n_unverified: int = 0  # accepted with no verifier: weak evidence, shown apart
    score_sum: float = 0.0  # sum of scores over judged attempts (pass = 1)
    n_passed: int = 0
    cost_sum: float = 0.0
    n_cost: int = 0  # attempts with a known cost
    duration_sum: float = 0.0  # over whole runs (not cancelled)
    last_used: str | None = None
    n_whole: int = 0  # attempts not cancelled: what a mean duration is over

    def add(self, other: "ArmStats") -> None:
        self.n += other.n
        self.n_judged += other.n_judged
        self.n_unverified += other.n_unverified
        self.score_sum += other.score_sum
        self.n_passed += other.n_passed
        self.cost_sum += other.cost_sum
        self.n_cost += other.n_cost
        self.duration_sum += other.duration_sum
        self.n_whole += other.n_whole
        if other.last_used and (self.last_used is None or other.last_used > self.last_used):
            self.last_used = other.last_used

    @property
    def mean_cost(self) -> float | None:
        return self.cost_sum / self.n_cost if self.n_cost else None

    @property
    def mean_duration(self) -> float | None:
        return self.duration_sum / self.n_whole if self.n_whole else None


def _stats_from_row(r: Any) -> ArmStats:
    return ArmStats(r["n"], r["n_judged"] or 0, r["n_unverified"] or 0, r["score_sum"] or 0.0, r["n_passed"] or 0,
                    r["cost_sum"] or 0.0,
                    r["n_cost"] or 0, r["duration_sum"] or 0.0, r["last_used"], r["n_whole"] or 0)


class Reads(Base):
    def kind_table(self, source: str = "live", kind: str | None = None) -> list[dict[str, Any]]:
        """Per task kind x arm: the figures ``acr memory show`` prints."""
        sql = (f"SELECT t.kind AS kind, a.agent AS agent, a.model AS model, {STATS_COLUMNS}"
               " FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.source = ?")
        params: list[Any] = [source]
        if kind:
            sql += " AND t.kind = ?"
            params.append(kind)
        sql += " GROUP BY t.kind, a.agent, a.model ORDER BY t.kind, n DESC"
        out = []
        for r in self.db.execute(sql, params):
            s = _stats_from_row(r)
            out.append({"kind": r["kind"], "agent": r["agent"], "model": r["model"], "stats": s})
        return out

    def task_results(self, source: str) -> list[dict[str, Any]]:
        """One row per task of ``source`` with its attempts folded: what every report is computed from."""
        sql = f"""
            SELECT t.id, t.ref, t.kind, t.oracle_reward, t.oracle_arm, t.created_at,
                   COUNT(a.id) AS steps,
                   MAX({SCORE}) AS score,
                   {total("a.cost_usd")} AS cost_usd,
                   MAX({flag("a.verdict = 'passed'")}) AS passed,
                   MAX(COALESCE(a.apply_ok, 0)) AS apply_ok,
                   {total("a.tokens_in")} AS tokens_in, {total("a.tokens_out")} AS tokens_out,
                   (SELECT a2.agent || ':' || a2.model FROM attempts a2 WHERE a2.task_id = t.id
                     ORDER BY a2.seq DESC LIMIT 1) AS final_arm,
                   (SELECT a3.agent || ':' || a3.model FROM attempts a3 WHERE a3.task_id = t.id
                     ORDER BY a3.seq LIMIT 1) AS first_arm
            FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
            WHERE t.source = ? GROUP BY t.id ORDER BY t.rowid
        """
        return [dict(r) for r in self.db.execute(sql, (source,))]

    def attempts_of(self, source: str) -> list[dict[str, Any]]:
        sql = ("SELECT a.task_id, t.ref, a.seq, a.agent, a.model, a.verdict, a.score, a.cost_usd, a.apply_ok, a.duration_s"
               " FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.source = ? ORDER BY t.rowid, a.seq")
        return [dict(r) for r in self.db.execute(sql, (source,))]

    def tasks(self, *, source: str | None = "live", since: str | None = None, kind: str | None = None,
              agent: str | None = None, limit: int | None = None, ids: Sequence[str] | None = None,
              oldest_first: bool = False, project: str | None = None,
              id_prefix: str | None = None, mark_unreadable: bool = False) -> list[dict[str, Any]]:
        """Tasks newest first (or in insertion order), each with its attempts (``acr memory log``).
        ``mark_unreadable``: see :func:`redact_task` (`acr show`)."""
        where, params = [], []
        if project is not None:
            where.append("t.project = ?")
            params.append(project)
        if id_prefix is not None:  # compared as text: an imported id may hold LIKE's % and _
            where.append("substr(t.id, 1, CAST(? AS INTEGER)) = ?")
            params += [len(id_prefix), id_prefix]
        if source is not None:
            where.append("t.source = ?")
            params.append(source)
        if since:
            where.append("t.created_at >= ?")
            params.append(since)
        if kind:
            where.append("t.kind = ?")
            params.append(kind)
        if agent:
            where.append("EXISTS (SELECT 1 FROM attempts x WHERE x.task_id = t.id AND x.agent = ?)")
            params.append(agent)
        if ids:
            where.append(f"t.id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        sql = f"SELECT {', '.join('t.' + f for f in TASK_FIELDS)} FROM tasks t" + (
            " WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY t.rowid" if oldest_first else " ORDER BY t.created_at DESC, t.rowid DESC"
        if limit:
            sql += f" LIMIT {min(int(limit), 2**62)}"  # (a larger LIMIT overflows the database)
        tasks = [dict(r) for r in self.db.execute(sql, params)]
        if tasks:
            by_id = {t["id"]: t for t in tasks}
            for t in tasks:
                t["attempts"] = []
                t["groups"] = []
            marks = ",".join("?" * len(by_id))
            for r in self.db.execute(f"SELECT * FROM attempts WHERE task_id IN ({marks}) ORDER BY task_id, seq",
                                     list(by_id)):
                d = dict(r)
                by_id[d.pop("task_id")]["attempts"].append({k: d[k] for k in ATTEMPT_FIELDS})
            for r in self.db.execute(f"SELECT * FROM task_groups WHERE task_id IN ({marks}) ORDER BY task_id, level",
                                     list(by_id)):
                by_id[r["task_id"]]["groups"].append(r["key"])
        # rows an older acr wrote unredacted are shown clean too
        return [redact_task(t, mark=mark_unreadable) for t in tasks]

    def counts(self) -> dict[str, int]:
        one = lambda sql: self.db.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "tasks": one("SELECT COUNT(*) FROM tasks WHERE source = 'live'"),
            "attempts": one("SELECT COUNT(*) FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.source = 'live'"),
            "bench_runs": one("SELECT COUNT(*) FROM runs"),
            "bench_tasks": one("SELECT COUNT(*) FROM tasks WHERE source != 'live'"),
        }

    def runs(self, benchmark: str | None = None) -> list[dict[str, Any]]:
        sql = (f"SELECT {RUN_COLUMNS} FROM runs" + (" WHERE benchmark = ?" if benchmark else "")
               + " ORDER BY started_at, rowid")
        return [_decode_run(dict(r)) for r in self.db.execute(sql, (benchmark,) if benchmark else ())]

    def run(self, run_id: str) -> dict[str, Any] | None:
        r = self.db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _decode_run(dict(r)) if r else None

    def live_task_ids(self, among: Iterable[str] | None = None) -> list[str]:
        """Ids of live tasks in memory (all, or those of ``among`` that exist)."""
        if among is None:
            return [r[0] for r in self.db.execute("SELECT id FROM tasks WHERE source = 'live'")]
        ids = list(among)
        found: list[str] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            found += [r[0] for r in self.db.execute(
                f"SELECT id FROM tasks WHERE source = 'live' AND id IN ({','.join('?' * len(chunk))})", chunk)]
        return found

    def size_bytes(self) -> int:
        if self.shared:
            return int(self.db.execute("SELECT pg_database_size(current_database())").fetchone()[0])
        if str(self.path) == ":memory:":
            return 0
        p = Path(self.path)
        return sum(q.stat().st_size for q in (p, Path(f"{p}-wal")) if q.exists())


RUN_COLUMNS = ", ".join(RUN_FIELDS)
# The free text of a task that may carry a secret: redacted when written, and again on export and import,
# so rows written by an older acr (older rules) leave clean.
TASK_TEXT = ("prompt",)
TASK_JSON = ("context", "baseline")  # redacted value by value: as text, a cut could leave JSON nobody can read
ATTEMPT_TEXT = ("reason", "detail", "verifier", "verifier_tail", "text")


def redact_task(task: dict[str, Any], mark: bool = False) -> dict[str, Any]:
    """``task`` with its free text redacted. ``mark``: a JSON column that cannot be read, dropped as not kept,
    is named in ``task["unreadable"]`` (for `acr show`, which says "not kept" rather than "not run")."""
    for k in TASK_TEXT:
        if isinstance(task.get(k), str):
            task[k] = redact(task[k])
    for k in TASK_JSON:
        if isinstance(task.get(k), str):
            try:
                task[k] = json.dumps(redact_values(json.loads(task[k])))
            except (ValueError, RecursionError):  # unreadable (an older acr redacted it as text): not kept
                task[k] = None
                if mark:
                    task.setdefault("unreadable", []).append(k)
    for a in task.get("attempts") or ():
        for k in ATTEMPT_TEXT:
            if isinstance(a.get(k), str):
                a[k] = redact(a[k])
    return task


def _decode_run(r: dict[str, Any]) -> dict[str, Any]:
    """A run row with its JSON fields read; one that is not a JSON object (written by something else than
    acr: import checks them) reads as empty, and the run is marked ``damaged``."""
    for k in ("params", "report"):
        if r.get(k):
            r[k] = shapes.load(k, r[k])
            if not isinstance(r[k], dict):
                r[k], r["damaged"] = {}, True
    return r
