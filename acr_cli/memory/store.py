"""The memory: tasks, attempts and benchmark runs in one SQLite file.

Everything acr knows is derived from the ``attempts`` rows with SQL
aggregates; nothing learned is stored twice. Writers use short transactions
(WAL + busy timeout), so several ``acr run`` processes can record at once.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from acr_cli.domain import VERDICTS, Decision, Feedback
from acr_cli.errors import MemoryFileError
from acr_cli.memory import db as dbmod, similar
from acr_cli.redact import redact

# Verdicts that say something about the arm's ability (errors and cancels do not).
JUDGED = ("passed", "failed", "timeout")
_JUDGED_SQL = "('passed','failed','timeout')"
# An attempt's cost as a price: an error's $0 (it never reached the model) is no evidence of cheapness.
PRICED_COST = "CASE WHEN a.verdict <> 'error' OR a.cost_usd > 0 THEN a.cost_usd END"

TASK_FIELDS = ("id", "created_at", "source", "project", "prompt", "prompt_sha256", "kind", "language", "size",
               "ref", "policy", "passed", "score", "cost_usd", "final_arm", "oracle_reward", "oracle_arm",
               "finished_at", "context", "baseline")
ATTEMPT_FIELDS = ("seq", "agent", "model", "policy", "reason", "started_at", "duration_s", "exit_code",
                  "tokens_in", "tokens_out", "cost_usd", "cost_source", "verdict", "score", "apply_ok", "detail",
                  "verifier", "verifier_tail", "session_id", "log_path", "text", "attempt_ref", "base_tree",
                  "verifier_unchanged", "changes")
TEXT_MAX = 100_000  # characters of an agent's answer kept in memory (the whole answer is in the attempt's log)
RUN_FIELDS = ("id", "benchmark", "policy", "params", "started_at", "finished_at", "n_tasks", "report")


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t if t is not None else time.time()))


def new_id(prefix: str = "") -> str:
    """The one id format of tasks, replay runs and replay groups: ``[PREFIX-]20261124-101500-a1b2c3`` (UTC
    time, then 3 random bytes: ids sort by time and do not collide between processes)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    return f"{prefix}-{stamp}" if prefix else stamp


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
    duration_sum: float = 0.0
    last_used: str | None = None

    def add(self, other: "ArmStats") -> None:
        self.n += other.n
        self.n_judged += other.n_judged
        self.n_unverified += other.n_unverified
        self.score_sum += other.score_sum
        self.n_passed += other.n_passed
        self.cost_sum += other.cost_sum
        self.n_cost += other.n_cost
        self.duration_sum += other.duration_sum
        if other.last_used and (self.last_used is None or other.last_used > self.last_used):
            self.last_used = other.last_used

    @property
    def mean_cost(self) -> float | None:
        return self.cost_sum / self.n_cost if self.n_cost else None

    @property
    def mean_duration(self) -> float | None:
        return self.duration_sum / self.n if self.n else None


_STATS_COLUMNS = f"""
    COUNT(*) AS n,
    SUM(a.verdict IN {_JUDGED_SQL}) AS n_judged,
    SUM(a.verdict = 'unverified') AS n_unverified,
    SUM(CASE WHEN a.verdict IN {_JUDGED_SQL} THEN COALESCE(a.score, a.verdict = 'passed') ELSE 0 END) AS score_sum,
    SUM(a.verdict = 'passed') AS n_passed,
    TOTAL({PRICED_COST}) AS cost_sum,
    COUNT({PRICED_COST}) AS n_cost,
    TOTAL(a.duration_s) AS duration_sum,
    MAX(a.started_at) AS last_used
"""


def _stats_from_row(r: sqlite3.Row) -> ArmStats:
    return ArmStats(r["n"], r["n_judged"] or 0, r["n_unverified"] or 0, r["score_sum"] or 0.0, r["n_passed"] or 0, r["cost_sum"] or 0.0,
                    r["n_cost"] or 0, r["duration_sum"] or 0.0, r["last_used"])


