"""`acr gc`: what acr kept to be safe goes once it is old, never what a killed run's checkpoint needs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import GOOD, VERIFY, acr, git

from acr_cli.workspace import Workspace

OLD = "20250101-000000-aaaaaa-1"  # a task of long ago (task ids begin with their UTC start)
PENDING = "20250101-000000-bbbbbb-1"  # a killed run's, as old, whose checkpoint `acr recover` still needs


def _plant_old(root: Path, name: str) -> None:
    """What a run of long ago left: a put-aside folder and refs of that name."""
    folder = root / ".git" / "acr" / "put-aside" / name
    folder.mkdir(parents=True)
    (folder / ".env").write_text("DB_PASS=old\n")
    git(root, "update-ref", f"refs/acr/put-aside/{name}/heads/main", "HEAD")
    git(root, "update-ref", f"refs/acr/before/{name}", "HEAD")


def _kept_attempts(home: Path) -> list[str]:
    stores = list((home / "data" / "checkpoints").glob("*/attempts"))
    if not stores:
        return []
    out = subprocess.run(["git", "--git-dir", str(stores[0]), "for-each-ref", "--format=%(refname)"],
                         capture_output=True, text=True).stdout
    return out.split()


def test_gc_prunes_what_is_old_and_never_what_a_pending_recovery_needs(project, fakes_on_path, scenario, acr_home):
    root = project
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text("DB_PASS=mine\n")
    scenario({"match": {"call": 1}, "write": {"calc.py": "broken\n"}},  # a failed attempt: its work is kept
             {"write": {"calc.py": GOOD, ".env": "DB_PASS=the-agents\n"}})  # a pass that changed .env
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4,claude:claude-opus-4-6", cwd=root)
    assert r.returncode == 0, r.stderr
    recent = [p.name for p in (root / ".git" / "acr" / "put-aside").iterdir()]
    assert len(recent) == 1 and len(_kept_attempts(acr_home)) == 1
    _plant_old(root, OLD)
    _plant_old(root, PENDING)
    Workspace.open(root).checkpoint(PENDING)  # then acr was killed mid-attempt
    (root / "calc.py").write_text("the killed attempt's edit\n")

    r = acr("gc", "--dry-run", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["put_aside_folders"] == [OLD] and out["dry_run"] is True and out["older_than_days"] == 30
    assert sorted(out["refs"]) == [f"refs/acr/before/{OLD}", f"refs/acr/put-aside/{OLD}/heads/main"]
    assert out["kept_attempts"] == [] and out["left_for_recovery"] == [PENDING]
    assert (root / ".git" / "acr" / "put-aside" / OLD).exists()  # a dry run removes nothing

    r = acr("gc", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "removed 1 put-aside folder(s), 2 ref(s) under refs/acr, 0 kept failed attempt(s) older than 30 days" \
        in r.stdout
    assert f"left what a killed run's checkpoint needs ({PENDING}): `acr recover` first" in " ".join(r.stdout.split())
    left = sorted(p.name for p in (root / ".git" / "acr" / "put-aside").iterdir())
    assert left == sorted([PENDING, *recent])  # the recent one stays for 30 days
    assert git(root, "for-each-ref", "--format=%(refname)", f"refs/acr/before/{OLD}") == ""

    r = acr("gc", "--older-than", "0", "--json", cwd=root)  # everything, but what the checkpoint needs
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["put_aside_folders"] == recent and len(out["kept_attempts"]) == 1
    assert _kept_attempts(acr_home) == []
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/acr").split()
    assert sorted(refs) == sorted([f"refs/acr/before/{PENDING}", f"refs/acr/keep/{PENDING}",
                                   f"refs/acr/put-aside/{PENDING}/heads/main"])
    r = acr("recover", cwd=root)  # the checkpoint still recovers
    assert r.returncode == 0, r.stderr
    assert (root / "calc.py").read_text() == GOOD


def test_a_run_prunes_what_is_old_at_most_once_a_day(project, fakes_on_path, scenario, acr_home):
    root = project
    scenario({"write": {"calc.py": GOOD}})
    _plant_old(root, OLD)
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    assert not (root / ".git" / "acr" / "put-aside" / OLD).exists()
    assert "acr: removed 1 put-aside folder(s), 2 ref(s) under refs/acr" in r.stderr
    assert "(`acr gc`, at most once a day)" in r.stderr
    again = "20250101-000000-cccccc-1"
    _plant_old(root, again)
    git(root, "checkout", "-q", "calc.py")
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    assert (root / ".git" / "acr" / "put-aside" / again).exists() and "acr gc" not in r.stderr  # not the same day


def test_gc_refuses_a_bad_age_and_outside_git(tmp_path, acr_home):
    r = acr("gc", "--older-than", "soon", cwd=tmp_path)
    assert r.returncode == 2 and "--older-than 'soon': expected an age like 30d" in r.stderr
    r = acr("gc", cwd=tmp_path)
    assert r.returncode == 2 and "not inside a git repository" in r.stderr and "Traceback" not in r.stderr


def test_gc_leaves_what_a_killed_run_in_another_worktree_needs(project, tmp_path, acr_home):
    """refs/acr and .git/acr are the repository's, shared by its linked worktrees."""
    other = tmp_path / "other"
    git(project, "worktree", "add", "-q", "-b", "other", str(other))
    _plant_old(project, PENDING)
    Workspace.open(other).checkpoint(PENDING)  # a run in the other worktree was killed
    r = acr("gc", "--older-than", "0", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["refs"] == [] and out["put_aside_folders"] == [] and out["left_for_recovery"] == [PENDING]
    assert f"refs/acr/keep/{PENDING}" in git(project, "for-each-ref", "--format=%(refname)", "refs/acr")
    assert acr("recover", cwd=other).returncode == 0


def test_gc_removes_what_finished_race_lanes_kept(project, fakes_on_path, scenario, acr_home):
    """Each raced arm checkpoints its lane in a store of its own, where a losing arm's work is kept (with the
    command to see it); once that is old, gc prunes it and removes the lane's store whole."""
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": "broken\n"}},
             {"match": {"agent": "codex"}, "sleep": 1, "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4",
            "--race", "2", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    ran = json.loads(r.stdout)
    loser = next(a for a in ran["attempts"] if a["agent"] == "opencode")
    stores = acr_home / "data" / "checkpoints"
    mine = Workspace.open(project).store.key
    lanes = [s for s in stores.iterdir() if s.name != mine]
    assert len(lanes) == 1 and (lanes[0] / "attempts").is_dir()  # the losing lane's store, keeping its work
    assert not (lanes[0] / "objects").exists()  # its checkpoint's objects went with the race
    r = acr("gc", "--json", cwd=project)
    assert r.returncode == 0 and json.loads(r.stdout)["race_lane_stores"] == 0  # a recent loser's work stays
    r = acr("gc", "--older-than", "0", "--json", cwd=project)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["race_lane_stores"] == 1 and f"{ran['task_id']}-{loser['seq']}" in out["kept_attempts"], out
    assert [s.name for s in stores.iterdir()] == [mine]
