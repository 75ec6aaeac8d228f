"""Print a replay document in the format asked for."""

from __future__ import annotations

import sys
from typing import Any

from acr_cli.cli.common import console, print_json
from acr_cli.cli.terminal import echo, terminal_safe
from acr_cli.errors import AcrError


def check_formats(*flags: bool) -> None:
    if sum(flags) > 1:
        raise AcrError("choose one output format: --json, --csv or --markdown")


def render(doc: dict[str, Any], *, json_out: bool, csv_out: bool, md_out: bool, plot: str | None,
           stored_note: bool = True, stored_in: str | None = None) -> None:
    from acr_cli.bench import report
    check_formats(json_out, csv_out, md_out)

    if json_out:
        print_json({k: v for k, v in doc.items() if k not in ("curves", "not_stored")})
    elif csv_out:
        sys.stdout.write(report.to_csv(doc))
    elif md_out:
        sys.stdout.write(terminal_safe(report.markdown(doc)))  # (a results folder names its arms)
    else:
        con = console()
        con.print(report.rich_table(doc, con.width))
        for line in report.legend(doc):  # what each column means, under the table
            con.print(f"[dim]  {line}[/]", highlight=False)
        for note in report.notes(doc):
            con.print(f"[dim]{note}[/]")
        if stored_note and not doc.get("not_stored"):
            import shlex

            from acr_cli.memory.postgres import is_url, masked

            if stored_in and is_url(stored_in):
                stored_in = masked(stored_in)  # a shared memory's password is never printed
            where = f" --memory {shlex.quote(stored_in)}" if stored_in else ""
            con.print(f"[dim]stored as replay {doc.get('group')}: `acr bench report {doc.get('group')}{where}`[/]")
    if csv_out or md_out:  # the table and JSON carry the warnings; CSV and markdown have no place for them
        for w in doc.get("warnings") or []:
            echo(f"acr: warning: {w}", err=True)
    if doc.get("not_stored"):
        echo(f"acr: warning: the replay was not stored, so `acr bench report` cannot show it again: "
             f"{doc['not_stored']}\n  hint: replay with --memory FILE to keep it in a file of your choice", err=True)
    if plot:  # after the figures: a plot that fails must not lose them
        report.plot(doc.get("curves") or {}, plot, f"{doc['title']}: cumulative regret ({doc['order']})")
        echo(f"plot written to {plot}", err=True)
