"""``acr profiles``: list, show and validate routing profiles."""

from __future__ import annotations

from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP, console, fmt_money, load_profile, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_USAGE, AcrError, Reported

app = typer.Typer(help="Routing profiles: the arms acr may use, prices, priors, order and settings.",
                  no_args_is_help=True)


def _arm_dict(a) -> dict:
    return {"agent": a.agent, "model": a.model, "price": {"input": a.price_in, "output": a.price_out},
            "args": list(a.args), "prior": dict(a.prior), "prior_weight": a.prior_weight}


@app.command("list")
def list_(json_out: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Every profile acr can use: built-in ones and yours in <config>/profiles.

    Example: acr profiles list
    """
    from acr_cli import profiles
    p = paths()
    items = profiles.available(p.profiles_dir)
    if json_out:
        print_json([{"name": n, "path": str(path), "origin": o} for n, path, o in items])
        return
    from rich.table import Table

    t = Table(box=None)
    for c in ("name", "origin", "arms", "description"):
        t.add_column(c)
    for name, path, origin in items:
        try:
            prof = profiles.load(str(path), p.profiles_dir)
            t.add_row(name, origin, str(len(prof.arms)), prof.description)
        except Exception as e:  # a broken user profile must not hide the others
            t.add_row(name, origin, "-", f"[red]invalid: {getattr(e, 'message', e)}[/]")
    console().print(t)
    console().print(f"[dim]your profiles go in {p.profiles_dir}[/]")


@app.command()
def show(
    name: Optional[str] = typer.Argument(None, help="Profile name or path (default: the one in effect here: "
                                                    "from .acr.toml or config.toml, else the default profile)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show a profile's settings, arms and orders.

    Example: acr profiles show cheap
    """
    from dataclasses import asdict
    from pathlib import Path

    prof, _ = load_profile(name, Path.cwd())
    if json_out:
        print_json({"name": prof.name, "path": str(prof.path), "description": prof.description,
                    "settings": asdict(prof.settings), "arms": [_arm_dict(a) for a in prof.arms],
                    "order": {k: list(v) for k, v in prof.order.items()}, "agents": prof.agents})
        return
    from rich.table import Table

    con = console()
    con.print(f"[bold]{prof.name}[/] ({prof.path})\n{prof.description}")
    con.print("settings: " + ", ".join(f"{k}={v}" for k, v in asdict(prof.settings).items()))
    t = Table(box=None)
    t.add_column("arm", no_wrap=True)  # the exact string --arms takes: never cut
    for c in ("in $/1M", "out $/1M", "priors", "args"):
        t.add_column(c)
    for a in prof.arms:
        priors = ", ".join(f"{k} {v:.2f}" for k, v in a.prior) or "-"
        if a.prior_weight is not None:
            priors += f" (worth {a.prior_weight:g} attempts)"
        t.add_row(a.id, fmt_money(a.price_in), fmt_money(a.price_out), priors, " ".join(a.args) or "-")
    con.print(t)
    for kind, ids in prof.order.items():
        con.print(f"order\\[{kind}]: {' → '.join(ids)}")  # \\[: a literal bracket, not rich markup
    for agent, spec in prof.agents.items():  # generic CLIs the profile describes
        con.print(f"agent {agent}: " + ", ".join(f"{k}={v}" for k, v in spec.items()))


@app.command()
def validate(
    targets: Optional[list[str]] = typer.Argument(None, help="Profile names or paths (default: all)."),
) -> None:
    """Check profiles; errors name the file, the line and the field (exit 2 if any is invalid).

    Example: acr profiles validate ~/my-profile.yaml
    """
    from acr_cli import profiles
    p = paths()
    names = targets or [str(path) for _, path, _ in profiles.available(p.profiles_dir)]
    bad = 0
    known = _known_kinds()
    for n in names:
        try:
            prof = profiles.load(n, p.profiles_dir)
            echo(f"ok  {prof.path} ({len(prof.arms)} arms)")
        except AcrError as e:
            bad += 1
            echo(f"acr: error: {e.message}", err=True)
            continue
        for where, kind in _kind_keys(prof):
            if kind not in known:
                import difflib

                close = difflib.get_close_matches(kind, sorted(known), n=1)
                echo(f"acr: warning: {prof.path}: {where}: {kind!r} is not a task kind acr knows, so it never "
                     f"applies" + (f" (did you mean {close[0]!r}?)" if close else ""), err=True)
        no_price = profiles.unpriced(prof)
        if no_price:
            echo(f"acr: warning: {prof.path}: no price for {', '.join(no_price)}, neither here nor in the price "
                 "catalog: the learned router cannot tell what an attempt costs until it has seen one (their "
                 "cost shows as unknown, and --max-cost cannot stop their first attempt); add "
                 "price: {input: USD, output: USD} per 1M tokens", err=True)
    if bad:
        raise Reported(EXIT_USAGE)


def _kind_keys(prof) -> list[tuple[str, str]]:
    keys = [("order", k) for k in prof.order]
    for a in prof.arms:
        keys += [(f"arms[{a.id}].prior", k) for k, _ in a.prior]
    return keys


def _known_kinds() -> set[str]:
    """The kinds live requests are classified into, ``default``, and those the built-in profiles use
    (the benchmarks' dimensions)."""
    from acr_cli import profiles
    from acr_cli.context import KINDS

    known = set(KINDS) | {"default"}
    for path in sorted(profiles.builtin_dir().glob("*.yaml")):
        known |= {k for _, k in _kind_keys(profiles.load(str(path), profiles.builtin_dir()))}
    return known
