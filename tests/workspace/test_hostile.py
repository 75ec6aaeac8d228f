"""A hostile or careless attempt leaves nothing behind: not in .git, not in another worktree.

Each test plays an agent that runs ordinary git and shell commands inside the project, then checks
the work tree, index, HEAD, ``.git/config``, hooks and info files byte for byte after the rollback,
and that no program the attempt planted ran during acr's own git commands.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import acr, git, init_repo

from acr_cli.errors import WorkspaceError
from acr_cli.workspace import Workspace


def tree_bytes(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] == ".git":
            continue
        if p.is_symlink():
            out[str(rel)] = b"->" + os.readlink(p).encode()
        elif p.is_file():
            out[str(rel)] = p.read_bytes() + f"|{p.stat().st_mode & 0o777:o}".encode()
        elif p.is_dir():
            out[str(rel) + "/"] = f"{p.stat().st_mode & 0o777:o}".encode()
    return out


def git_state(root: Path) -> dict[str, bytes]:
    """.git/config, hooks/ and info/ (bytes and modes), the index, HEAD and the refs."""
    g = root / ".git"
    out = {"config": (g / "config").read_bytes(), "index": (g / "index").read_bytes(),
           "HEAD": (g / "HEAD").read_bytes(), "refs": git(root, "for-each-ref", "refs/heads", "refs/tags", "refs/stash").encode(),
           "stash": git(root, "stash", "list", "--format=%H %gs").encode()}
    for d in ("hooks", "info"):
        for p in sorted((g / d).rglob("*")):
            out[str(p.relative_to(g))] = (p.read_bytes() if p.is_file() else b"dir") + f"|{p.stat().st_mode:o}".encode()
    return out


@pytest.fixture
def user_project(project: Path) -> Path:
    """A project with the user's own uncommitted work, a hook of theirs and an ignored .env."""
    (project / "calc.py").write_text("def add(a, b):\n    return a + b  # the user's fix, uncommitted\n")
    (project / "notes.md").write_text("the user's untracked notes\n")
    (project / ".gitignore").write_text(".env\n")
    (project / ".env").write_text("DB_PASS=hunter2hunter2\n")
    hook = project / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    return project


def plant(root: Path, sentinel: Path) -> None:
    """What a hostile attempt leaves in .git: each planted program touches ``sentinel`` when it runs."""
    run = f"touch {sentinel}"
    g = root / ".git"
    git(root, "config", "filter.x.clean", f"sh -c '{run}; cat'")
    git(root, "config", "filter.x.smudge", f"sh -c '{run}; echo injected = 1'")
    git(root, "config", "filter.x.required", "true")
    (g / "info").mkdir(exist_ok=True)
    (g / "info" / "attributes").write_text("*.py filter=x\n")
    for name in ("reference-transaction", "post-index-change", "post-checkout", "pre-commit"):
        (g / "hooks" / name).write_text(f"#!/bin/sh\n{run}\nsleep 600\n")  # and a hook that never returns
        (g / "hooks" / name).chmod(0o755)
    fsmonitor = g / "fsmonitor.sh"
    fsmonitor.write_text(f"#!/bin/sh\n{run}\n")
    fsmonitor.chmod(0o755)
    git(root, "config", "core.fsmonitor", str(fsmonitor))
    git(root, "config", "alias.st", f"!{run}")
    git(root, "config", "user.email", "attacker@example.com")
    git(root, "config", "remote.evil.url", "https://example.com/x.git")
    git(root, "config", "diff.external", str(fsmonitor))
    git(root, "config", "commit.gpgSign", "true")
    git(root, "config", "gpg.program", str(fsmonitor))


def test_planted_filters_hooks_and_fsmonitor_never_run_in_checkpoint_or_rollback(user_project, tmp_path):
    root = user_project
    sentinel = tmp_path / "planted-program-ran"
    files, state = tree_bytes(root), git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / "calc.py").write_text("the attempt's edit\n")
    (root / "new.py").write_text("x = 1\n")
    git(root, "add", "new.py")
    plant(root, sentinel)
    sentinel.unlink(missing_ok=True)  # the attempt's own git commands may have run them; acr's must not
    report = ws.restore(cp)
    assert not sentinel.exists()
    assert tree_bytes(root) == files  # the filter's output never reached the user's file
    assert git_state(root) == state  # config, hooks, info/attributes: byte for byte
    assert "changed .git/config" in report.git_state and "added .git/info/attributes" in report.git_state
    git(root, "status")  # the user's next git commands run nothing planted either
    assert not sentinel.exists()


def test_planted_programs_already_there_do_not_run_during_a_checkpoint(user_project, tmp_path):
    sentinel = tmp_path / "ran"
    plant(user_project, sentinel)
    sentinel.unlink(missing_ok=True)
    ws = Workspace.open(user_project)
    cp = ws.checkpoint("t-1")  # a hook that never returns would hang here
    (user_project / "calc.py").write_text("agent\n")
    ws.restore(cp)
    ws.drop(cp)
    assert not sentinel.exists()


def test_hooks_path_the_attempt_set_is_undone_and_the_users_hook_runs_again(user_project):
    root = user_project
    state = git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".husky").mkdir()
    (root / ".husky" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    git(root, "config", "core.hooksPath", ".husky")
    ws.restore(cp)
    assert not (root / ".husky").exists() and git_state(root) == state
    assert git(root, "config", "--get", "core.hooksPath", check=False) == ""


def test_core_worktree_set_by_the_attempt_cannot_redirect_the_rollback(user_project, tmp_path):
    root = user_project
    elsewhere = init_repo(tmp_path / "elsewhere", {"calc.py": "someone else's file\n"})
    theirs = tree_bytes(elsewhere)
    files, state = tree_bytes(root), git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / "calc.py").write_text("agent\n")
    (root / "notes.md").unlink()
    git(root, "config", "core.worktree", str(elsewhere))
    ws.restore(cp)
    assert tree_bytes(elsewhere) == theirs  # not overwritten with the project's files (nor its .env)
    assert tree_bytes(root) == files and git_state(root) == state
    # the same after a kill: `acr recover` opens the repository with core.worktree still planted
    cp = ws.checkpoint("t-2")
    (root / "calc.py").write_text("agent\n")
    git(root, "config", "core.worktree", str(elsewhere))
    r = acr("recover", cwd=root)
    assert r.returncode == 0, r.stderr
    assert tree_bytes(elsewhere) == theirs and tree_bytes(root) == files and git_state(root) == state


