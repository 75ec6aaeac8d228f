"""Checkpoint / rollback never loses the user's own work."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import git

from acr_cli import workspace
from acr_cli.errors import WorkspaceError
from acr_cli.workspace import Workspace


def snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if ".git" in p.relative_to(root).parts:
            continue
        if p.is_symlink():
            out[str(p.relative_to(root))] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[str(p.relative_to(root))] = p.read_bytes() + f"|mode={p.stat().st_mode & 0o777:o}".encode()
    return out


@pytest.fixture
def dirty(project: Path) -> Path:
    (project / "calc.py").write_bytes(b"user edit\r\nno newline at end")
    (project / "untracked.bin").write_bytes(bytes(range(256)))
    (project / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (project / "script.sh").chmod(0o755)
    (project / "sub").mkdir()
    (project / "sub" / "deep.txt").write_text("deep\n")
    os.symlink("calc.py", project / "link")
    (project / ".gitignore").write_text("ignored/\n")
    (project / "ignored").mkdir()
    (project / "ignored" / "cache").write_text("cache\n")
    (project / "staged.txt").write_text("staged\n")
    git(project, "add", "staged.txt")
    return project


def test_restore_undoes_every_kind_of_change_and_keeps_user_work(dirty):
    before = snapshot(dirty)
    index_before = git(dirty, "diff", "--cached", "--name-status")
    ws = Workspace.open(dirty)
    cp = ws.checkpoint()
    # an attempt that edits, deletes, adds, changes modes, swaps a file for a dir, stages and commits
    (dirty / "calc.py").write_text("agent edit\n")
    (dirty / "untracked.bin").unlink()
    (dirty / "sub" / "deep.txt").unlink()
    (dirty / "new" / "nested").mkdir(parents=True)
    (dirty / "new" / "nested" / "file.py").write_text("x = 1\n")
    (dirty / "script.sh").chmod(0o644)
    (dirty / "link").unlink()
    (dirty / "link").write_text("now a file\n")
    (dirty / "test_calc.py").unlink()
    (dirty / "test_calc.py").mkdir()
    (dirty / "test_calc.py" / "x").write_text("dir now\n")
    git(dirty, "add", "-A")
    git(dirty, "commit", "-qm", "agent commit")
    assert ws.changes(cp)
    ws.restore(cp)
    assert ws.changes(cp) == []
    after = snapshot(dirty)
    assert after == before
    assert git(dirty, "diff", "--cached", "--name-status") == index_before
    assert git(dirty, "log", "--format=%s") == "init\n"
    assert (dirty / "ignored" / "cache").read_text() == "cache\n"


def dirs(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts}


def test_directories_the_attempt_created_go_and_the_users_own_stay_even_empty(dirty):
    for d in ("empty", "sub/emptier", "ignored/empty", "notes/drafts"):
        (dirty / d).mkdir(parents=True)
    (dirty / "notes" / "todo.md").write_text("mine\n")
    before = dirs(dirty)
    ws = Workspace.open(dirty)
    cp = ws.checkpoint()
    for f in ("new/nested/deeper/file.py", "empty/added.py", "sub/emptier/more/x.py", "ignored/newdir/x",
              "notes/drafts/d.md", "sub/y/z.py"):
        (dirty / f).parent.mkdir(parents=True, exist_ok=True)
        (dirty / f).write_text("agent\n")
    (dirty / "made-but-empty").mkdir()  # holds no file: git cannot see it, so neither can a rollback
    ws.restore(cp)
    assert dirs(dirty) == before | {"made-but-empty"}


def test_same_size_edit_in_the_same_second_is_seen(project):
    # git's stat cache cannot tell these apart by size or second-resolution mtime
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    assert ws.changes(cp) == [("M", "calc.py")]
    ws.restore(cp)
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"


def test_untouched_files_are_not_rewritten(dirty):
    ws = Workspace.open(dirty)
    cp = ws.checkpoint()
    stat_before = (dirty / "untracked.bin").stat()
    (dirty / "other.txt").write_text("agent\n")
    ws.restore(cp)
    stat_after = (dirty / "untracked.bin").stat()
    assert (stat_before.st_ino, stat_before.st_mtime_ns) == (stat_after.st_ino, stat_after.st_mtime_ns)
    assert not (dirty / "other.txt").exists()


def test_empty_repository_without_commits(tmp_path):
    tmp_path = tmp_path / "repo"  # beside acr's home, not holding it
    tmp_path.mkdir()
    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("mine\n")
    ws = Workspace.open(tmp_path)
    cp = ws.checkpoint()
    (tmp_path / "a.txt").write_text("agent\n")
    (tmp_path / "b.txt").write_text("agent\n")
    ws.restore(cp)
    assert (tmp_path / "a.txt").read_text() == "mine\n" and not (tmp_path / "b.txt").exists()


def test_a_commit_into_an_empty_repository_is_undone(tmp_path):
    tmp_path = tmp_path / "repo"  # beside acr's home, not holding it
    tmp_path.mkdir()
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.txt").write_text("mine\n")
    (tmp_path / "s.txt").write_text("staged\n")
    git(tmp_path, "add", "s.txt")
    ws = Workspace.open(tmp_path)
    cp = ws.checkpoint()
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "agent")
    ws.restore(cp)
    assert git(tmp_path, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""  # still no commit
    assert git(tmp_path, "status", "--porcelain") == "A  s.txt\n?? a.txt\n"


def test_nested_repositories_are_never_deleted_or_rewritten(project):
    from conftest import init_repo

    clone = init_repo(project / "vendor" / "lib", {"lib.py": "v = 1\n"})
    (clone / "wip.txt").write_text("unpushed work\n")
    (project / "unborn").mkdir()
    git(project / "unborn", "init", "-q")  # a nested repository without any commit yet
    (project / "unborn" / "notes.txt").write_text("notes\n")
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    # the attempt commits inside the nested clone and edits the outer tree
    (clone / "lib.py").write_text("v = 2\n")
    git(clone, "commit", "-qam", "agent")
    (project / "calc.py").write_text("agent\n")
    report = ws.restore(cp)
    assert (project / "calc.py").read_text() != "agent\n"  # the outer tree is rolled back
    assert report.nested == ["vendor/lib"]  # the nested one is reported, and left as it is
    assert git(clone, "log", "--format=%s") == "agent\ninit\n"
    assert (clone / "wip.txt").read_text() == "unpushed work\n" and (clone / "lib.py").read_text() == "v = 2\n"
    assert (project / "unborn" / "notes.txt").read_text() == "notes\n"


def test_a_merge_in_progress_is_refused_up_front(project):
    git(project, "checkout", "-qb", "other")
    (project / "calc.py").write_text("other\n")
    git(project, "commit", "-qam", "other")
    git(project, "checkout", "-q", "-")
    (project / "calc.py").write_text("mine\n")
    git(project, "commit", "-qam", "mine")
    git(project, "merge", "other", check=False)
    with pytest.raises(WorkspaceError, match="a merge is in progress") as e:
        Workspace.open(project).ensure_no_operation_in_progress()
    assert "--no-rollback" in e.value.hint


def test_a_bisect_in_progress_is_refused_up_front(project):
    (project / "calc.py").write_text("second\n")
    git(project, "commit", "-qam", "second")
    git(project, "bisect", "start", "HEAD", "HEAD~1")
    with pytest.raises(WorkspaceError, match="a bisect is in progress"):
        Workspace.open(project).ensure_no_operation_in_progress()
    git(project, "bisect", "reset")
    Workspace.open(project).ensure_no_operation_in_progress()


def test_files_git_converts_come_back_byte_for_byte(project):
    git(project, "config", "filter.strip.clean", "tr a-z A-Z")  # lossy on the way in, like nbstripout
    git(project, "config", "filter.strip.smudge", "cat")
    (project / ".gitattributes").write_text("*.ipynb filter=strip\n*.bat eol=crlf\n")
    (project / "nb.ipynb").write_text("outputs the user has not committed\n")
    (project / "run.bat").write_bytes(b"echo lf only\n")  # untracked, LF: checkout would make it CRLF
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "nb.ipynb").write_text("agent\n")
    (project / "run.bat").write_text("agent\n")
    ws.restore(cp)
    assert (project / "nb.ipynb").read_text() == "outputs the user has not committed\n"
    assert (project / "run.bat").read_bytes() == b"echo lf only\n"


def test_what_a_rollback_undoes_is_kept_in_acrs_store_not_in_the_repository(project):
    ws = Workspace.open(project)
    cp = ws.checkpoint("t9-1")
    (project / "calc.py").write_text("the attempt's edit\n")
    (project / "notes.md").write_text("saved by the user while the attempt ran\n")
    (project / "test_calc.py").unlink()
    report = ws.restore(cp, keep_as="t9-1")
    ws.drop(cp)
    assert not (project / "notes.md").exists()  # the rollback undid it, but it is not lost:
    store, name = report.saved_as.rsplit("#", 1)
    assert name == "t9-1" and Path(store) == ws.kept.dir and not Path(store).is_relative_to(project)
    assert git(project, "--git-dir", store, "show", "t9-1:notes.md") == "saved by the user while the attempt ran\n"
    assert git(project, "--git-dir", store, "show", "t9-1:calc.py") == "the attempt's edit\n"
    # only what changed, against the checkpoint's side: the command acr prints shows the attempt's diff
    assert git(project, "--git-dir", store, "ls-tree", "-r", "--name-only", "t9-1").split() == ["calc.py", "notes.md"]
    assert git(project, "--git-dir", store, "ls-tree", "-r", "--name-only", "t9-1^").split() == ["calc.py",
                                                                                               "test_calc.py"]
    from acr_cli.workspace.kept import command

    shown = subprocess.run(shlex.split(command(report.saved_as)), capture_output=True, text=True, check=True).stdout
    assert "+the attempt's edit" in shown and "-    return a * b" in shown and "deleted file" in shown
    assert git(project, "for-each-ref", "refs/acr/") == ""  # nothing under the project's refs a push would carry


def test_only_the_newest_kept_attempts_stay_and_the_others_objects_go(project):
    ws = Workspace.open(project)
    for i in range(4):
        cp = ws.checkpoint(f"t{i}-1")
        (project / "calc.py").write_text(f"edit number {i}\n")
        ws.restore(cp, keep_as=f"t{i}-1")
        ws.drop(cp)
    assert len(ws.kept.names()) == 4
    assert ws.kept.prune(keep=2) == 2
    assert sorted(ws.kept.names()) == ["t2-1", "t3-1"]
    every = subprocess.run(["git", "--git-dir", str(ws.kept.dir), "cat-file", "--batch-all-objects", "--batch"],
                           capture_output=True, check=True).stdout
    assert b"edit number 3" in every and b"edit number 0" not in every and b"edit number 1" not in every


def test_a_kept_attempt_holds_files_within_its_budget_and_names_the_others(project, monkeypatch):
    monkeypatch.setattr(workspace.kept, "BUDGET", 1000)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "big.log").write_text("x" * 2000)
    (project / "calc.py").write_text("small edit\n")
    report = ws.restore(cp, keep_as="t-1")
    ws.drop(cp)
    store = report.saved_as.rsplit("#", 1)[0]
    assert git(project, "--git-dir", store, "ls-tree", "-r", "--name-only", "t-1").split() == ["calc.py"]
    assert report.not_kept == ["big.log (2000 bytes: over the 1000 bytes kept per attempt)"]
    assert "big.log" in git(project, "--git-dir", store, "log", "-1", "--format=%B", "t-1")  # said where it is kept
    assert any("big.log" in line for line in report.lines())  # and in the attempt's log


def test_not_a_git_repository_is_explained(tmp_path):
    with pytest.raises(WorkspaceError) as e:
        Workspace.open(tmp_path)
    assert "--no-rollback" in e.value.hint


def test_a_second_run_in_the_same_work_tree_is_refused(project):
    a, b = Workspace.open(project), Workspace.open(project)
    a.lock()
    try:
        with pytest.raises(WorkspaceError, match="another `acr run`"):
            b.lock()
    finally:
        a.unlock()
    b.lock()
    b.unlock()


def test_a_checkpoint_lives_in_acrs_data_directory_until_dropped(project, acr_home):
    ws = Workspace.open(project)
    cp = ws.checkpoint("t1-1")
    assert ws.interrupted_checkpoints() == ["t1-1"]
    folder = acr_home / "data" / "checkpoints" / ws.store.key
    assert (folder / "t1-1.json").exists() and (folder / "t1-1.json").stat().st_mode & 0o077 == 0
    ws.drop(cp)
    assert ws.interrupted_checkpoints() == [] and "refs/acr" not in git(project, "for-each-ref")


@pytest.fixture
def with_ignored(project: Path) -> Path:
    (project / ".gitignore").write_text(".env\n*.log\ndata/\nnode_modules/\n__pycache__/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    (project / ".env").write_text("TOKEN=mine\n")
    (project / "notes.log").write_text("my notes\n")
    (project / "data").mkdir()
    (project / "data" / "a.csv").write_text("x,y\n1,2\n")
    (project / "node_modules" / "pkg").mkdir(parents=True)
    for i in range(6):
        (project / "node_modules" / "pkg" / f"m{i}.js").write_text(f"module {i}\n")
    return project


def test_ignored_files_the_attempt_changed_are_put_back(with_ignored, monkeypatch):
    monkeypatch.setattr(workspace.snapshot, "IGNORED_MAX_FILES", 4)  # node_modules (6 files) is over the budget
    root = with_ignored
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    assert cp.ignored == (".env", "data/", "notes.log") and cp.unprotected == ("node_modules/",)
    kept_before = {p: (root / p).read_bytes() for p in (".env", "notes.log", "data/a.csv")}
    (root / ".env").write_text("TOKEN=agent\n")
    (root / "notes.log").unlink()
    (root / "data" / "a.csv").write_text("overwritten\n")
    (root / "data" / "b.csv").write_text("added inside a kept directory\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "calc.pyc").write_bytes(b"\0cache")
    (root / "node_modules" / "pkg" / "m0.js").write_text("upgraded\n")
    assert ws.changes(cp) == []  # ignored files are not the attempt's work (apply_ok)
    ws.restore(cp)
    assert {p: (root / p).read_bytes() for p in kept_before} == kept_before
    assert not (root / "data" / "b.csv").exists()
    # a new ignored entry (bytecode that would run on the next import) goes; a directory over the budget is
    # left whole as the attempt made it
    assert not (root / "__pycache__").exists()
    assert (root / "node_modules" / "pkg" / "m0.js").read_text() == "upgraded\n"


def test_ignored_directory_replaced_by_a_file_and_gitignore_edited(with_ignored, monkeypatch):
    monkeypatch.setattr(workspace.snapshot, "IGNORED_MAX_FILES", 4)
    root = with_ignored
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    assert cp.unprotected == ("node_modules/",)
    before = snapshot(root)
    shutil.rmtree(root / "data")
    (root / "data").write_text("a file where a directory was\n")
    # now nothing is ignored: .env and node_modules/ (not kept) look like files the attempt added
    (root / ".gitignore").write_text("")
    (root / ".env").write_text("TOKEN=agent\n")
    ws.restore(cp)
    assert snapshot(root) == before


def test_ignored_files_come_back_from_a_checkpoint_loaded_after_a_kill(with_ignored):
    root = with_ignored
    cp = Workspace.open(root).checkpoint("t2-1")
    (root / ".env").write_text("TOKEN=agent\n")
    ws = Workspace.open(root)  # acr was killed; `acr recover` starts from the store alone
    ws.restore(ws.load_checkpoint("t2-1"))
    assert (root / ".env").read_text() == "TOKEN=mine\n"
    ws.drop(cp)
    assert "refs/acr/keep" not in git(root, "for-each-ref")


def test_same_size_edit_of_an_ignored_file_in_the_same_second_is_put_back(with_ignored):
    ws = Workspace.open(with_ignored)
    ws.checkpoint()  # the second checkpoint reuses the first one's stat cache
    cp = ws.checkpoint()
    (with_ignored / ".env").write_text("TOKEN=evil\n")
    ws.restore(cp)
    assert (with_ignored / ".env").read_text() == "TOKEN=mine\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read every file")
def test_an_unreadable_ignored_file_does_not_stop_a_checkpoint(with_ignored):
    secret = with_ignored / "data" / "locked.csv"
    secret.write_text("locked\n")
    secret.chmod(0)
    try:
        ws = Workspace.open(with_ignored)
        cp = ws.checkpoint()
        (with_ignored / ".env").write_text("TOKEN=agent\n")
        ws.restore(cp)
        assert (with_ignored / ".env").read_text() == "TOKEN=mine\n"
    finally:
        secret.chmod(0o644)


def test_files_git_is_told_not_to_read_are_rolled_back_to_the_users_version(project):
    """skip-worktree / assume-unchanged: a local config the user edits on purpose, git is told to ignore."""
    git(project, "update-index", "--skip-worktree", "calc.py")
    git(project, "update-index", "--assume-unchanged", "test_calc.py")
    (project / "calc.py").write_text("my local version\n")
    (project / "test_calc.py").write_text("my local test\n")
    before, index_before = snapshot(project), (project / ".git" / "index").read_bytes()
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "calc.py").write_text("agent\n")
    (project / "test_calc.py").write_text("agent\n")
    assert {p for _, p in ws.changes(cp)} == {"calc.py", "test_calc.py"}  # the attempt's edits are seen
    ws.restore(cp)
    assert snapshot(project) == before
    assert (project / ".git" / "index").read_bytes() == index_before  # the bits stay set


@pytest.mark.parametrize("via", ["rollback", "recover"])
def test_sparse_checkout_files_outside_the_cone(project, via):
    (project / "out").mkdir()
    (project / "out" / "o.txt").write_text("o\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "out")
    git(project, "sparse-checkout", "set", "--no-cone", "/*.py")
    assert not (project / "out").exists()
    (project / "calc.py").write_text("user edit\n")
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint("k-1")
    (project / "calc.py").write_text("agent\n")
    (project / "out").mkdir()
    (project / "out" / "new.txt").write_text("agent made this outside the cone\n")
    (project / "out" / "o.txt").write_text("and this where the sparse checkout has the committed file\n")
    if via == "recover":  # acr was killed: `acr recover` starts from the refs alone
        ws = Workspace.open(project)
        cp = ws.load_checkpoint(cp.name)
    ws.restore(cp)
    assert snapshot(project) == before  # and the files the sparse checkout leaves out are not "deleted"
    assert "out/o.txt" in git(project, "ls-files") and not git(project, "status", "--porcelain", "out")
    assert git(project, "ls-files", "-v", "out/o.txt").startswith("S ")  # still outside the sparse checkout


def test_a_hidden_file_the_agent_deletes_comes_back(project):
    git(project, "update-index", "--skip-worktree", "calc.py")  # unchanged on disk, marked by the user
    git(project, "update-index", "--assume-unchanged", "test_calc.py")
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "calc.py").unlink()
    (project / "test_calc.py").unlink()
    ws.restore(cp)
    assert snapshot(project) == before


@pytest.mark.parametrize("rule_change", ["nested .gitignore added", ".git/info/exclude emptied",
                                         ".git/info/exclude emptied, then acr killed and recovered",
                                         ".git/info/exclude emptied, in a linked worktree"])
def test_an_attempt_that_unignores_files_does_not_get_them_deleted(project, monkeypatch, rule_change, tmp_path):
    monkeypatch.setattr(workspace.snapshot, "IGNORED_MAX_FILES", 0)  # like a 70 MB model file: over the budget, not kept
    if "worktree" in rule_change:  # git reads the main repository's info/exclude there
        git(project, "worktree", "add", "-q", str(tmp_path / "wt"))
        main_git, project = project / ".git", tmp_path / "wt"
    exclude_file = (main_git if "worktree" in rule_change else project / ".git") / "info" / "exclude"
    if rule_change.startswith(".git"):
        exclude_file.parent.mkdir(exist_ok=True)
        exclude_file.write_text("data/\n")
    else:
        (project / ".gitignore").write_text("*.bin\n")
        git(project, "add", ".gitignore")
        git(project, "commit", "-qm", "ignore")
    (project / "data").mkdir()
    (project / "data" / "model.bin").write_bytes(b"weights the user trained for days")
    before = snapshot(project)
    exclude = exclude_file.read_bytes()
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "calc.py").write_text("agent\n")
    if rule_change.startswith(".git"):
        exclude_file.write_text("")
    else:
        (project / "data" / ".gitignore").write_text("!*.bin\n")
    if "recovered" in rule_change:
        ws = Workspace.open(project)
        cp = ws.load_checkpoint(cp.name)
    ws.restore(cp)
    assert snapshot(project) == before  # model.bin is still there, and the new rule is gone
    assert exclude_file.read_bytes() == exclude


def test_many_recorded_modes_fit_in_a_checkpoint(project):
    for i in range(3000):  # e.g. a checkout made under another umask: every file's mode is recorded
        (project / f"a-file-with-a-long-enough-name-{i:04}.txt").write_text("x\n")
        os.chmod(project / f"a-file-with-a-long-enough-name-{i:04}.txt", 0o600)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")  # the modes are more than one command-line argument may hold
    assert len(ws.load_checkpoint(cp.name).modes) >= 3000
    ws.drop(cp)
    assert not git(project, "for-each-ref", "refs/acr/")


def test_permission_bits_come_back_as_the_user_set_them(project):
    (project / ".gitignore").write_text(".env\n")
    (project / ".env").write_text("TOKEN=secret\n")
    (project / ".env").chmod(0o600)  # a secret must not come back world-readable
    (project / "calc.py").chmod(0o640)
    (project / "key").write_text("private\n")
    (project / "key").chmod(0o400)
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / ".env").write_text("TOKEN=leaked\n")
    (project / "calc.py").chmod(0o644)  # a mode-only change: no diff to git
    (project / "key").unlink()
    ws.restore(cp)
    assert snapshot(project) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_does_not_stop_the_rest_of_the_rollback(project):
    (project / "d").mkdir()
    (project / "d" / "f.txt").write_text("committed\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "d")
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "d" / "f.txt").write_text("agent\n")
    (project / "calc.py").write_text("agent\n")
    git(project, "commit", "-qam", "agent")
    (project / "d").chmod(0o555)
    try:
        with pytest.raises(WorkspaceError) as e:
            ws.restore(cp)
    finally:
        (project / "d").chmod(0o755)
    assert "d/f.txt" in e.value.message
    assert (project / "calc.py").read_text() != "agent\n"  # every other path, HEAD and the index are back
    assert git(project, "log", "-1", "--format=%s").strip() != "agent"


def test_a_repository_the_attempt_made_where_a_file_was_is_moved_aside_never_deleted(project, tmp_path):
    (project / "u").write_text("the user's untracked notes\n")
    (project / "calc.py").write_text("user edit\n")
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "calc.py").write_text("agent\n")
    (project / "test_calc.py").unlink()
    (project / "u").unlink()
    (project / "u").mkdir()  # the agent's own repository where the user's file was: never deleted by acr
    git(project / "u", "init", "-q")
    (project / "u" / "x").write_text("x\n")
    report = ws.restore(cp)
    assert snapshot(project) == before  # the user's file is back where the repository was
    assert (report.put_aside / "u" / "x").read_text() == "x\n" and (report.put_aside / "u" / ".git").is_dir()
    assert any("a repository the attempt made at u/" in line for line in report.lines())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_path_the_rollback_cannot_write_does_not_stop_the_rest(project, tmp_path):
    (project / "calc.py").write_text("user edit\n")
    (project / "pkg").mkdir()
    (project / "pkg" / "m.py").write_text("the user's\n")
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "calc.py").write_text("agent\n")
    (project / "test_calc.py").unlink()
    (project / "pkg" / "m.py").unlink()
    (project / "pkg").chmod(0o500)  # the rollback cannot write m.py back: it puts back the rest, then says so
    try:
        with pytest.raises(WorkspaceError) as e:
            ws.restore(cp)
    finally:
        (project / "pkg").chmod(0o755)
    assert "pkg/m.py" in e.value.message and "acr recover" in e.value.hint
    assert (project / "calc.py").read_text() == "user edit\n" and (project / "test_calc.py").exists()
    ws.restore(ws.load_checkpoint(cp.name))  # what the message says: make it writable, then recover finishes
    assert snapshot(project) == before


def test_recover_after_a_kill_keeps_exact_bytes_and_modes_even_after_a_gc(project):
    (project / ".gitattributes").write_text("*.txt eol=crlf\n")
    (project / "notes.txt").write_bytes(b"a\r\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "attrs")
    (project / "notes.txt").write_bytes(b"user\r\nmixed lf\n")  # git would write these bytes back otherwise
    (project / "calc.py").chmod(0o600)
    before = snapshot(project)
    cp = Workspace.open(project).checkpoint("k-1")
    (project / "notes.txt").write_text("agent\n")
    (project / "calc.py").write_text("agent\n")
    git(project, "gc", "-q", "--prune=now")  # an agent's git housekeeping
    # acr was killed here; `acr recover` starts from the refs alone
    ws = Workspace.open(project)
    assert ws.interrupted_checkpoints() == [cp.name]
    ws.restore(ws.load_checkpoint(cp.name))
    assert snapshot(project) == before
    ws.drop(cp)
    assert ws.interrupted_checkpoints() == []


def test_exec_bits_come_back_with_core_filemode_off(project):
    git(project, "config", "core.fileMode", "false")  # as on some shared or Windows-mounted drives
    (project / "run.sh").write_text("#!/bin/sh\n")
    (project / "run.sh").chmod(0o755)
    (project / "calc.py").chmod(0o755)
    before = snapshot(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "run.sh").unlink()
    (project / "calc.py").write_text("agent\n")
    ws.restore(cp)
    assert snapshot(project) == before


def stash_list(root: Path) -> list[str]:
    return git(root, "stash", "list", "--format=%H %gs").splitlines()


@pytest.fixture
def with_stashes(project: Path) -> Path:
    """Three stash entries of the user's own uncommitted work, a feature branch and a tag."""
    for n in range(3):
        (project / "calc.py").write_text(f"user work {n}\n")
        git(project, "stash", "push", "-q", "-m", f"user work {n}")
    git(project, "branch", "feature")
    git(project, "tag", "-a", "v1", "-m", "release")
    return project


