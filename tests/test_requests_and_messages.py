"""Requests from anywhere (an argument, a file, stdin), output that survives a pipe, and error messages
that name their cause (a budget nothing fits in, an invalid profile, no verifier on purpose, a repository
git will not open or acr cannot write to)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BAD, GOOD, VERIFY, acr, calls, git

LONG_ARM = "opencode:openrouter/an-unusually-long-provider-name/an-extremely-long-model-name-for-pipes:free"


def tasks_in_memory() -> list[dict]:
    r = acr("memory", "log", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tasks"]


def acr_bytes(*args: str, input: bytes, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``acr`` with raw bytes on stdin (the conftest helper sends text)."""
    return subprocess.run([sys.executable, "-m", "acr_cli", *args], cwd=cwd, input=input, capture_output=True,
                          timeout=120)


# ---------------------------------------------------------------- 5. requests from anywhere

@pytest.mark.parametrize("args", [["run", "-"], ["run"]])
def test_a_request_piped_in_reaches_the_agent_and_a_dash_is_never_sent(project, fakes_on_path, scenario, args):
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr(*args, "--arms", "codex:gpt-5.4", "--json", cwd=project, input="fix the add function\nin calc.py\n")
    assert r.returncode == 0, r.stderr
    assert [c["prompt"] for c in calls(log)] == ["fix the add function\nin calc.py\n"]
    assert tasks_in_memory()[0]["prompt"] == "fix the add function\nin calc.py\n"


def test_route_takes_the_request_from_stdin_or_a_file_like_from_an_argument(tmp_path, fakes_on_path):
    request = "add unit tests for parser.py"
    (tmp_path / "request.txt").write_text(request + "\n")
    by_argument = json.loads(acr("route", request, "--json", cwd=tmp_path).stdout)
    for args, stdin in ((["route", "-"], request + "\n"), (["route"], request),
                        (["route", "--prompt-file", str(tmp_path / "request.txt")], None)):
        r = acr(*args, "--json", cwd=tmp_path, input=stdin)
        assert r.returncode == 0, (args, r.stderr)
        out = json.loads(r.stdout)
        assert out["context"]["kind"] == "test_generation" and out["order"] == by_argument["order"], args


@pytest.mark.parametrize("command", ["run", "route"])
@pytest.mark.parametrize("stdin", ["", "  \n\t\n"])
def test_an_empty_stdin_is_refused_and_nothing_runs(project, fakes_on_path, scenario, acr_home, command, stdin):
    log = scenario({"write": {"calc.py": GOOD}})
    for args in ([command, "-"], [command]):
        r = acr(*args, "--arms", "codex:gpt-5.4", cwd=project, input=stdin)
        assert r.returncode == 2 and "the request on stdin is empty" in r.stderr, r.stderr
        assert f"| acr {command} -" in r.stderr and "Traceback" not in r.stderr
    assert calls(log) == [] and not (acr_home / "data" / "memory.sqlite").exists()


def test_stdin_that_is_not_utf8_or_too_big_is_refused(project, fakes_on_path, scenario, acr_home):
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr_bytes("run", "-", "--arms", "codex:gpt-5.4", cwd=project, input=b"fix the add\nfunction \xff\xfe\n")
    assert r.returncode == 2 and b"the request on stdin: not UTF-8 text (byte 22, line 2)" in r.stderr, r.stderr
    r = acr_bytes("route", "-", cwd=project, input=b"fix add " * (600 * 1024))  # 4.7 MiB
    assert r.returncode == 2 and b"the request on stdin is over 4 MiB" in r.stderr, r.stderr
    r = acr_bytes("run", "--arms", "codex:gpt-5.4", cwd=project, input=b"fix\x00 add\n")
    assert r.returncode == 2 and b"NUL byte (line 1)" in r.stderr
    assert calls(log) == [] and not (acr_home / "data" / "memory.sqlite").exists()


def test_a_prompt_file_over_the_limit_or_with_stdin_is_refused(project, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * ((4 << 20) + 1))
    r = acr("route", "--prompt-file", str(big), cwd=project)
    assert r.returncode == 2 and f"--prompt-file {big} is over 4 MiB" in r.stderr
    (tmp_path / "ok.txt").write_text("fix add\n")
    r = acr("route", "-", "--prompt-file", str(tmp_path / "ok.txt"), cwd=project, input="fix add\n")
    assert r.returncode == 2 and "either on stdin (`-`) or with --prompt-file, not both" in r.stderr