def test_the_checkpoint_survives_an_attempt_that_deletes_refs_acr_and_prunes(user_project):
    root = user_project
    files, state = tree_bytes(root), git_state(root)
    ws = Workspace.open(root)
    ws.checkpoint("t-1")
    (root / "calc.py").write_text("agent\n")
    (root / "notes.md").unlink()
    for ref in git(root, "for-each-ref", "--format=%(refname)", "refs/acr").split():
        git(root, "update-ref", "-d", ref)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    Workspace.open(root).restore(Workspace.open(root).load_checkpoint("t-1"))  # as `acr recover` would
    assert tree_bytes(root) == files and git_state(root) == state
    assert (root / "notes.md").read_text() == "the user's untracked notes\n"


def test_stale_lock_files_the_attempt_left_are_removed_and_named(user_project):
    root = user_project
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    branch = git(root, "symbolic-ref", "HEAD").strip()
    (root / "calc.py").write_text("agent\n")
    (root / ".git" / "index.lock").write_text("")
    (root / ".git" / (branch + ".lock")).write_text("")
    report = ws.restore(cp)
    assert sorted(Path(p).name for p in report.stale_locks) == ["index.lock", Path(branch).name + ".lock"]
    git(root, "commit", "-qam", "the user's next commit works")


def test_directories_the_rollback_recreates_get_the_users_usual_mode(project):
    (project / "pkg" / "sub").mkdir(parents=True)
    (project / "pkg" / "sub" / "m.py").write_text("x = 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "pkg")
    mode = stat.S_IMODE((project / "pkg" / "sub").stat().st_mode)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    import shutil

    shutil.rmtree(project / "pkg")
    ws.restore(cp)
    assert stat.S_IMODE((project / "pkg" / "sub").stat().st_mode) == mode
    assert stat.S_IMODE((project / "pkg").stat().st_mode) == mode


def test_a_passing_attempts_changes_to_git_are_kept_and_listed(user_project):
    root = user_project
    ws = Workspace.open(root)
    with ws.attempt("t-1") as guard:
        (root / "calc.py").write_text("agent's fix\n")
        git(root, "config", "user.email", "attacker@example.com")
        (root / ".git" / "hooks" / "post-merge").write_text("#!/bin/sh\n")
        guard.passed = True
    assert (root / "calc.py").read_text() == "agent's fix\n"
    assert guard.side_effects == ["changed .git/config", "added .git/hooks/post-merge"]
    assert ws.interrupted_checkpoints() == []


def test_a_checkpoint_belongs_to_its_worktree(user_project, tmp_path):
    a = user_project
    b = tmp_path / "b"
    git(a, "worktree", "add", "-q", "-b", "other", str(b))
    (b / "untracked-in-b.txt").write_text("b's own\n")
    Workspace.open(a).checkpoint("killed-1")  # A's run was killed mid-attempt: its checkpoint stays
    (a / "calc.py").write_text("the agent's edit in A\n")
    files_b = tree_bytes(b)
    assert Workspace.open(b).interrupted_checkpoints() == []
    r = acr("recover", cwd=b)
    assert r.returncode == 0 and "nothing to recover" in r.stdout
    assert tree_bytes(b) == files_b and git(b, "branch", "--show-current").strip() == "other"
    assert Workspace.open(a).interrupted_checkpoints() == ["killed-1"]
    r = acr("recover", cwd=a)
    assert r.returncode == 0, r.stderr
    assert (a / "calc.py").read_text().endswith("# the user's fix, uncommitted\n")


# ---------------------------------------------------------------- end to end, through `acr run`

def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_hostile_agent_run_by_acr_leaves_nothing_behind(user_project, fakes_on_path, scenario, tmp_path):
    """The agent plants programs in .git, starts processes that leave its session, fails the check;
    afterwards the project and .git are byte for byte as before, nothing planted ran, nothing it started lives."""
    from conftest import VERIFY

    root = user_project
    sentinel = tmp_path / "planted-program-ran"
    pids = tmp_path / "escaped.pids"
    escape = (f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' </dev/null >/dev/null 2>&1 & "
              f"(sh -c 'echo $$ >> {pids}; exec sleep 300' </dev/null >/dev/null 2>&1 &) ; "
              f"set -m; sh -c 'echo $$ >> {pids}; exec sleep 300' </dev/null >/dev/null 2>&1 & disown")
    g = root / ".git"
    commands = [["git", "stash", "push", "-q", "-m", "the agent's"], ["git", "branch", "agent-branch"],
                ["git", "tag", "v9.9.9"],  # a tag a `git push --tags` would publish, a branch, a stash entry
                ["git", "config", "filter.x.clean", f"sh -c 'touch {sentinel}; cat'"],
                ["git", "config", "filter.x.smudge", f"sh -c 'touch {sentinel}; echo injected = 1'"],
                ["sh", "-c", f"mkdir -p {g}/info && echo '*.py filter=x' > {g}/info/attributes"],
                ["sh", "-c", f"printf '#!/bin/sh\\ntouch {sentinel}\\n' > {g}/hooks/reference-transaction && "
                             f"chmod +x {g}/hooks/reference-transaction"],
                ["git", "config", "core.hooksPath", ".husky"],
                ["git", "config", "user.email", "attacker@example.com"],
                ["bash", "-c", escape]]
    scenario({"commands": commands, "write": {"calc.py": "def add(a, b):\n    return 0\n"}})
    files, state = tree_bytes(root), git_state(root)
    r = acr("run", "fix add", "--verify", VERIFY, "--yes", "--arms", "codex:gpt-5.4", "--json", cwd=root)
    assert r.returncode == 1, r.stderr
    attempt = json.loads(r.stdout)["attempts"][0]
    assert attempt["verdict"] == "failed"
    assert "changed .git/config" in attempt["side_effects"]
    assert sum(("refs/heads/agent-branch" in e or "refs/tags/v9.9.9" in e or "the agent's" in e)
               for e in attempt["side_effects"]) == 3  # each named, kept under refs/acr/put-aside/
    found = [int(x) for x in pids.read_text().split()]
    assert len(found) == 3
    assert not [p for p in found if _alive(p)]  # every process the attempt started ended with it
    assert not sentinel.exists()  # nothing planted ran in acr's checkpoint or rollback
    assert tree_bytes(root) == files and git_state(root) == state
    log = Path(attempt["log"]).read_text()
    assert "outlived the agent" in log
    pids.unlink()
    shown = acr("run", "fix add", "--verify", VERIFY, "--yes", "--arms", "codex:gpt-5.4", cwd=root)
    progress = " ".join(shown.stderr.split())  # (a person sees it too, not only --json)
    assert "the rollback undid:" in progress and "refs/tags/v9.9.9 made during the attempt" in progress
    assert not [p for p in map(int, pids.read_text().split()) if _alive(p)] and not sentinel.exists()


SECRET = "sk-test-" + "Zq9xW2" * 4  # a secret-looking value only this test's environment holds


def _objects(git_dir: Path) -> bytes:
    """Every object of a repository, uncompressed (a grep of .git would miss what zlib hides)."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True, check=True).stdout


def test_a_failed_attempts_env_dump_reaches_no_ref_and_no_push_and_is_kept_masked(user_project, fakes_on_path,
                                                                                  scenario, tmp_path, acr_home):
    """`env > debug-env.txt`, then a failed check: the rollback keeps the attempt's work, but outside the
    repository (a `git push --mirror` publishes every ref) and with the secret masked; the command the run
    prints still shows it."""
    root = user_project
    scenario({"commands": [["sh", "-c", "env > debug-env.txt"]], "write": {"calc.py": "def add(a, b):\n    return 0\n"}})
    r = acr("run", "fix add", "--verify", "false", "--yes", "--arms", "codex:gpt-5.4", cwd=root,
            env={"OPENAI_API_KEY": SECRET})
    assert r.returncode == 1, r.stderr
    assert not (root / "debug-env.txt").exists()  # rolled back
    assert git(root, "for-each-ref", "refs/acr/attempts") == "" and git(root, "for-each-ref", "refs/acr") == ""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(root, "push", "-q", "--mirror", str(bare))
    assert SECRET.encode() not in _objects(bare)
    assert SECRET.encode() not in _objects(root / ".git")  # nor in any object of the project, reachable or not
    printed = " ".join(r.stderr.split())
    cmd = printed.split("its work is kept in acr's store, secrets masked; see it with: ", 1)[1].split(" log: ")[0]
    shown = subprocess.run(shlex.split(cmd), cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert "+++ b/debug-env.txt" in shown and "+OPENAI_API_KEY=[REDACTED]" in shown and SECRET not in shown
    assert "+    return 0" in shown  # the attempt's work, all of it
    assert cmd in " ".join(acr("show", cwd=root).stdout.split())  # `acr show` prints the same command
    store = Path(shlex.split(cmd)[1].split("=", 1)[1])
    assert SECRET.encode() not in _objects(store)
    leaks = [p for p in acr_home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []  # memory, logs: nowhere in acr's files either


def test_a_passing_attempt_that_changed_git_says_so(user_project, fakes_on_path, scenario):
    root = user_project
    scenario({"commands": [["git", "config", "core.hooksPath", "/tmp/elsewhere"]],
              "write": {"calc.py": "def add(a, b):\n    return a + b\n"}})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "besides the work tree, the attempt changed: (review these:" in out and "- changed .git/config" in out
    assert git(root, "config", "core.hooksPath").strip() == "/tmp/elsewhere"  # kept with the passing work


def test_a_passing_attempt_that_throws_away_uncommitted_work_leaves_it_recoverable(user_project, fakes_on_path,
                                                                                    scenario):
    """`git checkout -- .` and `git clean -fd`, then a fix that passes: the attempt is kept, and so is the user's
    uncommitted edit and untracked file, under a ref the run names."""
    root = user_project
    mine = {p: (root / p).read_bytes() for p in ("calc.py", "notes.md", ".gitignore")}
    scenario({"commands": [["git", "checkout", "--", "."], ["git", "clean", "-fdq"]],
              "write": {"other.py": "x = 1\n"}})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    assert not (root / "notes.md").exists()  # the passing attempt is kept as it left the tree...
    out = " ".join(r.stdout.split())
    assert ("the attempt changed uncommitted work of yours (.gitignore, calc.py, notes.md); the work tree before it "
            "is kept as refs/acr/before/") in out
    ref = out.split("kept as ", 1)[1].split()[0]
    for path, data in mine.items():  # ...and the user's work is one command away
        assert subprocess.run(["git", "show", f"{ref}:{path}"], cwd=root, capture_output=True).stdout == data


def test_a_passing_attempt_that_overwrites_an_ignored_env_keeps_the_users_version_out_of_any_ref(
        user_project, fakes_on_path, scenario):
    """An ignored file is no diff a person reviews: a passing attempt that rewrote the user's .env keeps its
    change, says so, and the user's version is saved where no push can carry it (a file in .git/acr)."""
    import stat

    root = user_project
    mine = (root / ".env").read_bytes()
    scenario({"write": {".env": "DB_PASS=the-agents\n", "calc.py": "def add(a, b):\n    return a + b\n"}})
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    assert (root / ".env").read_text() == "DB_PASS=the-agents\n"  # the passing attempt is kept as it left it
    out = " ".join(r.stdout.split())
    assert "the attempt changed ignored files of yours (.env); your versions are saved in " in out
    saved = Path(out.split("are saved in ", 1)[1].split()[0]) / ".env"
    assert saved.read_bytes() == mine and not stat.S_IMODE(saved.stat().st_mode) & 0o077
    assert saved.is_relative_to(root / ".git" / "acr" / "put-aside")
    for ref in git(root, "for-each-ref", "--format=%(refname)").split():  # in no ref a push could carry
        assert b"hunter2" not in subprocess.run(["git", "grep", "-a", "hunter2", ref], cwd=root,
                                                capture_output=True).stdout


def test_what_the_verifier_writes_in_ignored_files_is_not_put_aside_as_the_attempts(project, fakes_on_path,
                                                                                      scenario):
    """pytest's cache (.pytest_cache/v/cache/lastfailed) changes on every pass after a failure: the user's own
    check wrote it, not the agent. Only what the agent changed is put aside; a file both changed is the agent's."""
    import sys

    root = project
    (root / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n*.log\n.env\n")
    (root / ".env").write_text("DB_PASS=mine\n")
    (root / "both.log").write_text("the user's log\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore")
    check = f"echo verifier >> both.log; echo verifier >> check.log; {sys.executable} -m pytest -q"
    (root / "check.log").write_text("the user's\n")
    scenario({"write": {"calc.py": "def add(a, b):\n    return a + b\n", ".env": "DB_PASS=the-agents\n",
                        "both.log": "the agent's\n"}})
    r = acr("run", "fix add", "--verify", check, "--arms", "codex:gpt-5.4", cwd=root)  # the baseline fails first
    assert r.returncode == 0, r.stderr
    assert (root / ".pytest_cache" / "v" / "cache" / "lastfailed").exists()
    out = " ".join(r.stdout.split())
    assert "the attempt changed ignored files of yours (.env, both.log); your versions are saved in " in out, out
    folder = Path(out.split("are saved in ", 1)[1].split()[0])
    saved = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert saved == [".env", "both.log"]  # not the check's lastfailed, nor check.log only the check wrote
    assert (folder / "both.log").read_text() == "the user's log\nverifier\n"  # as it was before the attempt
    git(root, "checkout", "-q", "calc.py")  # broken again; nothing but the check touches an ignored file now
    scenario({"write": {"calc.py": "def add(a, b):\n    return a + b\n"}})
    r = acr("run", "fix add", "--verify", check, "--arms", "codex:gpt-5.4", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "ignored files of yours" not in r.stdout
    assert len(list((root / ".git" / "acr" / "put-aside").iterdir())) == 1


def _passing_run(root: Path, *extra: str) -> subprocess.CompletedProcess:
    """``acr run`` whose attempt passes (the scenario says what the agent does)."""
    r = acr("run", "fix add", "--verify", "true", "--yes", "--arms", "codex:gpt-5.4", *extra, cwd=root)
    assert r.returncode == 0, r.stderr
    return r


def _command_in(text: str, start: str) -> str:
    """The command a line of the run's output gives, between backquotes, beginning with ``start``."""
    i = text.index("`" + start) + 1
    return text[i:text.index("`", i)]


def test_a_passing_attempt_that_drops_a_stash_entry_names_it_and_keeps_it(project, fakes_on_path, scenario,
                                                                           tmp_path):
    """Nothing is undone after a pass, but the entry the agent dropped is not lost: kept under
    refs/acr/put-aside/, and the command the run prints (quoted: a message may hold `$(`) puts it back."""
    from conftest import GOOD

    root = project
    (root / "calc.py").write_text("the user's stashed work\n")
    git(root, "stash", "push", "-q", "-m", f"mine; $(touch {tmp_path}/pwned)")
    (root / "calc.py").write_text("more stashed work\n")
    git(root, "stash", "push", "-q", "-m", "newer")
    stashes = git(root, "stash", "list", "--format=%H %gs")
    scenario({"commands": [["git", "stash", "drop", "-q", "stash@{1}"]], "write": {"calc.py": GOOD}})
    r = _passing_run(root, "--json")
    effects = json.loads(r.stdout)["attempts"][0]["side_effects"]
    line = [e for e in effects if "mine; $(touch" in e]
    assert len(line) == 1 and "off the list: kept as refs/acr/put-aside/" in line[0], effects
    assert git(root, "stash", "list", "--format=%H %gs") != stashes  # the pass is kept as the agent left it
    subprocess.run(_command_in(line[0], "git stash store"), shell=True, cwd=root, check=True)
    assert not (tmp_path / "pwned").exists()
    listed = git(root, "stash", "list", "--format=%H %gs").splitlines()
    assert sorted(listed) == sorted(stashes.splitlines())  # back on the list (on top: `git stash store` puts it there)
    assert git(root, "show", "stash@{0}:calc.py") == "the user's stashed work\n"  # and holds the user's work


def test_a_passing_attempt_that_deletes_a_branch_and_a_tag_names_them_and_keeps_them(project, fakes_on_path,
                                                                                       scenario):
    """A branch with commits pushed nowhere and an annotated tag, deleted by an attempt that passes: each named in
    the run's output, kept under refs/acr/put-aside/<task>-<n>/, and the printed command recreates it."""
    from conftest import GOOD

    root = project
    git(root, "checkout", "-qb", "feature")
    (root / "feature.txt").write_text("unpushed work\n")
    git(root, "add", "feature.txt")
    git(root, "commit", "-qm", "unpushed")
    git(root, "checkout", "-q", "-")
    git(root, "tag", "-a", "-m", "release", "v1", "feature")
    before = git(root, "for-each-ref", "refs/heads", "refs/tags")
    objects = {ref: git(root, "rev-parse", ref).strip() for ref in ("refs/heads/feature", "refs/tags/v1")}
    scenario({"commands": [["git", "branch", "-qD", "feature"], ["git", "tag", "-d", "v1"]],
              "write": {"calc.py": GOOD}})
    r = _passing_run(root)
    out = " ".join(r.stdout.split())
    assert "besides the work tree, the attempt changed:" in out
    for ref in ("refs/heads/feature", "refs/tags/v1"):
        assert f"deleted {ref} (" in out
        kept = out.split(f"deleted {ref} (", 1)[1].split("kept as ", 1)[1].split()[0]
        assert kept.startswith("refs/acr/put-aside/") and kept.endswith(ref[len("refs/"):])
        assert git(root, "rev-parse", kept).strip() == objects[ref]
        assert not git(root, "rev-parse", "--verify", "-q", ref, check=False)  # deleted: the pass is kept
        subprocess.run(_command_in(out, f"git update-ref {ref}"), shell=True, cwd=root, check=True)
    assert git(root, "for-each-ref", "refs/heads", "refs/tags") == before
    assert git(root, "cat-file", "-t", "v1").strip() == "tag"  # the tag object itself, not only its commit


@pytest.mark.parametrize("rewrite", [["git", "commit", "--amend", "-qm", "the agent's"],
                                     ["git", "reset", "-q", "--hard", "HEAD~1"]])
def test_a_passing_attempt_that_rewrites_head_keeps_the_old_head(project, fakes_on_path, scenario, rewrite):
    """`git commit --amend` or `git reset --hard HEAD~1`, then a fix that passes: HEAD's commit before the
    attempt is no longer in its history; it is named and kept, and `git reset --soft` puts HEAD back on it."""
    from conftest import GOOD

    root = project
    (root / "notes.md").write_text("the user's last commit\n")
    git(root, "add", "notes.md")
    git(root, "commit", "-qm", "the user's")
    old = git(root, "rev-parse", "HEAD").strip()
    scenario({"commands": [rewrite], "write": {"calc.py": GOOD}})
    r = _passing_run(root, "--json")
    effects = json.loads(r.stdout)["attempts"][0]["side_effects"]
    line = [e for e in effects if "is no longer in HEAD's history" in e]
    assert len(line) == 1 and old[:12] in line[0], effects
    kept = line[0].split("kept as ", 1)[1].split()[0]
    assert kept.startswith("refs/acr/put-aside/") and kept.endswith("/HEAD")
    assert git(root, "rev-parse", kept).strip() == old != git(root, "rev-parse", "HEAD").strip()
    subprocess.run(_command_in(line[0], "git reset --soft"), shell=True, cwd=root, check=True)
    assert git(root, "rev-parse", "HEAD").strip() == old
    assert (root / "calc.py").read_text() == GOOD  # the agent's work stays


def test_a_passing_attempt_that_commits_its_work_says_so(project, fakes_on_path, scenario):
    """New commits on HEAD lose nothing (no ref kept aside), but they are not in the uncommitted diff: named."""
    from conftest import GOOD

    root = project
    old = git(root, "rev-parse", "HEAD").strip()
    scenario({"commands": [["sh", "-c", f"printf '{GOOD}' > calc.py && git commit -qam fix"]]})
    r = _passing_run(root, "--json")
    effects = json.loads(r.stdout)["attempts"][0]["side_effects"]
    assert [e for e in effects if e.startswith(f"made 1 commit(s) on HEAD ({old[:12]}..")], effects
    assert not git(root, "for-each-ref", "refs/acr/put-aside")


def test_a_file_outside_changed_through_a_symlink_is_reported(project, tmp_path):
    outside = tmp_path / "outside.cfg"
    outside.write_text("the user's config elsewhere\n")
    os.symlink(outside, project / "linked.cfg")
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "linked.cfg").write_text("written by the attempt through the link\n")  # lands outside
    report = ws.restore(cp)
    assert report.outside == [f"changed {outside} outside the project, through the symlink linked.cfg (not restored)"]


def test_an_attempt_log_on_a_full_disk_stops_logging_and_says_so():
    from acr_cli.live import AttemptLog

    with AttemptLog(Path("/dev/full")) as log:  # every write: ENOSPC
        for _ in range(1000):
            log.write("x" * 100 + "\n")  # never raises
    assert log.problem and "No space left" in log.problem


def test_staged_and_stashed_work_survive_an_attempt_that_drops_them_deletes_refs_acr_and_prunes(project):
    root = project
    (root / "calc.py").write_text("stashed work\n")
    git(root, "stash", "push", "-q", "-m", "mine")
    (root / "staged.py").write_text("staged, never committed\n")
    git(root, "add", "staged.py")
    stashes = git(root, "stash", "list", "--format=%H %gs")
    staged = git(root, "diff", "--cached")
    ws = Workspace.open(root)
    ws.checkpoint("t-1")
    git(root, "stash", "clear")
    git(root, "rm", "-q", "--cached", "staged.py")
    (root / "staged.py").unlink()
    for ref in git(root, "for-each-ref", "--format=%(refname)", "refs/acr").split():
        git(root, "update-ref", "-d", ref)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    ws = Workspace.open(root)  # as `acr recover` after a kill
    ws.restore(ws.load_checkpoint("t-1"))
    assert git(root, "stash", "list", "--format=%H %gs") == stashes
    assert git(root, "diff", "--cached") == staged
    git(root, "stash", "apply", "-q")
    assert (root / "calc.py").read_text() == "stashed work\n"


def test_a_damaged_checkpoint_file_is_explained_not_a_traceback(project):
    ws = Workspace.open(project)
    ws.checkpoint("t-1")
    (ws.store.dir / "t-1.json").write_text('{"name": "t-1"}')
    r = acr("recover", cwd=project)
    assert r.returncode == 2 and "damaged" in r.stderr and "--discard t-1" in r.stderr
    r = acr("recover", "--discard", "t-1", cwd=project)
    assert r.returncode == 0 and ws.interrupted_checkpoints() == []


# ---------------------------------------------------------------- found by an adversarial review

def test_a_git_directory_moved_and_replaced_by_a_symlink_is_never_deleted(user_project):
    root = user_project
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".git").rename(root / ".git2")
    os.symlink(".git2", root / ".git")
    (root / "calc.py").write_text("agent\n")
    with pytest.raises(WorkspaceError, match="moved or replaced"):
        ws.restore(cp)
    assert (root / ".git2" / "HEAD").is_file() and (root / ".git2" / "refs").is_dir()  # nothing of it deleted


def test_a_planted_commondir_is_put_back_and_redirects_nothing(user_project, tmp_path):
    root = user_project
    sentinel = tmp_path / "ran"
    evil = tmp_path / "E"
    evil.mkdir()
    for d in ("refs", "objects", "logs", "info"):
        os.symlink(root / ".git" / d, evil / d)
    (evil / "hooks").mkdir()
    (evil / "config").write_text(f"[core]\n\thooksPath = {evil / 'hooks'}\n"
                                 f"[filter \"ev\"]\n\tclean = sh -c 'touch {sentinel}; cat'\n")
    files, state = tree_bytes(root), git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".git" / "commondir").write_text(str(evil) + "\n")
    (root / ".gitattributes").write_text("* filter=ev\n")
    (root / "calc.py").write_text("agent\n")
    ws.changes(cp)
    report = ws.restore(cp)
    assert not sentinel.exists() and not (root / ".git" / "commondir").exists()
    assert "added .git/commondir" in report.git_state
    assert tree_bytes(root) == files and git_state(root) == state


