"""A rollback nothing an attempt does can stop (issue 40, part 2).

Each cheap action below stopped the rollback half way on an earlier acr, and `acr recover` then failed the
same way, leaving the damage in place: a name git refuses, an emptied index, a planted attribute git cannot
apply, an empty nested repository with a newline in its name, a file made immutable, a 2 TB sparse file, a
repository made in a folder of the user's files, linked work trees, a forged commit-graph. Each is played by
a fake agent run by `acr run` that fails its check, then again after a killed run, by `acr recover`; the
project must come back byte for byte (files, index, HEAD, refs, .git's config, hooks and info).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import acr, git
from test_hostile import git_state, tree_bytes, user_project  # noqa: F401 (a fixture)

from acr_cli.workspace import Workspace

BAD = "def add(a, b):\n    return 0\n"
NEWLINE_DIR = "a\nb"

# A forged commit-graph: HEAD's first parent made the root commit, so `git log` skips the commits between
# (git trusts the file; only `git commit-graph verify` reads its checksum).
FORGE = """
import struct, subprocess
run = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, check=True).stdout.strip()
run("commit-graph", "write", "--reachable")
path = ".git/objects/info/commit-graph"
data = bytearray(open(path, "rb").read())
chunks = {bytes(data[8 + 12 * i:12 + 12 * i]): struct.unpack(">Q", data[12 + 12 * i:20 + 12 * i])[0]
          for i in range(data[6] + 1)}
