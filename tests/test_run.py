"""End to end: route -> run a fake agent subprocess -> verify -> roll back -> escalate -> record."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BAD, GOOD, VERIFY, acr, calls, git

TWO_ARMS = "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4"
NOTE = "\n\n---\nNote from acr: "  # what acr adds after the request (the check's command, an earlier failure)


def attempts_in_memory(home: Path) -> list[dict]:
    db = sqlite3.connect(home / "data" / "memory.sqlite")
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM attempts ORDER BY id")]


def dirty_user_work(project: Path) -> dict[str, bytes]:
    """The user's own uncommitted edit, untracked file and staged change, before acr runs."""
    (project / "calc.py").write_bytes(b"def add(a, b):\n    return a * b\n# user's note\r\n\x00\xff")
    (project / "NOTES.md").write_bytes("untracked notes, ünïcode\n".encode())
    (project / "staged.txt").write_text("staged\n")
    git(project, "add", "staged.txt")
    return {p: (project / p).read_bytes() for p in ("calc.py", "NOTES.md", "staged.txt")}


def test_escalates_after_failed_verifier_and_records_every_attempt(project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}, "tokens": [4200, 180], "cost": 0.002},
                   {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "tokens": [3800, 150]})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", TWO_ARMS, "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["passed"] is True
    assert [a["verdict"] for a in out["attempts"]] == ["failed", "passed"]
    first, second = out["attempts"]
    assert (first["agent"], first["model"]) == ("opencode", "moonshotai/kimi-k2.5")
    assert (first["tokens_in"], first["tokens_out"], first["cost_source"]) == (4200, 180, "reported")
    # codex reports no cost: priced from the profile (gpt-5.4: $2.5 in / $15 out per 1M)
    assert second["cost_source"] == "priced"
    assert second["cost_usd"] == pytest.approx((3800 * 2.5 + 150 * 15) / 1e6)
    assert out["cost_usd"] == pytest.approx(0.002 + second["cost_usd"], abs=1e-6)
    assert set(out["attempts"][0]) >= {"agent", "model", "verdict", "score", "tokens_in", "tokens_out", "cost_usd",
                                       "cost_source", "duration_s", "reason"}
    # The second agent saw why the first failed (multi-turn routing).
    prompts = [c["prompt"] for c in calls(log)]
    assert prompts[0].startswith("fix the add function\n") and f"running `{VERIFY}`" in prompts[0]  # told its check
    assert "did not succeed" in prompts[1] and "assert" in prompts[1]
    # The passing change is left for review; the memory has both attempts.
    assert (project / "calc.py").read_text() == GOOD
    rows = attempts_in_memory(acr_home)
    assert [(a["agent"], a["verdict"]) for a in rows] == [("opencode", "failed"), ("codex", "passed")]
    assert rows[0]["apply_ok"] == 1 and rows[0]["tokens_in"] == 4200


