"""One JSON shape for an attempt, in ``acr run --json``, ``acr show --json`` and ``acr memory log --json``.

:func:`attempt_json` makes it from the attempt's outcome (:class:`acr_cli.domain.Feedback`); a stored attempt
(a row of memory's ``attempts`` table) becomes an outcome first (:func:`stored_attempt_json`), so both commands
print the same keys with the same meaning. What memory does not keep (``side_effects``, ``problem``,
``health``, ``held_until``, ``kept_before``, ``check_changed``, ``tests_added``, ``api_cost_usd``,
``counted``) is null for a stored attempt; ``started_at`` is null in ``acr run --json`` (memory sets it
when it records the attempt). The keys are listed in docs/command-guide.md.
"""

from __future__ import annotations

from typing import Any

from acr_cli.domain import Arm, Feedback
from acr_cli.redact import redact

# the keys of an attempt that memory does not keep: null for a stored attempt
NOT_STORED = ("side_effects", "problem", "health", "held_until", "kept_before", "check_changed", "tests_added",
              "api_cost_usd", "counted")


def attempt_json(fb: Feedback, *, seq: int, reason: str | None, counted: bool | None = None,
                 policy: str | None = None, verifier: str | None = None,
                 started_at: str | None = None) -> dict[str, Any]:
    """An attempt as scripts read it. ``reason``: why its arm was chosen (``detail``: how it ended);
    ``counted``: against max_attempts (False: it never reached a model)."""
    from acr_cli.session import diff_command

    return {
        "seq": seq, "agent": fb.arm.agent, "model": fb.arm.model, "policy": policy, "started_at": started_at,
        "verdict": fb.verdict, "score": fb.score, "exit_code": fb.exit_code, "apply_ok": fb.apply_ok,
        "tokens_in": fb.tokens_in, "tokens_out": fb.tokens_out,
        "cost_usd": fb.cost_usd, "cost_source": fb.cost_source, "api_cost_usd": fb.api_cost_usd, "counted": counted,
        "duration_s": round(fb.duration_s, 3) if isinstance(fb.duration_s, (int, float)) else None,
        "reason": redact(reason), "detail": redact(fb.reason),
        "text": redact(fb.final_text) if fb.final_text else None, "session_id": fb.session_id,
        "verifier": redact(verifier),
        "verifier_tail": redact(fb.verifier_tail) if fb.verifier_tail else None,
        "verifier_unchanged": fb.verifier_unchanged,
        "log": fb.log_path, "log_path": fb.log_path,
        "side_effects": fb.side_effects, "kept_before": fb.kept_before,
        "check_changed": [{"path": path, "why": why} for path, why in fb.check_changed],
        "tests_added": fb.tests_added,
        "problem": fb.problem.kind if fb.problem else None, "health": fb.health,
        "held_until": getattr(fb.problem, "until", None),
        "attempt_ref": fb.attempt_ref, "base_tree": fb.base_tree,
        "diff_command": diff_command(fb.base_tree, fb.attempt_ref),
        "changes": [list(c) for c in fb.diffstat],
    }


def stored_outcome(row: dict[str, Any]) -> Feedback:
    """A row of memory's ``attempts`` table as an outcome (what memory keeps of it; ``changes`` decoded)."""
    from acr_cli.memory.shapes import load

    return Feedback(
        arm=Arm(row["agent"], row["model"]), verdict=row["verdict"], score=row.get("score"),
        tokens_in=row.get("tokens_in"), tokens_out=row.get("tokens_out"), cost_usd=row.get("cost_usd"),
        cost_source=row.get("cost_source"), duration_s=row.get("duration_s"), exit_code=row.get("exit_code"),
        apply_ok=_flag(row.get("apply_ok")), reason=row.get("detail") or "", session_id=row.get("session_id"),
        final_text=row.get("text"), verifier_tail=row.get("verifier_tail"), log_path=row.get("log_path"),
        attempt_ref=row.get("attempt_ref"), base_tree=row.get("base_tree"),
        verifier_unchanged=_flag(row.get("verifier_unchanged")),
        diffstat=load("changes", row.get("changes")) or [],  # (anything else than acr wrote: not kept)
    )


def stored_attempt_json(row: dict[str, Any]) -> dict[str, Any]:
    """A stored attempt in the shape of :func:`attempt_json`; what memory does not keep is null."""
    item = attempt_json(stored_outcome(row), seq=row["seq"], reason=row.get("reason"), policy=row.get("policy"),
                        verifier=row.get("verifier"), started_at=row.get("started_at"))
    item["detail"] = row.get("detail")  # as kept: null stays null
    return {**item, **dict.fromkeys(NOT_STORED)}


def _flag(value: Any) -> bool | None:
    """A 0/1 column as a bool (NULL: unknown)."""
    return None if value is None else bool(value)