def test_on_a_terminal_no_request_is_an_error_at_once_and_a_dash_reads_what_is_typed(tmp_path, fakes_on_path):
    import pexpect

    child = pexpect.spawn(sys.executable, ["-m", "acr_cli", "route"], cwd=str(tmp_path), encoding="utf-8", timeout=30)
    child.expect(pexpect.EOF)  # not waiting for the terminal: an error straight away
    child.close()
    assert child.exitstatus == 2 and "no request given" in child.before and 'acr route "' in child.before
    child = pexpect.spawn(sys.executable, ["-m", "acr_cli", "route", "-"], cwd=str(tmp_path), encoding="utf-8",
                          timeout=30)
    child.expect("type the request, then Ctrl-D")
    child.sendline("fix the failing parser test")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "bug_fix" in child.before, child.before


def test_help_says_a_dash_reads_stdin():
    for command in ("run", "route"):
        r = acr(command, "--help")
        assert "`-` reads it from stdin" in " ".join(r.stdout.split()), command
    assert "--prompt-file" in acr("route", "--help").stdout


# ---------------------------------------------------------------- 6. output that survives a pipe

def test_output_into_a_pipe_is_not_cut_at_80_columns(project, fakes_on_path, scenario, monkeypatch):
    monkeypatch.delenv("COLUMNS")  # as in a user's shell: bash does not export it
    scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--arms", LONG_ARM, cwd=project)
    assert r.returncode == 0, r.stderr
    task_id = tasks_in_memory()[0]["id"]
    assert any(line.startswith("done, unverified") and LONG_ARM in line and "attempt(s)" in line
               for line in r.stdout.splitlines()), r.stdout
    ending = [line for line in r.stdout.splitlines() if f"task {task_id}" in line]
    assert ending and ending[0].count("`") == 2, r.stdout  # the command to run next, on one line
    assert any(LONG_ARM in line and "attempt 1" in line for line in r.stderr.splitlines()), r.stderr
    shown = acr("memory", "show").stdout.splitlines()
    row = [line for line in shown if LONG_ARM in line]
    assert row and row[0].split()[-1].startswith("20"), shown  # its whole row: down to "last used"
    logged = [line for line in acr("memory", "log").stdout.splitlines() if LONG_ARM in line]
    assert logged and logged[0].rstrip().endswith("(unverified)"), logged
    doctor = acr("doctor").stdout.splitlines()
    ready = [line for line in doctor if "opencode:moonshotai/kimi-k2.5" in line]
    assert ready and "…" not in ready[0] and ready[0].rstrip().endswith(")"), doctor  # its whole reason
    assert all(line.count(str(project.parent)) <= 1 for line in doctor)


def test_columns_still_sets_the_width_of_piped_output(fakes_on_path):
    narrow = acr("doctor", env={"COLUMNS": "60"}).stdout.splitlines()
    wide = acr("doctor", env={"COLUMNS": "500"}).stdout.splitlines()
    assert max(map(len, narrow)) <= 60 < max(map(len, wide))


# ---------------------------------------------------------------- 7a. a budget nothing fits in

def _expected_costs(project: Path) -> dict[str, float]:
    out = json.loads(acr("route", "fix add", "--json", cwd=project).stdout)
    return {f"{o['agent']}:{o['model']}": o["expected_cost"] for o in out["order"]}


@pytest.mark.parametrize("budget", ["0.0001", "0"])
@pytest.mark.parametrize("verified", [True, False])
def test_a_max_cost_below_every_arm_is_refused_naming_the_cheapest(project, fakes_on_path, scenario, acr_home,
                                                                   budget, verified):
    log = scenario({"write": {"calc.py": GOOD}})
    costs = _expected_costs(project)
    cheapest = min(costs, key=costs.get)
    assert costs[cheapest] > float(budget)
    r = acr("run", "fix add", "--max-cost", budget, *(["--verify", VERIFY] if verified else []), cwd=project)
    assert r.returncode == 2, r.stderr
    if budget == "0":  # spent before it starts, whatever any arm costs
        assert "--max-cost $0 leaves nothing to spend; no agent was run" in r.stderr
    else:
        assert (f"--max-cost $0.0001 is less than any arm is expected to cost: the cheapest, {cheapest}, "
                f"~${costs[cheapest]:.4f} an attempt; nothing was run") in r.stderr
        assert "acr route --explain" in r.stderr
    assert "Traceback" not in r.stderr
    assert calls(log) == [] and tasks_in_memory() == []  # no empty task left in memory


