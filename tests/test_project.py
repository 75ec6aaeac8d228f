"""Project identity: one name for a repository on every clone (acr_cli.project), and the migration that
gives the projects an older memory named by path their identity."""

from __future__ import annotations

import pytest
from conftest import git, init_repo
from shared import old_schema

from acr_cli.memory.store import Memory
from acr_cli.project import identity, normalise_url, path_key


def test_every_full_clone_has_the_root_commits_identity(tmp_path):
    origin = init_repo(tmp_path / "origin", {"a.txt": "one\n"})
    root = git(origin, "rev-parse", "HEAD").strip()
    (origin / "a.txt").write_text("two\n")
    git(origin, "commit", "-qam", "second")
    git(tmp_path, "clone", "-q", str(origin), str(tmp_path / "elsewhere" / "renamed"))
    assert identity(origin) == identity(tmp_path / "elsewhere" / "renamed") == f"git:{root[:12]}"


def test_a_shallow_clone_falls_back_to_its_origin_url_and_no_git_to_the_path(tmp_path):
    origin = init_repo(tmp_path / "origin", {"a.txt": "one\n"})
    (origin / "a.txt").write_text("two\n")
    git(origin, "commit", "-qam", "second")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))  # its oldest commit is not the root
    git(shallow, "remote", "set-url", "origin", "git@github.com:Team/Calc.git")
    assert identity(shallow) == "url:github.com/Team/Calc"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert identity(plain) == path_key(plain)
    empty = tmp_path / "empty"  # git, but no commit and no remote yet
    empty.mkdir()
    git(empty, "init", "-q")
    assert identity(empty) == path_key(empty)


@pytest.mark.parametrize("url", ["git@github.com:Team/Calc.git", "https://github.com/Team/Calc",
                                 "https://bob:token123@GitHub.com/Team/Calc.git/", "ssh://git@github.com:22/Team/Calc.git"])
def test_the_ways_of_writing_one_remote_are_one_url_without_credentials(url):
    assert normalise_url(url) == "github.com/Team/Calc"


def test_an_older_memorys_projects_named_by_path_get_their_identity(tmp_path):
    repo = init_repo(tmp_path / "calc", {"a.txt": "one\n"})
    gone = tmp_path / "deleted-project"
    path = tmp_path / "old.sqlite"
    raw = old_schema(path, "009_project_identity")
    for tid, project in (("t1", repo), ("t2", gone)):
        raw.execute("INSERT INTO tasks (id, created_at, source, kind, project, finished_at)"
                    " VALUES (?, 't', 'live', 'docs', ?, 't')", (tid, str(project)))
        raw.executemany("INSERT INTO task_groups (task_id, level, key, source) VALUES (?, ?, ?, 'live')",
                        [(tid, 0, "all"), (tid, 1, "kind=docs"), (tid, 2, f"kind=docs/project={path_key(project)}")])
    raw.close()
    mem = Memory.open(path)
    new = identity(repo)
    assert new.startswith("git:")
    rows = {r[0]: r[1] for r in mem.db.execute("SELECT id, project FROM tasks")}
    assert rows == {"t1": new, "t2": path_key(gone)}  # a path no longer there keeps the name it had
    groups = [r[0] for r in mem.db.execute("SELECT key FROM task_groups WHERE level = 2 ORDER BY task_id")]
    assert groups == [f"kind=docs/project={new}", f"kind=docs/project={path_key(gone)}"]
    mem.close()