class Memory:
    def __init__(self, conn: sqlite3.Connection, path: Path | str):
        self.db = conn
        self.path = path
        self._in_batch = False

    @classmethod
    def open(cls, path: Path | str, create: bool = True, read_only: bool = False) -> "Memory":
        return cls(dbmod.connect(path, create=create, read_only=read_only), path)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writing

    def _write(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, params)
        except sqlite3.OperationalError as e:
            raise dbmod._explain(e, self.path) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes (a benchmark replay writes thousands of rows); nests as a no-op."""
        if self._in_batch:
            yield
            return
        self._write("BEGIN IMMEDIATE")
        self._in_batch = True
        try:
            yield
        except BaseException:
            self._in_batch = False
            self.db.execute("ROLLBACK")
            raise
        self._in_batch = False
        self._write("COMMIT")

    def begin_task(self, *, source: str, kind: str | None, groups: Sequence[str], prompt: str | None = None,
                   project: str | None = None, language: str | None = None, size: str | None = None,
                   ref: str | None = None, policy: str | None = None, task_id: str | None = None,
                   oracle_reward: float | None = None, oracle_arm: str | None = None,
                   created_at: str | None = None) -> str:
        task_id = task_id or new_id()
        clean = redact(prompt)
        sha = hashlib.sha256(prompt.encode()).hexdigest() if prompt is not None else None
        with self.transaction():
            self._write(
                "INSERT INTO tasks (id, created_at, source, project, prompt, prompt_sha256, kind, language, size,"
                " ref, policy, oracle_reward, oracle_arm) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (task_id, created_at or now_iso(), source, project, clean, sha, kind, language, size, ref, policy,
                 oracle_reward, oracle_arm),
            )
            similar.count(self.db, [(source, clean)])
            if groups:
                try:
                    self.db.executemany("INSERT INTO task_groups (task_id, level, key, source) VALUES (?,?,?,?)",
                                        [(task_id, level, key, source) for level, key in enumerate(groups)])
                except sqlite3.OperationalError as e:
                    raise dbmod._explain(e, self.path) from None
        return task_id

    def add_attempt(self, task_id: str, seq: int, decision: Decision, fb: Feedback, *, policy: str | None = None,
                    verifier: str | None = None, started_at: str | None = None) -> None:
        self._write(
            "INSERT INTO attempts (task_id, seq, agent, model, policy, reason, started_at, duration_s, exit_code,"
            " tokens_in, tokens_out, cost_usd, cost_source, verdict, score, apply_ok, detail, verifier,"
            " verifier_tail, session_id, log_path, text, attempt_ref, base_tree, verifier_unchanged, changes)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (task_id, seq, fb.arm.agent, fb.arm.model, policy, redact(decision.reason),
             started_at or now_iso(time.time() - fb.duration_s), fb.duration_s, fb.exit_code, fb.tokens_in,
             fb.tokens_out, fb.cost_usd, fb.cost_source, fb.verdict, fb.score,
             None if fb.apply_ok is None else int(fb.apply_ok), redact(fb.reason), redact(verifier),
             redact(fb.verifier_tail), fb.session_id, fb.log_path, _answer(fb.final_text), fb.attempt_ref,
             fb.base_tree, None if fb.verifier_unchanged is None else int(fb.verifier_unchanged),
             json.dumps(fb.diffstat) if fb.diffstat else None),
        )

    def describe_task(self, task_id: str, *, context: dict[str, Any] | None = None,
                      baseline: dict[str, Any] | None = None) -> None:
        """Keep how the request was read and what the verifier said on the untouched tree (``acr show``)."""
        self._write("UPDATE tasks SET context=?, baseline=? WHERE id=?",
                    (None if context is None else redact(json.dumps(context)),
                     None if baseline is None else redact(json.dumps(baseline)), task_id))

    def finish_task(self, task_id: str, *, passed: bool | None, score: float | None, cost_usd: float,
                    final_arm: str | None) -> None:
        """``passed=None``: accepted with no verifier (unverified), so nobody knows."""
        self._write("UPDATE tasks SET passed=?, score=?, cost_usd=?, final_arm=?, finished_at=? WHERE id=?",
                    (None if passed is None else int(passed), score, cost_usd, final_arm, now_iso(), task_id))

    def close_interrupted(self, task_ids: Iterable[str]) -> int:
        """Finish tasks whose ``acr run`` was killed (they would show "running" forever): not passed,
        with the cost of the attempts that were recorded. Returns how many were still open."""
        n = 0
        for tid in task_ids:
            n += self._write(
                "UPDATE tasks SET passed=0, finished_at=?, cost_usd=(SELECT COALESCE(SUM(cost_usd), 0) FROM"
                " attempts WHERE task_id=?) WHERE id=? AND finished_at IS NULL", (now_iso(), tid, tid)).rowcount
        return n

    # ------------------------------------------------------------------ reading

    def kind_table(self, source: str = "live", kind: str | None = None) -> list[dict[str, Any]]:
        """Per task kind x arm: the figures ``acr memory show`` prints."""
        sql = (f"SELECT t.kind AS kind, a.agent AS agent, a.model AS model, {_STATS_COLUMNS}"
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

    def task_outcomes(self, source: str) -> list[dict[str, Any]]:
        """One row per task of ``source`` with its attempts folded: what every report is computed from."""
        sql = """
            SELECT t.id, t.ref, t.kind, t.oracle_reward, t.oracle_arm, t.created_at,
                   COUNT(a.id) AS steps,
                   MAX(COALESCE(a.score, a.verdict = 'passed')) AS score,
                   TOTAL(a.cost_usd) AS cost_usd,
                   MAX(a.verdict = 'passed') AS passed,
                   MAX(COALESCE(a.apply_ok, 0)) AS apply_ok,
                   TOTAL(a.tokens_in) AS tokens_in, TOTAL(a.tokens_out) AS tokens_out,
                   (SELECT a2.agent || ':' || a2.model FROM attempts a2 WHERE a2.task_id = t.id
                     ORDER BY a2.seq DESC LIMIT 1) AS final_arm,
                   (SELECT a3.agent || ':' || a3.model FROM attempts a3 WHERE a3.task_id = t.id
                     ORDER BY a3.seq LIMIT 1) AS first_arm
            FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id
            WHERE t.source = ? GROUP BY t.id ORDER BY t.rowid
        """
        return [dict(r) for r in self.db.execute(sql, (source,))]

    def attempts_of(self, source: str) -> list[dict[str, Any]]:
        sql = ("SELECT a.task_id, t.ref, a.seq, a.agent, a.model, a.verdict, a.score, a.cost_usd, a.apply_ok"
               " FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.source = ? ORDER BY t.rowid, a.seq")
        return [dict(r) for r in self.db.execute(sql, (source,))]

    def tasks(self, *, source: str | None = "live", since: str | None = None, kind: str | None = None,
              agent: str | None = None, limit: int | None = None, ids: Sequence[str] | None = None,
              oldest_first: bool = False, project: str | None = None,
              id_prefix: str | None = None) -> list[dict[str, Any]]:
        """Tasks newest first (or in insertion order), each with its attempts (``acr memory log``)."""
        where, params = [], []
        if project is not None:
            where.append("t.project = ?")
            params.append(project)
        if id_prefix is not None:  # ids are [0-9a-f-]: no LIKE wildcard in one
            where.append("t.id LIKE ? || '%'")
            params.append(id_prefix.replace("%", "").replace("_", ""))
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
        sql = "SELECT * FROM tasks t" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY t.rowid" if oldest_first else " ORDER BY t.created_at DESC, t.rowid DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
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
        return [_redact_task(t) for t in tasks]  # rows an older acr wrote unredacted are shown clean too

    def counts(self) -> dict[str, int]:
        one = lambda sql: self.db.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "tasks": one("SELECT COUNT(*) FROM tasks WHERE source = 'live'"),
            "attempts": one("SELECT COUNT(*) FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.source = 'live'"),
            "bench_runs": one("SELECT COUNT(*) FROM runs"),
            "bench_tasks": one("SELECT COUNT(*) FROM tasks WHERE source != 'live'"),
        }

    # ------------------------------------------------------------------ runs (benchmark replays)

    def add_run(self, run_id: str, benchmark: str, policy: str, params: dict[str, Any]) -> None:
        self._write("INSERT INTO runs (id, benchmark, policy, params, started_at) VALUES (?,?,?,?,?)",
                    (run_id, benchmark, policy, json.dumps(params, sort_keys=True), now_iso()))

    def finish_run(self, run_id: str, n_tasks: int, report: dict[str, Any] | None = None) -> None:
        self._write("UPDATE runs SET finished_at=?, n_tasks=?, report=? WHERE id=?",
                    (now_iso(), n_tasks, json.dumps(report) if report is not None else None, run_id))

    def runs(self, benchmark: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM runs" + (" WHERE benchmark = ?" if benchmark else "") + " ORDER BY started_at, rowid"
        return [_decode_run(dict(r)) for r in self.db.execute(sql, (benchmark,) if benchmark else ())]

    def run(self, run_id: str) -> dict[str, Any] | None:
        r = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _decode_run(dict(r)) if r else None

    # ------------------------------------------------------------------ forget / export / import

    def forget(self, task_ids: Iterable[str]) -> int:
        ids = list(task_ids)
        if not ids:
            return 0
        with self.transaction():
            n = 0
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                similar.count(self.db, self.db.execute(
                    f"SELECT source, prompt FROM tasks WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall(),
                    sign=-1)
                n += self._write(f"DELETE FROM tasks WHERE id IN ({','.join('?' * len(chunk))})", chunk).rowcount
        return n

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

    def forget_all(self) -> tuple[int, int]:
        """Forget everything; returns (tasks, replay runs) forgotten."""
        with self.transaction():
            n = self._write("DELETE FROM tasks").rowcount
            self._write("DELETE FROM prompt_terms")
            runs = self._write("DELETE FROM runs").rowcount
        self.db.execute("VACUUM")
        return n, runs

    def forget_source_prefix(self, prefix: str) -> tuple[int, int]:
        """Forget the tasks whose source starts with ``prefix`` (and, for ``bench:``, every stored replay run);
        returns (tasks, replay runs) forgotten."""
        runs = 0
        with self.transaction():
            n = self._write("DELETE FROM tasks WHERE source LIKE ? || '%'", (prefix,)).rowcount
            self._write("DELETE FROM prompt_terms WHERE source LIKE ? || '%'", (prefix,))
            if prefix.startswith("bench:"):
                runs = self._write("DELETE FROM runs").rowcount
        return n, runs

    def export(self, out: IO[str]) -> int:
        n = 0
        for r in self.db.execute("SELECT * FROM runs ORDER BY rowid"):
            out.write(json.dumps({"type": "run", **{k: r[k] for k in RUN_FIELDS}}, sort_keys=True) + "\n")
            n += 1
        ids = [r[0] for r in self.db.execute("SELECT id FROM tasks ORDER BY rowid")]
        for i in range(0, len(ids), 500):
            for t in self.tasks(source=None, ids=ids[i:i + 500], oldest_first=True):
                out.write(json.dumps({"type": "task", **_redact_task(t)}, sort_keys=True) + "\n")
                n += 1
        return n

    def import_(self, lines: Iterable[str]) -> tuple[int, int]:
        """Import an export; tasks and runs already present are skipped. Returns (added, skipped)."""
        added = skipped = 0
        with self.transaction():
            for lineno, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):  # RecursionError: nested deeper than any record is
                    obj = None
                problem = _record_problem(obj)
                if problem:
                    raise MemoryFileError(f"line {lineno}: {problem}",
                                          hint="nothing was imported; give a file written by `acr memory export`")
                kind = obj.pop("type")
                if kind == "task":
                    _redact_task(obj)
                if kind == "task" and not obj.get("source"):
                    obj["source"] = "live"
                if kind == "run":
                    cur = self._write(f"INSERT OR IGNORE INTO runs ({','.join(RUN_FIELDS)}) VALUES "
                                      f"({','.join('?' * len(RUN_FIELDS))})", [obj.get(k) for k in RUN_FIELDS])
                elif kind == "task":
                    attempts = obj.pop("attempts", [])
                    groups = obj.pop("groups", [])
                    cur = self._write(f"INSERT OR IGNORE INTO tasks ({','.join(TASK_FIELDS)}) VALUES "
                                      f"({','.join('?' * len(TASK_FIELDS))})", [obj.get(k) for k in TASK_FIELDS])
                    if cur.rowcount:
                        similar.count(self.db, [(obj.get("source") or "live", obj.get("prompt"))])
                        for level, key in enumerate(groups):
                            self._write("INSERT INTO task_groups (task_id, level, key, source) VALUES (?,?,?,?)",
                                        (obj["id"], level, key, obj.get("source") or "live"))
                        for a in attempts:
                            self._write(f"INSERT INTO attempts (task_id, {','.join(ATTEMPT_FIELDS)}) VALUES "
                                        f"(?, {','.join('?' * len(ATTEMPT_FIELDS))})",
                                        [obj["id"], *[a.get(k) for k in ATTEMPT_FIELDS]])
                if cur.rowcount:
                    added += 1
                else:
                    skipped += 1
        return added, skipped

    def size_bytes(self) -> int:
        if str(self.path) == ":memory:":
            return 0
        p = Path(self.path)
        return sum(q.stat().st_size for q in (p, Path(f"{p}-wal")) if q.exists())


def _answer(text: str | None) -> str | None:
    """An agent's answer as memory keeps it: redacted, and cut at TEXT_MAX characters (said so)."""
    if not text:
        return None
    clean = redact(text)
    if len(clean) > TEXT_MAX:
        clean = clean[:TEXT_MAX] + f"\n[... {len(clean) - TEXT_MAX} more characters in the attempt's log]"
    return clean


