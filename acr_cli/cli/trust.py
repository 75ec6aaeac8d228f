"""``acr trust``: let a project's ``.acr.toml`` set what only you may set (acr_cli.trust)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError


def trust(
    forget: bool = typer.Option(False, "--forget", help="Untrust the project's .acr.toml again."),
    show: bool = typer.Option(False, "--show", help="Only say whether it is trusted, and what it sets."),
    project: Optional[Path] = typer.Option(None, "--project", help="The project (default: the current directory)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Trust the project's .acr.toml as it is now, so it may set what a cloned repository may not.

    Until you trust it, a project file cannot name a memory server, set permissions or share_prompts,
    name a profile file, or override your config.toml. acr remembers the file's SHA-256: once it
    changes (a git pull), it is untrusted again until you read it and trust it again.

    Examples: acr trust --show; acr trust; acr trust --forget
    """
    from acr_cli import trust as store
    from acr_cli.cli.common import project_dir
    from acr_cli.config import find_project_file, read_toml

    proj = project_dir(project)
    file = find_project_file(proj)
    if file is None:
        raise AcrError(f"no .acr.toml in {proj} or the folders above it (up to the repository's root)",
                       hint="project settings go in .acr.toml at the project's root")
    data_dir = paths().data_dir
    settings = read_toml(file)  # a file acr cannot read as settings is not trusted either
    if forget:
        changed = store.is_trusted(file, data_dir)  # (a file changed since it was trusted was not trusted)
        store.forget(file, data_dir)
    elif not show:
        changed = not store.trust(file, data_dir)
    else:
        changed = False
    trusted = store.is_trusted(file, data_dir)
    if json_out:
        print_json({"file": str(file), "trusted": trusted, "changed": changed, "sha256": store.digest(file),
                    "settings": settings})
        return
    name = str(file)
    if forget:
        echo(f"{name} is {'no longer' if changed else 'not'} trusted")
    elif show:
        echo(f"{name} is {'trusted' if trusted else 'not trusted (`acr trust` trusts it)'}")
    else:
        echo(f"{name} is trusted{' (it was already)' if not changed else ''}; it sets:")
    if not forget:
        for key, value in settings.items():
            echo(f"  {key} = {value!r}")
