"""HEAD, branches, tags and stash entries: what a checkpoint records and a rollback puts back.

HEAD and its branch come back exactly. Branches and tags the attempt deleted are recreated. The
user's stash list comes back exactly, in its order: entries the attempt dropped are stored again
where they were (``drop stash@{1}`` no longer makes the next ``pop`` apply the wrong one); entries
made during the attempt stay on top of it (another worktree shares the stash and may have made
them; an agent's ``git stash`` holds the user's work, which the rollback has put back anyway).
Nothing else about refs is undone: a branch the attempt created or moved stays (the old tip is in
its reflog), since another work tree of the same repository may have done it. What cannot come
back where it was (the attempt made ``a/b`` where branch ``a`` was) is put aside under
``refs/acr/put-aside/``.

While an attempt runs, a commit under ``refs/acr/keep/<name>`` has HEAD and every branch, tag and
stash commit as parents, so a ``git gc`` during the attempt cannot prune one it deleted.
"""

from __future__ import annotations

from acr_cli.errors import printable
from acr_cli.workspace.git import Git, ident

KEPT_REFS = ("refs/heads", "refs/tags", "refs/stash")
KEEP_REFS = "refs/acr/keep/"
ATTEMPT_REFS = "refs/acr/attempts/"  # failed attempts' trees, as they were before their rollback
BEFORE_REFS = "refs/acr/before/"  # the work tree before a kept attempt that changed the user's uncommitted work
RECOVERED_REFS = "refs/acr/recovered/"
PUT_ASIDE_REFS = "refs/acr/put-aside/"
ATTEMPTS_KEPT = 50
KEEP_ALIVE_MAX = 5000  # commits of branches, tags and stash entries a keep-alive commit holds


