"""HEAD, branches, tags and stash entries: what a checkpoint records and a rollback puts back.

HEAD and its branch come back exactly, and so do the other branches and tags and the stash list, in
its order: what the attempt deleted is recreated (a dropped stash entry where it was, so that
``drop stash@{1}`` does not make the next ``pop`` apply the wrong one), and what it made or moved
is put back as it was, its own version kept under ``refs/acr/put-aside/<checkpoint>/`` and named
(:func:`restore_refs`). Only a branch checked out in another work tree is left as it moved.

After a passing attempt nothing is undone: :func:`kept_changes` reads the same record and names what the
attempt did to them, keeping what it deleted, moved or rewrote (HEAD's commit too) under the same names.

While an attempt runs, a commit under ``refs/acr/keep/<name>`` has HEAD and every branch, tag and
stash commit as parents, so a ``git gc`` during the attempt cannot prune one it deleted.
"""

from __future__ import annotations

import os

from acr_cli.errors import printable
from acr_cli.workspace.git import Git, ident

KEPT_REFS = ("refs/heads", "refs/tags", "refs/stash")
KEEP_REFS = "refs/acr/keep/"
BEFORE_REFS = "refs/acr/before/"  # the work tree before a kept attempt that changed the user's uncommitted work
PUT_ASIDE_REFS = "refs/acr/put-aside/"
KEEP_ALIVE_MAX = 5000  # commits of branches, tags and stash entries a keep-alive commit holds


def head(git: Git) -> tuple[str | None, str | None]:
    """(the commit HEAD points to, refs/heads/... when HEAD is symbolic)."""
    h = git("rev-parse", "--verify", "-q", "HEAD", check=False).decode().strip() or None
    branch = git("symbolic-ref", "-q", "HEAD", check=False).decode().strip() or None
    return h, branch


def listed(git: Git, symbolic: dict[str, str] | None = None) -> tuple[dict[str, str], tuple[tuple[str, str], ...],
                                                                       list[str]]:
    """(branches and tags: name -> object, stash entries newest first: (commit, message), the
    commits all of them point to). Symbolic refs are left out: they follow their target; given a dict,
    ``symbolic`` gets them, name -> target (``refs/heads/master`` -> ``refs/heads/main``: they hold no object,
    yet ``git push --tags`` publishes what one under ``refs/tags`` points to)."""
    fmt = "%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00%(*objecttype)%00%(symref)"
    out = git("for-each-ref", f"--format={fmt}", *KEPT_REFS).decode("utf-8", "surrogateescape")
    refs, commits = {}, []
    for line in out.split("\n"):  # (not splitlines: a ref name may hold U+2028 or U+0085)
        if not line:
            continue
        name, obj, kind, peeled, peeled_kind, symref = line.split("\0")
        if symref:
            if symbolic is not None and name != "refs/stash":
                symbolic[name] = symref
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


def worktree_branches(git: Git) -> dict[str, str | None]:
    """The repository's other work trees: their admin name (``""`` for the main one) -> the branch
    checked out there (``refs/heads/...``; None when detached). Read from their HEAD files."""
    return {n: b for n, (b, _) in _worktrees(git).items()}


def _worktrees(git: Git) -> dict[str, tuple[str | None, str]]:
    """admin name -> (its branch, its directory as git recorded it) for every other work tree."""
    out: dict[str, tuple[str | None, str]] = {}
    heads = [("", git.common_dir / "HEAD", str(git.common_dir.parent))]
    try:
        for d in sorted((git.common_dir / "worktrees").iterdir()):
            if d.is_dir():
                try:
                    where = os.path.dirname((d / "gitdir").read_text(errors="surrogateescape").strip())
                except OSError:
                    where = str(d)
                heads.append((d.name, d / "HEAD", where))
    except OSError:
        pass
    own = (git.git_dir / "HEAD").resolve()
    for name, path, where in heads:
        if path.resolve() == own:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="surrogateescape").strip()
        except OSError:
            continue
        out[name] = (text[len("ref: "):] if text.startswith("ref: ") else None, where)
    return out


SHOWN_MAX = 20  # refs named one by one in a rollback's report; the rest are counted, with where they are