def test_a_filter_in_an_included_config_file_never_runs(user_project, tmp_path):
    root = user_project
    sentinel = tmp_path / "ran"
    (root / "project.gitconfig").write_text("[core]\n\tautocrlf = false\n")
    git(root, "add", "project.gitconfig")
    git(root, "commit", "-qm", "shared config")
    git(root, "config", "include.path", "../project.gitconfig")
    files = tree_bytes(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    with open(root / "project.gitconfig", "a") as f:
        f.write(f"[filter \"ev\"]\n\tclean = sh -c 'touch {sentinel}; cat'\n")
    (root / ".gitattributes").write_text("*.py filter=ev\n")
    (root / "calc.py").write_text("agent\n")
    ws.changes(cp)
    ws.restore(cp)
    assert not sentinel.exists() and tree_bytes(root) == files


def test_a_planted_signature_check_never_runs(user_project, tmp_path):
    root = user_project
    sentinel = tmp_path / "ran"
    prog = tmp_path / "gpg"
    prog.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    prog.chmod(0o755)
    git(root, "stash", "push", "-q", "-m", "users")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    head = git(root, "rev-parse", "HEAD").strip()
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    body = (f"tree {tree}\nparent {head}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n x\n -----END PGP SIGNATURE-----\n\nsigned\n")
    import subprocess

    signed = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=root, input=body,
                            capture_output=True, text=True, check=True).stdout.strip()
    git(root, "stash", "store", "-m", "planted", signed)
    git(root, "config", "log.showSignature", "true")
    git(root, "config", "gpg.program", str(prog))
    git(root, "stash", "drop", "-q", "stash@{1}")  # the user's: the rollback lists the stash to bring it back
    sentinel.unlink(missing_ok=True)
    ws.restore(cp)
    assert not sentinel.exists()


