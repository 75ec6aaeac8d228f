"""``acr recover``: finish the rollback of an ``acr run`` that was killed mid-attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP, open_memory, print_json, project_dir
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError, WorkspaceError


def recover(
    name: Optional[str] = typer.Argument(None, help="Which checkpoint (default: the newest); see --list."),
    list_: bool = typer.Option(False, "--list", "-l", help="Only list the checkpoints left behind."),
    discard: bool = typer.Option(False, "--discard", help="Delete the checkpoint(s) instead of restoring."),
    kill: bool = typer.Option(False, "--kill", help="End the killed run's processes that are still alive, then "
                              "recover."),
    force: bool = typer.Option(False, "--force", help="Restore even though a later run kept its work here since "
                               "(that work is kept in acr's store first, like all the tree holds)."),
    project: Optional[Path] = typer.Option(None, "--project", "-C", help="Project directory (default: current)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Put the work tree back as it was before an attempt whose `acr run` was killed (SIGKILL, a crash).

    While an attempt runs, acr keeps its checkpoint in its data directory, one folder per git
    worktree (out of the agent's reach). A run that ends in any normal way (pass, fail, timeout,
    Ctrl-C, SIGTERM) rolls back and deletes it; one that is killed leaves it, and `acr run` warns
    about it. `acr recover` restores the repository's own files (.git/config, hooks, info/), files,
    index, HEAD and branch, and branches, tags and the stash list as they were (what the attempt
    made or moved is kept under refs/acr/put-aside/<name>/, and named). What the work tree
    holds that differs from the checkpoint is kept first, secrets masked, in acr's store (never
    in the repository, where a push could carry it), with the command that shows it. It only
    sees the checkpoints of the worktree it runs in, and refuses while a process of the killed
    run is still alive (it could undo the recovery): --kill ends those. It refuses to restore a checkpoint
    taken before a later run kept its work in this work tree (that would revert it): --discard, or --force.

    Examples: acr recover --list; acr recover; acr recover --kill; acr recover --discard
    """
    from acr_cli import process
    from acr_cli.workspace import Workspace
    from acr_cli.workspace.kept import command

    if list_ and (discard or kill):
        raise AcrError(f"--list only lists the checkpoints; it does not combine with {'--discard' if discard else '--kill'}",
                       hint="run `acr recover --list` first, then `acr recover [--discard|--kill] [NAME]`")

    try:
        ws = Workspace.open(project_dir(project))
    except WorkspaceError as e:  # not the run's hint (--no-rollback): nothing here to recover
        from acr_cli.workspace.core import NO_GIT_HINT

        if e.hint and e.hint != NO_GIT_HINT:  # a repository git refuses (another owner...): its own fix
            raise
        raise AcrError(e.message, hint="run `acr recover` in the git repository (or pass -C DIR) where the "
                       "killed `acr run` worked") from None
    ws.lock()  # no run is active here now, so every checkpoint left is an interrupted one
    try:
        found = ws.interrupted_checkpoints()
        if name is not None:
            name = name.rsplit("/", 1)[-1]  # refs/acr/checkpoints/<name>, as older versions printed it
            if name not in found:
                raise AcrError(f"no interrupted checkpoint {name!r} in {ws.root}",
                               hint="`acr recover --list` shows the ones there are")
            chosen = [name]
        else:
            chosen = found[-1:]
        out: dict = {"root": str(ws.root), "checkpoints": found, "restored": None, "saved_as": None,
                     "discarded": [], "killed": [], "report": None}
        if found and not list_:
            alive = ws.survivors(found)
            if alive and not kill:
                raise AcrError(
                    "processes of the killed run are still alive and could undo the recovery: "
                    + "; ".join(f"pid {pid} ({cmd})" for pid, cmd in alive),
                    hint="end them with `acr recover --kill` (or `kill PID`), then recover")
            if alive:
                still = process.kill_pids([pid for pid, _ in alive])
                out["killed"] = [pid for pid, _ in alive if pid not in still]
                if still:
                    raise AcrError(f"could not end pid(s) {', '.join(map(str, still))}",
                                   hint="end them by hand (`kill -9 PID`), then run `acr recover` again")
        if list_ or not found:
            pass
        elif discard:
            for n in (found if name is None else chosen):
                ws.drop(n)
                out["discarded"].append(n)
        else:
            later = None if force else ws.kept_since(chosen[0])
            if later is not None:  # restoring would revert a later run's kept work
                raise AcrError(
                    f"a later `acr run` kept its work here (attempt {later[0]}, {_when(later[1])}) after checkpoint "
                    f"{chosen[0]} was taken: restoring it would revert that work; nothing was changed",
                    hint=f"`acr recover --discard {chosen[0]}` deletes the checkpoint and leaves the work tree as it "
                         "is; `acr recover --force` restores anyway (what the tree holds is kept in acr's store "
                         "first)")
            cp = ws.load_checkpoint(chosen[0])
            saved, n = f"recovered/{cp.name}", 1
            while ws.kept.exists(saved):  # a recover that stopped half way saved one already: keep both
                n += 1
                saved = f"recovered/{cp.name}-{n}"
            report = ws.restore(cp, keep_as=saved, what=f"the work tree `acr recover` found after {cp.name}",
                                recovering=True)
            out["saved_as"] = report.saved_as
            ws.drop(cp)
            out["restored"] = chosen[0]
            out["report"] = {"paths": report.paths, "side_effects": report.side_effects(),
                             "stale_locks": report.stale_locks, "refs_put_back": report.refs_put_back,
                             "refs_put_aside": report.refs_put_aside, "refs_taken": report.refs_taken, "nested": report.nested,
                             "ignored_put_aside": report.removed_ignored, "ignored_left": report.ignored_left,
                             "put_aside_in": str(report.put_aside) if report.put_aside else None}
    finally:
        ws.unlock()
    done = out["discarded"] + ([out["restored"]] if out["restored"] else [])
    out["tasks_closed"] = _close_tasks([n.rsplit("-", 1)[0] for n in done])
    if json_out:
        print_json(out)
        return
    if not found:
        echo(f"nothing to recover: no interrupted acr run left a checkpoint in {ws.root}")
    elif list_:
        for n in found:
            echo(n)
    elif out["discarded"]:
        echo(f"deleted {len(out['discarded'])} checkpoint(s); the work tree is unchanged")
    else:
        if out["killed"]:
            echo(f"ended the killed run's processes: {', '.join(map(str, out['killed']))}")
        saved = (f"; what it changed since is kept, secrets masked, in acr's store (`{command(out['saved_as'])}` "
                 "shows it)") if out["saved_as"] else ""
        echo(f"restored the work tree from checkpoint {out['restored']}{saved}")
        for line in report.lines():  # (each names paths and refs: a newline in one is shown escaped)
            echo(line, one_line=True)
        left = [n for n in found if n != out["restored"]]
        if left:
            echo(f"{len(left)} older checkpoint(s) left: {', '.join(left)}")


def _when(at: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def _close_tasks(task_ids: list[str]) -> int:
    """The killed run's tasks end "not passed" in memory (they showed "running"); 0 when memory is not at hand."""
    if not task_ids:
        return 0
    from acr_cli.cli.common import paths

    p = paths()
    # with a team's memory (a URL) runs record into the local file first: that is where they are
    location = p.memory_choice(None)[0]
    named = None if not isinstance(location, str) else str(p.local_copy(location))
    try:
        mem = open_memory(named, create=False)
    except AcrError:
        return 0
    try:
        return mem.close_interrupted(task_ids)
    except Exception:  # the work tree is back; bookkeeping in memory must not turn that into a failure
        return 0
    finally:
        mem.close()
