"""The --json shapes scripts read: a field renamed or dropped breaks someone's script, so each shape is
spelled out here and a change to it must change this file (and docs/command-guide.md) too."""

from __future__ import annotations

import json

from conftest import GOOD, VERIFY, acr

RUN = {"task_id", "passed", "verdict", "cost_usd", "stop_reason", "budget", "answer", "changes", "baseline", "context",
       "attempts", "skipped", "shared_memory", "attempts_counted", "attempts_free", "attempts_free_max",
       "race"}  # race: null unless --race ran arms side by side
RUN_ATTEMPT = {"agent", "model", "verdict", "score", "tokens_in", "tokens_out", "cost_usd", "cost_source",
               "duration_s", "reason", "detail", "log", "side_effects", "problem", "health", "text", "verifier_tail",
               "verifier_unchanged", "attempt_ref", "diff_command", "kept_before", "check_changed", "tests_added",
               "api_cost_usd", "counted", "held_until",
               "seq", "policy", "started_at", "exit_code", "apply_ok", "verifier", "session_id", "log_path", "base_tree",
               "changes"}
BASELINE = {"command", "passed", "exit_code", "score", "timed_out", "duration_s", "tail"}
CONTEXT = {"kind", "language", "size", "project", "groups", "reasons", "kind_sure"}
SHOW = {"id", "created_at", "finished_at", "state", "passed", "cost_usd", "project", "prompt", "policy", "context",
        "baseline", "answer", "changes", "attempts"}
MEMORY_ATTEMPT = {"seq", "agent", "model", "policy", "reason", "started_at", "duration_s", "exit_code", "tokens_in",
                  "tokens_out", "cost_usd", "cost_source", "verdict", "score", "apply_ok", "detail", "verifier",
                  "verifier_tail", "session_id", "log_path", "text", "attempt_ref", "base_tree", "verifier_unchanged",
                  "changes"}
ROUTE = {"context", "profile", "policy", "order", "cannot_run", "excluded", "similar", "moved_by_similar"}
ROUTE_ARM = {"agent", "model", "mean", "interval90", "expected_cost", "expected_reward", "attempts", "why"}
MEMORY_SHOW_ROW = {"kind", "agent", "model", "attempts", "judged", "passed", "unverified", "pass_rate", "mean_cost_usd",
                   "mean_duration_s", "last_used", "posterior_mean", "interval90", "expected_cost_usd",
                   "expected_reward", "order", "health"}
DOCTOR = {"acr", "agents", "memory", "paths", "problems", "profile", "race_lanes", "sandbox"}
DOCTOR_AGENT = {"executable", "found", "path", "version"}
DOCTOR_ARM = {"agent", "arm", "fix", "health", "installed", "model", "price_note", "priced", "reason", "scope", "state",
              "usable", "version"}


def test_the_json_that_scripts_read_keeps_its_shape(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "opencode"}, "error": "500"}, {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    run = json.loads(acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4",
                         "--json", cwd=project).stdout)
    assert set(run) == RUN and set(run["baseline"]) == BASELINE and set(run["context"]) == CONTEXT
    assert all(set(a) == RUN_ATTEMPT for a in run["attempts"]) and len(run["attempts"]) == 2
    assert set(run["changes"][0]) == {"path", "added", "deleted"}

    show = json.loads(acr("show", "--json", cwd=project).stdout)
    assert set(show) == SHOW and set(show["baseline"]) == BASELINE
    # one shape for an attempt: `acr show --json` gives the attempts `acr run --json` gave, as memory kept them
    assert all(set(a) == RUN_ATTEMPT for a in show["attempts"]) and MEMORY_ATTEMPT < RUN_ATTEMPT
    kept = MEMORY_ATTEMPT - {"started_at"}
    assert [{k: a[k] for k in kept} for a in show["attempts"]] == [{k: a[k] for k in kept} for a in run["attempts"]]
    logged = json.loads(acr("memory", "log", "--json").stdout)["tasks"][0]
    assert set(logged) == {"id", "created_at", "kind", "language", "project", "prompt", "passed", "cost_usd",
                           "state", "attempts"}
    assert logged["attempts"] == show["attempts"]  # the same attempt, in the same shape

    route = json.loads(acr("route", "fix add", "--json", cwd=project).stdout)
    assert set(route) == ROUTE and set(route["context"]) == CONTEXT
    assert route["order"] and all(set(a) == ROUTE_ARM for a in route["order"])
    shown = json.loads(acr("memory", "show", "--json").stdout)
    assert set(shown) == {"kinds", "profile"} and all(set(r) == MEMORY_SHOW_ROW for r in shown["kinds"])
    doctor = json.loads(acr("doctor", "--json", cwd=project).stdout)
    assert set(doctor) == DOCTOR and set(doctor["agents"]) == {"claude", "codex", "gemini", "opencode"}
    assert all(set(a) == DOCTOR_AGENT for a in doctor["agents"].values())
    assert all(set(a) == DOCTOR_ARM for a in doctor["profile"]["arms"])
    assert set(doctor["profile"]["readiness"]) == {"held", "not_ready", "ready", "total", "unknown"}