def test_a_budget_nothing_fits_in_is_refused_before_the_baseline_check_runs(project, fakes_on_path, scenario,
                                                                            tmp_path, acr_home):
    """The baseline may take minutes on a real suite: a refusal that needs no verifier comes before it."""
    log = scenario({"write": {"calc.py": GOOD}})
    ran = tmp_path / "verifier-ran"
    check = f"touch {ran}; {VERIFY}"
    r = acr("run", "fix add", "--max-cost", "0.0001", "--verify", check, cwd=project)
    assert r.returncode == 2 and "--max-cost $0.0001 is less than any arm is expected to cost" in r.stderr
    assert not ran.exists() and calls(log) == [] and tasks_in_memory() == []
    # a budget from the settings is named by where it came from
    (acr_home / "config").mkdir(parents=True, exist_ok=True)
    (acr_home / "config" / "config.toml").write_text("max_cost = 0.0001\n")
    r = acr("run", "fix add", "--verify", check, "--json", cwd=project)
    assert r.returncode == 2 and not ran.exists()
    assert "max_cost (from " in r.stderr and "config.toml) $0.0001 is less than any arm" in r.stderr
    assert "max_cost (from " in json.loads(r.stdout)["error"]["message"]


def test_no_arm_that_can_run_is_refused_before_the_baseline_check_runs(project, fakes_on_path, scenario, tmp_path):
    scenario({"error": "401"})
    assert acr("run", "fix add", "--arms", "claude:claude-opus-4-6", "--verify", "false", "--yes",
               cwd=project).returncode == 1  # its login is refused: the arm is set aside
    ran = tmp_path / "verifier-ran"
    r = acr("run", "fix add", "--arms", "claude:claude-opus-4-6", "--verify", f"touch {ran}; {VERIFY}", cwd=project)
    assert r.returncode == 2 and "no arm of the plan can run here" in r.stderr, r.stderr
    assert not ran.exists()


def test_a_run_the_budget_stops_says_so_naming_the_budget(project, fakes_on_path, scenario, tmp_path):
    """The learned policy plans within the budget: when no further arm fits, the run names the budget, not
    "no arm left worth trying"."""
    scenario({"write": {"calc.py": BAD}, "cost": 0, "tokens": [0, 0]})
    costs = _expected_costs(project)
    ranked = sorted(costs, key=costs.get)
    budget = costs[ranked[0]] * 1.01
    assert costs[ranked[1]] > budget  # only the cheapest arm fits
    r = acr("run", "fix add", "--verify", VERIFY, "--max-cost", f"{budget:.6f}", "--json", cwd=project)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert len(out["attempts"]) == 1
    assert out["stop_reason"].startswith(f"stopped by the budget: --max-cost ${budget:.4f}, $0.00 spent; the next "
                                         "arm, "), out["stop_reason"]
    assert out["budget"] == {"max_cost": float(f"{budget:.6f}"), "spent": 0.0, "stopped": True}
    r = acr("run", "fix add", "--verify", VERIFY, "--max-cost", f"{budget:.6f}", "--memory", str(tmp_path / "m.sqlite"),
            cwd=project)
    assert r.returncode == 1 and "stopped by the budget: --max-cost" in " ".join(r.stdout.split())
    assert "no arm left worth trying" not in r.stdout
    # now the one arm that fits failed this very request lately: the plan within the budget is empty
    r = acr("run", "fix add", "--verify", VERIFY, "--max-cost", f"{budget:.6f}", cwd=project)
    assert r.returncode == 2 and f"--max-cost ${budget:.4f} leaves no arm the learned policy would try first" in r.stderr
    assert "no usable arm" not in r.stdout


def test_without_a_verifier_the_first_attempt_is_one_the_budget_covers(project, fakes_on_path, scenario):
    log = scenario({"write": {"calc.py": GOOD}})
    costs = _expected_costs(project)
    ranked = sorted(costs, key=costs.get)
    budget = costs[ranked[0]] * 1.01
    assert costs[ranked[1]] > budget  # only the cheapest arm fits
    r = acr("run", "fix add", "--max-cost", f"{budget:.6f}", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [f"{a['agent']}:{a['model']}" for a in out["attempts"]] == [ranked[0]]
    assert len(calls(log)) == 1


# ---------------------------------------------------------------- 7b/c. config set profile / verify ""

def test_config_set_profile_checks_the_profile_before_saving_it(acr_home, fakes_on_path):
    profiles = acr_home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "mine.yaml").write_text("description: mine\narms:\n  - agent: codex\n    model: gpt-5.4\n"
                                        "  - agent: nosuch\n    model: m\n")
    r = acr("config", "set", "profile", "mine")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"profile 'mine' is not valid, so it was not set: {profiles / 'mine.yaml'}:5: arms[1].agent: " \
           "unknown agent 'nosuch'" in r.stderr
    assert "acr profiles validate mine" in r.stderr
    assert not (acr_home / "config" / "config.toml").exists()
    assert acr("route", "fix add").returncode == 0  # nothing broken for the commands after it
    (profiles / "mine.yaml").write_text("description: mine\narms:\n  - agent: codex\n    model: gpt-5.4\n")
    assert acr("config", "set", "profile", "mine").returncode == 0
    assert "profile mine" in acr("route", "fix add").stdout


