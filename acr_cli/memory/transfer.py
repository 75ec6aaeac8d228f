"""``acr memory export`` / ``import``: every task and replay run as JSON lines, and the checks an import
makes before it writes anything (a record that is not what an export writes is refused by line)."""

from __future__ import annotations

import json
import math
from typing import IO, Any, Callable, Iterable

from acr_cli.domain import VERDICTS
from acr_cli.errors import MemoryFileError
from acr_cli.memory import shapes, similar
from acr_cli.memory.dialect import INT_MAX
from acr_cli.memory.reads import Reads, redact_task
from acr_cli.memory.sql import ATTEMPT_FIELDS, RUN_FIELDS, TASK_FIELDS


class Transfer(Reads):
    def export(self, out: IO[str]) -> int:
        n = 0
        for r in self.db.execute(f"SELECT {', '.join(RUN_FIELDS)} FROM runs ORDER BY rowid"):
            out.write(json.dumps({"type": "run", **{k: r[k] for k in RUN_FIELDS}}, sort_keys=True) + "\n")
            n += 1
        ids = [r[0] for r in self.db.execute("SELECT id FROM tasks ORDER BY rowid")]
        for i in range(0, len(ids), 500):
            for t in self.tasks(source=None, ids=ids[i:i + 500], oldest_first=True):
                out.write(json.dumps({"type": "task", **redact_task(t)}, sort_keys=True) + "\n")
                n += 1
        return n

    def copy_into(self, other: "Transfer", batch: int = 200) -> None:
        """Every task of this memory, then every replay run, into ``other``: a replay computed in a throw-away
        memory and kept in a team's shared one. ``batch`` tasks per transaction, so the writers who take turns
        on the server never wait long; the runs come last, so a stored replay is never seen without its tasks."""
        ids = [r[0] for r in self.db.execute("SELECT id FROM tasks ORDER BY rowid")]
        for i in range(0, len(ids), batch):
            other.add_tasks(self.tasks(source=None, ids=ids[i:i + batch], oldest_first=True))
        runs = [{k: r[k] for k in RUN_FIELDS}
                for r in self.db.execute(f"SELECT {', '.join(RUN_FIELDS)} FROM runs ORDER BY rowid")]
        with other.transaction():
            for run in runs:
                other._add("run", run)

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
                try:
                    fresh = self._add(obj.pop("type"), obj)
                except UnicodeEncodeError:  # a lone surrogate escape ("\ud800"): JSON allows it, UTF-8 does not
                    raise MemoryFileError(f"line {lineno}: text that is not valid Unicode (a lone surrogate "
                                          "such as \\ud800)",
                                          hint="nothing was imported; give a file written by `acr memory export`"
                                          ) from None
                if fresh:
                    added += 1
                else:
                    skipped += 1
        return added, skipped

    def add_tasks(self, tasks: Iterable[dict[str, Any]]) -> tuple[int, int]:
        """Add tasks as :meth:`tasks` reads them (with their attempts and groups) from another memory, in one
        transaction; a task already here is skipped whole. Returns (added, skipped). How a team's shared
        memory and a local one exchange tasks (acr_cli.memory.team)."""
        added = skipped = 0
        with self.transaction():
            for t in tasks:
                if self._add("task", dict(t)):
                    added += 1
                else:
                    skipped += 1
        return added, skipped

    def _add(self, kind: str, obj: dict[str, Any]) -> bool:
        """Insert one run or task record (with its attempts and groups); False if it was already here."""
        if kind == "task":
            redact_task(obj)
            if not obj.get("source"):
                obj["source"] = "live"
        if kind == "run":
            cur = self._write(f"INSERT INTO runs ({','.join(RUN_FIELDS)}) VALUES "
                              f"({','.join('?' * len(RUN_FIELDS))}) ON CONFLICT DO NOTHING",
                              [obj.get(k) for k in RUN_FIELDS])
            return bool(cur.rowcount)
        attempts = obj.pop("attempts", None) or []
        groups = obj.pop("groups", None) or []
        cur = self._write(f"INSERT INTO tasks ({','.join(TASK_FIELDS)}) VALUES "
                          f"({','.join('?' * len(TASK_FIELDS))}) ON CONFLICT DO NOTHING",
                          [obj.get(k) for k in TASK_FIELDS])
        if not cur.rowcount:
            return False
        similar.count(self.db, [(obj["source"], obj.get("prompt"))])
        if groups:
            self._write_many("INSERT INTO task_groups (task_id, level, key, source) VALUES (?,?,?,?)",
                             [(obj["id"], level, key, obj["source"]) for level, key in enumerate(groups)])
        if attempts:
            self._write_many(f"INSERT INTO attempts (task_id, {','.join(ATTEMPT_FIELDS)}) VALUES "
                             f"(?, {','.join('?' * len(ATTEMPT_FIELDS))})",
                             [[obj["id"], *[a.get(k) for k in ATTEMPT_FIELDS]] for a in attempts])
        return True


