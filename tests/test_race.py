"""`acr run --race N`: arms side by side in worktree lanes, through the real CLI, git and the fake agents.

Every test here races in git worktrees (``race_lanes = "worktree"``); tests/test_race_overlay.py runs the
same race in overlay lanes, which ``auto`` chooses where the kernel allows."""

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
from conftest import BAD, FAKES, GOOD, VERIFY, acr, calls, git

from acr_cli import sandbox

FAILING, FAST, SLOW = "opencode:moonshotai/kimi-k2.5", "codex:gpt-5.4", "claude:claude-opus-4-6"
ARMS = f"{FAILING},{FAST},{SLOW}"


@pytest.fixture(autouse=True)
def worktree_lanes(acr_home) -> Path:
    """acr's user settings: race lanes are git worktrees."""
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('race_lanes = "worktree"\n')
    return config


def three_arms(scenario, slow_sleep: float = 40, fast: dict | None = None) -> Path:
    """The issue's race: one arm failing at once, one passing after 4 s, one that would pass after 40 s."""
    return scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}},
                    {"match": {"agent": "codex"}, "sleep": 4, "write": {"calc.py": GOOD, "bin.dat": "\x00\x01"},
                     **(fast or {})},
                    {"match": {"agent": "claude"}, "sleep": slow_sleep, "write": {"calc.py": GOOD}})


def user_edits(project: Path) -> dict[str, bytes]:
    """Uncommitted work of the user's: an unstaged edit, a staged new file, an untracked file, an ignored .env."""
    (project / ".gitignore").write_text(".env\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore .env")
    with open(project / "test_calc.py", "a") as f:
        f.write("\n# the user's note\n")
    (project / "staged.txt").write_text("staged\n")
    git(project, "add", "staged.txt")
    (project / "notes.txt").write_text("untracked\n")
    (project / ".env").write_text("TOKEN=abc\n")
    return {p: (project / p).read_bytes() for p in ("test_calc.py", "staged.txt", "notes.txt", ".env")}


def git_state(project: Path) -> dict[str, bytes]:
    """What the user's repository must keep byte for byte: config, HEAD, the index, every ref."""
    d = project / ".git"
    return {"config": (d / "config").read_bytes(), "HEAD": (d / "HEAD").read_bytes(), "index": (d / "index").read_bytes(),
            "refs": git(project, "for-each-ref").encode(), "worktrees": git(project, "worktree", "list").encode()}