def test_stash_entries_branches_and_tags_the_attempt_removes_come_back(with_stashes):
    root = with_stashes
    user_refs = ("for-each-ref", "refs/heads", "refs/tags", "refs/stash")
    stashes, refs = stash_list(root), git(root, *user_refs)
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    git(root, "stash", "pop", "-q")  # the agent takes the user's newest stash for its own...
    git(root, "stash", "drop", "-q", "stash@{1}")  # ...drops another,
    git(root, "branch", "-D", "-q", "feature")  # deletes a branch and a tag
    git(root, "tag", "-d", "v1")
    report = ws.restore(cp)
    assert git(root, *user_refs) == refs
    # every entry is back, in its place: the user's next `git stash pop` applies what it would have
    assert stash_list(root) == stashes
    git(root, "stash", "apply", "-q", "stash@{2}")  # and each still holds the user's work
    assert (root / "calc.py").read_text() == "user work 0\n"
    branch = git(root, "branch", "--show-current").strip()
    assert report.refs_put_back == ["refs/heads/feature", "refs/tags/v1", f"stash: On {branch}: user work 0",
                                f"stash: On {branch}: user work 2"]


def test_a_stash_entry_made_during_the_attempt_is_kept_aside_and_named(with_stashes, tmp_path):
    """The user's list comes back exactly: the next `git stash pop` must not apply what the agent stashed. The
    stash is shared by every worktree, so an entry made meanwhile may be the user's own, from another one:
    nothing is lost, it is named with the command that puts it back."""
    root = with_stashes
    stashes = stash_list(root)
    other = tmp_path / "other"
    git(root, "worktree", "add", "-q", str(other), "feature")
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    git(root, "stash", "drop", "-q", "stash@{1}")  # the attempt drops one of the user's
    (other / "calc.py").write_text("the user's work in the other worktree\n")
    git(other, "stash", "push", "-q", "-m", "mine, from the other worktree")
    report = ws.restore(cp)
    assert stash_list(root) == stashes
    [line] = [t for t in report.refs_taken if "mine, from the other worktree" in t]
    assert line in report.side_effects()  # the run shows it, not only the attempt's log
    command = line[line.index("`git stash store") + 1:line.rindex("`")]
    subprocess.run(command, shell=True, cwd=other, check=True)  # (the command as the user pastes it)
    git(other, "stash", "pop", "-q")
    assert (other / "calc.py").read_text() == "the user's work in the other worktree\n"