# The free text of a task that may carry a secret: redacted when written, and again on export and import,
# so rows written by an older acr (older rules) leave clean.
TASK_TEXT = ("prompt", "context", "baseline")
ATTEMPT_TEXT = ("reason", "detail", "verifier", "verifier_tail", "text")


def _redact_task(task: dict[str, Any]) -> dict[str, Any]:
    for k in TASK_TEXT:
        if isinstance(task.get(k), str):
            task[k] = redact(task[k])
    for a in task.get("attempts") or ():
        for k in ATTEMPT_TEXT:
            if isinstance(a.get(k), str):
                a[k] = redact(a[k])
    return task


REQUIRED = {"run": ("id", "benchmark", "policy", "started_at"), "task": ("id", "created_at"),
            "attempt": ("seq", "agent", "model", "started_at", "verdict")}


def _record_problem(obj: Any) -> str | None:
    """Why ``obj`` is not an export record, or None. (A record missing a required field would
    otherwise be dropped by INSERT OR IGNORE and counted as already present.)"""
    if not isinstance(obj, dict) or "type" not in obj:
        return "not an acr memory export record (a JSON object with a \"type\")"
    kind = obj["type"]
    if kind not in ("run", "task"):
        return f"unknown record type {kind!r}"
    missing = [k for k in REQUIRED[kind] if obj.get(k) is None]
    if missing:
        return f"{kind} record without {', '.join(missing)}"
    attempts, groups = obj.get("attempts", []), obj.get("groups", [])
    if not isinstance(attempts, list) or not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        return f"task {obj['id']}: attempts and groups must be lists"
    wrong = _wrong_field(obj, kind)
    if wrong:
        return f"{kind} {obj['id']!r}: {wrong}"
    seqs = set()
    for a in attempts:
        if not isinstance(a, dict):
            return f"task {obj['id']}: an attempt is not a JSON object"
        missing = [k for k in REQUIRED["attempt"] if a.get(k) is None]
        if missing:
            return f"task {obj['id']}: attempt without {', '.join(missing)}"
        wrong = _wrong_field(a, "attempt")
        if wrong:
            return f"task {obj['id']}, attempt {a['seq']!r}: {wrong}"
        if a["seq"] in seqs:
            return f"task {obj['id']}: two attempts numbered {a['seq']}"
        seqs.add(a["seq"])
    return None