def test_config_set_verify_empty_means_no_verifier_over_the_profiles(project, fakes_on_path, scenario, acr_home):
    profiles = acr_home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "checked.yaml").write_text("extends: balanced\nsettings:\n  verify: exit 1\n")
    assert acr("config", "set", "profile", "checked").returncode == 0
    r = acr("config", "set", "verify", "")
    assert r.returncode == 0, r.stderr
    assert 'verify = ""' in (acr_home / "config" / "config.toml").read_text()
    shown = [line for line in acr("config", "show", cwd=project).stdout.splitlines() if "verify " in line]
    assert "(none: no verifier)" in shown[0] and "config.toml" in shown[0]
    scenario({"write": {"calc.py": BAD}})  # a verifier would fail this; with none, the agent's word decides
    r = acr("run", "fix add", "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "unverified" and "verify: none" in r.stderr


def test_a_project_verify_empty_means_no_verifier_over_the_users(project, fakes_on_path, scenario, acr_home):
    assert acr("config", "set", "verify", "exit 1").returncode == 0
    (project / ".acr.toml").write_text('verify = ""\n')
    scenario({"write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--arms", "codex:gpt-5.4", "--json", cwd=project)  # untrusted: the user's wins
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "failed" and "not trusted" in r.stderr
    assert acr("trust", cwd=project).returncode == 0
    r = acr("run", "fix add", "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "unverified" and "verify: none" in r.stderr
    (project / ".acr.toml").unlink()
    git(project, "checkout", "--", "calc.py")
    r = acr("run", "fix add", "--arms", "codex:gpt-5.4", "--json", cwd=project)  # the user's `exit 1` again
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "failed"


# ---------------------------------------------------------------- 7d. repositories git refuses or acr cannot write

def test_a_repository_git_takes_for_another_users_gets_the_safe_directory_fix(project, fakes_on_path, scenario,
                                                                              tmp_path, monkeypatch):
    # git's own switch for "the repository is not owned by you" (git >= 2.35.2); acr passes no GIT_* variable
    # to git, so a wrapper sets it the way a different owner would make git see it
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\nGIT_TEST_ASSUME_DIFFERENT_OWNER=1 exec {shutil.which("git")} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, cwd=project)
    assert r.returncode == 2, r.stderr
    assert "dubious ownership" in r.stderr and "not inside a git repository" not in r.stderr
    assert f"git config --global --add safe.directory {project}" in r.stderr
    assert calls(log) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another user")
def test_a_repository_owned_by_another_user_names_the_owner(project, fakes_on_path, scenario):
    log = scenario({"write": {"calc.py": GOOD}})
    os.chown(project, 65534, 65534)
    try:
        r = acr("run", "fix add", "--verify", VERIFY, cwd=project)
    finally:
        os.chown(project, 0, 0)
    assert r.returncode == 2 and "not to you (root)" in r.stderr, r.stderr
    assert f"git config --global --add safe.directory {project}" in r.stderr
    assert calls(log) == []


def run_with_git_dir_read_only(project, *flags: str):
    """`acr run` in ``project`` while its .git is mode 0555 (put back afterwards)."""
    (project / ".git").chmod(0o555)
    try:
        return acr("run", "fix add", "--verify", VERIFY, *flags, cwd=project)
    finally:
        (project / ".git").chmod(0o755)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_git_directory_is_explained_not_a_bare_lock_file_error(project, fakes_on_path, scenario):
    log = scenario({"write": {"calc.py": GOOD}})
    r = run_with_git_dir_read_only(project)
    assert r.returncode == 2, r.stderr
    assert f"acr cannot write to {project / '.git' / 'acr-run.lock'} (Permission denied)" in r.stderr
    assert f"chmod -R u+w {project / '.git'}" in r.stderr and "Traceback" not in r.stderr
    assert calls(log) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_no_rollback_runs_in_a_repository_whose_git_directory_is_read_only(project, fakes_on_path, scenario):
    log = scenario({"write": {"calc.py": GOOD}})
    r = run_with_git_dir_read_only(project, "--no-rollback", "--yes")
    assert r.returncode == 0, r.stderr  # --no-rollback writes nothing to .git: the lock is not needed
    assert len(calls(log)) == 1
