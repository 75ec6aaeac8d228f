"""``acr spend``: what live runs cost, per day, week, month, arm, agent, project or kind."""

from __future__ import annotations

from typing import Optional

import typer

from acr_cli.cli.common import JSON_HELP, MEMORY_HELP, fmt_money, open_memory, parse_since, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError


def spend(
    by: str = typer.Option("day", "--by", help="Group by day, week, month, arm, agent, project or kind."),
    since: Optional[str] = typer.Option(None, "--since", help="Only tasks newer than this: 7d, 24h or a date."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """What acr's live runs cost: money, tokens, tasks passed and passed per dollar.

    Days, weeks and months are this machine's local calendar. Per arm or agent, "passed" counts
    the tasks an attempt of that arm passed; otherwise the tasks whose run passed. Benchmark
    replays are not counted. With a team's shared memory the figures are the team's
    (`--memory FILE` for one file's).

    Examples: acr spend; acr spend --by arm --since 30d; acr spend --by week --json
    """
    from acr_cli.memory import spend as calc

    if by not in calc.BY:
        raise AcrError(f"--by {by!r}: expected one of {', '.join(calc.BY)}")
    start = parse_since(since)
    mem = open_memory(memory, create=False, read_only=True, local_copy=True)
    try:
        lines, total = calc.totals(calc.rows(mem, start), by)
    finally:
        mem.close()
    if json_out:
        print_json({"by": by, "since": start, "lines": [x.to_json() for x in lines], "total": total.to_json()})
        return
    if not lines:
        echo("No live runs recorded" + (f" since {start}." if start else " yet."))
        return
    width = max(len(by), *(len(x.key) for x in lines), len("total"))
    echo(f"{by:<{width}}  {'tasks':>6}  {'passed':>6}  {'attempts':>8}  {'cost':>10}  {'passed/$':>8}  {'tokens in/out':>17}")
    for x in [*lines, total]:
        j = x.to_json()
        per = "-" if j["passed_per_usd"] is None else f"{j['passed_per_usd']:.1f}"
        unknown = f"  ({x.unknown_cost} attempt(s) of unknown cost)" if x.unknown_cost else ""
        echo(f"{x.key:<{width}}  {j['tasks']:>6}  {j['passed']:>6}  {j['attempts']:>8}  "
             f"{fmt_money(j['cost_usd'], None):>10}  {per:>8}  {_tokens(x.tokens_in):>8}/{_tokens(x.tokens_out):<8}{unknown}")
    if total.plan_attempts:
        echo(f"plans saved ~{fmt_money(total.plan_saved_usd, None)}: {total.plan_attempts} attempt(s) on a plan "
             "(billing: plan) priced at the catalog's API prices")


def _tokens(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else str(n)
