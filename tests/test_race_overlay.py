"""Race lanes as copy-on-write overlays (``race_lanes``), through the real CLI, git, the kernel and the fakes.

These need a kernel that lets acr mount overlays in a user namespace of its own; where it cannot, they are
skipped, unless ACR_REQUIRE_OVERLAY=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import BAD, GOOD, VERIFY, acr, git, init_repo
from test_race import (
    ARMS,
    FAILING,
    FAST,
    git_state,
    kill_race,
    race_dirs,
    race_processes,
    start_race,
    three_arms,
    user_edits,
)

from acr_cli.workspace import overlay


@pytest.fixture(scope="module")
def can_overlay() -> None:
    why = overlay.probe()
    if why is not None:
        if os.environ.get("ACR_REQUIRE_OVERLAY") == "1":
            pytest.fail(f"overlay lanes cannot start here: {why}")
        pytest.skip(f"overlay lanes cannot start here: {why}")


@pytest.fixture
def overlay_lanes(acr_home, can_overlay) -> Path:
    """acr's user settings ask for overlay lanes (``auto`` falls back to worktrees where they cannot be)."""
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('race_lanes = "overlay"\n')
    return config


def mounts_of(pid: int) -> str:
    return Path(f"/proc/{pid}/mountinfo").read_text()


def test_overlay_race_keeps_the_fast_arms_change_on_the_users_work(project, fakes_on_path, scenario, acr_home,
                                                                   overlay_lanes):
    three_arms(scenario)
    before = user_edits(project)
    state = git_state(project)
    staged = git(project, "diff", "--cached", "--name-status")
    t0 = time.monotonic()
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", ARMS, "--race", "3", "--json", cwd=project)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {a["agent"]: a["verdict"] for a in out["attempts"]} == {"opencode": "failed", "codex": "passed",
                                                                  "claude": "cancelled"}
    assert took < 30
    assert (project / "calc.py").read_text() == GOOD and (project / "bin.dat").read_bytes() == b"\x00\x01"
    assert {p: (project / p).read_bytes() for p in before} == before
    assert git(project, "diff", "--cached", "--name-status") == staged
    assert git_state(project) == state
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []
    assert "acr-race-" not in mounts_of(os.getpid())  # the mounts were acr's alone


def test_an_overlay_lane_is_the_users_repository_and_its_git_writes_stay_in_it(project, fakes_on_path, scenario,
                                                                              acr_home, overlay_lanes):
    """A lane shows the user's ignored files and index as they are; a commit, a branch and a config change made
    in a lane never reach the user's repository, and the winner's change arrives as a change of files."""
    probe = ("import os; open('seen.txt','w').write(repr(sorted(os.listdir('.'))) + open('test_calc.py').read()[-20:]"
             " + open('.env').read())")
    lane_git = [[sys.executable, "-c", probe], ["git", "add", "-A"],
                ["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "lane"],
                ["git", "branch", "from-the-lane"], ["git", "config", "core.hooksPath", "/tmp/evil"]]
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}, "commands": lane_git},
             {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", "--json",
            cwd=project)
    assert r.returncode == 0, r.stderr
    seen = (project / "seen.txt").read_text()
    assert "'.env'" in seen and "TOKEN=abc" in seen and "the user's note" in seen and "'notes.txt'" in seen
    assert (project / "calc.py").read_text() == GOOD
    assert {p: (project / p).read_bytes() for p in before} == before
    assert git_state(project) == state  # no branch, no commit, no config from the lane
    assert "from-the-lane" not in git(project, "branch")