def head(git: Git) -> tuple[str | None, str | None]:
    """(the commit HEAD points to, refs/heads/... when HEAD is symbolic)."""
    h = git("rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip() or None
    branch = git("symbolic-ref", "-q", "HEAD", check=False).decode().strip() or None
    return h, branch


def listed(git: Git) -> tuple[dict[str, str], tuple[tuple[str, str], ...], list[str]]:
    """(branches and tags: name -> object, stash entries newest first: (commit, message), the
    commits all of them point to). Symbolic refs are left out: they follow their target."""
    fmt = "%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00%(*objecttype)%00%(symref)"
    out = git("for-each-ref", f"--format={fmt}", *KEPT_REFS).decode("utf-8", "surrogateescape")
    refs, commits = {}, []
    for line in out.split("\n"):  # (not splitlines: a ref name may hold U+2028 or U+0085)
        if not line:
            continue
        name, obj, kind, peeled, peeled_kind, symref = line.split("\0")
        if symref:
            continue
        refs[name] = obj
        if kind == "commit" or peeled_kind == "commit":
            commits.append(obj if kind == "commit" else peeled)
    stash: tuple[tuple[str, str], ...] = ()
    top = refs.pop("refs/stash", None)
    if top:
        log = git("log", "-g", "-z", "--format=%H%x00%gs", "refs/stash", "--", check=False)
        parts = log.decode("utf-8", "surrogateescape").split("\0")
        stash = tuple((parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2))
        if not stash:  # a stash whose log was expired: the ref alone holds the entry (git stash show reads it)
            stash = ((top, "stash entry kept without its log"),)
    return refs, stash, [sha for sha, _ in stash] + commits


def keep_alive(git: Git, name: str, head_commit: str | None, commits: list[str]) -> None:
    """A commit in the repository whose parents are HEAD and ``commits``, under ``refs/acr/keep/<name>``."""
    alive = [c for c in dict.fromkeys(([head_commit] if head_commit else []) + commits)][:KEEP_ALIVE_MAX]
    if not alive:
        return
    empty = git("mktree", input=b"", repo_objects=True).decode().strip()
    parents = [x for c in alive for x in ("-p", c)]
    commit = git("commit-tree", empty, *parents, "-m", f"acr: keeps {name}'s refs alive", env=ident(),
                 repo_objects=True).decode().strip()
    git("update-ref", KEEP_REFS + name, commit, repo_objects=True)


def drop_keep_alive(git: Git, name: str) -> None:
    git("update-ref", "-d", KEEP_REFS + name, check=False, repo_objects=True)


def restore_head(git: Git, cp_head: str | None, cp_branch: str | None) -> None:
    h, branch = head(git)
    if cp_head is None and cp_branch and h is not None:  # an empty repository the attempt committed to
        git("update-ref", "-d", cp_branch)
    if branch != cp_branch:
        if cp_branch:
            git("symbolic-ref", "HEAD", cp_branch)
        elif cp_head:
            git("update-ref", "--no-deref", "HEAD", cp_head)
    if cp_head and head(git)[0] != cp_head:
        git("update-ref", cp_branch or "HEAD", cp_head)


def restore_deleted(git: Git, kept: dict[str, str] | None, stash_then: tuple[tuple[str, str], ...],
                    branch: str | None) -> tuple[list[str], list[str]]:
    """Recreate what the attempt deleted; returns (put back, put aside) for people.

    Only what went missing comes back: a ref that now points elsewhere, or one that is new, may be
    another work tree's doing (they share refs), and it loses nothing where it is."""
    back: list[str] = []
    aside: list[str] = []
    if kept is None:
        return back, aside
    refs, stash, _ = listed(git)
    missing = {r: v for r, v in kept.items() if r not in refs and r != branch}
    if missing:
        lines = "".join(f"create {r} {v}\n" for r, v in missing.items()).encode("utf-8", "surrogateescape")
        if git.ok("update-ref", "--stdin", input=lines):
            back += [printable(r) for r in missing]
        else:  # one at a time: a name taken now must not keep the others from coming back
            for r, v in missing.items():
                if git.ok("update-ref", r, v, ""):  # "": only if it does not exist
                    back.append(printable(r))
                else:
                    aside.append(_put_aside(git, PUT_ASIDE_REFS + r[len("refs/"):], v, printable(r)))
    if [sha for sha, _ in stash] != [sha for sha, _ in stash_then]:
        b, a = _restore_stash(git, stash, stash_then)
        back += b
        aside += a
    return back, aside


def _restore_stash(git: Git, now: tuple[tuple[str, str], ...],
                   then: tuple[tuple[str, str], ...]) -> tuple[list[str], list[str]]:
    """Rebuild the stash list: ``then`` (newest first) exactly, and on top of it the entries made
    during the attempt, in their order (the stash is shared by every worktree: another one may have
    made them, as with branches)."""
    back: list[str] = []
    aside: list[str] = []
    known = {sha for sha, _ in then}
    made = [(sha, msg) for sha, msg in now if sha not in known]
    present = {sha for sha, _ in now}
    git("update-ref", "-d", "refs/stash", check=False)  # the ref and its log, which is the list
    for sha, msg in [*reversed(then), *reversed(made)]:  # oldest first: the newest ends on top
        if git.ok("stash", "store", "-m", msg, sha, env=ident()):
            if sha not in present:
                back.append(f"stash: {printable(msg)}")
        else:
            aside.append(_put_aside(git, f"{PUT_ASIDE_REFS}stash/{sha}", sha, f"stash: {printable(msg)}"))
    if made:
        back.append("stash entries made during the attempt, kept on top: "
                    + ", ".join(printable(msg) for _, msg in made))
    return back, aside


def _put_aside(git: Git, ref: str, obj: str, what: str) -> str:
    if git.ok("update-ref", ref, obj):
        return f"{what} (could not come back where it was; kept as {printable(ref)})"
    return f"{what} (could not come back: its objects are gone, pruned meanwhile)"


def exists(git: Git, obj: str) -> bool:
    return git.ok("cat-file", "-e", obj)


def replace_refs(git: Git) -> dict[str, str]:
    """refs/replace/*: they swap one object for another in every later git command of the user's."""
    out = git("for-each-ref", "--format=%(refname)%00%(objectname)", "refs/replace/").decode("utf-8", "surrogateescape")
    return dict(line.split("\0", 1) for line in out.split("\n") if "\0" in line)


def restore_replace_refs(git: Git, before: dict[str, str]) -> list[str]:
    """Delete replace refs the attempt made or moved (recreating those it deleted); returns what changed."""
    now = replace_refs(git)
    lines, changed = [], []
    for name in sorted(set(now) | set(before)):
        if now.get(name) == before.get(name):
            continue
        if name in before:  # deleted or moved by the attempt: back as it was
            lines.append(f"update {name} {before[name]}\n")
        else:
            lines.append(f"delete {name}\n")
        changed.append(f"undid the object replacement {printable(name)} the attempt made")
    if lines and not git.ok("update-ref", "--stdin", input="".join(lines).encode("utf-8", "surrogateescape")):
        changed.append("could not put refs/replace/ back as it was: check `git replace -l`")
    return changed


def prune_attempts(git: Git, keep: int = ATTEMPTS_KEPT) -> int:
    """Delete all but the newest ``keep`` attempt refs; returns how many were deleted."""
    raw = git("for-each-ref", "--sort=-committerdate", "--format=%(refname)", ATTEMPT_REFS).decode()
    old = raw.split()[keep:]
    if old:
        git("update-ref", "--stdin", input="".join(f"delete {r}\n" for r in old).encode())
    return len(old)