def _number(v: Any, low: float = -math.inf, high: float = math.inf) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high


def _whole(v: Any, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


# What each field of an export record may hold (None is always allowed but for REQUIRED fields):
# anything else would be stored as it is and break the commands that read it later.
_TEXT = (lambda v: isinstance(v, str), "a string")
_NAME = (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")
_SCORE = (lambda v: _number(v, 0.0, 1.0), "a number from 0 to 1")
_MONEY = (lambda v: _number(v, 0.0), "a number >= 0")
_COUNT = (lambda v: _whole(v, 0), "a whole number >= 0")
_FLAG = (lambda v: v in (True, False, 0, 1) and not isinstance(v, float), "true, false, 0 or 1")
FIELD_TYPES: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "run": {"id": _NAME, "benchmark": _NAME, "policy": _TEXT, "params": _TEXT, "started_at": _TEXT,
            "finished_at": _TEXT, "n_tasks": _COUNT, "report": _TEXT},
    "task": {"id": _NAME, "created_at": _TEXT, "source": _TEXT, "project": _TEXT, "prompt": _TEXT,
             "prompt_sha256": _TEXT, "kind": _TEXT, "language": _TEXT, "size": _TEXT, "ref": _TEXT,
             "policy": _TEXT, "passed": _FLAG, "score": _SCORE, "cost_usd": _MONEY, "final_arm": _TEXT,
             "oracle_reward": (_number, "a number"), "oracle_arm": _TEXT, "finished_at": _TEXT,
             "context": _TEXT, "baseline": _TEXT},
    "attempt": {"seq": (lambda v: _whole(v, 1), "a whole number >= 1"), "agent": _NAME, "model": _NAME,
                "policy": _TEXT, "reason": _TEXT, "started_at": _TEXT, "duration_s": _MONEY,
                "exit_code": (lambda v: _whole(v, -2**31), "a whole number"), "tokens_in": _COUNT,
                "tokens_out": _COUNT, "cost_usd": _MONEY, "cost_source": _TEXT,
                "verdict": (lambda v: v in VERDICTS, " or ".join(VERDICTS)), "score": _SCORE, "apply_ok": _FLAG,
                "detail": _TEXT, "verifier": _TEXT, "verifier_tail": _TEXT, "session_id": _TEXT, "log_path": _TEXT,
                "text": _TEXT, "attempt_ref": _TEXT, "base_tree": _TEXT, "verifier_unchanged": _FLAG,
                "changes": _TEXT},
}


def _wrong_field(record: dict[str, Any], kind: str) -> str | None:
    for name, (ok, what) in FIELD_TYPES[kind].items():
        value = record.get(name)
        if value is not None and not ok(value):
            return f"{name} is {json.dumps(value)[:40]}, should be {what}"
    return None


def _decode_run(r: dict[str, Any]) -> dict[str, Any]:
    for k in ("params", "report"):
        if r.get(k):
            r[k] = json.loads(r[k])
    return r