def test_a_stash_clear_leaves_the_list_exactly_as_it_was(with_stashes):
    root = with_stashes
    stashes = stash_list(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    git(root, "stash", "clear")
    ws.restore(cp)
    assert stash_list(root) == stashes


def test_a_branch_checked_out_in_another_work_tree_keeps_its_commits_made_meanwhile(with_stashes, tmp_path):
    root = with_stashes
    other = tmp_path / "other"
    git(root, "worktree", "add", "-q", str(other), "feature")
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    (other / "calc.py").write_text("the user's commit in the other work tree\n")
    git(other, "commit", "-qam", "other work")
    tip = git(root, "rev-parse", "feature")
    report = ws.restore(cp)
    assert git(root, "rev-parse", "feature") == tip and git(other, "status", "--porcelain") == ""
    assert any("refs/heads/feature" in t and "left as it is" in t for t in report.refs_taken)


def test_an_agent_cannot_hide_a_branch_behind_another_work_tree(with_stashes, tmp_path):
    # only the branch a work tree had checked out at the checkpoint is left to it: pointing that work
    # tree's HEAD at a branch the agent made does not keep the branch
    root = with_stashes
    other = tmp_path / "other"
    git(root, "worktree", "add", "-q", str(other), "feature")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    git(root, "branch", "evil")
    admin = Path(git(other, "rev-parse", "--git-dir").strip())
    (admin / "HEAD").write_text("ref: refs/heads/evil\n")
    report = ws.restore(cp)
    assert not git(root, "rev-parse", "--verify", "-q", "refs/heads/evil", check=False).strip()
    assert git(root, "rev-parse", "--verify", "-q", "refs/acr/put-aside/t-1/heads/evil")
    assert any(f"the work tree {other}" in t for t in report.refs_taken)


def test_branches_tags_and_stash_entries_the_attempt_makes_or_moves_come_back_as_they_were(with_stashes, tmp_path):
    """A hostile agent leaves a branch and a tag (a `git push --tags` would publish it, a tag push may start a
    release), moves a branch, stashes, and parks a branch in a work tree of its own: after the rollback the
    user's refs and stash list are exactly as they were, and each of the agent's is kept aside and named."""
    root = with_stashes
    user_refs = ("for-each-ref", "refs/heads", "refs/tags", "refs/stash")
    stashes, refs = stash_list(root), git(root, *user_refs)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    git(root, "checkout", "-q", "-b", "agent-branch")
    (root / "calc.py").write_text("agent\n")
    git(root, "commit", "-qam", "agent's commit")
    agent_tip = git(root, "rev-parse", "HEAD").strip()
    git(root, "tag", "v9.9.9")
    git(root, "branch", "-f", "feature", "agent-branch")
    (root / "calc.py").write_text("agent again\n")
    git(root, "stash", "push", "-q", "-m", "agent's stash")
    git(root, "worktree", "add", "-q", str(tmp_path / "agent-wt"), "-b", "parked")
    report = ws.restore(cp)
    assert git(root, *user_refs) == refs and stash_list(root) == stashes
    kept = {r: v for line in git(root, "for-each-ref", "--format=%(refname) %(objectname)",
                                 "refs/acr/put-aside/t-1/").splitlines() for r, v in [line.split()]}
    assert kept["refs/acr/put-aside/t-1/heads/agent-branch"] == agent_tip
    assert kept["refs/acr/put-aside/t-1/heads/feature"] == agent_tip
    assert {"refs/acr/put-aside/t-1/tags/v9.9.9", "refs/acr/put-aside/t-1/heads/parked",
            "refs/acr/put-aside/t-1/stash/0"} <= set(kept)
    assert len(report.refs_taken) == 5 and all(t in report.side_effects() for t in report.refs_taken)
    # the agent's own work tree is moved aside, with its .git/worktrees/ entry: its branch is kept as the rest
    assert not (tmp_path / "agent-wt").exists() and (report.put_aside / "worktrees" / "agent-wt" / "calc.py").exists()
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert any(str(tmp_path / "agent-wt") in line for line in report.side_effects())


def test_recover_brings_dropped_stash_entries_back_even_after_a_gc(with_stashes):
    root = with_stashes
    stashes = stash_list(root)
    cp = Workspace.open(root).checkpoint("k-1")
    git(root, "stash", "clear")
    git(root, "branch", "-D", "-q", "feature")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")  # unreachable now but for acr's own refs
    ws = Workspace.open(root)  # acr was killed; `acr recover` starts from the refs alone
    ws.restore(ws.load_checkpoint(cp.name))
    assert stash_list(root) == stashes and git(root, "rev-parse", "--verify", "-q", "feature")
    ws.drop(cp)
    assert not git(root, "for-each-ref", "refs/acr/")


def test_a_branch_deleted_and_pruned_during_the_attempt_comes_back(with_stashes):
    root = with_stashes
    git(root, "checkout", "-q", "-b", "only-here")
    (root / "calc.py").write_text("work that lives on this branch alone\n")
    git(root, "commit", "-qam", "branch work")
    git(root, "checkout", "-q", "-")
    tip = git(root, "rev-parse", "only-here")
    ws = Workspace.open(root)
    cp = ws.checkpoint("k-1")
    git(root, "branch", "-D", "-q", "only-here")
    git(root, "tag", "-d", "v1")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    report = ws.restore(cp)
    assert git(root, "rev-parse", "only-here") == tip and git(root, "cat-file", "-t", "only-here") == "commit\n"
    # an annotated tag's own object is not kept (only the commit it names): it is reported, not re-made
    assert report.refs_put_aside == ["refs/tags/v1 (could not come back: its objects are gone, pruned meanwhile)"]


def test_a_branch_name_the_attempt_took_is_freed_and_the_branch_comes_back(with_stashes):
    root = with_stashes
    tip = git(root, "rev-parse", "feature")
    git(root, "symbolic-ref", "refs/heads/alias", "refs/heads/feature")  # e.g. master -> main
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    (root / "calc.py").write_text("agent\n")
    git(root, "update-ref", "-d", "refs/heads/alias", "--no-deref")
    git(root, "branch", "-D", "-q", "feature")
    git(root, "branch", "feature/new")  # the old name is a directory of refs now
    report = ws.restore(cp)  # no error: the files, HEAD and the other refs are back
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"
    assert git(root, "rev-parse", "feature") == tip  # its name was freed: the attempt's feature/new is aside
    assert git(root, "rev-parse", f"refs/acr/put-aside/{cp.name}/heads/feature/new") == tip
    assert not report.refs_put_aside
    assert git(root, "symbolic-ref", "refs/heads/alias").strip() == "refs/heads/feature"  # back as a symbolic ref


def test_a_branch_made_in_another_work_tree_during_the_attempt_is_kept_aside_and_its_work_tree_named(
        with_stashes, tmp_path):
    """Refs are shared by every work tree, and which one made a branch cannot be told (a hostile agent can
    rewrite another work tree's HEAD): one made during the attempt is kept aside, never lost, and a work tree
    left on it is named with what to do. Its name no longer blocks the user's branch it took."""
    root = with_stashes
    tip = git(root, "rev-parse", "feature").strip()
    other = tmp_path / "other"
    git(root, "worktree", "add", "-q", "--detach", str(other))
    ws = Workspace.open(root)
    cp = ws.checkpoint()
    (root / "calc.py").write_text("agent\n")
    git(root, "branch", "-D", "-q", "feature")
    git(other, "checkout", "-q", "-b", "feature/mine")
    mine = git(root, "rev-parse", "feature/mine").strip()
    report = ws.restore(cp)  # no error: the files, HEAD and the other refs are back
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"
    assert git(root, "rev-parse", "feature").strip() == tip
    assert git(root, "rev-parse", f"refs/acr/put-aside/{cp.name}/heads/feature/mine").strip() == mine
    assert any(f"the work tree {other}" in t and "switch" in t for t in report.refs_taken)


def test_a_ref_made_where_acr_keeps_what_it_puts_aside_does_not_stop_it(with_stashes):
    """`git update-ref refs/acr/put-aside HEAD` would make every name below it impossible: it is removed."""
    root = with_stashes
    refs = git(root, "for-each-ref", "refs/heads", "refs/tags")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    git(root, "update-ref", "refs/acr/put-aside", "HEAD")
    git(root, "tag", "v9.9.9")
    git(root, "symbolic-ref", "refs/tags/v3.0", "refs/heads/feature")  # a symbolic tag: --tags would push it
    report = ws.restore(cp)
    assert git(root, "for-each-ref", "refs/heads", "refs/tags") == refs
    assert git(root, "rev-parse", "--verify", "-q", "refs/acr/put-aside/t-1/tags/v9.9.9")
    assert any("removed refs/acr/put-aside" in t for t in report.side_effects())
    assert any("removed the symbolic ref refs/tags/v3.0" in t for t in report.side_effects())


def test_the_command_that_takes_a_ref_back_is_safe_to_paste(with_stashes, tmp_path):
    root = with_stashes
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    name = "x;touch${IFS}PWNED;#it's"  # a name git allows, and a shell would run
    git(root, "branch", name)
    report = ws.restore(cp)
    [line] = [t for t in report.refs_taken if "PWNED" in t]
    command = line[line.index("`") + 1:line.rindex("`")]
    subprocess.run(command, shell=True, cwd=root, check=True)
    assert not (root / "PWNED").exists() and git(root, "rev-parse", "--verify", "-q", name)


def test_names_that_are_not_utf8_are_put_back_and_shown(project):
    import subprocess

    def stash_list(root):
        return subprocess.run(["git", "stash", "list", "--format=%H %gs"], cwd=root, capture_output=True).stdout

    (project / "calc.py").write_text("user work\n")
    subprocess.run(["git", "stash", "push", "-q", "-m", b"caf\xe9"], cwd=project, check=True, capture_output=True)
    subprocess.run(["git", "branch", b"br\xe9"], cwd=project, check=True)
    user_refs = ["git", "for-each-ref", "refs/heads", "refs/tags", "refs/stash"]
    stashes, refs = stash_list(project), subprocess.run(user_refs, cwd=project, capture_output=True).stdout
    ws = Workspace.open(project)
    cp = ws.checkpoint("k-1")
    git(project, "stash", "drop", "-q")
    subprocess.run(["git", "branch", "-D", "-q", b"br\xe9"], cwd=project, check=True)
    report = ws.restore(ws.load_checkpoint(cp.name))
    assert stash_list(project) == stashes
    assert subprocess.run(user_refs, cwd=project, capture_output=True).stdout == refs
    assert sorted(report.refs_put_back) == ["refs/heads/br\\xe9", "stash: On master: caf\\xe9".replace(
        "master", git(project, "branch", "--show-current").strip())]


def test_a_stash_whose_log_was_expired_keeps_its_entry(project):
    """refs/stash alone can hold the user's entry (its reflog expired): rebuilding the list must keep it."""
    (project / "calc.py").write_text("the user's stashed work\n")
    git(project, "stash", "push", "-q", "-m", "mine")
    mine = git(project, "rev-parse", "refs/stash").strip()
    git(project, "reflog", "expire", "--expire=all", "refs/stash")
    ws = Workspace.open(project)
    cp = ws.checkpoint()
    (project / "calc.py").write_text("the agent's\n")
    git(project, "stash", "push", "-q", "-m", "the agent's")
    ws.restore(cp)
    listed = git(project, "stash", "list", "--format=%H").split()
    assert mine in listed  # still reachable: gc will not take it
    git(project, "stash", "apply", "-q", f"stash@{{{listed.index(mine)}}}")
    assert (project / "calc.py").read_text() == "the user's stashed work\n"
