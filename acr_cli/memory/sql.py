"""The SQL that more than one memory module writes: column lists and the fragments that say what an
attempt counts as (judged, its score, its price, its weight as evidence). One home, so the commands,
the reports and routing cannot drift apart."""

from __future__ import annotations

from acr_cli.domain import JUDGED

TASK_FIELDS = ("id", "created_at", "source", "project", "prompt", "prompt_sha256", "kind", "language", "size",
               "ref", "policy", "passed", "score", "cost_usd", "final_arm", "oracle_reward", "oracle_arm",
               "finished_at", "context", "baseline")
ATTEMPT_FIELDS = ("seq", "agent", "model", "policy", "reason", "started_at", "duration_s", "exit_code",
                  "tokens_in", "tokens_out", "cost_usd", "cost_source", "verdict", "score", "apply_ok", "detail",
                  "verifier", "verifier_tail", "session_id", "log_path", "text", "attempt_ref", "base_tree",
                  "verifier_unchanged", "changes")
RUN_FIELDS = ("id", "benchmark", "policy", "params", "started_at", "finished_at", "n_tasks", "report")

# Verdicts that say something about the arm's ability (acr_cli.domain.JUDGED), as an SQL list.
JUDGED_SQL = "(" + ",".join(f"'{v}'" for v in JUDGED) + ")"
# The SQL here and in the other memory modules is the SQL SQLite and PostgreSQL both speak: a
# condition is counted with count_if (PostgreSQL does not add up booleans) and a sum that must be
# 0 over no rows is total() (SQLite's TOTAL). What the two say differently is in .dialect.


def count_if(condition: str) -> str:
    return f"SUM(CASE WHEN {condition} THEN 1 ELSE 0 END)"


def total(expr: str) -> str:
    return f"COALESCE(SUM({expr}), 0.0)"


def flag(condition: str) -> str:
    """1 where ``condition`` holds, else 0 (a boolean as a number, on both databases)."""
    return f"(CASE WHEN {condition} THEN 1 ELSE 0 END)"


# An attempt's score: its own (partial credit), else 1 for a pass and 0 otherwise.
SCORE = "COALESCE(a.score, CASE WHEN a.verdict = 'passed' THEN 1.0 ELSE 0.0 END)"
# A cancelled attempt (Ctrl-C, or a race's loser stopped when another arm passed) spent part of what its run
# would have cost and took part of its time: no evidence of the arm's price or speed, as of its skill.
WHOLE = "a.verdict <> 'cancelled'"
# An attempt's cost as a price: an error's $0 (it never reached the model) is no evidence of cheapness.
PRICED_COST = f"CASE WHEN {WHOLE} AND (a.verdict <> 'error' OR a.cost_usd > 0) THEN a.cost_usd END"
POS_COST = f"(a.cost_usd > 0 AND {WHOLE})"  # a positive price, from a whole run

# How much a task accepted with no verifier tells about an arm's skill, as a share of a verified
# pass: four such tasks count as one verified pass. An agent that finishes without an error says
# it is done on nearly every task, good work or not, so its word separates arms only weakly (it
# does separate them from arms whose agent gives up or reports failure, which are judged fully).
# Counting it fully would let the first arm tried win every later no-verifier task by its own
# claims; counting it as nothing would leave a user who never verifies with the profile's priors
# forever. A quarter lets a verified failure outweigh three claims. No benchmark task is
# unverified, so replays do not depend on this setting.
UNVERIFIED_WEIGHT = 0.25
# verdicts that enter the success estimates, and each one's weight and pass flag
EVIDENCE_SQL = JUDGED_SQL[:-1] + ",'unverified')"
WEIGHT = f"(CASE WHEN a.verdict = 'unverified' THEN {UNVERIFIED_WEIGHT} ELSE 1.0 END)"
WEIGHTED_SCORE = f"(CASE WHEN a.verdict = 'unverified' THEN {UNVERIFIED_WEIGHT} ELSE {SCORE} END)"

# Per arm, what `acr memory show` prints (columns of a GROUP BY over attempts ``a``).
STATS_COLUMNS = f"""
    COUNT(*) AS n,
    {count_if(f"a.verdict IN {JUDGED_SQL}")} AS n_judged,
    {count_if("a.verdict = 'unverified'")} AS n_unverified,
    SUM(CASE WHEN a.verdict IN {JUDGED_SQL} THEN {SCORE} ELSE 0 END) AS score_sum,
    {count_if("a.verdict = 'passed'")} AS n_passed,
    {total(PRICED_COST)} AS cost_sum,
    COUNT({PRICED_COST}) AS n_cost,
    {total(f"CASE WHEN {WHOLE} THEN a.duration_s END")} AS duration_sum,
    {count_if(WHOLE)} AS n_whole,
    MAX(a.started_at) AS last_used
"""
