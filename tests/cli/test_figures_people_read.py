"""The small things people read: money, verdicts, scores, a request's first line, the replay table's columns
and flags. Each through the real `acr` with the fake agents, as a user would see it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from conftest import GOOD, REPO, VERIFY, acr

CLAUDE = "claude:claude-sonnet-4-6"
ODD_COST = 0.009084000000000002  # what claude's stream-json reported: a sum of floats


def test_every_cost_shown_goes_through_one_formatter(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": GOOD}, "cost": ODD_COST})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", CLAUDE, cwd=project)
    assert r.returncode == 0, r.stderr
    assert "result: success cost $0.0091" in r.stdout + r.stderr  # the agent's own live line
    assert "$0.0091 in total" in r.stdout
    shown = [r.stdout + r.stderr]
    for command in (["show"], ["memory", "log"], ["spend"], ["route", "fix add", "--explain"]):
        out = acr(*command, cwd=project)
        assert out.returncode == 0, (command, out.stderr)
        shown.append(out.stdout)
    assert "$0.0091" in shown[1] and "$0.0091" in shown[2] and "$0.0091" in shown[3]
    for text in shown:
        assert "0.009084" not in text and "00000" not in text
    assert json.loads(acr("show", "--json", cwd=project).stdout)["attempts"][0]["cost_usd"] == ODD_COST  # JSON: as is


def test_a_cancelled_attempt_says_cancelled_once(project, fakes_on_path, scenario, tmp_path):
    scenario({"hang": True})
    pidfile = tmp_path / "agent.pids"
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms",
                             "codex:gpt-5.4"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env={**os.environ, "FAKE_AGENT_PIDFILE": str(pidfile)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not pidfile.exists():
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "■ cancelled with Ctrl-C" in out + err
    logged = acr("memory", "log").stdout
    assert "cancelled with Ctrl-C" in logged
    for text in (out, err, logged):
        assert "cancelled cancelled" not in " ".join(text.split())


def test_a_failed_check_never_shows_a_score_rounded_up_to_one(project, fakes_on_path, scenario, tmp_path):
    check = tmp_path / "check.py"
    check.write_text("print('=== 2 failed, 532 passed in 3.21s ===')\nraise SystemExit(1)\n")
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", f"{sys.executable} {check}", "--arms", "codex:gpt-5.4", "--json",
            cwd=project)
    attempt = json.loads(r.stdout)["attempts"][0]
    assert attempt["verdict"] == "failed"
    assert "score 0.996 (532 of 534 passed)" in attempt["detail"]
    shown = acr("show", cwd=project).stdout + acr("memory", "log").stdout
    assert "score 0.996 (532 of 534 passed)" in shown and "score 1.00" not in shown


def test_memory_log_shows_a_requests_first_meaningful_line(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "text": "```\n)\nFixed add: it multiplied.\n"})
    r = acr("run", ")\n```python\nfix the add function in calc.py\n```", "--verify", VERIFY, "--arms",
            "codex:gpt-5.4", cwd=project)
    assert r.returncode == 0, r.stderr
    lines = acr("memory", "log").stdout.splitlines()
    assert lines[1].strip() == "fix the add function in calc.py"
    assert any(line.strip() == "answer: Fixed add: it multiplied." for line in lines)


def test_replay_baselines_flag_and_the_legend_of_the_columns():
    tiny = str(REPO / "bench" / "examples" / "tiny")

    def policies(*args: str) -> list[str]:
        r = acr("bench", "replay", tiny, "--json", *args)
        assert r.returncode == 0, r.stderr
        return [row["policy"] for row in json.loads(r.stdout)["results"]]

    alone = policies("--policy", "learned")
    both = policies("--policy", "learned", "--baselines")
    assert alone == ["learned"] and len(both) > 3 and "oracle" in both
    assert set(policies()) == set(both)  # no --policy: the baselines
    assert policies("--policy", "learned", "--no-baselines") == ["learned"]
    r = acr("bench", "replay", tiny, "--no-baselines")
    assert r.returncode == 2 and "--no-baselines without --policy leaves nothing to replay" in r.stderr
    table = acr("bench", "replay", tiny, "--policy", "learned", env={"COLUMNS": "200"}).stdout
    assert "rAcc: routing accuracy" in table and "Esc.: tasks where the most expensive arm" in table
    helped = acr("bench", "replay", "--help", env={"COLUMNS": "200"}).stdout
    assert "--no-baselines" in helped and "rAcc: routing accuracy" in helped and "Apply%:" in helped