def race_processes(acr_home: Path, agents_only: bool = False) -> list[int]:
    """Live processes whose working directory is a race lane of this test's acr (not another test's, which
    may run beside it); ``agents_only``: the fake agents alone (not git filling a worktree lane)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd") if pid.isdigit() else ""
            if "acr-race-" not in cwd or not cwd.startswith(os.path.realpath(acr_home)):
                continue
            if agents_only and str(FAKES) not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                continue
            found.append(int(pid))
        except OSError:
            pass
    return found


def race_dirs(acr_home: Path) -> list[Path]:
    return list((acr_home / "data").rglob("acr-race-*"))


def test_race_of_three_keeps_the_fast_arms_change_on_the_users_work_and_cancels_the_slow_one(
        project, fakes_on_path, scenario, acr_home):
    three_arms(scenario)
    before = user_edits(project)
    state = git_state(project)
    staged = git(project, "diff", "--cached", "--name-status")
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", ARMS, "--race", "3", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    verdicts = {a["agent"]: a["verdict"] for a in out["attempts"]}
    assert verdicts == {"opencode": "failed", "codex": "passed", "claude": "cancelled"}
    by_agent = {a["agent"]: a["seq"] for a in out["attempts"]}
    assert out["race"]["winner"] == by_agent["codex"] and sorted(out["race"]["attempts"]) == [1, 2, 3]
    assert "codex:gpt-5.4 passed first" in next(a["detail"] for a in out["attempts"] if a["agent"] == "claude")
    # the winner's change, on top of the user's uncommitted work, the index as the user left it
    assert (project / "calc.py").read_text() == GOOD and (project / "bin.dat").read_bytes() == b"\x00\x01"
    assert {p: (project / p).read_bytes() for p in before} == before
    assert git(project, "diff", "--cached", "--name-status") == staged
    assert git_state(project) == state  # config, HEAD, index, refs and worktrees byte for byte
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT COUNT(DISTINCT task_id), COUNT(*) FROM attempts").fetchone() == (1, 3)


def test_race_worktrees_get_the_users_state_and_race_copy_files(project, fakes_on_path, scenario, acr_home):
    """Each arm sees HEAD plus the user's staged, unstaged and untracked work; ignored files only as copied
    (``race_copy``); ``race`` in config.toml races without the flag."""
    probe = ("import os,sys; open('seen.txt','w').write(repr(sorted(os.listdir('.'))) + "
             "open('test_calc.py').read()[-20:])")
    scenario({"match": {"agent": "codex"}, "commands": [[sys.executable, "-c", probe]], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    user_edits(project)
    (project / "local.cfg").write_text("ignored, not copied\n")
    with open(project / ".git" / "info" / "exclude", "a") as f:
        f.write("local.cfg\n")
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", cwd=project)
    assert r.returncode == 0, r.stderr
    seen = (project / "seen.txt").read_text()
    assert "'notes.txt'" in seen and "'staged.txt'" in seen and "the user's note" in seen and "'.env'" not in seen
    git(project, "checkout", "-q", "calc.py")
    (project / "seen.txt").unlink()
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config.read_text() + 'race = 2\nrace_copy = [".env"]\n')
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["race"]["attempts"] == [1, 2]
    seen = (project / "seen.txt").read_text()
    assert "'.env'" in seen and "'local.cfg'" not in seen


@pytest.mark.parametrize("lanes", ["worktree", "overlay"])
def test_an_arm_writing_into_the_users_work_tree_is_reported_and_undone(project, fakes_on_path, scenario, acr_home,
                                                                       worktree_lanes, lanes):
    """With either kind of lane, a write by absolute path into the user's work tree spoils the race."""
    if lanes == "overlay":
        from acr_cli.workspace import overlay

        if overlay.probe() is not None:
            pytest.skip(f"overlay lanes cannot start here: {overlay.probe()}")
        worktree_lanes.write_text('race_lanes = "overlay"\n')
    hostile = [sys.executable, "-c", f"open({str(project / 'planted.py')!r}, 'w').write('x = 1')"]
    scenario({"match": {"agent": "codex"}, "commands": [hostile], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    before = user_edits(project)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2",
            "--max-attempts", "2", "--json", cwd=project)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    codex = next(a for a in out["attempts"] if a["agent"] == "codex")
    assert codex["verdict"] == "failed" and "planted.py" in codex["detail"] and "outside its worktree" in codex["detail"]
    assert out["race"]["winner"] is None and "planted.py" in out["race"]["note"]
    assert not (project / "planted.py").exists() and (project / "calc.py").read_text() != GOOD
    assert {p: (project / p).read_bytes() for p in before} == before
    assert race_dirs(acr_home) == []


def test_a_race_that_all_fails_goes_on_escalating_with_the_arms_left(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD}},
             {"match": {"agent": "codex"}, "write": {"calc.py": BAD}},
             {"match": {"agent": "claude"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAILING},{FAST},{SLOW}", "--race", "2", "--json",
            cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(a["seq"], a["agent"], a["verdict"]) for a in out["attempts"]] == [
        (1, "opencode", "failed"), (2, "codex", "failed"), (3, "claude", "passed")]
    assert out["race"] == {"attempts": [1, 2], "winner": None, "pick": "first", "note": None}
    assert (project / "calc.py").read_text() == GOOD


def test_cheapest_pick_waits_for_all_and_keeps_the_cheaper_pass(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "codex"}, "tokens": [2000000, 200000], "write": {"calc.py": GOOD}},
             {"match": {"agent": "claude"}, "sleep": 2, "cost": 0.01,
              "write": {"calc.py": "def add(a, b):\n    return b + a\n"}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{SLOW}", "--race", "2", "--race-pick", "cheapest",
            "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {a["agent"]: a["verdict"] for a in out["attempts"]} == {"codex": "passed", "claude": "passed"}
    assert out["race"]["winner"] == next(a["seq"] for a in out["attempts"] if a["agent"] == "claude")
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"


def test_a_same_size_change_made_at_once_is_applied(project, fakes_on_path, scenario, acr_home):
    """The winner rewrites calc.py at once, with as many bytes as before: its change is applied all the same."""
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "calc.py").read_text() == GOOD


def test_race_needs_rollback(project, fakes_on_path, scenario):
    r = acr("run", "fix add", "--arms", ARMS, "--race", "2", "--no-rollback", cwd=project)
    assert r.returncode == 2 and "--race" in r.stderr and "Traceback" not in r.stderr


def start_race(project: Path, acr_home: Path) -> subprocess.Popen:
    """``acr run --race 3`` in the background, once at least two of its arms run."""
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms", ARMS,
                             "--race", "3"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(race_processes(acr_home, agents_only=True)) < 2:
        time.sleep(0.2)
    assert race_processes(acr_home, agents_only=True)
    return proc