def test_a_killed_overlay_race_leaves_no_mount_and_acr_recover_removes_its_layers(project, fakes_on_path, scenario,
                                                                                 acr_home, overlay_lanes):
    three_arms(scenario, fast={"sleep": 60})
    before = user_edits(project)
    state = git_state(project)
    proc = start_race(project, acr_home)
    assert "acr-race-" in mounts_of(proc.pid) and "acr-race-" not in mounts_of(os.getpid())
    kill_race(proc, acr_home)
    assert race_dirs(acr_home)  # the layers of the killed race
    r = acr("recover", "--kill", "--json", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {p: (project / p).read_bytes() for p in before} == before
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == [] and git_state(project) == state


def test_overlay_lanes_where_they_cannot_be_refuse_and_auto_falls_back(tmp_path, fakes_on_path, scenario, acr_home,
                                                                        overlay_lanes):
    """A linked worktree's git directory lives outside its work tree: an overlay of the work tree would write
    through to it, so ``overlay`` refuses (exit 2, no agent run) and ``auto`` races in worktrees."""
    main = init_repo(tmp_path / "main", {"calc.py": "def add(a, b):\n    return a * b\n",
                                         "test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                         "    assert add(2, 3) == 5\n"})
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "--detach", str(linked))
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
                   {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", cwd=linked)
    assert r.returncode == 2 and "race_lanes" in r.stderr and "git directory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (log.parent / "calls.jsonl").exists()
    overlay_lanes.write_text('race_lanes = "auto"\n')
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", cwd=linked)
    assert r.returncode == 0, r.stderr
    assert (linked / "calc.py").read_text() == GOOD
    assert "own worktree (not an overlay: the repository" in " ".join(r.stderr.split())


def test_doctor_says_how_race_lanes_are_made(project, acr_home, overlay_lanes):
    r = acr("doctor", "--json", cwd=project)
    out = json.loads(r.stdout)
    assert out["race_lanes"] == {"setting": "overlay", "source": str(overlay_lanes), "lanes": "overlay",
                                 "problem": None}
    assert not any("race_lanes" in p for p in out["problems"])
    overlay_lanes.write_text("")
    assert json.loads(acr("doctor", "--json", cwd=project).stdout)["race_lanes"] == {
        "setting": "auto", "source": "default", "lanes": "overlay", "problem": None}
    overlay_lanes.write_text('race_lanes = "worktree"\n')
    assert json.loads(acr("doctor", "--json", cwd=project).stdout)["race_lanes"]["lanes"] == "worktree"
    overlay_lanes.write_text('race_lanes = "copy"\n')
    r = acr("doctor", cwd=project)
    assert r.returncode == 2 and "race_lanes" in r.stderr and "auto, overlay or worktree" in r.stderr
    assert "Traceback" not in r.stderr


def test_race_setup_runs_in_each_overlay_lane_and_stays_there(project, fakes_on_path, scenario, acr_home,
                                                              overlay_lanes, tmp_path):
    from test_race import agent_probe

    scenario({"match": {"agent": "codex"}, "commands": [agent_probe(tmp_path / "codex.txt")], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "commands": [agent_probe(tmp_path / "opencode.txt")],
              "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", "--json",
            "--race-setup", 'echo "set up $ACR_RACE_SLOT" > setup.txt', cwd=project)
    assert r.returncode == 0, r.stderr
    seen = {agent: (tmp_path / f"{agent}.txt").read_text().split("|") for agent in ("codex", "opencode")}
    assert sorted(s[0] for s in seen.values()) == ["0", "1"]
    for slot, lane, cwd, setup in seen.values():
        assert "acr-race-" in lane and os.path.realpath(cwd) == os.path.realpath(lane)
        assert setup == f"set up {slot}"
    assert (project / "calc.py").read_text() == GOOD and not (project / "setup.txt").exists()
    assert race_processes(acr_home) == [] and race_dirs(acr_home) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="what root keeps in the namespace")
def test_root_keeps_its_power_over_other_users_files_in_an_overlay_lane(project, fakes_on_path, scenario,
                                                                        acr_home, overlay_lanes):
    """As root, every uid is mapped in acr's namespace: an agent reads and changes a file that belongs to
    another user (mode 600), as it could outside a race."""
    theirs = project / "theirs.txt"
    theirs.write_text("another user's file\n")
    os.chown(theirs, 12345, 12345)
    theirs.chmod(0o600)
    copy = [sys.executable, "-c", "open('seen.txt','w').write(open('theirs.txt').read()); "
                                  "open('theirs.txt','a').write('changed\\n')"]
    scenario({"match": {"agent": "codex"}, "commands": [copy], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "seen.txt").read_text() == "another user's file\n"
    assert theirs.read_text() == "another user's file\nchanged\n"


@pytest.mark.parametrize("lanes", ["overlay", "worktree"])
def test_an_arm_that_breaks_its_own_lane_fails_alone(project, fakes_on_path, scenario, acr_home, overlay_lanes,
                                                    lanes):
    """An arm that removes its lane's .git passes its check but its work cannot be read back: its attempt is an
    error, the task goes on (here: no arm left) and the user's repository is untouched."""
    overlay_lanes.write_text(f'race_lanes = "{lanes}"\n')
    scenario({"match": {"agent": "codex"}, "commands": [["rm", "-rf", ".git"]], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", f"{FAST},{FAILING}", "--race", "2", "--json",
            cwd=project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    codex = next(a for a in json.loads(r.stdout)["attempts"] if a["agent"] == "codex")
    assert codex["verdict"] == "error" and "its lane could not be read back" in codex["detail"]
    assert {p: (project / p).read_bytes() for p in before} == before and git_state(project) == state
    assert race_dirs(acr_home) == [] and race_processes(acr_home) == []
