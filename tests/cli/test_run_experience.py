"""What a person sees of a run: the answer, why an attempt failed, `acr show`, and a verifier that is
checked on the untouched tree before any money is spent (issue 19)."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys

import pytest
from conftest import BAD, GOOD, VERIFY, acr, calls, git

THREE = "opencode:moonshotai/kimi-k2.5,claude:claude-sonnet-4-6,codex:gpt-5.4"
ANSWER = "The function is slow because it re-reads the file on every call.\nCache the parsed rows instead.\n" + \
         "A long line that must reach a pipe whole: " + "x" * 300


def tasks_in_memory(home) -> int:
    path = home / "data" / "memory.sqlite"
    return sqlite3.connect(path).execute("SELECT COUNT(*) FROM tasks").fetchone()[0] if path.exists() else 0


def test_the_answer_to_a_question_is_printed_whole_with_and_without_quiet_and_in_json(project, fakes_on_path,
                                                                                      scenario):
    scenario({"match": {"agent": "codex"}, "text": ANSWER})
    for flags in ((), ("-q",)):
        r = acr("run", "why is this function slow?", "--arms", "codex:gpt-5.4", *flags, cwd=project)
        assert r.returncode == 0, r.stderr
        assert ANSWER.rstrip("\n") in r.stdout  # whole: every line, the long one unbroken
        assert "No file changed." in r.stdout and "changes are in your work tree" not in r.stdout
    assert r.stderr == ""  # -q: the live view is hidden, the answer is not
    out = json.loads(acr("run", "why is this function slow?", "--arms", "codex:gpt-5.4", "--json",
                         cwd=project).stdout)
    assert out["answer"] == ANSWER.rstrip("\n") and out["attempts"][0]["text"] == out["answer"]
    assert out["changes"] == []
    logged = json.loads(acr("memory", "log", "--json", "-n", "1").stdout)["tasks"][0]
    assert logged["attempts"][0]["text"] == ANSWER.rstrip("\n")


def test_a_kept_change_is_shown_as_a_diffstat(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD, "notes/new.txt": "a\nb\n"}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project)
    out = json.loads(r.stdout)
    assert {c["path"]: (c["added"], c["deleted"]) for c in out["changes"]} == {"calc.py": (1, 1),
                                                                             "notes/new.txt": (2, 0)}
    git(project, "checkout", "--", "calc.py")
    text = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project).stdout
    assert "Changed 1 file(s), uncommitted in your work tree:" in text and "calc.py  +1 -1" in text


def test_a_failed_attempt_says_why_where_its_work_is_and_how_to_see_it(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}, "text": "I think it is fixed."})
    for quiet in (False, True):
        r = acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5",
                *(["-q"] if quiet else []), cwd=project)
        assert r.returncode == 1
        shown = r.stdout if quiet else r.stderr  # with -q the summary on stdout carries it
        assert "the verifier printed (last lines):" in shown and "assert -1 == 5" in shown
        assert "log: " in shown and "1-opencode.log" in shown
        cmd = next(line.split("see it with: ")[1] for line in shown.splitlines() if "see it with: " in line)
        diff = subprocess.run(shlex.split(cmd), cwd=project, capture_output=True, text=True, check=True).stdout
        assert "-    return a * b" in diff and "+    return a - b" in diff  # the failed attempt's work, kept
        assert "I think it is fixed." in r.stdout  # its answer too


def test_acr_show_tells_the_whole_story_of_a_three_attempt_task(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}, "text": "subtracting now"},
             {"match": {"agent": "claude"}, "error": "500"},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "text": "fixed: a + b"})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", THREE, cwd=project)
    assert r.returncode == 0, r.stderr
    (project / "sub").mkdir()
    shown = acr("show", cwd=project / "sub")  # the latest task of this project, from anywhere in it
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    for piece in ("request:\n  fix the add function", "read as: bug_fix", "baseline: `", "failed (exit 1) before any change",
                  "attempt 1: opencode:moonshotai/kimi-k2.5 · failed", "attempt 2: claude:claude-sonnet-4-6 · error",
                  "attempt 3: codex:gpt-5.4 · passed", "chosen: ", "subtracting now", "fixed: a + b",
                  "assert -1 == 5", "its work is kept in acr's store, secrets masked; see it with: git --git-dir=",
                  "kept change", "calc.py  +1 -1"):
        assert piece in text, piece
    data = json.loads(acr("show", "--json", cwd=project).stdout)
    assert [a["verdict"] for a in data["attempts"]] == ["failed", "error", "passed"]
    assert data["state"] == "passed" and data["answer"] == "fixed: a + b"
    assert data["baseline"]["passed"] is False and data["baseline"]["exit_code"] == 1
    assert data["attempts"][0]["diff_command"].startswith("git --git-dir=") and data["attempts"][0]["log_path"]
    shown = subprocess.run(shlex.split(data["attempts"][0]["diff_command"]), capture_output=True, text=True,
                           check=True).stdout
    assert "+    return a - b" in shown  # attempt 1's work
    assert data["changes"] == [{"path": "calc.py", "added": 1, "deleted": 1}]
    assert data["context"]["kind"] == "bug_fix" and data["context"]["reasons"]
    by_id = json.loads(acr("show", data["id"][:17], "--json").stdout)  # an unambiguous start of the id
    assert by_id["id"] == data["id"]
    missing = acr("show", "20990101-000000-ffffff")
    assert missing.returncode == 1 and "no task" in missing.stderr and "acr memory log" in missing.stderr
    for pattern in ("%", "_" * len(data["id"]), "2%"):  # SQL wildcards are characters of an id, not patterns
        r = acr("show", pattern)
        assert r.returncode == 1 and "no task" in r.stderr, pattern


@pytest.mark.parametrize("command", ["python3 chek.py", f"{sys.executable} -m pytest -q tests/test_nope.py"])
def test_a_verifier_that_cannot_run_stops_before_any_agent_and_spends_nothing(project, fakes_on_path, scenario,
                                                                               acr_home, command):
    (project / "check.py").write_text("import calc\nassert calc.add(2, 3) == 5\n")
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", command, "--arms", THREE, cwd=project)
    assert r.returncode == 2 and "cannot run here" in r.stderr and "nothing was spent" in r.stderr
    assert ("chek.py" in r.stderr) if "chek" in command else ("test_nope.py" in r.stderr)
    assert calls(log) == [] and tasks_in_memory(acr_home) == 0


def test_a_project_verifier_run_from_a_subdirectory_where_its_file_is_missing_stops(project, fakes_on_path, scenario,
                                                                                   acr_home):
    (project / "check.py").write_text("import calc\nassert calc.add(2, 3) == 5\n")
    (project / ".acr.toml").write_text(f'verify = "{sys.executable} check.py"\n')
    (project / "docs").mkdir()
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--arms", "codex:gpt-5.4", cwd=project / "docs")
    assert r.returncode == 2 and "check.py" in r.stderr and ".acr.toml" in r.stderr
    assert str(project / "docs") in r.stderr  # where it ran
    assert calls(log) == [] and tasks_in_memory(acr_home) == 0


def test_a_verifier_that_times_out_before_any_change_says_how_to_give_it_longer(project, fakes_on_path, scenario):
    scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", "sleep 5", "--verify-timeout", "1", "--arms", "codex:gpt-5.4", cwd=project)
    assert "timed out after" in r.stderr and "raise --verify-timeout" in r.stderr
    assert "as it should" not in r.stderr  # a check that needs longer is not failing as it should


def test_a_verifier_that_already_passes_stops_without_yes_and_runs_with_it(project, fakes_on_path, scenario,
                                                                           acr_home):
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", "true", "--arms", "codex:gpt-5.4", cwd=project)  # no terminal here
    assert r.returncode == 2 and "already passes" in r.stderr and "--yes" in r.stderr
    assert calls(log) == [] and tasks_in_memory(acr_home) == 0
    ok = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert ok.returncode == 0 and json.loads(ok.stdout)["baseline"]["passed"] is True
    (project / ".acr.toml").write_text('verify = "true"\nbaseline = "accept"\n')
    assert acr("run", "fix add", "--arms", "codex:gpt-5.4", cwd=project).returncode == 0
    skipped = acr("run", "fix add", "--no-baseline", "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert skipped.returncode == 0 and json.loads(skipped.stdout)["baseline"] is None


def test_a_failure_the_attempt_did_not_touch_is_reported_unchanged_to_the_user_and_the_next_arm(project,
                                                                                               fakes_on_path,
                                                                                               scenario):
    log = scenario({"match": {"agent": "opencode"}, "write": {"README.md": "edited the wrong file\n"}},
                   {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4",
            "--json", cwd=project)
    out = json.loads(r.stdout)
    first = out["attempts"][0]
    assert first["verdict"] == "failed" and first["verifier_unchanged"] is True
    assert "the check failed as it did before the attempt (same output)" in first["detail"]
    assert "the attempt's changes did not change its result" in first["detail"]  # not "nothing changed"
    assert "did not change the check's result" in calls(log)[1]["prompt"]
    assert out["passed"] is True  # the next arm still got its turn


def test_a_changed_failure_is_not_called_unchanged(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    out = json.loads(acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5", "--json",
                         cwd=project).stdout)
    assert out["attempts"][0]["verifier_unchanged"] is False
    assert "as it did before the attempt" not in out["attempts"][0]["detail"]


def test_the_first_prompt_names_the_check_unless_the_profile_says_not_to(project, fakes_on_path, scenario, tmp_path):
    log = scenario({"write": {"calc.py": GOOD}})
    acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project)
    assert f"acr checks the work by running `{VERIFY}`" in calls(log)[0]["prompt"]
    git(project, "checkout", "--", "calc.py")
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text("extends: balanced\nsettings: {tell_verifier: false}\n")
    acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--profile", str(quiet), cwd=project)
    assert calls(log)[1]["prompt"] == "fix add"


def test_an_agent_error_is_said_once_and_a_partial_answer_before_it_is_labelled(project, fakes_on_path, scenario,
                                                                               tmp_path):
    scenario({"match": {"agent": "claude"}, "error": "overloaded"})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "claude:claude-sonnet-4-6", cwd=project)
    assert r.returncode == 1 and "answer from" not in r.stdout  # the error message is not an answer
    assert r.stdout.count("529 Overloaded") == 1  # in the attempt list, once
    shown = acr("show", cwd=project).stdout
    assert shown.count("529 Overloaded") == 1 and "answer:" not in shown  # as why the attempt ended
    agent = tmp_path / "partial.py"  # a generic agent CLI that ends in an error after saying something
    agent.write_text("import json, sys\nprint(json.dumps({'answer': 'Half done: the parser is split.',"
                     " 'error': 'max turns reached'}))\nsys.exit(1)\n")
    prof = tmp_path / "mine.yaml"
    prof.write_text("description: mine\narms:\n  - agent: mine\n    model: m1\n    price: {input: 1, output: 2}\n"
                    f"agents:\n  mine:\n    command: ['{sys.executable}', '{agent}', '{{prompt}}']\n"
                    "    output: json\n    fields: {text: answer, error: error}\n")
    r = acr("run", "fix add", "--verify", VERIFY, "--profile", str(prof), cwd=project)
    assert r.returncode == 1, r.stderr
    assert "── last message (the attempt ended in an error) from mine:m1 ──" in r.stdout
    assert "Half done: the parser is split." in r.stdout and "max turns reached" in r.stdout
    shown = acr("show", cwd=project).stdout
    assert "last message (the attempt ended in an error):" in shown and "Half done" in shown


def test_a_total_that_leaves_out_an_attempt_of_unknown_cost_says_so(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "opencode"}, "hang": True},
             {"match": {"agent": "codex"}, "write": {"calc.py": BAD}, "tokens": [10000, 500]})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4",
            "--timeout", "2", cwd=project)
    assert r.returncode == 1, r.stderr
    # the timed-out attempt reported nothing; codex's tokens at gpt-5.4's price make the total
    assert "2 attempt(s), $0.0325 spent (the cost of 1 attempt(s) is not known);" in r.stdout


def test_secrets_in_what_the_agent_says_are_masked_on_the_terminal_too(project, fakes_on_path, scenario):
    """A run's output ends up in CI logs: the answer and the live view are masked as memory and logs are."""
    said = ("Connected with postgres://bob:s3cretpw@db.internal/app using MY_SERVICE_TOKEN's value "
            "tok-9f8e7d6c5b4a3f2e1d0c")
    scenario({"match": {"agent": "codex"}, "text": said})
    r = acr("run", "why is it slow?", "--arms", "codex:gpt-5.4", cwd=project,
            env={"MY_SERVICE_TOKEN": "tok-9f8e7d6c5b4a3f2e1d0c"})
    assert r.returncode == 0, r.stderr
    for shown in (r.stdout, r.stderr):  # the answer, and the live view's line of it
        assert "s3cretpw" not in shown and "tok-9f8e7d6c5b4a3f2e1d0c" not in shown
        assert "postgres://bob:[REDACTED]@db.internal/app" in shown