def kill_race(proc: subprocess.Popen, acr_home: Path) -> None:
    """SIGKILL acr (no clean-up of its own), then wait for its arms' processes to end."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and race_processes(acr_home):
        time.sleep(0.2)


def test_a_killed_race_is_recovered_with_acr_recover(project, fakes_on_path, scenario, acr_home):
    three_arms(scenario, fast={"sleep": 60})
    before = user_edits(project)
    state = git_state(project)
    proc = start_race(project, acr_home)
    (project / "calc.py").write_text("half done\n")  # what a race killed mid-apply could leave
    kill_race(proc, acr_home)
    r = acr("recover", "--kill", "--json", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {p: (project / p).read_bytes() for p in before} == before
    assert (project / "calc.py").read_text() != "half done\n"
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []
    assert git_state(project) == state


def test_ctrl_c_ends_every_arm_records_them_cancelled_and_leaves_the_work_tree(project, fakes_on_path, scenario,
                                                                                acr_home):
    scenario({"match": {"agent": "codex"}, "sleep": 60, "write": {"calc.py": GOOD}},
             {"match": {"agent": "claude"}, "sleep": 60, "write": {"calc.py": GOOD}})
    before = user_edits(project)
    state = git_state(project)
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", "fix add", "--verify", VERIFY, "--arms",
                             f"{FAST},{SLOW}", "--race", "2", "--json"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(race_processes(acr_home, agents_only=True)) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert {a["agent"]: a["verdict"] for a in json.loads(out)["attempts"]} == {"codex": "cancelled",
                                                                               "claude": "cancelled"}
    assert {p: (project / p).read_bytes() for p in before} == before and "return a * b" in (project / "calc.py").read_text()
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == [] and git_state(project) == state


def agent_probe(out: Path) -> list[str]:
    """A command a fake agent runs: writes to ``out`` its race slot, worktree, directory and what the set-up left."""
    code = ("import os,sys; s=open('setup.txt').read().strip() if os.path.exists('setup.txt') else 'no setup'; "
            "open(sys.argv[1],'w').write('|'.join([os.environ.get('ACR_RACE_SLOT','-'), "
            "os.environ.get('ACR_RACE_WORKTREE','-'), os.getcwd(), s]))")
    return [sys.executable, "-c", code, str(out)]


def test_race_setup_runs_in_each_worktree_before_its_agent_and_every_lane_knows_its_slot(
        project, fakes_on_path, scenario, acr_home, tmp_path):
    """``--race-setup`` runs in each worktree before its agent; the set-up, the agent and the verifier see
    ACR_RACE_SLOT and ACR_RACE_WORKTREE; what the set-up wrote is not part of the winner's change."""
    scenario({"match": {"agent": "codex"}, "commands": [agent_probe(tmp_path / "codex.txt")], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "commands": [agent_probe(tmp_path / "opencode.txt")],
              "write": {"calc.py": BAD}})
    verify = f'echo "$ACR_RACE_SLOT $ACR_RACE_WORKTREE" >> {tmp_path}/verifier.txt && {VERIFY}'
    r = acr("run", "fix add", "--verify", verify, "--arms", f"{FAST},{FAILING}", "--race", "2", "--json",
            "--race-setup", 'echo "set up $ACR_RACE_SLOT in $PWD" > setup.txt', cwd=project)
    assert r.returncode == 0, r.stderr
    seen = {agent: (tmp_path / f"{agent}.txt").read_text().split("|") for agent in ("codex", "opencode")}
    assert sorted(s[0] for s in seen.values()) == ["0", "1"]
    for slot, worktree, cwd, setup in seen.values():
        assert "acr-race-" in worktree and os.path.realpath(cwd) == os.path.realpath(worktree)
        assert setup == f"set up {slot} in {cwd}"  # the set-up ran there first, with the lane's slot
    checked = {line for line in (tmp_path / "verifier.txt").read_text().splitlines() if line.strip()}
    assert checked == {f"{s[0]} {s[1]}" for s in seen.values()}  # each lane's verifier, in its own worktree
    assert (project / "calc.py").read_text() == GOOD and not (project / "setup.txt").exists()
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []


def test_a_lane_whose_race_setup_fails_is_an_error_without_its_agent_and_the_others_go_on(
        project, fakes_on_path, scenario, acr_home):
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
                   {"match": {"agent": "claude"}, "write": {"calc.py": GOOD}})
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config.read_text()
                      + "race_setup = 'test \"$ACR_RACE_SLOT\" != 0 || { echo no database for slot 0 >&2; exit 3; }'\n")
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{SLOW}", "--race", "2", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    failed = [a for a in out["attempts"] if a["verdict"] == "error"]
    passed = [a for a in out["attempts"] if a["verdict"] == "passed"]
    assert len(failed) == 1 and len(passed) == 1 and out["race"]["winner"] == passed[0]["seq"]
    detail = failed[0]["detail"]
    assert "race setup" in detail and "exit 3" in detail and "no database for slot 0" in detail
    assert "agent was not started" in detail
    assert not failed[0]["cost_usd"] and failed[0]["tokens_in"] is None and failed[0]["health"] is None
    assert [c["agent"] for c in calls(log)] == [passed[0]["agent"]]  # the failed lane's agent never ran
    assert (project / "calc.py").read_text() == GOOD
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []
    db = sqlite3.connect(acr_home / "data" / "memory.sqlite")
    assert db.execute("SELECT COUNT(*) FROM attempts WHERE verdict = 'error'").fetchone() == (1,)


