"""``acr recover``: finish the rollback of an ``acr run`` that was killed mid-attempt."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from acr_cli.cli.common import JSON_HELP, open_memory, print_json, project_dir
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError

if TYPE_CHECKING:
    from acr_cli.workspace.recover import Recovery


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
    from acr_cli.workspace.recover import recover as run_recovery

    if list_ and (discard or kill):
        raise AcrError(f"--list only lists the checkpoints; it does not combine with {'--discard' if discard else '--kill'}",
                       hint="run `acr recover --list` first, then `acr recover [--discard|--kill] [NAME]`")
    result = run_recovery(project_dir(project), name, list_only=list_, discard=discard, kill=kill, force=force)
    closed = _close_tasks([n.rsplit("-", 1)[0] for n in result.dealt_with])
    if json_out:
        print_json({**result.as_json(), "tasks_closed": closed})
    else:
        _render(result, list_)


def _render(done: Recovery, list_only: bool) -> None:
    """A recovery for people: what was restored or deleted, the restore's report, the checkpoints left."""
    from acr_cli.workspace.kept import command

    if not done.checkpoints:
        echo(f"nothing to recover: no interrupted acr run left a checkpoint in {done.root}")
    elif list_only:
        for n in done.checkpoints:
            echo(n)
    elif done.discarded:
        echo(f"deleted {len(done.discarded)} checkpoint(s); the work tree is unchanged")
    else:
        if done.killed:
            echo(f"ended the killed run's processes: {', '.join(map(str, done.killed))}")
        saved = (f"; what it changed since is kept, secrets masked, in acr's store (`{command(done.saved_as)}` "
                 "shows it)") if done.saved_as else ""
        echo(f"restored the work tree from checkpoint {done.restored}{saved}")
        for line in done.report.lines() if done.report else ():  # (a newline in a path or ref is shown escaped)
            echo(line, one_line=True)
        if done.left:
            echo(f"{len(done.left)} older checkpoint(s) left: {', '.join(done.left)}")


def _close_tasks(task_ids: list[str]) -> int:
    """The killed run's tasks end "not passed" in memory (they showed "running"); 0 when memory is not at hand."""
    if not task_ids:
        return 0
    from acr_cli.cli.common import paths

    p = paths()
    # with a team's memory (a URL) runs record into the local file first: that is where they are
    location = p.memory_choice(None)
    named = str(p.local_copy(location)) if location.is_server else None
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
