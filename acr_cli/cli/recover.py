"""``acr recover``: finish the rollback of an ``acr run`` that was killed mid-attempt."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP


def recover(
    ref: Optional[str] = typer.Argument(None, help="Which checkpoint (default: the newest); see --list."),
    list_: bool = typer.Option(False, "--list", "-l", help="Only list the checkpoints left behind."),
    discard: bool = typer.Option(False, "--discard", help="Delete the checkpoint(s) instead of restoring."),
    project: Optional[Path] = typer.Option(None, "--project", "-C", help="Project directory (default: current)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Put the work tree back as it was before an attempt whose `acr run` was killed (SIGKILL, a crash).

    While an attempt runs, acr keeps its checkpoint under refs/acr/checkpoints/. A run that ends in
    any normal way (pass, fail, timeout, Ctrl-C, SIGTERM) rolls back and deletes it; one that is killed
    leaves it, and `acr run` warns about it. `acr recover` restores files, index, HEAD and branch from
    it, and the stash entries, branches and tags the attempt deleted. What the work tree holds just
    before is saved first as refs/acr/recovered/<name>, so nothing is lost either way.

    Examples: acr recover --list; acr recover; acr recover --discard
    """
    from acr_cli.cli.common import print_json
    from acr_cli.cli.run import _project
    from acr_cli.errors import AcrError
    from acr_cli.workspace import CHECKPOINT_REFS, Workspace

    from acr_cli.errors import WorkspaceError

    try:
        ws = Workspace.open(_project(project))
    except WorkspaceError as e:  # not the run's hint (--no-rollback): nothing here to recover
        raise AcrError(e.message, hint="run `acr recover` in the git repository (or pass -C DIR) where the "
                       "killed `acr run` worked") from None
    ws.lock()  # no run is active here now, so every checkpoint left is an interrupted one
    try:
        found = ws.interrupted_checkpoints()
        if ref is not None:
            full = ref if ref.startswith("refs/") else CHECKPOINT_REFS + ref
            if full not in found:
                raise AcrError(f"no interrupted checkpoint {ref!r} in {ws.root}",
                               hint="`acr recover --list` shows the ones there are")
            chosen = [full]
        else:
            chosen = found[-1:]
        out: dict = {"root": str(ws.root), "checkpoints": found, "restored": None, "saved_as": None,
                     "discarded": []}
        if list_ or not found:
            pass
        elif discard:
            for r in (found if ref is None else chosen):
                ws.drop(ws.load_checkpoint(r))
                out["discarded"].append(r)
        else:
            cp = ws.load_checkpoint(chosen[0])
            name = chosen[0][len(CHECKPOINT_REFS):]
            saved, n = f"refs/acr/recovered/{name}", 1
            while ws.has_ref(saved):  # a recover that stopped half way saved one already: keep both
                n += 1
                saved = f"refs/acr/recovered/{name}-{n}"
            out["saved_as"] = ws.save_current(saved)
            ws.restore(cp)
            ws.drop(cp)
            out["restored"] = chosen[0]
    finally:
        ws.unlock()
    if json_out:
        print_json(out)
        return
    if not found:
        typer.echo(f"nothing to recover: no interrupted acr run left a checkpoint in {ws.root}")
    elif list_:
        for r in found:
            typer.echo(r)
    elif out["discarded"]:
        typer.echo(f"deleted {len(out['discarded'])} checkpoint(s); the work tree is unchanged")
    else:
        typer.echo(f"restored the work tree from {out['restored']}; what it held just before is saved as "
                   f"{out['saved_as']} (`git checkout {out['saved_as']} -- .` brings it back)")
        left = [r for r in found if r != out["restored"]]
        if left:
            typer.echo(f"{len(left)} older checkpoint(s) left: {', '.join(left)}")
