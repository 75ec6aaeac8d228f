"""OpenAI Codex CLI (``codex``).

Non-interactive: ``codex exec --json -m M -C DIR -s SANDBOX -c
approval_policy="never" [--skip-git-repo-check] -- PROMPT`` (a prompt too long
for one argument goes to stdin instead). Output is JSONL
events: ``thread.started{thread_id}``, ``item.completed{item}``
(``agent_message``, ``command_execution``, ``error``), ``turn.completed{usage}``,
``turn.failed{error}``. Codex reports tokens but no cost: acr prices them from
the profile. A plan's usage limit ends the turn with "You've hit your usage limit ... try again at
<time>" (read by :mod:`acr_cli.health.limits`); an ``error`` object of type ``usage_limit_reached`` with
``resets_at`` / ``resets_in_seconds``, where a version prints one, gives the reset exactly.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from acr_cli.agents.base import (
    Adapter,
    AgentResult,
    Invocation,
    as_int,
    json_event,
    json_lines,
    limit_reset,
    prompt_fits_argv,
    short,
)
from acr_cli.domain import Arm

SANDBOX = {"read-only": "read-only", "workspace-write": "workspace-write", "full": "danger-full-access"}


def _in_git(workdir: Path) -> bool:
    return any((p / ".git").exists() for p in (workdir, *workdir.parents))


class CodexAdapter(Adapter):
    name = "codex"
    executable = "codex"

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "exec", "--json", "-m", arm.model, "-C", str(workdir),
                "-s", SANDBOX.get(permissions, "workspace-write"), "-c", 'approval_policy="never"']
        if not _in_git(workdir):
            argv.append("--skip-git-repo-check")
        argv += list(arm.args)
        if prompt_fits_argv(prompt):
            return Invocation(argv + ["--", prompt])
        return Invocation(argv, stdin=prompt)  # no prompt argument: codex exec reads it from stdin

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "-m", arm.model, "-C", str(workdir), "-s", SANDBOX.get(permissions, "workspace-write")]
        return Invocation(argv + list(arm.args) + (["--", prompt] if prompt else []))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        res = AgentResult()
        tin = tout = None
        failure = None  # turn.failed: the run gave up
        notice = None  # top-level "error" events: also retry notices ("Reconnecting... 1/5") of runs that recover
        for ev in json_lines(stdout):
            kind = ev.get("type")
            if kind == "thread.started":
                res.session_id = ev.get("thread_id") or res.session_id
            elif kind == "turn.completed":
                usage = ev.get("usage") or {}
                if as_int(usage.get("input_tokens")) is not None:
                    tin = (tin or 0) + as_int(usage.get("input_tokens"))
                if as_int(usage.get("output_tokens")) is not None:
                    tout = (tout or 0) + as_int(usage.get("output_tokens"))
            elif kind == "turn.failed":
                err = ev.get("error")
                res.limit_resets_at = _usage_limit(err, res.limit_resets_at)
                failure = (err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
                           ) or "turn failed"
            elif kind == "error":
                notice = ev.get("message") or notice
                res.limit_resets_at = _usage_limit(ev.get("error"), res.limit_resets_at)
            elif kind == "item.completed":
                item = ev.get("item") or {}
                if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                    res.text = item["text"]
        res.tokens_in, res.tokens_out = tin, tout
        if failure or exit_code:
            res.limit_resets_at = limit_reset(failure or notice, res.limit_resets_at)
            res.error = short(failure or notice or _stderr_reason(stderr) or f"codex exited with {exit_code}")
        return res

    def describe(self, line: str) -> str | None:
        ev = json_event(line)
        if ev is None:
            return None
        item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        if ev.get("type") == "item.completed":
            if item.get("type") == "command_execution":
                return f"$ {short(item.get('command'), 100)} -> {item.get('exit_code')}"
            if item.get("type") == "agent_message":
                return short(item.get("text"), 120)
            if item.get("type") == "file_change":
                return "edit: " + short(json.dumps(item.get("changes")), 100)
        if ev.get("type") == "turn.failed":
            return "turn failed: " + short((ev.get("error") or {}).get("message"))
        return None

    def session_usage(self, workdir: Path, since: float) -> tuple[int, int] | None:
        """Token totals from the newest ``$CODEX_HOME/sessions/Y/M/D/rollout-*.jsonl`` written after ``since``."""
        home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        files = [p for p in (home / "sessions").glob("*/*/*/rollout-*.jsonl") if p.stat().st_mtime >= since]
        if not files:
            return None
        return rollout_usage(max(files, key=lambda p: p.stat().st_mtime).read_text(errors="replace"))


def rollout_usage(text: str) -> tuple[int, int] | None:
    """The last ``token_count`` event's ``info.total_token_usage`` (input, output)."""
    best = None
    for ev in json_lines(text):
        payload = ev.get("payload") if isinstance(ev.get("payload"), dict) else {}
        info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
        total = info.get("total_token_usage")
        if isinstance(total, dict):
            best = (as_int(total.get("input_tokens")) or 0, as_int(total.get("output_tokens")) or 0)
    return best


def _usage_limit(err, before: float | None) -> float | None:
    """The reset (epoch seconds) of an error object of type ``usage_limit_reached``, else ``before``."""
    if not isinstance(err, dict) or err.get("type") != "usage_limit_reached":
        return before
    at = as_int(err.get("resets_at"))
    if at:
        return float(at)
    after = as_int(err.get("resets_in_seconds"))
    return time.time() + after if after is not None else 0.0


def _stderr_reason(stderr: str) -> str:
    noise = ("could not create PATH aliases", "Reading additional input from stdin")
    lines = [ln for ln in (stderr or "").splitlines() if ln.strip() and not any(n in ln for n in noise)]
    return lines[-1] if lines else ""
