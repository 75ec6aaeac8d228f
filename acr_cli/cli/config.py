"""``acr config``: show and change user settings (config.toml)."""

from __future__ import annotations

import typer

from acr_cli.cli.common import JSON_HELP

app = typer.Typer(help="User settings in <config>/config.toml (project settings go in .acr.toml).",
                  no_args_is_help=True)


@app.command()
def show(json_out: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Every setting with its value and where it comes from.

    Example: acr config show
    """
    from pathlib import Path

    from acr_cli.cli.common import paths, print_json
    from acr_cli.config import KEYS, Settings

    p = paths()
    s = Settings(p.config_file, Path.cwd())
    rows = {k: dict(zip(("value", "source"), s.resolve(k))) for k in KEYS}
    if json_out:
        print_json({"config_file": str(p.config_file), "project_file": str(s.project_file) if s.project_file else None,
                    "settings": rows})
        return
    typer.echo(f"user config: {p.config_file}")
    typer.echo(f"project config: {s.project_file or '(no .acr.toml)'}")
    for k, r in rows.items():
        typer.echo(f"  {k:15} {r['value']!s:30} ({r['source']})")


@app.command("set")
def set_(key: str = typer.Argument(..., help="Setting name, e.g. profile."),
         value: str = typer.Argument(..., help="New value.")) -> None:
    """Set a user setting.

    Example: acr config set profile cheap
    """
    from acr_cli.cli.common import paths
    from acr_cli.config import set_user_value

    p = paths()
    v = set_user_value(p.config_file, key, value)
    typer.echo(f"{key} = {v!r} in {p.config_file}")


@app.command()
def unset(key: str = typer.Argument(..., help="Setting name.")) -> None:
    """Remove a user setting (its default applies again).

    Example: acr config unset profile
    """
    from acr_cli.cli.common import paths
    from acr_cli.config import unset_user_value

    p = paths()
    typer.echo(f"removed {key}" if unset_user_value(p.config_file, key) else f"{key} was not set")