def test_a_check_that_prints_a_nul_byte_does_not_stop_the_next_agent(project, fakes_on_path, scenario, acr_home):
    """The next agent is told what the check printed; a NUL in it (binary output) cannot go in an argument."""
    check = ("python3 -c \"import sys; from calc import add; ok = add(2, 3) == 5; "
             "ok or sys.stdout.write('bad\\x00value\\n'); sys.exit(0 if ok else 1)\"")
    log = scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}},
                   {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix the add function", "--verify", check, "--arms", TWO_ARMS, "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert [a["verdict"] for a in json.loads(r.stdout)["attempts"]] == ["failed", "passed"]
    told = calls(log)[1]["prompt"]
    assert "bad\ufffdvalue" in told and "\0" not in told


def test_a_task_forgotten_while_it_runs_stays_forgotten_and_the_run_goes_on(project, fakes_on_path, scenario,
                                                                            acr_home):
    # the first agent (as a user in another shell could) forgets everything while its attempt runs
    forget = [sys.executable, "-m", "acr_cli", "memory", "forget", "--all", "--yes"]
    scenario({"match": {"agent": "opencode"}, "commands": [forget], "write": {"calc.py": BAD}},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", TWO_ARMS, cwd=project)
    assert r.returncode == 0, r.stderr  # the second arm was tried and passed: no memory error
    assert "was forgotten (`acr memory forget`) while it ran" in r.stderr
    assert "Traceback" not in r.stderr and "could not be read" not in r.stderr
    assert (project / "calc.py").read_text() == GOOD
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0
    assert attempts_in_memory(acr_home) == []
    logs = acr_home / "data" / "logs"  # nor a log of the attempts after the forget (they hold the request)
    assert not logs.exists() or list(logs.iterdir()) == []
    assert "acr show" not in r.stdout  # no pointer to a task that is gone


def test_users_uncommitted_work_survives_a_failed_run(project, fakes_on_path, scenario):
    before = dirty_user_work(project)
    (project / ".git" / "info" / "exclude").write_text(".env\nsecrets/\n")
    (project / ".env").write_text("API_KEY=mine\n")  # ignored: not in git, still the user's
    (project / "secrets").mkdir()
    (project / "secrets" / "local.json").write_text("{}\n")
    before.update({p: (project / p).read_bytes() for p in (".env", "secrets/local.json")})
    scenario({"write": {"calc.py": BAD, "new_file.py": "x = 1\n", ".env": "API_KEY=agent\n"},
              "delete": ["NOTES.md", "secrets/local.json"]})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", TWO_ARMS, cwd=project)
    assert r.returncode == 1, r.stderr
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    assert not (project / "new_file.py").exists()
    assert git(project, "diff", "--cached", "--name-only").split() == ["staged.txt"]


def test_an_agent_that_drops_the_users_stash_and_a_branch_is_undone(project, fakes_on_path, scenario):
    (project / "calc.py").write_text("stashed work\n")
    git(project, "stash", "push", "-q", "-m", "my experiment")
    git(project, "branch", "feature")
    stashes, branches = git(project, "stash", "list", "--format=%H %gs"), git(project, "branch", "--list")
    before = dirty_user_work(project)
    scenario({"commands": [["git", "stash", "push", "-u", "-q"], ["git", "stash", "drop", "-q"],
                           ["git", "stash", "drop", "-q"], ["git", "branch", "-D", "-q", "feature"]],
              "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", TWO_ARMS, cwd=project)
    assert r.returncode == 1, r.stderr
    assert git(project, "stash", "list", "--format=%H %gs") == stashes
    assert git(project, "branch", "--list") == branches
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p


def test_an_agent_that_removes_dot_git_stops_the_task_with_what_to_do(project, fakes_on_path, scenario, acr_home):
    scenario({"commands": [["rm", "-rf", ".git"]], "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", TWO_ARMS, cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "removed the git repository" in r.stderr and "git clone" in r.stderr
    assert [a["verdict"] for a in attempts_in_memory(acr_home)] == ["failed"]  # recorded; no second attempt on a bare tree


def test_users_uncommitted_work_survives_a_timeout(project, fakes_on_path, scenario, tmp_path, monkeypatch):
    before = dirty_user_work(project)
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("FAKE_AGENT_PIDFILE", str(pidfile))
    scenario({"match": {"agent": "opencode"}, "hang": True},
             {"match": {"agent": "codex"}, "write": {"calc.py": BAD}})
    start = time.monotonic()
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", TWO_ARMS, "--timeout", "3", "--json", cwd=project)
    assert time.monotonic() - start < 60
    out = json.loads(r.stdout)
    assert [a["verdict"] for a in out["attempts"]] == ["timeout", "failed"]
    assert r.returncode == 1
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    # The stalled agent and the child it started are gone (the whole process group was killed).
    for pid in map(int, pidfile.read_text().split()):
        assert not _alive(pid), pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_prompt_reaches_the_agent_verbatim_and_is_never_run_by_a_shell(project, fakes_on_path, scenario, tmp_path):
    canary = tmp_path / "pwned"
    prompt = (f"fix \"quoted\" and 'single' $(touch {canary}) `touch {canary}` ; touch {canary} && echo hi\n"
              "second line\twith tab $HOME -rf --help")
    log = scenario({"write": {"calc.py": GOOD}})
    for agent in ("claude:claude-opus-4-6", "codex:gpt-5.4", "opencode:moonshotai/kimi-k2.5"):
        r = acr("run", "--arms", agent, "--verify", VERIFY, "--", prompt, cwd=project)
        assert r.returncode == 0, r.stderr
        git(project, "checkout", "--", "calc.py")
    sent = [c["prompt"].split(NOTE)[0] for c in calls(log)]  # the request, then acr's note naming the check
    assert sent == [prompt] * 3 and all(NOTE in c["prompt"] for c in calls(log))
    assert not canary.exists()


def test_a_prompt_longer_than_an_argument_can_be_reaches_every_agent(project, fakes_on_path, scenario, tmp_path):
    prompt = "fix add; here is the whole failing log:" + "\nE   assert 1 == 2  ünïcode" * 12_000  # ~330 KB
    (tmp_path / "long.txt").write_text(prompt)
    log = scenario({"write": {"calc.py": GOOD}})
    for agent in ("claude:claude-opus-4-6", "codex:gpt-5.4", "opencode:moonshotai/kimi-k2.5"):
        r = acr("run", "--arms", agent, "--verify", VERIFY, "--prompt-file", str(tmp_path / "long.txt"), cwd=project)
        assert r.returncode == 0, r.stderr
        git(project, "checkout", "--", "calc.py")
    assert [c["prompt"].split(NOTE)[0] for c in calls(log)] == [prompt] * 3
    assert "refs/acr/keep" not in git(project, "for-each-ref")


def test_a_request_with_a_nul_byte_is_refused_before_anything_runs(project, fakes_on_path, scenario, tmp_path):
    (tmp_path / "nul.txt").write_bytes(b"fix\n the \x00 add function\n")
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "--arms", "codex:gpt-5.4", "--verify", VERIFY, "--prompt-file", str(tmp_path / "nul.txt"),
            cwd=project)
    assert r.returncode == 2 and "NUL byte (line 2)" in r.stderr and "Traceback" not in r.stderr
    assert calls(log) == []
    assert git(project, "for-each-ref", "refs/acr") == ""


def test_api_errors_move_on_to_the_next_arm(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "claude"}, "error": "500"},
             {"match": {"agent": "opencode"}, "error": "rate_limit"},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--json", "--arms",
            "claude:claude-sonnet-4-6,opencode:alibaba/qwen3.5-plus,codex:gpt-5.4", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 0
    assert [a["verdict"] for a in out["attempts"]] == ["error", "error", "passed"]
    assert "500" in out["attempts"][0]["detail"] and "429" in out["attempts"][1]["detail"]


def test_claude_run_with_every_tool_denied_is_a_failed_attempt(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": GOOD}, "deny": True})
    r = acr("run", "fix add", "--verify", VERIFY, "--json", "--arms", "claude:claude-opus-4-6", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 1
    assert out["attempts"][0]["verdict"] == "failed"
    assert "denied" in out["attempts"][0]["detail"]


def test_missing_cli_is_skipped_with_a_note(project, fakes_on_path, scenario):
    scenario({"write": {"calc.py": GOOD}})
    bindir = project.parent / "onlycodex"
    bindir.mkdir()
    (bindir / "codex").write_text((Path(__file__).parent / "fakes" / "codex").read_text().replace(
        '"$(dirname "$0")/fakeagent.py"', f'"{Path(__file__).parent / "fakes" / "fakeagent.py"}"'))
    (bindir / "codex").chmod(0o755)
    path = os.pathsep.join([str(bindir)] + [p for p in os.environ["PATH"].split(os.pathsep) if "fakes" not in p])
    r = acr("run", "fix add", "--verify", VERIFY, "--json", "--arms",
            "claude:claude-opus-4-6,codex:gpt-5.4", cwd=project, env={"PATH": path})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(s["agent"], "not installed" in s["reason"]) for s in out["skipped"]] == [("claude", True)]
    assert [a["agent"] for a in out["attempts"]] == ["codex"]


def test_no_installed_agent_is_a_setup_error_not_a_failed_task(project, acr_home):
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)  # none of them, fake or real
                           if not any(os.path.exists(os.path.join(p, cli)) for cli in ("claude", "codex")))
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "claude:claude-opus-4-6,codex:gpt-5.4", cwd=project,
            env={"PATH": path})
    assert r.returncode == 2 and "`claude` is not installed" in r.stderr and "`codex` is not installed" in r.stderr
    assert "acr doctor" in r.stderr
    assert not (acr_home / "data" / "memory.sqlite").exists()  # no empty task recorded


def test_a_mistyped_agent_in_arms_is_a_usage_error_before_anything_runs(project, fakes_on_path, scenario, acr_home):
    scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4,nosuchagent:m1", cwd=project)
    assert r.returncode == 2
    assert "unknown agent 'nosuchagent'" in r.stderr and "valid agents: claude, codex, opencode" in r.stderr
    assert (project / "calc.py").read_text() != GOOD  # codex did not run
    assert not (acr_home / "data" / "memory.sqlite").exists()  # nothing recorded
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", " , ", cwd=project)
    assert r.returncode == 2 and "no arm given" in r.stderr


def test_max_cost_stops_escalation(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": BAD}, "cost": 0.9})
    r = acr("run", "fix add", "--verify", VERIFY, "--json", "--max-cost", "0.5", "--arms",
            "claude:claude-opus-4-6,claude:claude-sonnet-4-6", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 1
    assert len(out["attempts"]) == 1
    assert out["stop_reason"] == "--max-cost $0.50 is spent ($0.90)"
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": BAD}, "cost": 0.0021})
    r = acr("run", "fix add", "--verify", VERIFY, "--json", "--max-cost", "0.001", "--arms",
            "claude:claude-opus-4-6,claude:claude-sonnet-4-6", cwd=project)
    assert json.loads(r.stdout)["stop_reason"] == "--max-cost $0.0010 is spent ($0.0021)"  # not "$0.00 ... $0.00"


def test_outside_git_explains_and_no_rollback_works(tmp_path, fakes_on_path, scenario):
    plain = tmp_path / "plain"
    plain.mkdir()
    scenario({"write": {"out.txt": "hello\n"}})
    r = acr("run", "write hello", "--arms", "codex:gpt-5.4", cwd=plain)
    assert r.returncode == 2
    assert "git" in r.stderr and "--no-rollback" in r.stderr
    assert "Traceback" not in r.stderr
    r = acr("run", "write hello", "--arms", "codex:gpt-5.4", "--no-rollback", cwd=plain)
    assert r.returncode == 0, r.stderr
    assert (plain / "out.txt").read_text() == "hello\n"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_ctrl_c_sigterm_and_sighup_cancel_record_and_restore(project, fakes_on_path, scenario, acr_home, tmp_path,
                                                            sig, code):
    """Ctrl-C, `kill`/`timeout` (SIGTERM) and a closed terminal (SIGHUP) all end the run the same way."""
    before = dirty_user_work(project)
    scenario({"hang": True, "write": {"calc.py": BAD}})
    pidfile = tmp_path / "agent.pids"
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms",
                             "codex:gpt-5.4", "--json"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, "FAKE_AGENT_PIDFILE": str(pidfile)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not pidfile.exists():
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert json.loads(out)["attempts"][0]["verdict"] == "cancelled"
    assert attempts_in_memory(acr_home)[0]["verdict"] == "cancelled"
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    for pid in map(int, pidfile.read_text().split()):  # the agent and its child are gone
        assert not _running(pid), pid
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT passed FROM tasks").fetchall() == [(0,)]  # finished, not left "running"
    assert "refs/acr/keep" not in git(project, "for-each-ref")


def test_a_killed_run_is_recovered_with_acr_recover(project, fakes_on_path, scenario, acr_home, tmp_path):
    before = dirty_user_work(project)
    staged_before = git(project, "diff", "--cached", "--name-status")
    head_before = git(project, "rev-parse", "HEAD")
    scenario({"hang": True})
    pidfile = tmp_path / "agent.pids"
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms",
                             "codex:gpt-5.4"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env={**os.environ, "FAKE_AGENT_PIDFILE": str(pidfile)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not pidfile.exists():
        time.sleep(0.1)
    # what the agent did before acr was killed: edits, a new file, a staged deletion, a commit
    (project / "calc.py").write_text("agent\n")
    (project / "agent_new.py").write_text("x = 1\n")
    git(project, "rm", "-q", "--cached", "staged.txt")
    git(project, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "agent", "--allow-empty")
    proc.kill()
    proc.wait(timeout=10)
    agent, child = map(int, pidfile.read_text().split())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(agent):
        time.sleep(0.1)
    assert not _running(agent)  # the agent dies with acr (its parent-death signal)...
    assert _running(child)  # ...but what it started lives on, and could undo a recovery:
    r = acr("recover", cwd=project)
    assert r.returncode == 2 and f"pid {child}" in r.stderr and "--kill" in r.stderr
    assert (project / "agent_new.py").exists()  # refused: nothing was touched
    # a new run would checkpoint the half-done tree and have the old agent's child write into its attempts
    recorded = attempts_in_memory(acr_home)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project)
    assert r.returncode == 2 and f"pid {child}" in r.stderr and "acr recover --kill" in r.stderr, r.stderr
    assert (project / "agent_new.py").exists() and attempts_in_memory(acr_home) == recorded  # no agent ran
    r = acr("recover", "--list", cwd=project)
    assert r.returncode == 0 and len(r.stdout.split()) == 1
    listed = r.stdout
    r = acr("recover", "--list", "--discard", cwd=project)  # list, or delete? neither: refused
    assert r.returncode == 2 and "--discard" in r.stderr and acr("recover", "--list", cwd=project).stdout == listed
    r = acr("recover", "--kill", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["killed"] == [child] and not _running(child)
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    assert not (project / "agent_new.py").exists()
    assert git(project, "diff", "--cached", "--name-status") == staged_before  # the index, exactly
    assert git(project, "rev-parse", "HEAD") == head_before
    store, name = out["saved_as"].rsplit("#", 1)  # nothing is lost either way, and nothing is in the project's refs
    assert git(project, "--git-dir", store, "show", f"{name}:agent_new.py") == "x = 1\n"
    assert name.startswith("recovered/") and git(project, "for-each-ref", "refs/acr/") == ""
    assert "nothing to recover" in acr("recover", cwd=project).stdout
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT passed FROM tasks").fetchall() == [(0,)]  # no longer "running"
    shown = json.loads(acr("show", "--json", cwd=project).stdout)  # how it was read and the baseline are kept
    assert shown["baseline"]["command"] == VERIFY and shown["baseline"]["passed"] is False
    assert shown["context"]["kind"] == "bug_fix" and shown["attempts"] == []
    text = acr("show", cwd=project).stdout
    assert "no attempt was recorded: acr stopped while the first one ran" in text and "verifier: none" not in text


def test_what_the_verifier_started_is_found_by_recover_after_acr_is_killed(project, fakes_on_path, scenario,
                                                                             acr_home, tmp_path):
    """acr SIGKILLed while the verifier ran: a process the verifier started must not write into the tree
    after `acr recover` has put it back."""
    before = dirty_user_work(project)
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": BAD}})
    started = tmp_path / "verifier.pid"
    check = tmp_path / "check.py"
    check.write_text("import os, pathlib, sys, time\n"
                     "if 'a - b' not in pathlib.Path('calc.py').read_text():\n    sys.exit(1)  # the baseline\n"
                     f"pathlib.Path({str(started)!r}).write_text(str(os.getpid()))\n"
                     "time.sleep(30)\npathlib.Path('late.txt').write_text('written after the recovery')\n")
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify",
                             f"{sys.executable} {check}", "--arms", "codex:gpt-5.4", "--yes"], cwd=project,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (started.exists() and started.read_text()):
        time.sleep(0.1)
    os.kill(proc.pid, 9)
    proc.wait(timeout=10)
    verifier = int(started.read_text())
    r = acr("recover", cwd=project)
    assert r.returncode == 2 and f"pid {verifier}" in r.stderr and "--kill" in r.stderr
    r = acr("recover", "--kill", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert verifier in json.loads(r.stdout)["killed"] and not _running(verifier)
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    assert not (project / "late.txt").exists()


def test_a_recover_that_stops_half_way_can_be_finished_and_keeps_each_saved_state(project, tmp_path, acr_home):
    from acr_cli.workspace import Workspace

    git(project, "commit", "-qm", "second", "--allow-empty")
    head = git(project, "rev-parse", "HEAD").strip()
    git(project, "bundle", "create", "-q", str(tmp_path / "backup.bundle"), "HEAD")  # the user's backup
    Workspace.open(project).checkpoint("20260101-000000-abcdef-1")  # then acr was killed
    (project / "calc.py").write_text("the agent's edit\n")
    (project / "notes.txt").write_text("saved by the user while the agent ran\n")
    git(project, "reset", "-q", "--soft", "HEAD~1")  # and the agent pruned HEAD's commit: HEAD cannot come back
    for ref in git(project, "for-each-ref", "--format=%(refname)", "refs/acr").split():
        git(project, "update-ref", "-d", ref)
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")
    r = acr("recover", cwd=project)
    assert r.returncode == 2 and "HEAD" in r.stderr and "acr recover" in r.stderr
    assert "agent" not in (project / "calc.py").read_text()  # every other path is back already
    git(project, "fetch", "-q", str(tmp_path / "backup.bundle"))  # the commit is back: recover finishes
    r = acr("recover", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["saved_as"] is None  # every path was back already: nothing more to keep
    store = str(acr_home / "data" / "checkpoints")
    store = next(p for p in Path(store).glob("*/attempts") if p.is_dir())
    first = git(project, "--git-dir", str(store), "show", "recovered/20260101-000000-abcdef-1:notes.txt")
    assert first == "saved by the user while the agent ran\n"  # the first save is not overwritten
    assert git(project, "rev-parse", "HEAD").strip() == head and "agent" not in (project / "calc.py").read_text()


def _killed_mid_attempt(project: Path, scenario, tmp_path: Path, env: dict | None = None) -> Path:
    """An `acr run` killed with -9 while its agent had half done calc.py (and what the agent started, ended);
    the next call of the agent writes GOOD. Returns the scenario's call log."""
    pidfile = tmp_path / "writer.pid"
    half_done = f"echo half-done > calc.py; echo $$ > {pidfile}; exec sleep 60"
    log = scenario({"match": {"call": 1}, "commands": [["sh", "-c", half_done]]}, {"write": {"calc.py": GOOD}})
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms",
                             "codex:gpt-5.4"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (pidfile.exists() and pidfile.read_text().strip()):
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)  # acr killed mid-attempt
    proc.wait(timeout=10)
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # (and what its agent started: no survivor to end)
    assert (project / "calc.py").read_text() == "half-done\n"
    return log


def test_a_run_after_a_killed_one_refuses_and_recover_never_reverts_a_later_pass(project, fakes_on_path, scenario,
                                                                                 tmp_path):
    """acr killed with -9 mid-attempt: the next run would keep its work on top of the killed attempt's, and a
    later `acr recover` would revert it. So the next run refuses (nothing run), naming both ways out."""
    before = (project / "calc.py").read_text()
    log = _killed_mid_attempt(project, scenario, tmp_path)
    for extra in ([], ["--no-rollback"]):
        r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", *extra, cwd=project)
        assert r.returncode == 2, r.stderr
        assert "was killed mid-attempt" in r.stderr and "`acr recover`" in r.stderr
        assert "acr recover --discard" in r.stderr and "Traceback" not in r.stderr
    assert len(calls(log)) == 1 and (project / "calc.py").read_text() == "half-done\n"  # nothing ran
    r = acr("recover", cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "calc.py").read_text() == before
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project)
    assert r.returncode == 0, r.stderr
    r = acr("recover", cwd=project)  # the later pass stays
    assert r.returncode == 0 and "nothing to recover" in r.stdout
    assert (project / "calc.py").read_text() == GOOD


def test_recover_never_reverts_what_a_later_run_kept_even_one_that_did_not_see_the_checkpoint(
        project, fakes_on_path, scenario, tmp_path):
    """A run with another ACR_HOME (another install, an IDE's) does not see the killed run's checkpoint; its
    pass is still not reverted by `acr recover` from the first."""
    _killed_mid_attempt(project, scenario, tmp_path)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project,
            env={"ACR_HOME": str(tmp_path / "other-home")})
    assert r.returncode == 0, r.stderr
    r = acr("recover", cwd=project)
    assert r.returncode == 2 and "a later `acr run` kept its work here" in r.stderr, r.stderr
    assert "acr recover --discard" in r.stderr and "--force" in r.stderr
    assert (project / "calc.py").read_text() == GOOD  # nothing was changed
    r = acr("recover", "--force", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    store, name = json.loads(r.stdout)["saved_as"].rsplit("#", 1)  # the pass is kept in acr's store first
    assert git(project, "--git-dir", store, "show", f"{name}:calc.py") == GOOD


def _running(pid: int) -> bool:
    """Alive and not a zombie (orphans killed here may wait for a container's init to reap them)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in "ZX":
            return False
        time.sleep(0.1)
    return True


def _attempt_started(home: Path) -> bool:
    logs = home / "data" / "logs"
    return logs.exists() and any(logs.rglob("*.log"))


def test_parallel_runs_lose_no_row(tmp_path, fakes_on_path, scenario, acr_home):
    scenario({"write": {"out.txt": "x\n"}, "sleep": 0.2})
    projects = []
    for i in range(8):
        p = tmp_path / f"p{i}"
        p.mkdir()
        git(p, "init", "-q")
        projects.append(p)
    procs = [subprocess.Popen([sys.executable, "-m", "acr_cli", "run", f"task {i}", "--arms",
                               "claude:claude-sonnet-4-6,codex:gpt-5.4", "--verify", "false", "--quiet"],
                              cwd=p, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
             for i, p in enumerate(projects)]
    for pr in procs:
        _, err = pr.communicate(timeout=120)
        assert pr.returncode == 1, err
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 8
    assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 16
    assert db.execute("SELECT COUNT(*) FROM tasks WHERE passed IS NULL").fetchone()[0] == 0


def test_corrupt_memory_gives_a_clear_error(project, tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    r = acr("memory", "show", "--memory", str(bad), cwd=project)
    assert r.returncode == 2
    assert "not a readable acr memory" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only files")
def test_unwritable_memory_gives_a_clear_error(project, tmp_path, fakes_on_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    r = acr("run", "fix add", "--memory", str(ro / "m.sqlite"), cwd=project)
    assert r.returncode == 2 and "cannot create the memory file" in r.stderr


def test_unwritable_memory_dir_gives_a_clear_error_even_as_root(project, tmp_path, fakes_on_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = acr("run", "fix add", "--memory", str(blocker / "m.sqlite"), cwd=project)
    assert r.returncode == 2 and "cannot create the memory file" in r.stderr
    assert "Traceback" not in r.stderr


def test_reading_commands_never_create_or_change_a_memory_file(project, tmp_path, acr_home, fakes_on_path):
    typo = tmp_path / "nx" / "memroy.sqlite"
    for args in (["memory", "show"], ["memory", "log"], ["memory", "export"], ["route", "fix add"]):
        r = acr(*args, "--memory", str(typo), cwd=project)
        assert r.returncode == 2 and "no memory at" in r.stderr, args
    assert not typo.parent.exists()
    # the default memory that does not exist yet is simply empty, and stays uncreated
    r = acr("memory", "log", cwd=project)
    assert r.returncode == 0 and "No tasks recorded yet" in r.stdout
    assert not (acr_home / "data").exists()
    # someone else's SQLite database is refused and left exactly as it was
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE tasks (x)")
    db.commit()
    db.close()
    before = other.read_bytes()
    for args in (["memory", "show"], ["run", "fix add"]):
        r = acr(*args, "--memory", str(other), cwd=project)
        assert r.returncode == 2 and "not an acr memory" in r.stderr, args
    assert other.read_bytes() == before


def test_memory_setting_in_config_toml_moves_the_memory(project, tmp_path, acr_home):
    target = tmp_path / "elsewhere" / "mine.sqlite"
    assert acr("config", "set", "memory", str(target)).returncode == 0
    r = acr("doctor", "--json", cwd=project)
    assert json.loads(r.stdout)["memory"]["path"] == str(target)
    (project / ".acr.toml").write_text('memory = "/tmp/x.sqlite"\n')
    r = acr("route", "fix add", cwd=project)  # a cloned repository's file: ignored, and said
    assert "not trusted" in r.stderr and "memory = '/tmp/x.sqlite'" in r.stderr and "belongs in" not in r.stderr
    assert acr("trust", cwd=project).returncode == 0
    r = acr("route", "fix add", cwd=project)  # trusted, it still may not move your memory file
    assert r.returncode == 2 and "belongs in the user's config.toml" in r.stderr


def test_interactive_run_hands_over_the_terminal_then_verifies_and_records(project, fakes_on_path, scenario,
                                                                           acr_home, tmp_path):
    import pexpect

    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "tokens": [3100, 420]})
    env = dict(os.environ, CODEX_HOME=str(tmp_path / "codex-home"))
    child = pexpect.spawn(sys.executable, ["-m", "acr_cli", "run", "--interactive", "--arms", "codex:gpt-5.4",
                                           "--verify", VERIFY, "fix add"], cwd=str(project), env=env,
                          encoding="utf-8", timeout=60)
    child.expect("fake codex interactive")
    child.expect("type ok")
    child.sendline("ok")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    row = attempts_in_memory(acr_home)[0]
    assert (row["verdict"], row["tokens_in"], row["tokens_out"]) == ("passed", 3100, 420)
    assert row["cost_source"] == "priced"
    assert (project / "calc.py").read_text() == GOOD


def test_an_interactive_attempt_leaves_no_process_behind(project, fakes_on_path, scenario, acr_home, tmp_path):
    """What an interactive session started in the background (a dev server, a watcher) ends with it, as
    without --interactive: it must not write into the tree after the rollback."""
    import pexpect

    before = dirty_user_work(project)
    late = project / "late.txt"
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": BAD},
              "commands": [["sh", "-c", f"setsid sh -c 'sleep 3; echo late > {late}; echo broken > calc.py' "
                                        ">/dev/null 2>&1 </dev/null &"]]})
    child = pexpect.spawn(sys.executable, ["-m", "acr_cli", "run", "--interactive", "--arms", "codex:gpt-5.4",
                                           "--verify", VERIFY, "fix add"], cwd=str(project),
                          env=dict(os.environ, CODEX_HOME=str(tmp_path / "codex-home")), encoding="utf-8", timeout=60)
    child.expect("type ok")
    child.sendline("ok")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1, child.before
    time.sleep(4)  # past the background writer's sleep
    assert not late.exists()
    for p, data in before.items():
        assert (project / p).read_bytes() == data, p
    log = next((acr_home / "data" / "logs").rglob("1-codex.log")).read_text()
    assert "a process of the attempt outlived the agent and was ended" in log


def test_interactive_refuses_a_request_too_long_for_an_argument(project, fakes_on_path, acr_home, tmp_path):
    import pexpect

    big = tmp_path / "request.txt"
    big.write_text("fix add\n" + "context line\n" * 10_000)  # 130 KB: over what one argument may hold
    child = pexpect.spawn(sys.executable, ["-m", "acr_cli", "run", "--interactive", "--arms", "codex:gpt-5.4",
                                           "--prompt-file", str(big)], cwd=str(project),
                          encoding="utf-8", timeout=60)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and "at most 100 KB; this one is 130 KB" in child.before
    assert "without --interactive" in child.before and not (acr_home / "data" / "memory.sqlite").exists()


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_verifier_means_none_not_a_pass(project, fakes_on_path, scenario, acr_home, blank):
    (project / ".acr.toml").write_text('verify = "exit 1"\n')  # overridden by the command line
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": BAD}, "exit": 1})
    r = acr("run", "fix add", "--verify", blank, "--arms", "codex:gpt-5.4", "--json", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["attempts"][0]["verdict"] != "passed"  # the agent's own failure decides
    assert "verify: none" in r.stderr


def test_a_run_without_a_verifier_is_unverified_its_change_kept_and_shown_apart(project, fakes_on_path, scenario,
                                                                                acr_home):
    scenario({"match": {"agent": "opencode"}, "error": "login"},  # a set-up error: acr moves on
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "tokens": [3800, 150]})
    r = acr("run", "fix add", "--arms", TWO_ARMS, "--json", cwd=project)
    assert r.returncode == 0, r.stderr  # accepted: the task ended with an attempt that finished
    out = json.loads(r.stdout)
    assert (out["passed"], out["verdict"]) == (False, "unverified")  # nobody checked: not "passed"
    assert [a["verdict"] for a in out["attempts"]] == ["error", "unverified"]
    assert (project / "calc.py").read_text() == GOOD  # kept for review, as a pass would be
    log = json.loads(acr("memory", "log", "--json").stdout)["tasks"][0]
    assert (log["state"], log["passed"]) == ("unverified", None)
    shown = json.loads(acr("memory", "show", "--json").stdout)["kinds"]
    codex = next(k for k in shown if k["agent"] == "codex" and k["attempts"])
    assert (codex["attempts"], codex["unverified"], codex["judged"], codex["passed"]) == (1, 1, 0, 0)
    text = acr("memory", "show", cwd=project).stdout
    assert "unv" in text and "a quarter of a verified pass" in text.replace("\n", " ")
    plain = acr("run", "fix add", "--arms", "codex:gpt-5.4", cwd=project)
    assert plain.returncode == 0 and "done, unverified" in plain.stdout and "--verify" in plain.stdout