def few(names: list[str], n: int) -> str:
    """The first ``n`` of ``names``, and how many more, for a line people read."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def restore_refs(git: Git, kept: dict[str, str] | None, stash_then: tuple[tuple[str, str], ...],
                 branch: str | None, name: str, worktrees: dict[str, str | None] | None,
                 kept_symbolic: dict[str, str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """Branches, tags and the stash list as they were; returns (put back, could not come back, taken
    away), each for people.

    What the attempt deleted comes back. What was made or moved during it (a branch, a tag: one a push
    would publish, or a release a tag push would start) is put back as it was and its own version kept
    under ``refs/acr/put-aside/<name>/``; so is a stash entry made during it (the user's next
    ``git stash pop`` must not apply the agent's work), and a symbolic ref made among branches and tags
    is removed. Nothing is lost: each is named, with a command that takes it back (quoted: a ref name
    may hold ``;`` or ``$(``). The one exception: a branch that another work tree had checked out at the
    checkpoint, and still has, moves with that work tree's commits (its user may have committed
    meanwhile), so it stays as it is, named. ``branch``, HEAD's, is :func:`restore_head`'s."""
    if kept is None:
        return [], [], []
    store = f"{PUT_ASIDE_REFS}{name}/"
    ours = _acr_refs(git)
    taken = _clear_way(git, store, ours)
    earlier = sorted(r for r in ours if r.startswith(store))  # kept by an earlier try of this rollback
    symbolic_now: dict[str, str] = {}
    refs, stash, _ = listed(git, symbolic_now)
    aside, moved = _undo_moves(git, kept, refs, branch, store, worktrees)
    taken += moved
    back, lost = _recreate_missing(git, {r: v for r, v in kept.items() if r not in refs and r != branch}, store)
    aside += lost
    if kept_symbolic is not None and kept_symbolic != symbolic_now:
        taken += _restore_symbolic(git, kept_symbolic, symbolic_now)
    if [sha for sha, _ in stash] != [sha for sha, _ in stash_then]:
        b, a, t = _restore_stash(git, stash, stash_then, store)
        back += b
        aside += a
        taken += t
    if earlier:
        taken.append(f"kept aside by an earlier try of this rollback: {few([printable(r) for r in earlier], SHOWN_MAX)}")
    return back, aside, taken


def _undo_moves(git: Git, kept: dict[str, str], refs: dict[str, str], branch: str | None, store: str,
                worktrees: dict[str, str | None] | None) -> tuple[list[str], list[str]]:
    """Put each branch and tag made or moved during the attempt back as it was, its own version kept under
    ``store``; one checked out in another work tree since the checkpoint is left as it is. Returns (what could
    not be put aside, what was put aside or left), for people."""
    others = _worktrees(git)
    if worktrees is None:  # a checkpoint from before acr recorded them: what is checked out now, if it existed
        busy = {b for b, _ in others.values() if b and b in kept}
    else:
        busy = {b for wt, b in worktrees.items() if b and others.get(wt, (None, ""))[0] == b}
    taken: list[str] = []
    moves: list[tuple[str, str, str]] = []
    for r, v in sorted(refs.items()):
        if r == branch or kept.get(r) == v:
            continue
        if r in busy:
            taken.append(f"{printable(r)} moved during the attempt and is checked out in another work tree: "
                         "left as it is")
        else:
            moves.append((r, v, store + r[len("refs/"):]))
    done = _move_aside(git, moves, kept)
    aside: list[str] = []
    shown: list[str] = []
    for r, _, keep in moves:
        if keep in done:
            shown += _moved_lines(r, keep, r in kept, store, [w for b, w in others.values() if b == r])
        else:
            aside.append(f"{printable(r)} (made or moved during the attempt; could not be put aside, left as it is)")
    return aside, taken + _at_most(shown, store)


def _moved_lines(r: str, keep: str, existed: bool, store: str, checked_out_in: list[str]) -> list[str]:
    """What a rollback says of a ref it put aside, with the command that takes it back; and, for each other
    work tree that has it checked out (now on no commit), how to switch it to a branch."""
    verb, how = ("moved", "puts it back over yours") if existed else ("made", "brings it back")
    out = [f"{printable(r)} {verb} during the attempt: kept as {printable(keep)} "
           f"({_command(('git', 'update-ref', r, keep), store)} {how})"]
    for where in checked_out_in:
        out.append(f"the work tree {printable(where)} has {printable(r)} checked out, which is kept aside "
                   f"now: switch it to a branch there (`git -C {_quote(where)} switch BRANCH`)")
    return out


def _recreate_missing(git: Git, missing: dict[str, str], store: str) -> tuple[list[str], list[str]]:
    """Recreate the branches and tags the attempt deleted: in one transaction, else one at a time (a name
    taken now must not keep the others from coming back; that one is kept under ``store``). Returns (put
    back, could not come back where it was), for people."""
    if not missing:
        return [], []
    lines = "".join(f"create {r} {v}\n" for r, v in missing.items()).encode("utf-8", "surrogateescape")
    if git.ok("update-ref", "--stdin", input=lines):
        return [printable(r) for r in missing], []
    back, aside = [], []
    for r, v in missing.items():
        if git.ok("update-ref", r, v, ""):  # "": only if it does not exist
            back.append(printable(r))
        else:
            aside.append(_put_aside(git, store + r[len("refs/"):], v, printable(r)))
    return back, aside


# One thing a kept attempt did that is kept aside: (keep-as, object, what happened, the command that takes it
# back, what that command does).
_Aside = tuple[str, str, str, tuple[str, ...], str]


def kept_changes(git: Git, kept: dict[str, str] | None, stash_then: tuple[tuple[str, str], ...],
                 head_then: str | None, branch_then: str | None, name: str, publish,
                 worktrees: dict[str, str | None] | None = None) -> list[str]:
    """What a passing attempt, kept as it is, did to HEAD, branches, tags and the stash list, for people.

    Nothing is undone, but nothing is lost either: each branch or tag it deleted or moved, each stash entry it
    took (``pop``, ``drop``, ``clear``) and HEAD's commit when HEAD's history no longer holds it (``commit
    --amend``, ``reset --hard HEAD~1``, a rebase) are kept under ``refs/acr/put-aside/<name>/`` (the names a
    rollback uses) and named with the command that takes each back, quoted for a shell. What it made (a
    branch, a tag, a stash entry, commits on top of HEAD) is named. ``publish``: copies acr's objects into the
    repository (a stash entry the attempt dropped and pruned is in acr's store). ``worktrees``: the checkpoint's
    (:func:`worktree_branches`): a branch another work tree had checked out, and still has, may have moved with
    commits made there meanwhile, which the line says."""
    if kept is None:  # a checkpoint from before acr recorded refs
        return []
    store = f"{PUT_ASIDE_REFS}{name}/"
    now, stash_now, _ = listed(git)
    head_now, branch_now = head(git)
    switched = branch_now != branch_then
    aside, made = _head_changes(git, (head_then, branch_then), (head_now, branch_now), store)
    skip = branch_then if not switched else None  # HEAD's own branch: said with HEAD
    a, m = _branch_changes(git, kept, now, skip, store, worktrees)
    aside += a
    made += m
    a, m = _stash_changes(stash_then, stash_now, store)
    aside += a
    made += m
    return _at_most(_keep_aside(git, aside, store, publish) + made, store)


def _head_changes(git: Git, then: tuple[str | None, str | None], now: tuple[str | None, str | None],
                  store: str) -> tuple[list[_Aside], list[str]]:
    """What a kept attempt did to HEAD, each (commit, branch): a switch, commits made on it, or its commit
    left out of its history (kept aside). Returns (to keep aside, what it made)."""
    (head_then, branch_then), (head_now, branch_now) = then, now
    switched = branch_now != branch_then
    aside: list[_Aside] = []
    made: list[str] = []
    if switched:
        made.append(_switch_line(head_then, branch_then, branch_now, store))
    if not head_then or head_now == head_then:
        return aside, made
    if head_now and _descends(git, head_then, head_now):
        if not switched:
            n = git("rev-list", "--count", f"{head_then}..{head_now}", check=False).decode().strip() or "?"
            made.append(f"made {n} commit(s) on HEAD ({_short(head_then)}..{_short(head_now)}, not in the "
                        f"uncommitted diff; {_command(('git', 'reset', '--soft', head_then), store)} uncommits "
                        "them, your files as they are)")
    else:
        back = ("git", "reset", "--soft", head_then) if not switched else ()
        aside.append((store + "HEAD", head_then, f"HEAD's commit before the attempt, {_short(head_then)}, is no "
                      "longer in HEAD's history (an amend, a reset to an earlier commit or a rebase)", back,
                      "puts HEAD back on it, your files and index as they are"))
    return aside, made


def _switch_line(head_then: str | None, branch_then: str | None, branch_now: str | None, store: str) -> str:
    """HEAD switched to another branch (or detached), with the command that switches it back."""
    if not (branch_then or head_then):
        return f"switched HEAD to {printable(branch_now or 'a detached HEAD')}"
    back = ("git", "symbolic-ref", "HEAD", branch_then) if branch_then else \
        ("git", "update-ref", "--no-deref", "HEAD", head_then or "")
    was = printable(branch_then) if branch_then else f"a detached HEAD at {_short(head_then)}"
    return (f"switched HEAD from {was} to {printable(branch_now) if branch_now else 'a detached HEAD'} "
            f"({_command(back, store)} puts it back, your files and index as they are)")


def _branch_changes(git: Git, kept: dict[str, str], now: dict[str, str], skip: str | None, store: str,
                    worktrees: dict[str, str | None] | None) -> tuple[list[_Aside], list[str]]:
    """Branches and tags a kept attempt made (named), deleted or moved (kept aside); ``skip``: one said
    elsewhere. Returns (to keep aside, what it made)."""
    others = {b: where for b, where in _worktrees(git).values() if b}
    aside: list[_Aside] = []
    made: list[str] = []
    for r in sorted(set(kept) | set(now)):
        old, new = kept.get(r), now.get(r)
        if r == skip or old == new:
            continue
        if old is None:
            made.append(f"made {printable(r)} ({_short(new)}"
                        + ("; a `git push --tags` would publish it)" if r.startswith("refs/tags/") else ")"))
        elif new is None:
            aside.append((store + r[len("refs/"):], old, f"deleted {printable(r)} ({_short(old)})",
                          ("git", "update-ref", r, old), "brings it back"))
        else:
            note = "" if _descends(git, old, new) else ", which no longer holds the old one"
            if r in others and (worktrees is None or r in worktrees.values()):
                note += (f" (the work tree {printable(others[r])} has it checked out: commits made there meanwhile "
                         "may be yours)")
            aside.append((store + r[len("refs/"):], old, f"moved {printable(r)} from {_short(old)} to "
                          f"{_short(new)}{note}", ("git", "update-ref", r, old), "puts it back"))
    return aside, made


def _stash_changes(then: tuple[tuple[str, str], ...], now: tuple[tuple[str, str], ...],
                   store: str) -> tuple[list[_Aside], list[str]]:
    """Stash entries a kept attempt took off the list (kept aside), made, or reordered. Returns (to keep
    aside, what it made)."""
    present, known = {sha for sha, _ in now}, {sha for sha, _ in then}
    aside: list[_Aside] = [(f"{store}stash/{sha}", sha, f"took your stash entry ({printable(msg)}) off the list",
                            ("git", "stash", "store", "-m", msg, sha), "puts it back on your list")
                           for sha, msg in then if sha not in present]
    made = [f"made the stash entry ({printable(msg)}): your next `git stash pop` applies it"
            for sha, msg in now if sha not in known]
    if [s for s, _ in then if s in present] != [s for s, _ in now if s in known]:
        made.append("reordered your stash list (`git stash list` shows it; stash@{n} names another entry now)")
    return aside, made


def _keep_aside(git: Git, aside: list[_Aside], store: str, publish) -> list[str]:
    """Keep each under its name (acr's objects published first), and say so with the command that takes it
    back; one whose objects were pruned meanwhile is said to be lost."""
    if not aside:
        return []
    out = _clear_way(git, store, _acr_refs(git))
    publish()
    done = _keep(git, [(keep, obj) for keep, obj, *_ in aside])
    for keep, _, what, back, does in aside:
        if keep not in done:
            out.append(f"{what}; it could not be kept: its objects are gone, pruned meanwhile")
        else:
            out.append(f"{what}: kept as {printable(keep)}" + (f" ({_command(back, store)} {does})" if back else ""))
    return out


def _keep(git: Git, refs: list[tuple[str, str]]) -> set[str]:
    """Point each (name, object) at its object, only where the repository holds it: in one transaction, else one
    by one (a missing object must not stop the others). Returns the names done."""
    def lines(pairs: list[tuple[str, str]]) -> bytes:
        return "".join(f"update {r} {obj}\n" for r, obj in pairs).encode("utf-8", "surrogateescape")

    if not refs or git.ok("update-ref", "--stdin", input=lines(refs), repo_objects=True):
        return {r for r, _ in refs}
    return {r for r, obj in refs if git.ok("update-ref", "--stdin", input=lines([(r, obj)]), repo_objects=True)}


def _descends(git: Git, ancestor: str, commit: str) -> bool:
    return git.ok("merge-base", "--is-ancestor", ancestor, commit)


def _short(obj: str | None) -> str:
    return obj[:12] if obj else "nothing"


def _acr_refs(git: Git) -> dict[str, str]:
    """The refs under ``refs/acr``: name -> object."""
    out = git("for-each-ref", "--format=%(refname)%00%(objectname)", "refs/acr").decode("utf-8", "surrogateescape")
    return dict(line.split("\0", 1) for line in out.split("\n") if "\0" in line)


def _move_aside(git: Git, moves: list[tuple[str, str, str]], kept: dict[str, str]) -> set[str]:
    """Keep each (ref, value, keep-as) under its keep-as name and put the ref back as it was (deleted when it
    is new): in one transaction, else one by one (a name in the way must not stop the others). Returns the
    keep-as names done; a ref changed again meanwhile stays as it is."""
    def lines(r: str, v: str, keep: str) -> str:
        undo = f"update {r} {kept[r]} {v}\n" if r in kept else f"delete {r} {v}\n"
        return f"update {keep} {v}\n{undo}"

    if not moves:
        return set()
    if git.ok("update-ref", "--stdin", input="".join(lines(*m) for m in moves).encode("utf-8", "surrogateescape")):
        return {keep for _, _, keep in moves}
    done = set()
    for m in moves:
        if git.ok("update-ref", "--stdin", input=lines(*m).encode("utf-8", "surrogateescape")):
            done.add(m[2])
    return done


def _clear_way(git: Git, store: str, ours: dict[str, str]) -> list[str]:
    """Refs made where acr's own put-aside names go (``refs/acr/put-aside`` as a ref of its own would make
    every name below it impossible): removed, and named. ``ours``: the refs under ``refs/acr``."""
    out = []
    parts = store.rstrip("/").split("/")
    for ref in ("/".join(parts[:n]) for n in range(2, len(parts) + 1)):
        if ref in ours and git.ok("update-ref", "--no-deref", "-d", ref):
            out.append(f"removed {ref}, a ref made in acr's own namespace (it pointed to {ours[ref]})")
    return out


def _at_most(lines: list[str], store: str) -> list[str]:
    if len(lines) <= SHOWN_MAX:
        return lines
    return lines[:SHOWN_MAX] + [f"and {len(lines) - SHOWN_MAX} more, kept under {store} "
                                f"(`git for-each-ref {store}` lists them)"]


def _restore_symbolic(git: Git, then: dict[str, str], now: dict[str, str]) -> list[str]:
    """Symbolic refs among branches and tags as they were: one made during the attempt is removed (it holds
    nothing: its target stays), one deleted or pointed elsewhere comes back."""
    out = []
    for r in sorted(set(now) | set(then)):
        if now.get(r) == then.get(r):
            continue
        if r in now:
            git("update-ref", "--no-deref", "-d", r, check=False)
        if r in then and not git.ok("symbolic-ref", r, then[r]):
            out.append(f"the symbolic ref {printable(r)} -> {printable(then[r])} could not come back")
        elif r not in then:
            out.append(f"removed the symbolic ref {printable(r)} -> {printable(now[r])}, made during the attempt")
    return out


def _command(argv: tuple[str, ...], store: str) -> str:
    """A command to paste, every argument quoted; a name that is not UTF-8 cannot be pasted: say where to look."""
    if any(printable(a) != a for a in argv):
        return f"(its name is not UTF-8: `git for-each-ref {store}` lists it)"
    return "`" + " ".join(_quote(a) for a in argv) + "`"


def _restore_stash(git: Git, now: tuple[tuple[str, str], ...], then: tuple[tuple[str, str], ...],
                   store: str) -> tuple[list[str], list[str], list[str]]:
    """Rebuild the stash list as ``then`` (newest first), exactly; entries made during the attempt are
    kept under ``store`` instead (the stash is shared by every work tree, so one may be the user's own,
    from another: it is named, with the command that puts it back)."""
    back: list[str] = []
    aside: list[str] = []
    taken: list[str] = []
    known = {sha for sha, _ in then}
    present = {sha for sha, _ in now}
    for n, (sha, msg) in enumerate(e for e in now if e[0] not in known):
        keep = f"{store}stash/{n}"
        if git.ok("update-ref", keep, sha):
            taken.append(f"stash entry made during the attempt ({printable(msg)}), kept as {keep} "
                         f"({_command(('git', 'stash', 'store', '-m', msg, sha), store)} puts it back on your list)")
        else:
            aside.append(f"stash entry made during the attempt ({printable(msg)}) could not be kept")
    git("update-ref", "-d", "refs/stash", check=False)  # the ref and its log, which is the list
    for sha, msg in reversed(then):  # oldest first: the newest ends on top
        if git.ok("stash", "store", "-m", msg, sha, env=ident()):
            if sha not in present:
                back.append(f"stash: {printable(msg)}")
        else:
            aside.append(_put_aside(git, f"{store}stash/{sha}", sha, f"stash: {printable(msg)}"))
    return back, _at_most(aside, store), _at_most(taken, store)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


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
