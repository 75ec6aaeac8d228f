"""Race lanes under attack: hostile arms and hostile repositories, in overlay and in worktree lanes, through the
real CLI, git, the kernel and the fake agents. Each test names what a user would lose if acr got it wrong: their
uncommitted work, their repository's index, HEAD, refs or config, a process or a lane left behind, or a winner's
change applied other than a sequential pass would leave it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import BAD, GOOD, VERIFY, acr, git
from test_race import FAILING, FAST, race_dirs, race_processes, user_edits
from test_race import git_state as every_git_state

from acr_cli.workspace import overlay

TWO = f"{FAST},{FAILING}"


@pytest.fixture(params=["overlay", "worktree"])
def lanes(request, acr_home) -> str:
    """Race in overlay lanes, then in worktree lanes (overlay skipped where the kernel cannot mount them)."""
    if request.param == "overlay":
        why = overlay.probe()
        if why is not None:
            if os.environ.get("ACR_REQUIRE_OVERLAY") == "1":
                pytest.fail(f"overlay lanes cannot start here: {why}")
            pytest.skip(f"overlay lanes cannot start here: {why}")
    config = acr_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'race_lanes = "{request.param}"\n')
    return request.param


def git_state(project: Path) -> dict[str, bytes]:
    """The user's config, HEAD, index, refs and worktrees; what an arm made may be kept in acr's own namespace
    (``refs/acr/put-aside/``), as a sequential rollback keeps it, so refs under ``refs/acr/`` do not count."""
    state = every_git_state(project)
    state["refs"] = b"".join(line + b"\n" for line in state["refs"].splitlines() if b"\trefs/acr/" not in line)
    return state


def py(code: str) -> list[str]:
    """A command a fake agent runs in its lane (its shell tool)."""
    return [sys.executable, "-c", code]


def race(project: Path, *extra: str, arms: str = TWO, n: str = "2"):
    r = acr("run", "fix add", "--verify", VERIFY, "--arms", arms, "--race", n, "--json", *extra, cwd=project,
            timeout=180)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def left_clean(project: Path, acr_home: Path, before: dict[str, bytes], state: dict[str, bytes]) -> None:
    """The user's uncommitted work and repository as they were, no lane and no process of the race left."""
    assert {p: (project / p).read_bytes() for p in before} == before
    assert git_state(project) == state
    assert race_dirs(acr_home) == [] and race_processes(acr_home) == []


