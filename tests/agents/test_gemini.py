"""Gemini CLI, the agent added through the registry: ``acr doctor`` and ``acr run`` with its fake
(``tests/fakes/gemini``, speaking gemini's stream-json events and its stderr API errors)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import GOOD, VERIFY, acr, calls

PROFILE = """\
arms:
  - agent: gemini
    model: gemini-2.5-pro
  - agent: codex
    model: gpt-5.4
    price: {input: 2.5, output: 15}
order:
  default: [gemini:gemini-2.5-pro, codex:gpt-5.4]
"""


@pytest.fixture
def profile(tmp_path) -> Path:
    path = tmp_path / "gemini.yaml"
    path.write_text(PROFILE)
    return path


@pytest.fixture
def no_gemini_login(tmp_path, monkeypatch):
    """A HOME without ~/.gemini and no Google key or Vertex variable: gemini has no credentials."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    return home


def gemini_arm(out: dict) -> dict:
    return next(a for a in out["profile"]["arms"] if a["agent"] == "gemini")


def test_doctor_finds_gemini_and_reads_its_credentials(project, fakes_on_path, profile, no_gemini_login):
    out = json.loads(acr("doctor", "--json", "--profile", str(profile), cwd=project).stdout)
    assert out["agents"]["gemini"]["found"] and out["agents"]["gemini"]["version"] == "0.19.4"
    arm = gemini_arm(out)
    assert arm["state"] == "not_ready" and "GEMINI_API_KEY" in arm["fix"]
    # a key in the environment, or a Google sign-in cached by the CLI, makes it ready (no status command exists)
    keyed = json.loads(acr("doctor", "--json", "--profile", str(profile), cwd=project,
                           env={"GEMINI_API_KEY": "k"}).stdout)
    assert gemini_arm(keyed)["state"] == "ready" and "GEMINI_API_KEY" in gemini_arm(keyed)["reason"]
    (no_gemini_login / ".gemini").mkdir()
    (no_gemini_login / ".gemini" / "oauth_creds.json").write_text("{}")
    signed_in = json.loads(acr("doctor", "--json", "--profile", str(profile), cwd=project).stdout)
    assert gemini_arm(signed_in)["state"] == "ready" and "signed in with Google" in gemini_arm(signed_in)["reason"]


def test_run_with_a_gemini_arm_passes_and_records_its_tokens(project, fakes_on_path, scenario, profile, acr_home,
                                                              monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    log = scenario({"match": {"agent": "gemini", "model": "gemini-2.5-pro"}, "write": {"calc.py": GOOD},
                    "tokens": [5200, 240], "text": "Fixed add() to return a + b."})
    request = "-- fix the add function; don't use \"eval\" or $(shell)"
    r = acr("run", "--verify", VERIFY, "--profile", str(profile), "--policy", "fixed", "--json", "--", request,
            cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["passed"] is True
    [attempt] = out["attempts"]
    assert (attempt["agent"], attempt["model"], attempt["verdict"]) == ("gemini", "gemini-2.5-pro", "passed")
    assert (attempt["tokens_in"], attempt["tokens_out"]) == (5200, 240)
    assert (project / "calc.py").read_text() == GOOD
    [call] = calls(log)
    assert call["prompt"].startswith(request + "\n")  # verbatim, as one argument: no shell on the way
    assert "--output-format" in call["argv"] and "--approval-mode" in call["argv"]
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT agent, verdict, tokens_in FROM attempts").fetchall() == [("gemini", "passed", 5200)]


def test_a_gemini_api_key_error_sets_the_arm_aside_and_the_next_arm_runs(project, fakes_on_path, scenario, profile,
                                                                         monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "bad")
    scenario({"match": {"agent": "gemini"}, "error": "401"},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--profile", str(profile), "--policy", "fixed", "--json",
            cwd=project)
    assert r.returncode == 0, r.stderr
    first, second = json.loads(r.stdout)["attempts"]
    assert (first["agent"], first["verdict"]) == ("gemini", "error")
    assert "API key not valid" in first["detail"] and first["problem"] == "setup"
    assert (second["agent"], second["verdict"]) == ("codex", "passed")
    # gemini words a bad key as a 400: acr still reads it as a set-up problem and sets the arm aside
    doctor = json.loads(acr("doctor", "--json", "--profile", str(profile), cwd=project).stdout)
    assert gemini_arm(doctor)["health"]["state"] == "set_aside"


def test_a_gemini_rate_limit_is_transient_and_the_next_arm_runs(project, fakes_on_path, scenario, profile,
                                                               monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    scenario({"match": {"agent": "gemini"}, "error": "rate_limit"},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--profile", str(profile), "--policy", "fixed", "--json",
            cwd=project)
    first = json.loads(r.stdout)["attempts"][0]
    assert first["verdict"] == "error" and "RESOURCE_EXHAUSTED" in first["detail"]
    assert first["problem"] == "transient"  # cools down for a while, not set aside for a login
    assert (project / "calc.py").read_text() == GOOD


def test_gemini_stream_json_is_read_as_the_cli_prints_it():
    """Events shaped as gemini-cli's stream-json types: the answer is the text after the last tool call (sent in
    deltas), tokens come from the result's stats; a failed result or an API error on stderr is the error."""
    from acr_cli.agents.gemini import GeminiAdapter

    ev = [{"type": "init", "session_id": "s-1", "model": "gemini-2.5-pro"},
          {"type": "message", "role": "user", "content": "fix add"},
          {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
          {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": {"command": "ls"}},
          {"type": "tool_result", "tool_id": "t1", "status": "success", "output": "calc.py"},
          {"type": "message", "role": "assistant", "content": "Fixed ", "delta": True},
          {"type": "message", "role": "assistant", "content": "add().", "delta": True},
          {"type": "result", "status": "success", "stats": {"total_tokens": 1300, "input_tokens": 1200,
                                                            "output_tokens": 100, "cached": 300, "input": 900,
                                                            "duration_ms": 900, "tool_calls": 1}}]
    out = "\n".join(json.dumps(e) for e in ev)
    res = GeminiAdapter().parse(out, "", 0)
    assert (res.text, res.session_id, res.tokens_in, res.tokens_out, res.error) == ("Fixed add().", "s-1", 1200, 100,
                                                                                    None)
    assert GeminiAdapter().describe(json.dumps(ev[3])) == "run_shell_command: ls"
    failed = dict(ev[-1], status="error", error={"type": "INVALID_STREAM", "message": "empty response"})
    assert GeminiAdapter().parse(json.dumps(failed), "", 1).error == "empty response"
    api = "[API Error: Internal error encountered. (Status: INTERNAL)]"
    assert GeminiAdapter().parse(json.dumps(ev[0]), f"Error when talking to Gemini API\n{api}\n", 1).error == api
    as_json = json.dumps({"error": {"type": "Error", "message": "quota", "code": 1}}, indent=2)
    assert GeminiAdapter().parse("", as_json, 1).error == "quota"