def test_a_zero_budget_runs_nothing_and_a_fixed_order_says_its_budget_cannot_stop_the_first_attempt(
        project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--max-cost", "0", cwd=project)
    assert r.returncode == 2 and "--max-cost $0 leaves nothing to spend; no agent was run" in r.stderr
    assert not log.exists() and tasks_in_memory(acr_home) == 0  # no agent ran, nothing was recorded
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--max-cost", "0.01", cwd=project)
    assert r.returncode == 0, r.stderr
    assert ("no cost estimate for codex:gpt-5.4 (fixed policy): the cost limit $0.0100 (--max-cost, or max_cost in "
            "the profile) can stop only the attempts after this one") in " ".join(r.stderr.split())


def test_escape_sequences_in_a_request_or_an_answer_never_reach_the_terminal(project, fakes_on_path, scenario):
    """What memory holds can come from anyone (an import, a teammate's shared memory, an agent): printed, an
    escape sequence could retitle the window, clear the screen or hide a line."""
    planted = "\x1b]0;PWNED\x07\x1b[2J"
    scenario({"match": {"agent": "codex"}, "text": f"done{planted}\rfake line"})
    r = acr("run", f"fix add {planted} now", "--arms", "codex:gpt-5.4", cwd=project)
    assert r.returncode == 0, r.stderr
    shown = [r.stdout, r.stderr] + [acr(*cmd, cwd=project).stdout for cmd in (("show",), ("memory", "log"))]
    for text in shown:
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "\\x1b]0;PWNED\\x07" in shown[2]  # visible, as what it is
    assert "fake line" in shown[0] and "\\x0d" not in shown[0]  # a carriage return is a new line, not \x0d


ABSURD = [{"cost": -0.5}, {"cost": float("inf")}, {"tokens": [10**20, 100]}, {"tokens": [-1000, 100]},
          {"tokens": [2**31, 100]}]


@pytest.mark.parametrize("report", ABSURD)
def test_an_absurd_cost_or_token_count_from_an_agent_is_read_as_unknown(tmp_path, fakes_on_path, scenario, report):
    """What the fake claude prints for each absurd figure: the adapter reads it as not reported (None)."""
    from acr_cli import agents

    scenario({"match": {"agent": "claude"}, **report})
    out = subprocess.run(["claude", "-p", "--output-format", "stream-json", "--verbose", "--", "fix add"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    res = agents.get("claude").parse(out.stdout, out.stderr, out.returncode)
    assert not res.error, res.error
    figures = {"cost": [res.cost_usd], "tokens": [res.tokens_in]}[next(iter(report))]
    assert figures == [None]


def test_an_absurd_cost_and_token_count_from_an_agent_are_recorded_as_unknown(project, fakes_on_path, scenario,
                                                                               tmp_path):
    """A CLI's bug must not crash the run (an int SQL cannot store), poison routing (inf: NaN rewards) or make
    the memory's export impossible to import again. (Each absurd figure alone: the test above.)"""
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": GOOD}, "cost": float("inf"), "tokens": [10**20, 100]})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "claude:claude-opus-4-6", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    attempt = json.loads(r.stdout)["attempts"][0]
    for field in ("tokens_in", "tokens_out", "cost_usd"):
        value = attempt[field]
        assert value is None or (0 <= value < 2**31 and value != float("inf")), (field, value)  # a team's server stores it
    dump = tmp_path / "dump.jsonl"
    assert acr("memory", "export", str(dump)).returncode == 0
    back = acr("memory", "import", str(dump), "--memory", str(tmp_path / "again.sqlite"))
    assert back.returncode == 0, back.stderr
    explained = acr("route", "fix add", "--explain", cwd=project).stdout
    assert "nan" not in explained.lower()


def test_brackets_in_a_verifier_or_a_model_name_are_shown_as_written(project, fakes_on_path, scenario):
    """The live view is rich markup: `[/v1]` in a user's text was read as a closing tag and crashed the run."""
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    check = f"{VERIFY} && grep -qE '^[/a-z ]+' calc.py"
    r = acr("run", "fix add", "--verify", check, "--arms", "codex:gpt-5.4[/v1]", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "grep -qE '^[/a-z ]+' calc.py" in " ".join(r.stderr.split()) and "codex:gpt-5.4[/v1]" in r.stderr


def test_a_closed_stdin_or_stdout_is_no_crash(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    closed_stdin = subprocess.run([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", "true", "--arms",
                                   "codex:gpt-5.4"], cwd=project, capture_output=True, text=True,
                                  preexec_fn=lambda: __import__("os").close(0))
    assert closed_stdin.returncode == 2 and "already passes" in closed_stdin.stderr  # asked nobody: refused
    closed_stdout = subprocess.run([sys.executable, "-m", "acr_cli", "route", "fix add", "--json"], cwd=project,
                                   stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: __import__("os").close(1))
    assert closed_stdout.returncode == 0 and "Traceback" not in closed_stdout.stderr


@pytest.mark.parametrize("events, verdict", [
    # a field of another type than the CLI documents: the attempt is an error, recorded like any other
    ([{"type": "turn.failed", "error": "boom"}], "error"),
    ([{"type": "turn.completed", "usage": [1, 2]}], "error"),
    # a session id that is not a string, and half an emoji (a lone surrogate) in the answer
    ([{"type": "thread.started", "thread_id": ["x"]},
      {"type": "item.completed", "item": {"type": "agent_message", "text": "half an emoji: \ud83d"}},
      {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}}], "failed"),
])
def test_agent_output_of_an_odd_shape_is_recorded_never_lost(project, tmp_path, acr_home, events, verdict):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    lines = "".join(json.dumps(e) + "\n" for e in events)
    codex.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nsys.stdout.write({lines!r})\n"
                     f"sys.exit({1 if verdict == 'error' else 0})\n")
    codex.chmod(0o755)
    import os

    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project, env=env)
    assert r.returncode == 1, r.stderr  # not passed; no crash (70), no "damaged memory" (2)
    assert [a["verdict"] for a in json.loads(r.stdout)["attempts"]] == [verdict]
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT verdict FROM attempts").fetchall() == [(verdict,)]
    assert db.execute("SELECT finished_at IS NOT NULL FROM tasks").fetchone() == (1,)  # not left "running"