oids, cdat = chunks[b"OIDL"], chunks[b"CDAT"]
listed = [data[oids + 20 * i:oids + 20 * i + 20].hex() for i in range((cdat - oids) // 20)]
head, root = run("rev-parse", "HEAD"), run("rev-list", "--max-parents=0", "HEAD")
struct.pack_into(">I", data, cdat + 36 * listed.index(head) + 20, listed.index(root))
open(path, "wb").write(data)
"""


def _history(root: Path) -> str:
    return git(root, "log", "--format=%H")


@pytest.fixture
def project_with_history(user_project: Path) -> Path:  # noqa: F811
    """The user's project with three commits (a forged commit-graph can then hide one) and a tracked folder."""
    (user_project / "src").mkdir()
    (user_project / "src" / "lib.py").write_text("X = 1\n")
    git(user_project, "add", "src/lib.py")
    git(user_project, "commit", "-qm", "src")
    (user_project / "src" / "lib.py").write_text("X = 2  # the user's, uncommitted\n")
    git(user_project, "add", "notes.md")  # staged work: the index is not HEAD's
    (user_project / "notes.md").write_text("the user's untracked notes, edited after staging\n")
    return user_project


def _forge(tmp_path: Path) -> list[str]:
    script = tmp_path / "forge.py"
    script.write_text(FORGE)
    return [sys.executable, str(script)]


# what each break does in the project, as the agent's shell tool would (then it writes a wrong calc.py)
def _breaks(tmp_path: Path) -> dict[str, list[list[str]]]:
    monitor = tmp_path / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {tmp_path / 'planted-program-ran'}\n")
    monitor.chmod(0o755)
    return {
        "git~1": [["sh", "-c", "echo planted > 'git~1'"]],
        "emptied index": [["sh", "-c", ": > .git/index"]],
        "working-tree-encoding": [["sh", "-c", "printf '* working-tree-encoding=UTF-16\\n' > .gitattributes; "
                                               "echo 'changed' > src/lib.py"]],
        "nested repository, newline": [["git", "init", "-q", NEWLINE_DIR]],
        "2 TB sparse file": [["truncate", "-s", "2T", "data.bin"], ["truncate", "-s", "1T", "notes.md"],
                             ["truncate", "-s", "1T", ".env"]],  # (an ignored file acr keeps)
        "repository in a tracked folder": [["git", "init", "-q", "src"],
                                           ["git", "-C", "src", "config", "core.fsmonitor", str(monitor)]],
        "repository where a tracked file was": [
            ["sh", "-c", "rm test_calc.py && git init -q test_calc.py && git -C test_calc.py -c user.name=a "
                         "-c user.email=a@b commit -q --allow-empty -m x"]],
        "linked work trees": [["git", "worktree", "add", "-q", str(tmp_path / "agent-wt")],
                              ["git", "worktree", "add", "-q", "inside"]],
        "forged commit-graph": [_forge(tmp_path), ["git", "repack", "-q", "-d"], ["git", "multi-pack-index", "write"],
                                ["git", "update-server-info"]],  # (and the other caches of the object store)
    }


BREAKS = ["git~1", "emptied index", "working-tree-encoding", "nested repository, newline", "2 TB sparse file",
          "repository in a tracked folder", "repository where a tracked file was", "linked work trees",
          "forged commit-graph"]


def _after_checks(root: Path, tmp_path: Path, history: str) -> None:
    """What every break must leave: nothing of it, and nothing it planted running later."""
    assert not (root / "git~1").exists() and not (root / NEWLINE_DIR).exists() and not (root / "data.bin").exists()
    assert not (root / "src" / ".git").exists() and not (root / "inside").exists()
    assert not (tmp_path / "agent-wt").exists() and not (root / ".git" / "worktrees").exists()
    objects = root / ".git" / "objects"
    assert not (objects / "info" / "commit-graph").exists() and not (objects / "info" / "packs").exists()
    assert not (objects / "pack" / "multi-pack-index").exists()
    assert _history(root) == history  # the forged graph hid no commit
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1
    git(root / "src", "status")  # the user's next `git status` in src runs no planted fsmonitor
    assert not (tmp_path / "planted-program-ran").exists()


def _failing_run(root: Path) -> subprocess.CompletedProcess:
    return acr("run", "fix add", "--verify", "false", "--yes", "--arms", "codex:gpt-5.4", "--json", cwd=root)


@pytest.mark.parametrize("name", BREAKS)
def test_a_failed_attempt_is_undone_whatever_it_broke(name, project_with_history, fakes_on_path, scenario, tmp_path):
    root = project_with_history
    scenario({"commands": _breaks(tmp_path)[name], "write": {"calc.py": BAD}})
    files, state, history = tree_bytes(root), git_state(root), _history(root)
    started = time.monotonic()
    r = _failing_run(root)
    assert r.returncode == 1, r.stderr
    attempt = json.loads(r.stdout)["attempts"][0]
    assert attempt["verdict"] == "failed" and "rollback failed" not in Path(attempt["log"]).read_text()
    assert tree_bytes(root) == files and git_state(root) == state
    _after_checks(root, tmp_path, history)
    assert not Workspace.open(root).interrupted_checkpoints()  # nothing left for `acr recover`
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("name", BREAKS)
def test_acr_recover_finishes_whatever_the_attempt_broke(name, project_with_history, tmp_path):
    root = project_with_history
    files, state, history = tree_bytes(root), git_state(root), _history(root)
    Workspace.open(root).checkpoint("20260101-000000-abcdef-1")  # then acr was killed, mid-attempt
    for argv in _breaks(tmp_path)[name]:
        subprocess.run(argv, cwd=root, check=True, capture_output=True)
    (root / "calc.py").write_text(BAD)
    r = acr("recover", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert tree_bytes(root) == files and git_state(root) == state
    _after_checks(root, tmp_path, history)


def test_a_huge_file_the_attempt_made_is_deleted_unread_and_the_run_says_so(project_with_history, fakes_on_path,
                                                                            scenario, tmp_path):
    """`truncate -s 2T` made a rollback hash 2 TB until git's time limit; now it is not read at all."""
    root = project_with_history
    scenario({"commands": _breaks(tmp_path)["2 TB sparse file"], "write": {"calc.py": BAD}})
    r = acr("run", "fix add", "--verify", "false", "--yes", "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 1, r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "over the rollback's size budget" in said and "data.bin (2 TiB)" in said and "deleted" in said
    assert (root / "notes.md").read_text().startswith("the user's untracked notes")  # grown to 1 TB: back
    assert (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"


def test_a_huge_file_a_passing_attempt_made_is_kept_and_named(project, fakes_on_path, scenario):
    """Kept with the passing work, but never read: the diff shown cannot show it, so the run names it."""
    from conftest import GOOD

    scenario({"commands": [["truncate", "-s", "2T", "data.bin"]], "write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    effects = json.loads(r.stdout)["attempts"][0]["side_effects"]
    assert any("over the size budget" in e and "data.bin (2 TiB)" in e for e in effects)
    assert (project / "data.bin").stat().st_size == 2 * 2**40


def test_recover_moves_a_huge_file_aside_rather_than_delete_it(project_with_history):
    """Days may pass before `acr recover`: a huge file made since the checkpoint may be the user's."""
    root = project_with_history
    Workspace.open(root).checkpoint("20260101-000000-abcdef-1")
    subprocess.run(["truncate", "-s", "2T", "data.bin"], cwd=root, check=True)
    r = acr("recover", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    aside = Path(json.loads(r.stdout)["report"]["put_aside_in"])
    assert (aside / "data.bin").stat().st_size == 2 * 2**40 and not (root / "data.bin").exists()


def test_a_users_utf16be_file_comes_back_byte_for_byte(project, fakes_on_path, scenario):
    """git writes `working-tree-encoding=UTF-16` files back in its own byte order (little-endian here): the
    user's big-endian file must come back as it was, not as git would write it."""
    (project / ".gitattributes").write_text("*.txt working-tree-encoding=UTF-16\n")
    (project / "notes.txt").write_bytes("\ufeffthe user's notes\n".encode("utf-16-be"))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "notes")
    (project / "notes.txt").write_bytes("\ufeffedited, uncommitted\n".encode("utf-16-be"))
    files, state = tree_bytes(project), git_state(project)
    # valid UTF-16 (little-endian, with its BOM): git takes it
    scenario({"commands": [["sh", "-c", "printf '\\377\\376a\\000\\n\\000' > notes.txt"]], "write": {"calc.py": BAD}})
    r = _failing_run(project)
    assert r.returncode == 1, r.stderr
    assert (project / "notes.txt").read_bytes() == "\ufeffedited, uncommitted\n".encode("utf-16-be")
    assert tree_bytes(project) == files and git_state(project) == state
    Workspace.open(project).checkpoint("20260101-000000-abcdef-1")  # and by `acr recover`, after a kill
    (project / "notes.txt").write_bytes(b"\xff\xfea\x00\n\x00")
    assert acr("recover", cwd=project).returncode == 0
    assert tree_bytes(project) == files and git_state(project) == state


def _chattr_works(where: Path) -> bool:
    probe = where / "chattr-probe"
    probe.write_text("x")
    try:
        ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    except OSError:
        return False
    subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    probe.unlink()
    return ok


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file immutable (chattr +i)")
def test_config_and_hooks_made_immutable_are_still_undone(user_project, fakes_on_path, scenario, tmp_path):  # noqa: F811
    root = user_project
    if not _chattr_works(root):
        pytest.skip("this file system does not support chattr +i")
    sentinel = tmp_path / "planted-program-ran"
    hook = root / ".git" / "hooks" / "post-checkout"
    commands = [["git", "config", "alias.st", f"!touch {sentinel}"],
                ["sh", "-c", f"printf '#!/bin/sh\\ntouch {sentinel}\\n' > {hook} && chmod +x {hook}"],
                ["sh", "-c", "echo planted > planted.txt"],
                ["chattr", "+i", str(hook), str(root / ".git" / "config"), "planted.txt"]]
    scenario({"commands": commands})
    files, state = tree_bytes(root), git_state(root)
    try:
        r = _failing_run(root)
        assert r.returncode == 1, r.stderr
        assert tree_bytes(root) == files and git_state(root) == state
        assert not hook.exists() and not (root / "planted.txt").exists()
        Workspace.open(root).checkpoint("20260101-000000-abcdef-1")  # and by `acr recover`, after a kill
        for argv in commands:
            subprocess.run(argv, cwd=root, check=True, capture_output=True)
        r = acr("recover", cwd=root)
        assert r.returncode == 0, r.stderr
        assert tree_bytes(root) == files and git_state(root) == state
        git(root, "st", check=False)
        git(root, "checkout", "-q", "-b", "next")
        assert not sentinel.exists()
    finally:
        subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True)


def test_the_users_own_work_trees_stay_when_the_attempts_go(project, tmp_path):
    """Only work trees added since the checkpoint go, also when acr runs in a linked work tree, and also when
    one of the user's cannot be read (its HEAD gone)."""
    git(project, "worktree", "add", "-q", str(tmp_path / "mine"))
    git(project, "worktree", "add", "-q", str(tmp_path / "broken"))
    (tmp_path / "mine" / "wip.txt").write_text("the user's work in progress\n")
    (project / ".git" / "worktrees" / "broken" / "HEAD").unlink()
    for where in (project, tmp_path / "mine"):
        ws = Workspace.open(where)
        cp = ws.checkpoint("t-1")
        git(where, "worktree", "add", "-q", str(tmp_path / "agent-wt"))
        report = ws.restore(cp)
        ws.drop(cp)
        assert not (tmp_path / "agent-wt").exists()
        said = [line for line in report.lines() if line.startswith("a work tree")]
        admin = project / ".git" / "worktrees" / "agent-wt"
        assert said == [f"a work tree the attempt added ({tmp_path / 'agent-wt'}, moved to "
                        f"{report.put_aside / 'worktrees' / 'agent-wt'}); its {admin} moved to "
                        f"{report.put_aside / '.git-worktrees' / 'agent-wt'}"], said
        assert (tmp_path / "mine" / "wip.txt").exists() and (tmp_path / "broken" / "calc.py").exists()
        assert sorted(os.listdir(project / ".git" / "worktrees")) == ["broken", "mine"]
        assert (report.put_aside / "worktrees" / "agent-wt" / "calc.py").exists()
        assert not git(project, "branch", "--list", "agent-wt")  # (kept aside under refs/acr/put-aside)