def test_an_untrusted_project_file_cannot_set_race_setup(project, fakes_on_path, scenario, acr_home, tmp_path):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
             {"match": {"agent": "claude"}, "sleep": 1, "write": {"calc.py": GOOD}})
    ran = tmp_path / "setup-ran"
    (project / ".acr.toml").write_text(f"race_setup = 'touch {ran}'\n")
    git(project, "add", ".acr.toml")
    git(project, "commit", "-qm", "project settings")
    args = ("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{SLOW}", "--race", "2")
    r = acr(*args, cwd=project)
    assert r.returncode == 0, r.stderr
    assert "race_setup" in r.stderr and "not trusted" in r.stderr and not ran.exists()
    git(project, "checkout", "-q", "calc.py")
    assert acr("trust", cwd=project).returncode == 0
    r = acr(*args, cwd=project)
    assert r.returncode == 0, r.stderr
    assert ran.exists()


def test_a_losers_running_verifier_is_stopped_when_the_winner_passes(project, fakes_on_path, scenario, acr_home):
    """The loser's agent is done and its verifier sleeps a minute when the other arm passes: the verifier's
    process group is ended at once, the loser is cancelled, nothing is left running."""
    scenario({"match": {"agent": "claude"}, "write": {"calc.py": GOOD, "slow.flag": "1"}},
             {"match": {"agent": "codex"}, "sleep": 3, "write": {"calc.py": GOOD}})
    verify = f"if [ -f slow.flag ]; then sleep 60; fi; {VERIFY}"
    started = time.monotonic()
    r = acr("run", "fix add", "--verify", verify, "--arms", f"{FAST},{SLOW}", "--race", "2", "--json",
            "--no-baseline", cwd=project)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    by_agent = {a["agent"]: a for a in out["attempts"]}
    assert by_agent["codex"]["verdict"] == "passed" and by_agent["claude"]["verdict"] == "cancelled"
    assert "codex:gpt-5.4 passed first" in by_agent["claude"]["detail"] and "check was stopped" in by_agent["claude"]["detail"]
    assert took < 30, took
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []
    assert (project / "calc.py").read_text() == GOOD and not (project / "slow.flag").exists()


def test_a_race_setup_still_running_when_another_arm_passes_is_stopped(project, fakes_on_path, scenario, acr_home):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
             {"match": {"agent": "claude"}, "write": {"calc.py": GOOD}})
    started = time.monotonic()
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{SLOW}", "--race", "2", "--json",
            "--race-setup", 'if [ "$ACR_RACE_SLOT" = 1 ]; then sleep 60; fi', cwd=project)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    verdicts = sorted(a["verdict"] for a in json.loads(r.stdout)["attempts"])
    assert verdicts == ["cancelled", "passed"] and took < 30, (verdicts, took)
    stopped = next(a for a in json.loads(r.stdout)["attempts"] if a["verdict"] == "cancelled")
    assert "passed first" in stopped["detail"] and "before its agent started" in stopped["detail"]
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []


def test_a_sandboxed_races_setup_writes_only_its_worktree(project, fakes_on_path, acr_home, tmp_path, monkeypatch):
    why = sandbox.problem()
    if why:
        pytest.skip(why)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's\n")
    rules = [{"match": {"agent": agent}, "write": {"calc.py": GOOD}} for agent in ("codex", "claude")]
    (tmp_path / "scenario.json").write_text(json.dumps({"rules": rules}))  # no call log: it would be outside
    monkeypatch.setenv("FAKE_AGENT_SCENARIO", str(tmp_path / "scenario.json"))
    r = acr("run", "fix add", "--verify", f"test -f set-up.txt && {VERIFY}", "--arms", f"{FAST},{SLOW}",
            "--race", "2", "--sandbox", "bwrap", "--no-baseline", "--json",
            "--race-setup", f"echo pwned >> {outside}; echo done > set-up.txt", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "passed" in {a["verdict"] for a in json.loads(r.stdout)["attempts"]}
    assert outside.read_text() == "the user's\n" and not (project / "set-up.txt").exists()


def test_race_setup_without_a_race_is_refused(project, fakes_on_path, scenario):
    log = scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", FAST, "--race-setup", "npm ci", cwd=project)
    assert r.returncode == 2 and "--race-setup" in r.stderr and "does not race" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and calls(log) == []