def test_a_winners_exotic_change_is_applied_as_a_sequential_pass_leaves_it(project, fakes_on_path, scenario,
                                                                          acr_home, lanes):
    """Binary bytes, a deletion, a mode change, a symlink out of the project, a file replaced by a folder and a
    folder by a file, names with a newline, unicode, a comma and a colon: all arrive as the winner left them."""
    (project / "tool.sh").write_text("echo hi\n")
    (project / "gone.txt").write_text("to delete\n")
    (project / "becomes_dir").write_text("a file\n")
    (project / "becomes_file").mkdir()
    (project / "becomes_file" / "inner.txt").write_text("inside\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "more files")
    change = ("import os\n"
              "os.chmod('tool.sh', 0o755)\n"
              "os.remove('gone.txt')\n"
              "os.remove('becomes_dir'); os.mkdir('becomes_dir'); open('becomes_dir/x.txt','w').write('x\\n')\n"
              "import shutil; shutil.rmtree('becomes_file'); open('becomes_file','w').write('now a file\\n')\n"
              "os.symlink('/etc/hostname', 'outside-link')\n"
              "open('line\\nbreak.txt','w').write('nl\\n')\n"
              "open('caf\\u00e9 \\u2603.txt','w').write('u\\n')\n"
              "open('a,b:c.txt','w').write('punct\\n')\n"
              "open('blob.bin','wb').write(bytes(range(256)) * 64)\n")
    scenario({"match": {"agent": "codex"}, "commands": [py(change)], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = race(project)
    assert r.returncode == 0, r.stderr
    assert os.stat(project / "tool.sh").st_mode & 0o111 == 0o111
    assert not (project / "gone.txt").exists()
    assert (project / "becomes_dir" / "x.txt").read_text() == "x\n"
    assert (project / "becomes_file").read_text() == "now a file\n"
    assert os.readlink(project / "outside-link") == "/etc/hostname"
    assert (project / "line\nbreak.txt").read_text() == "nl\n"
    assert (project / "caf\u00e9 \u2603.txt").read_text() == "u\n"
    assert (project / "a,b:c.txt").read_text() == "punct\n"
    assert (project / "blob.bin").read_bytes() == bytes(range(256)) * 64
    left_clean(project, acr_home, before, state)


@pytest.mark.xfail(strict=True, reason="the winner's tree is read with git add, which skips a new nested repository "
                   "(or records a bare gitlink): the folder never reaches the user's work tree; carrying it means "
                   "copying new repositories from the lane, files and .git, as a sequential pass leaves them")
def test_a_winner_that_makes_a_nested_repository_brings_its_files(project, fakes_on_path, scenario, acr_home, lanes):
    """An arm that runs ``git init`` in a new folder and writes files there: a sequential pass leaves the folder
    with its files; the race must not turn it into an empty folder (a gitlink)."""
    nested = ("import os, subprocess; os.mkdir('vendor'); open('vendor/lib.py','w').write('LIB = 1\\n'); "
              "subprocess.run(['git', 'init', '-q', 'vendor'])")
    scenario({"match": {"agent": "codex"}, "commands": [py(nested)], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = race(project)
    assert r.returncode == 0, r.stderr
    assert (project / "calc.py").read_text() == GOOD
    assert (project / "vendor" / "lib.py").read_text() == "LIB = 1\n"
    left_clean(project, acr_home, before, state)


def test_a_winner_that_makes_a_huge_sparse_file_does_not_hang_the_race(project, fakes_on_path, scenario, acr_home,
                                                                       lanes):
    """``truncate -s 200G`` in the winner's lane: reading it back would take many minutes; the race ends at once
    and the huge file is not copied into the user's work tree (a sequential attempt leaves such a file unread)."""
    scenario({"match": {"agent": "codex"}, "commands": [["truncate", "-s", "200G", "huge.bin"]],
              "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    started = time.monotonic()
    r = race(project)
    took = time.monotonic() - started
    assert took < 60, took
    assert r.returncode == 0, r.stderr
    assert (project / "calc.py").read_text() == GOOD and not (project / "huge.bin").exists()
    assert "huge.bin" in json.loads(r.stdout)["race"]["note"]
    left_clean(project, acr_home, before, state)


def test_one_arms_git_writes_never_reach_the_users_repository_through_another_arms_checkpoint(
        project, fakes_on_path, scenario, acr_home, lanes):
    """Arm 0 changes the repository's config and makes a branch and a tag at once; arm 1 takes its checkpoint
    only later (a slow race set-up). Neither arm's rollback may bring arm 0's git writes back to the user."""
    hostile = [["git", "config", "core.editor", "evil-editor"], ["git", "branch", "planted"],
               ["git", "tag", "planted-tag"]]
    scenario({"match": {"agent": "codex"}, "commands": hostile, "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = race(project, "--race-pick", "cheapest", "--race-setup", 'if [ "$ACR_RACE_SLOT" = 1 ]; then sleep 3; fi')
    assert r.returncode == 0, r.stderr
    assert (project / "calc.py").read_text() == GOOD
    left_clean(project, acr_home, before, state)


def test_a_background_process_an_arm_leaves_in_its_lane_is_ended(project, fakes_on_path, scenario, acr_home,
                                                                  lanes, tmp_path):
    """An arm starts a daemon (new session, empty environment) whose working directory is its lane."""
    pidfile = tmp_path / "daemon.pid"
    daemon = ("import os, sys, time\n"
              "if os.fork(): sys.exit(0)\n"
              "os.setsid()\n"
              "if os.fork(): sys.exit(0)\n"
              f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
              "time.sleep(300)\n")
    launch = ["env", "-i", sys.executable, "-c", daemon]
    scenario({"match": {"agent": "codex"}, "sleep": 1, "commands": [launch], "write": {"calc.py": GOOD}},
             {"match": {"agent": "opencode"}, "commands": [launch], "write": {"calc.py": BAD}})
    before = user_edits(project)
    state = git_state(project)
    r = race(project)
    assert r.returncode == 0, r.stderr
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    alive = Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    if alive:
        os.kill(pid, 9)
    assert not alive
    left_clean(project, acr_home, before, state)


def test_a_winners_bytes_arrive_unconverted_whatever_the_repositorys_attributes(project, fakes_on_path, scenario,
                                                                               acr_home, lanes):
    """A repository whose attributes convert files (``eol=crlf``, ``ident``): the winner's files arrive with the
    bytes it wrote, as a sequential pass leaves them, not as git would check them out."""
    (project / ".gitattributes").write_text("*.txt text eol=crlf\n*.id ident\n")
    git(project, "add", ".gitattributes")
    git(project, "commit", "-qm", "attributes")
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD, "notes.txt": "one\ntwo\n",
                                                     "keep.id": "version $Id$\n"}},
             {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    state = git_state(project)
    r = race(project)
    assert r.returncode == 0, r.stderr
    assert (project / "notes.txt").read_bytes() == b"one\ntwo\n"
    assert (project / "keep.id").read_bytes() == b"version $Id$\n"
    left_clean(project, acr_home, {}, state)


def test_a_race_in_a_repository_whose_path_has_a_comma_and_a_colon(tmp_path, fakes_on_path, scenario, acr_home,
                                                                   lanes):
    """Overlay's mount options are a comma-separated string: such a path cannot be an overlay lane, so
    ``overlay`` refuses plainly (exit 2, no agent run) and the other lanes race."""
    from conftest import init_repo

    project = init_repo(tmp_path / "odd,name:dir", {"calc.py": "def add(a, b):\n    return a * b\n",
                                                    "test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                                                                    "    assert add(2, 3) == 5\n"})
    log = scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD}},
                   {"match": {"agent": "opencode"}, "sleep": 1, "write": {"calc.py": BAD}})
    state = git_state(project)
    r = race(project)
    if lanes == "overlay":
        assert r.returncode == 2 and "race_lanes" in r.stderr and not log.exists(), r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert (project / "calc.py").read_text() == GOOD
    left_clean(project, acr_home, {}, state)
