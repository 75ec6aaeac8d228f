"""``acr gc``: prune what acr kept to be safe once it is old (put-aside folders, refs/acr/*, kept attempts)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP, print_json, project_dir
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError, WorkspaceError

_UNITS = {"h": 1 / 24, "d": 1.0, "w": 7.0}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``2w`` or a number of days -> days."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([hdw]?)", text.strip())
    if not m:
        raise AcrError(f"--older-than {text!r}: expected an age like 30d, 12h, 2w (or a number of days)")
    return float(m.group(1)) * _UNITS[m.group(2) or "d"]


def gc(
    older_than: str = typer.Option("30d", "--older-than",
                                   help="Prune what is older than this: 30d (the default), 12h, 2w, or days."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only list what would be removed."),
    project: Optional[Path] = typer.Option(None, "--project", "-C", help="Project directory (default: current)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Remove what acr kept to be safe, once it is old: put-aside folders (.git/acr/put-aside/), refs under
    refs/acr/ (put-aside, before, keep, and attempts of older versions) and failed attempts' kept work in
    acr's store, for this work tree.

    Never what a killed run's checkpoint needs (`acr recover` first), nor refs/acr/checkpoints/*. The age
    comes from the time in each name (a task's start, UTC), else the file's or the object's date. acr
    runs this itself with the default age after a run, at most once a day per work tree.

    Examples: acr gc --dry-run; acr gc; acr gc --older-than 7d --json
    """
    from acr_cli.workspace import Workspace
    from acr_cli.workspace.gc import describe, prune

    days = parse_age(older_than)
    try:
        ws = Workspace.open(project_dir(project))
    except WorkspaceError as e:
        from acr_cli.workspace.core import NO_GIT_HINT

        if e.hint and e.hint != NO_GIT_HINT:
            raise
        raise AcrError(e.message, hint="run `acr gc` in a git repository where acr ran (or pass -C DIR)") from None
    ws.lock()  # no run is active: its checkpoint is not pruned from under it
    try:
        pruned = prune(ws, days, dry_run=dry_run)
    finally:
        ws.unlock()
    if json_out:
        print_json({"root": str(ws.root), **pruned.to_json()})
        return
    echo(f"{pruned.line()} in {ws.root}")
    for name in describe(pruned):
        echo(f"  {name}", one_line=True)
    if pruned.left_for_recovery:
        echo(f"left what a killed run's checkpoint needs ({', '.join(pruned.left_for_recovery)}): `acr recover` "
             "first")
