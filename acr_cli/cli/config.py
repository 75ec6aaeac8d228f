"""``acr config``: show and change user settings (config.toml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from acr_cli import setting_keys
from acr_cli.cli.common import JSON_HELP, load_profile, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError

if TYPE_CHECKING:
    from acr_cli.config import Settings
    from acr_cli.paths import Paths
    from acr_cli.profiles import Profile

app = typer.Typer(help="User settings in <config>/config.toml (project settings go in .acr.toml).",
                  no_args_is_help=True)


@app.command()
def show(json_out: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Every setting with its value and where it comes from.

    Example: acr config show
    """
    from pathlib import Path

    from acr_cli.config import KEYS, Settings
    p = paths()
    s = Settings(p.config_file, Path.cwd(), p.data_dir)
    prof, run, problem = _profile_and_options(s)
    rows = {k: dict(zip(("value", "source"), _setting(k, p, s, prof, run))) for k in KEYS}
    if json_out:
        print_json({"config_file": str(p.config_file), "project_file": str(s.project_file) if s.project_file else None,
                    "project_trusted": s.trusted if s.project_file else None, "ignored": s.ignored,
                    "settings": rows, "profile_error": problem})
        return
    _print_settings(p, s, rows, problem)


def _profile_and_options(s: Settings) -> tuple[Profile | None, dict, str | None]:
    """The profile here, the options `acr run` here would use (with where each value comes from), and why
    either could not be loaded. A problem does not stop the rest: this is where a user looks to find out why."""
    from pathlib import Path

    from acr_cli.config import resolve_options
    prof = problem = None
    try:
        prof, _ = load_profile(None, Path.cwd())
    except AcrError as e:
        problem = e.message
    try:
        run = resolve_options(s, prof)
    except AcrError as e:
        problem, run = problem or e.message, {}
    return prof, run, problem


def _setting(k: str, p: Paths, s: Settings, prof: Profile | None, run: dict) -> tuple[Any, str]:
    """One setting's (value, source)."""
    if k in run:
        return run[k].value, run[k].source
    if k == "memory":
        return _memory_setting(p)
    if k == "exclude" and "exclude" in s.project and "exclude" in s.user:  # the lists add up
        return [*s.project["exclude"], *s.user["exclude"]], f"{s.project_file} and {s.user_file}"
    # (policy, time_weight: the profile's unless a settings file sets them)
    value, source = s.resolve(k, None, getattr(prof.settings, k, None) if prof is not None else None)
    if source == "profile" and prof is not None:
        source = f"profile {prof.name}"
    if k == "profile" and source == "default":
        from acr_cli.profiles import DEFAULT_PROFILE

        value = DEFAULT_PROFILE
    return value, source


def _memory_setting(p: Paths) -> tuple[str, str]:
    """The memory acr will open: ACR_MEMORY wins, a relative path is the config dir's; a team's server is
    shown without its password."""
    location = p.memory_choice()  # a relative ACR_MEMORY is the current directory's
    return (location.label if location.is_server else str(location.path.absolute())), location.source


def _print_settings(p: Paths, s: Settings, rows: dict[str, dict], problem: str | None) -> None:
    echo(f"user config: {p.config_file}")
    trusted = "" if not s.project_file else (" (trusted)" if s.trusted else " (not trusted: `acr trust` trusts it)")
    echo(f"project config: {s.project_file or '(no .acr.toml)'}{trusted}")
    for k, r in rows.items():
        shown = "-" if r["value"] is None else str(r["value"])
        if k == "verify" and r["value"] is None and r["source"] != "default":
            shown = "(none: no verifier)"  # `verify = ""`: set on purpose, as `--verify ""`
        echo(f"  {k:15} {shown:30} ({r['source']})")
    for why in s.ignored.values():
        echo(f"  ignored from the untrusted project file: {why}")
    if problem:
        echo(f"(the profile could not be loaded: {problem})", err=True)


_SET_HELP = f"""Set a user setting (a profile is checked first; `verify ""` means no verifier).

Example: acr config set profile cheap

The settings (the same keys go in a project's .acr.toml):

\b
{setting_keys.help_text()}
"""


@app.command("set", context_settings={"ignore_unknown_options": True},  # `max_cost -1` is a value, not an option
             help=_SET_HELP)
def set_(key: str = typer.Argument(..., help="Setting name, e.g. profile (the list is above)."),
         value: str = typer.Argument(..., help="New value; a list is comma-separated.")) -> None:
    from acr_cli.config import set_user_value

    p = paths()
    v = set_user_value(p.config_file, key, value)
    note = " (no verifier: runs accept an attempt on the agent's word, as unverified)" if v == "" else ""
    if key == "memory" and isinstance(v, str):
        from acr_cli.memory.postgres import masked

        v = masked(v)  # a URL's password is not echoed back
    echo(f"{key} = {v!r} in {p.config_file}{note}")


@app.command()
def unset(key: str = typer.Argument(..., help="Setting name.")) -> None:
    """Remove a user setting (its default applies again).

    Example: acr config unset profile
    """
    from acr_cli.config import unset_user_value

    p = paths()
    echo(f"removed {key}" if unset_user_value(p.config_file, key) else f"{key} was not set")