def test_a_hooks_directory_made_unreadable_still_loses_what_was_planted_in_it(user_project):
    root = user_project
    state = git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    hooks = root / ".git" / "hooks"
    (hooks / "post-commit").write_text("#!/bin/sh\necho planted\n")
    (hooks / "post-commit").chmod(0o755)
    hooks.chmod(0)
    report = ws.restore(cp)
    assert not (hooks / "post-commit").exists() and git_state(root) == state
    assert report.git_state == ["added .git/hooks/post-commit"] or "added .git/hooks/post-commit" in report.git_state


def test_fifos_where_files_were_are_replaced_by_the_files(user_project):
    root = user_project
    files = tree_bytes(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".env").unlink()
    os.mkfifo(root / ".env")  # the ignored secret
    (root / "test_calc.py").unlink()
    os.mkfifo(root / "test_calc.py")  # a tracked file
    ws.restore(cp)
    assert tree_bytes(root) == files and (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"


def test_when_the_head_commit_was_pruned_everything_else_still_comes_back(user_project):
    root = user_project
    git(root, "commit", "-qm", "second", "--allow-empty")
    staged_before = git(root, "diff", "--cached", "--name-status")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    git(root, "reset", "-q", "--hard", "HEAD~1")
    git(root, "clean", "-qfdx")
    for ref in git(root, "for-each-ref", "--format=%(refname)", "refs/acr").split():
        git(root, "update-ref", "-d", ref)
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    with pytest.raises(WorkspaceError, match="HEAD"):
        ws.restore(cp)
    assert (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"  # from acr's own store
    assert (root / "notes.md").read_text() == "the user's untracked notes\n"
    assert "# the user's fix, uncommitted" in (root / "calc.py").read_text()
    assert git(root, "diff", "--cached", "--name-status") == staged_before


def test_replace_refs_shallow_alternates_and_lock_directories_are_undone(user_project, tmp_path):
    root = user_project
    state = git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    blob = git(root, "rev-parse", "HEAD:calc.py").strip()
    import subprocess

    evil = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input="import os  # planted\n",
                          capture_output=True, text=True).stdout.strip()
    git(root, "replace", "-f", blob, evil)
    (root / ".git" / "shallow").write_text(git(root, "rev-parse", "HEAD"))
    (root / ".git" / "objects" / "info" / "alternates").write_text(str(tmp_path) + "\n")
    (root / ".git" / "index.lock").mkdir()
    report = ws.restore(cp)
    assert not git(root, "replace", "-l").strip()
    assert not (root / ".git" / "shallow").exists() and not (root / ".git" / "objects" / "info" / "alternates").exists()
    assert not (root / ".git" / "index.lock").exists() and git_state(root) == state
    assert any("object replacement" in s for s in report.git_state)


def test_a_directory_swapped_for_a_symlink_comes_back_as_a_directory_and_nothing_is_written_outside(project, tmp_path):
    (project / "pkg").mkdir()
    (project / "pkg" / "m.py").write_text("x = 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "pkg")
    mode = stat.S_IMODE((project / "pkg").stat().st_mode)
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    import shutil

    shutil.rmtree(project / "pkg")
    os.symlink(outside, project / "pkg")
    ws.restore(cp)
    assert not (project / "pkg").is_symlink() and stat.S_IMODE((project / "pkg").stat().st_mode) == mode
    assert (project / "pkg" / "m.py").read_text() == "x = 1\n" and not list(outside.iterdir())


def _with_submodule(project: Path, tmp_path: Path) -> Path:
    lib = init_repo(tmp_path / "lib", {"lib.py": "X = 1\n"})
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "sub")
    git(project, "commit", "-qm", "add sub")
    return project / ".git" / "modules" / "sub"


def test_what_an_attempt_plants_in_a_submodules_repository_is_undone(project, tmp_path):
    """A submodule's config and hooks are as able to run code as the superproject's: its core.fsmonitor
    runs on the user's next `git status` in the superproject."""
    module = _with_submodule(project, tmp_path)
    sentinel = tmp_path / "planted-program-ran"
    config, objects = (module / "config").read_bytes(), sorted(p.name for p in (module / "objects").rglob("*"))
    files, state = tree_bytes(project), git_state(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    monitor = module / "fsmon.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    monitor.chmod(0o755)
    git(project / "sub", "config", "core.fsmonitor", str(monitor))
    (module / "hooks" / "post-checkout").write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    (module / "hooks" / "post-checkout").chmod(0o755)
    planted = project / ".git" / "modules" / "new"  # a repository that appeared: left whole (it may be the user's),
    planted.mkdir()  # and inert, since no submodule of the project uses it once .gitmodules and config are back
    (planted / "HEAD").write_text("ref: refs/heads/main\n")
    (planted / "config").write_text(f"[core]\n\tfsmonitor = {monitor}\n")
    report = ws.restore(cp)
    assert (module / "config").read_bytes() == config and not (module / "hooks" / "post-checkout").exists()
    assert any("left as it is: .git/modules/new" in line for line in report.git_state)
    assert sorted(p.name for p in (module / "objects").rglob("*")) == objects  # its objects untouched
    assert tree_bytes(project) == files and git_state(project) == state
    assert "changed .git/modules/sub/config" in report.git_state
    git(project, "status")
    git(project / "sub", "status")
    assert not sentinel.exists()


def test_a_merge_or_rebase_the_attempt_left_in_progress_is_not_in_progress_after_the_rollback(project):
    """Left in progress, the user's next `git commit -a` would make the attempt's merge (and drop the other
    branch's change from every later merge)."""
    root = project
    git(root, "checkout", "-q", "-b", "other")
    (root / "calc.py").write_text("def add(a, b):\n    return b + a  # other\n")
    git(root, "commit", "-qam", "other")
    git(root, "checkout", "-q", "-")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b + 0  # main\n")
    git(root, "commit", "-qam", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b  # the user's fix, uncommitted\n")
    (root / "notes.md").write_text("the user's untracked notes\n")
    files, state = tree_bytes(root), git_state(root)
    head = git(root, "rev-parse", "HEAD")
    ws = Workspace.open(root)
    for start in (["merge", "other"], ["rebase", "other"]):
        cp = ws.checkpoint("t-1")
        git(root, "stash", "-q")
        r = git(root, "-c", "user.name=a", "-c", "user.email=a@b", *start, check=False)
        assert "CONFLICT" in r or (root / ".git" / "MERGE_HEAD").exists() or (root / ".git" / "rebase-merge").exists()
        ws.restore(cp)
        ws.drop(cp)
        gd = root / ".git"
        assert not any((gd / n).exists() for n in ("MERGE_HEAD", "MERGE_MSG", "AUTO_MERGE", "rebase-merge",
                                                  "rebase-apply")), start
        assert tree_bytes(root) == files and git_state(root) == state and git(root, "rev-parse", "HEAD") == head
        assert "You have unmerged paths" not in git(root, "status") and "rebase" not in git(root, "status")


def test_a_secret_the_attempt_un_ignored_is_not_kept_with_its_work(user_project):
    """A .env the attempt made visible by editing .gitignore is the user's own (the rollback puts it back): it is
    not kept with the attempt's work, which holds only what the attempt changed, redacted."""
    root = user_project
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".gitignore").write_text("# cleaned up\n")
    (root / "calc.py").write_text("the attempt's edit\n")
    (root / "config.py").write_text("DB_PASS = 'hunter2hunter2'\n")
    report = ws.restore(cp, keep_as="t-1")
    ws.drop(cp)
    store, name = report.saved_as.rsplit("#", 1)
    kept = git(root, "--git-dir", store, "ls-tree", "-r", "--name-only", name).split()
    assert kept == [".gitignore", "calc.py", "config.py"]  # the attempt's work, and nothing else
    assert git(root, "--git-dir", store, "show", f"{name}:calc.py") == "the attempt's edit\n"
    assert git(root, "--git-dir", store, "show", f"{name}:config.py") == "DB_PASS = '[REDACTED]'\n"
    every = subprocess.run(["git", "--git-dir", store, "cat-file", "--batch-all-objects", "--batch"],
                           capture_output=True, check=True).stdout
    assert b"hunter2" not in every
    assert (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"
    assert git(root, "for-each-ref", "refs/acr/") == ""


def test_ignored_files_that_appeared_are_moved_out_of_the_tree_never_deleted(user_project):
    """A new __pycache__ of planted bytecode would run on the user's next import: out of the work tree it goes,
    into .git/acr/put-aside/<checkpoint>/, never deleted (it may be the user's: saved while the attempt ran, or
    before an `acr recover`); an ignored directory that already held the user's files stays where it is."""
    root = user_project
    (root / ".gitignore").write_text(".env\n__pycache__/\nbuild/\n*.log\nvendor/\n")
    (root / "build").mkdir()
    (root / "build" / "mine.bin").write_bytes(b"the user's build output")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"planted bytecode")
    (root / "debug.log").write_text("the attempt's log\n")
    (root / "build" / "agent.bin").write_bytes(b"the attempt's")
    (root / "vendor" / "lib").mkdir(parents=True)
    git(root / "vendor" / "lib", "init", "-q")  # a repository the attempt cloned: its history may be the only copy
    report = ws.restore(cp)
    assert not (root / "__pycache__").exists() and not (root / "debug.log").exists()
    aside = root / ".git" / "acr" / "put-aside" / "t-1"
    assert (aside / "__pycache__" / "calc.cpython-311.pyc").read_bytes() == b"planted bytecode"
    assert (aside / "debug.log").read_text() == "the attempt's log\n"
    assert sorted(report.removed_ignored) == ["__pycache__/", "debug.log", "vendor/"]
    assert (aside / "vendor" / "lib" / ".git").is_dir()  # a repository too: moved whole, nothing of it lost
    assert (root / "build" / "mine.bin").read_bytes() == b"the user's build output"
    assert not (root / "build" / "agent.bin").exists()  # inside a kept directory: put back as it was
    assert (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"


def test_empty_directories_and_directory_modes_come_back(user_project):
    root = user_project
    (root / "emptydir").mkdir()
    (root / "notes" / "drafts").mkdir(parents=True)  # empty, inside an untracked directory
    (root / "private").mkdir(mode=0o700)
    (root / "private").chmod(0o700)
    (root / "private" / "key.txt").write_text("the user's secret\n")
    (root / "private" / "key.txt").chmod(0o600)
    files = tree_bytes(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / "emptydir").rmdir()
    (root / "notes" / "drafts").rmdir()
    (root / "private").chmod(0o777)  # the secret inside is now reachable by every user of the machine
    ws.restore(cp)
    assert tree_bytes(root) == files  # the empty directories, and private/ 0700 again
    assert stat.S_IMODE((root / "private").stat().st_mode) == 0o700


def test_a_submodule_repository_the_attempt_moved_into_git_modules_is_never_removed(project, tmp_path):
    """`git submodule absorbgitdirs` (or `git rm` of the submodule) moves the user's own submodule repository,
    unpushed commits and all, into .git/modules: it appeared during the attempt, and it is not the attempt's."""
    lib = init_repo(tmp_path / "lib", {"lib.py": "X = 1\n"})
    git(project, "-c", "protocol.file.allow=always", "clone", "-q", str(lib), "sub")  # embedded: sub/.git a dir
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "sub")
    git(project, "commit", "-qm", "add sub")
    (project / "sub" / "local.py").write_text("unpushed work\n")
    git(project / "sub", "add", "-A")
    git(project / "sub", "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "unpushed")
    unpushed = git(project / "sub", "rev-parse", "HEAD").strip()
    assert (project / "sub" / ".git").is_dir() and not (project / ".git" / "modules" / "sub").exists()
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    git(project, "submodule", "absorbgitdirs")
    report = ws.restore(cp)
    assert (project / ".git" / "modules" / "sub" / "HEAD").is_file()
    assert git(project / "sub", "cat-file", "-t", unpushed).strip() == "commit"  # the user's commit, reachable
    assert any("left as it is: .git/modules/sub" in line for line in report.git_state)


def test_recover_moves_ignored_files_made_since_the_checkpoint_aside_and_loses_none(user_project):
    """Days may pass between a killed run and `acr recover`: the user's new ignored files (a local database,
    an .env.local) are moved out of the tree with the attempt's, never deleted."""
    root = user_project
    (root / ".gitignore").write_text(".env*\n*.sqlite3\n")
    Workspace.open(root).checkpoint("20260101-000000-abcdef-1")  # then acr was killed
    (root / ".env.local").write_text("MINE=1\n")
    (root / "dev.sqlite3").write_bytes(b"the user's data")
    r = acr("recover", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    moved = json.loads(r.stdout)["report"]["ignored_put_aside"]
    assert sorted(moved) == [".env.local", "dev.sqlite3"]
    aside = root / ".git" / "acr" / "put-aside" / "20260101-000000-abcdef-1"
    assert (aside / "dev.sqlite3").read_bytes() == b"the user's data" and (aside / ".env.local").exists()
    assert (root / ".env").read_text() == "DB_PASS=hunter2hunter2\n"  # there before: stays


def test_a_second_rollback_of_one_checkpoint_puts_aside_beside_the_first_never_over_it(user_project):
    root = user_project
    (root / ".gitignore").write_text(".env*\n")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".env.local").write_text("first\n")
    ws.restore(cp)
    (root / ".env.local").write_text("second\n")
    ws.restore(cp)  # (as a second `acr recover` of the same checkpoint would)
    aside = root / ".git" / "acr" / "put-aside"
    assert sorted((p.name, (p / ".env.local").read_text()) for p in aside.iterdir()) == [
        ("t-1", "first\n"), ("t-1-2", "second\n")]


def test_no_number_or_size_of_new_ignored_files_lets_planted_bytecode_stay(user_project):
    """Thousands of junk files (more than the checkpoint's budget) must not make room for a planted
    __pycache__ to stay: every new ignored entry leaves the tree, whatever its size."""
    root = user_project
    (root / ".gitignore").write_text(".env\n*.log\n__pycache__/\n")
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / "junk").mkdir()
    for i in range(6000):
        (root / "junk" / f"{i}.log").write_bytes(b"")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"planted")
    report = ws.restore(cp)
    assert not (root / "__pycache__").exists() and not (root / "junk").exists()
    assert len(report.removed_ignored) == 6001 and (report.put_aside / "__pycache__").is_dir()
    assert report.lines()[-1].endswith("and 5991 more")


def test_a_symlink_planted_where_acr_puts_files_aside_leads_nothing_out_of_the_project(user_project, tmp_path):
    root = user_project
    (root / ".gitignore").write_text(".env\n*.log\n")
    elsewhere = tmp_path / "home"
    (elsewhere / "dir00").mkdir(parents=True)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    (root / ".git" / "acr").mkdir(exist_ok=True)
    (root / ".git" / "acr" / "put-aside").symlink_to(elsewhere)
    (root / "x.log").write_text("the attempt's\n")
    report = ws.restore(cp)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["dir00"]  # nothing went there, nothing left it
    assert not (root / ".git" / "acr" / "put-aside").is_symlink()
    assert (report.put_aside / "x.log").read_text() == "the attempt's\n"


def test_a_work_tree_on_another_file_system_than_its_git_directory_still_moves_them_aside(project, tmp_path):
    """A linked worktree on a tmpfs: a rename cannot reach the git directory (EXDEV); copied, then removed."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system to put a worktree on")
    other = Path(tempfile.mkdtemp(dir=shm))
    try:
        (project / ".gitignore").write_text("*.log\n__pycache__/\n")
        git(project, "add", ".gitignore")
        git(project, "commit", "-qm", "ignore")
        git(project, "worktree", "add", "-q", str(other / "wt"), "-b", "side")
        wt = other / "wt"
        ws = Workspace.open(wt)
        cp = ws.checkpoint("t-1")
        (wt / "__pycache__").mkdir()
        (wt / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"planted")
        (wt / "x.log").write_text("log\n")
        report = ws.restore(cp)
        assert not (wt / "__pycache__").exists() and not (wt / "x.log").exists()
        assert (report.put_aside / "__pycache__" / "calc.cpython-311.pyc").read_bytes() == b"planted"
    finally:
        import shutil

        shutil.rmtree(other, ignore_errors=True)


def test_a_submodule_the_attempt_checked_out_with_planted_config_runs_nothing_later(project, tmp_path):
    """The project declares submodule lib, not checked out. The attempt runs `git submodule update --init`,
    then plants core.fsmonitor in the new repository's config: checked out, it would run on the user's
    next `git status`. The submodule goes back to an empty folder (its files moved aside, never deleted)."""
    lib = init_repo(tmp_path / "lib", {"lib.py": "X = 1\n"})
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(project, "commit", "-qm", "add lib")
    import shutil

    shutil.rmtree(project / ".git" / "modules" / "lib")  # as a fresh clone has it: declared, not checked out
    shutil.rmtree(project / "lib")
    (project / "lib").mkdir()
    git(project, "config", "--remove-section", "submodule.lib")
    sentinel = tmp_path / "planted-program-ran"
    files, state = tree_bytes(project), git_state(project)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    git(project, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    monitor = tmp_path / "fsmon.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
    monitor.chmod(0o755)
    git(project / "lib", "config", "core.fsmonitor", str(monitor))
    report = ws.restore(cp)
    assert tree_bytes(project) == files and git_state(project) == state
    assert list((project / "lib").iterdir()) == [] and (report.put_aside / "lib" / "lib.py").exists()
    git(project, "status")
    assert not sentinel.exists()
    # the repository made for it went aside too: the user's own `git submodule update --init` later clones
    # afresh instead of reusing one whose config and hooks are the attempt's
    assert not (project / ".git" / "modules" / "lib").exists()
    git(project, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    git(project, "status")
    assert not sentinel.exists() and (project / "lib" / "lib.py").exists()


def test_a_folder_that_held_files_is_never_emptied_as_a_submodule(project):
    """A stale .gitmodules entry naming a tracked folder: the attempt's `git init` there makes it look checked
    out, and the folder must keep the user's files (only a folder that was empty is emptied again)."""
    (project / "docs").mkdir()
    (project / "docs" / "guide.md").write_text("the user's guide\n")
    (project / ".gitmodules").write_text('[submodule "docs"]\n\tpath = docs\n\turl = ../nowhere\n')
    git(project, "add", "-A")
    git(project, "commit", "-qm", "docs")
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    assert cp.unpopulated == ()
    git(project / "docs", "init", "-q")
    report = ws.restore(cp)
    assert (project / "docs" / "guide.md").read_text() == "the user's guide\n" and report.unpopulated == []


def test_a_ref_name_with_a_unicode_line_separator_does_not_stop_the_rollback(user_project):
    root = user_project
    files, state = tree_bytes(root), git_state(root)
    ws = Workspace.open(root)
    cp = ws.checkpoint("t-1")
    git(root, "branch", "x\u2028y")  # git allows it; str.splitlines() would split the line there
    (root / "calc.py").write_text("agent\n")
    ws.restore(cp)
    assert tree_bytes(root) == files and git_state(root)["config"] == state["config"]


def test_a_directorys_default_mode_comes_back_too(project):
    mode = stat.S_IMODE((project / ".git").stat().st_mode)  # a directory as git made it: the default mode
    (project / "src").mkdir()
    (project / "src" / "m.py").write_text("x = 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "src")
    before = stat.S_IMODE((project / "src").stat().st_mode)
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    (project / "src").chmod(0o777)  # world-writable source
    ws.restore(cp)
    assert stat.S_IMODE((project / "src").stat().st_mode) == before, (mode, before)


def test_restoring_directory_modes_never_follows_a_link_out_of_the_tree(project, tmp_path):
    outside = tmp_path / "outside"
    (outside / "keys").mkdir(parents=True)
    (outside / "keys").chmod(0o700)
    tools = project / "tools"  # the user's own nested repository: a rollback leaves it as the attempt left it
    (tools / "cfg" / "keys").mkdir(parents=True)
    (tools / "cfg" / "keys").chmod(0o777)
    git(tools, "init", "-q")
    ws = Workspace.open(project)
    cp = ws.checkpoint("t-1")
    import shutil

    shutil.rmtree(tools / "cfg")
    (tools / "cfg").symlink_to(outside)
    ws.restore(cp)
    assert stat.S_IMODE((outside / "keys").stat().st_mode) == 0o700 and sorted(os.listdir(outside)) == ["keys"]


def test_a_linked_worktrees_put_aside_outlives_git_worktree_remove(project, tmp_path):
    (project / ".gitignore").write_text("*.local\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    wt = tmp_path / "wt"
    git(project, "worktree", "add", "-q", str(wt), "-b", "side")
    ws = Workspace.open(wt)
    cp = ws.checkpoint("t-1")
    (wt / "notes.local").write_text("the user's notes, saved while the agent ran\n")
    report = ws.restore(cp)
    git(project, "worktree", "remove", "--force", str(wt))
    assert (report.put_aside / "notes.local").read_text().startswith("the user's notes")
