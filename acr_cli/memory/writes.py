"""Writing memory: a task as it starts and ends, each attempt, replay runs, and forgetting.

Free text is redacted before it is written (:mod:`acr_cli.redact`); a task's request also enters
the index of similar requests (:mod:`acr_cli.memory.similar`) and leaves it when forgotten.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any, Iterable, Sequence

from acr_cli.domain import Decision, Feedback
from acr_cli.memory import similar
from acr_cli.memory.base import Base, new_id, now_iso
from acr_cli.memory.dialect import INT_MAX
from acr_cli.redact import redact, redact_values

TEXT_MAX = 100_000  # characters of an agent's answer kept in memory (the whole answer is in the attempt's log)


class Writes(Base):
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
                self._write_many("INSERT INTO task_groups (task_id, level, key, source) VALUES (?,?,?,?)",
                                 [(task_id, level, key, source) for level, key in enumerate(groups)])
        return task_id

    def add_attempt(self, task_id: str, seq: int, decision: Decision, fb: Feedback, *, policy: str | None = None,
                    verifier: str | None = None, started_at: str | None = None) -> bool:
        """Record an attempt; False (nothing written) when its task is no longer in memory: someone ran
        ``acr memory forget`` on it while it ran, and forgetting means its attempts are not kept either."""
        try:
            self._insert_attempt(task_id, seq, decision, fb, policy, verifier, started_at)
        except Exception:  # the foreign key refuses an attempt of a task that is gone; asked only then
            try:
                gone = self.db.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone() is None
            except Exception:  # (a connection that cannot even answer that: the first error says more)
                gone = False
            if gone:
                return False
            raise
        return True

    def _insert_attempt(self, task_id: str, seq: int, decision: Decision, fb: Feedback, policy: str | None,
                        verifier: str | None, started_at: str | None) -> None:
        self._write(
            "INSERT INTO attempts (task_id, seq, agent, model, policy, reason, started_at, duration_s, exit_code,"
            " tokens_in, tokens_out, cost_usd, cost_source, verdict, score, apply_ok, detail, verifier,"
            " verifier_tail, session_id, log_path, text, attempt_ref, base_tree, verifier_unchanged, changes)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (task_id, seq, fb.arm.agent, fb.arm.model, policy, redact(decision.reason),
             started_at or now_iso(time.time() - fb.duration_s), fb.duration_s, fb.exit_code, _count(fb.tokens_in),
             _count(fb.tokens_out), _amount(fb.cost_usd), fb.cost_source, fb.verdict, fb.score,
             None if fb.apply_ok is None else int(fb.apply_ok), redact(fb.reason), redact(verifier),
             redact(fb.verifier_tail), fb.session_id, fb.log_path, _answer(fb.final_text), fb.attempt_ref,
             fb.base_tree, None if fb.verifier_unchanged is None else int(fb.verifier_unchanged),
             json.dumps(fb.diffstat) if fb.diffstat else None),
        )

    def describe_task(self, task_id: str, *, context: dict[str, Any] | None = None,
                      baseline: dict[str, Any] | None = None) -> None:
        """Keep how the request was read and what the verifier said on the untouched tree (``acr show``)."""
        self._write("UPDATE tasks SET context=?, baseline=? WHERE id=?",
                    (None if context is None else json.dumps(redact_values(context)),
                     None if baseline is None else json.dumps(redact_values(baseline)), task_id))

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

    def add_run(self, run_id: str, benchmark: str, policy: str, params: dict[str, Any]) -> None:
        self._write("INSERT INTO runs (id, benchmark, policy, params, started_at) VALUES (?,?,?,?,?)",
                    (run_id, benchmark, policy, json.dumps(params, sort_keys=True), now_iso()))

    def finish_run(self, run_id: str, n_tasks: int, report: dict[str, Any] | None = None) -> None:
        self._write("UPDATE runs SET finished_at=?, n_tasks=?, report=? WHERE id=?",
                    (now_iso(), n_tasks, json.dumps(report) if report is not None else None, run_id))

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
        if n and not self.shared and self.dialect.has_text_index(self.db):
            # the text index keeps a deleted request's words in its segments until they are merged: merge now
            # (secure_delete then overwrites the freed pages), so a forgotten request is gone from the file
            with self.transaction():
                self._write("INSERT INTO task_text(task_text) VALUES ('optimize')")
        return n

    def forget_all(self) -> tuple[int, int]:
        """Forget everything; returns (tasks, replay runs) forgotten."""
        with self.transaction():
            n = self._write("DELETE FROM tasks").rowcount
            self._write("DELETE FROM prompt_terms")
            runs = self._write("DELETE FROM runs").rowcount
        if not self.shared:  # give the file's space back (a server reclaims its own)
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


def _answer(text: str | None) -> str | None:
    """An agent's answer as memory keeps it: redacted, and cut at TEXT_MAX characters (said so)."""
    if not text:
        return None
    clean = redact(text)
    if len(clean) > TEXT_MAX:
        clean = clean[:TEXT_MAX] + f"\n[... {len(clean) - TEXT_MAX} more characters in the attempt's log]"
    return clean


def _count(v: int | None) -> int | None:
    """A token count as memory keeps it: a whole number both databases store, else unknown (what import
    accepts). 2^31 - 1 tokens is 2,000 times the largest context window."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_MAX else None


def _amount(v: float | None) -> float | None:
    """A cost as memory keeps it: finite and not negative, else unknown (an export must import again)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 else None