REQUIRED = {"run": ("id", "benchmark", "policy", "started_at"), "task": ("id", "created_at"),
            "attempt": ("seq", "agent", "model", "started_at", "verdict")}


def _record_problem(obj: Any) -> str | None:
    """Why ``obj`` is not an export record, or None. (A record missing a required field would
    otherwise be dropped by ON CONFLICT DO NOTHING and counted as already present.)"""
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
    if isinstance(v, int) and not -2**63 <= v <= 2**63 - 1:  # more than SQL stores (as a float it loses digits)
        return False
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high


def _whole(v: Any, low: int) -> bool:
    """A whole number from ``low`` up to what an INTEGER column holds on both databases (dialect.INT_MAX)."""
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= INT_MAX


# What each field of an export record may hold (None is always allowed but for REQUIRED fields):
# anything else would be stored as it is and break the commands that read it later.
_TEXT = (lambda v: isinstance(v, str), "a string")
_NAME = (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")
_SCORE = (lambda v: _number(v, 0.0, 1.0), "a number from 0 to 1")
_MONEY = (lambda v: _number(v, 0.0), "a number >= 0")
_COUNT = (lambda v: _whole(v, 0), "a whole number >= 0")
_FLAG = (lambda v: v in (True, False, 0, 1) and not isinstance(v, float), "true, false, 0 or 1")


FIELD_TYPES: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "run": {"id": _NAME, "benchmark": _NAME, "policy": _TEXT, "started_at": _TEXT,
            "finished_at": _TEXT, "n_tasks": _COUNT},
    "task": {"id": _NAME, "created_at": _TEXT, "source": _TEXT, "project": _TEXT, "prompt": _TEXT,
             "prompt_sha256": _TEXT, "kind": _TEXT, "language": _TEXT, "size": _TEXT, "ref": _TEXT,
             "policy": _TEXT, "passed": _FLAG, "score": _SCORE, "cost_usd": _MONEY, "final_arm": _TEXT,
             "oracle_reward": (_number, "a number"), "oracle_arm": _TEXT, "finished_at": _TEXT},
    "attempt": {"seq": (lambda v: _whole(v, 1), "a whole number >= 1"), "agent": _NAME, "model": _NAME,
                "policy": _TEXT, "reason": _TEXT, "started_at": _TEXT, "duration_s": _MONEY,
                "exit_code": (lambda v: _whole(v, -2**31), "a whole number"), "tokens_in": _COUNT,
                "tokens_out": _COUNT, "cost_usd": _MONEY, "cost_source": _TEXT,
                "verdict": (lambda v: v in VERDICTS, " or ".join(VERDICTS)), "score": _SCORE, "apply_ok": _FLAG,
                "detail": _TEXT, "verifier": _TEXT, "verifier_tail": _TEXT, "session_id": _TEXT, "log_path": _TEXT,
                "text": _TEXT, "attempt_ref": _TEXT, "base_tree": _TEXT, "verifier_unchanged": _FLAG},
}


# Fields that hold JSON (as a string), checked against the shapes acr writes (acr_cli.memory.shapes)
JSON_FIELDS = {"run": ("params", "report"), "task": ("context", "baseline"), "attempt": ("changes",)}


def _wrong_field(record: dict[str, Any], kind: str) -> str | None:
    for name, (ok, what) in FIELD_TYPES[kind].items():
        value = record.get(name)
        if value is not None and not ok(value):
            return f"{name} is {json.dumps(value)[:40]}, should be {what}"
    for name in JSON_FIELDS[kind]:
        why = shapes.problem(name, record.get(name))
        if why == "is not JSON" and kind == "task":
            continue  # an older acr redacted these as text and could cut them: imported as not kept (redact_task)
        if why:
            return why if why.startswith(name) else f"{name} {why}"
    return None
