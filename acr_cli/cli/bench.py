"""``acr bench``: replay routing policies on CodeRouterBench, or on your own memory."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import typer

from acr_cli.bench.columns import legend_lines
from acr_cli.cli.common import JSON_HELP, PROFILE_HELP, console, finite, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError
from acr_cli.routing import registry

app = typer.Typer(help="Replay routing policies on CodeRouterBench (OOD176, ID2919), on anyone's results (a folder "
                       "with results.jsonl) or on your own memory.",
                  no_args_is_help=True)

MAX_ORDERS = 10_000  # 100 orders of ID2919 take minutes; 10,000 take most of a day
DATA_HELP = "Folder with the CodeRouterBench files (default: $ACR_BENCH_DATA, else acr's download cache)."


_REPLAY_HELP = """Replay routing policies on a benchmark and report regret, performance and cost.

Examples:

  acr bench replay ood176 --data-dir ../shared/coderouterbench

  acr bench replay id2919 --policy learned --protocol verify --orders 20

  acr bench replay bench/examples/tiny --policy learned --baselines --orders 20

The table's columns (n: tasks; a dim "paper" line under a row: the paper's published figures):

\b
""" + "\n".join(legend_lines())


@app.command(help=_REPLAY_HELP)
def replay(
    benchmark: str = typer.Argument(..., help="ood176, id2919, memory (your own recorded runs), or a folder of "
                                                   "results: results.jsonl or results.csv, one record per task and arm "
                                                   "(bench/README.md, 'Your own results')."),
    policy: Optional[List[str]] = typer.Option(None, "--policy", "-P",
                                               help=f"Policy to replay (repeatable): {registry.help_text(live=False)}."),
    baselines: Optional[bool] = typer.Option(None, "--baselines/--no-baselines", show_default=False,
                                             help="Replay the standard set of baselines too (on a results folder: "
                                                  "oracle, the best arm and the best two-arm cascade in hindsight, "
                                                  "random, linucb, lints, knn, learned). Default: with them when no "
                                                  "--policy is given, without when one is; --baselines adds them to "
                                                  "your --policy rows, --no-baselines replays only those."),
    all_arms: bool = typer.Option(False, "--all-arms", help="A results folder: the baselines and every arm alone."),
    time_weight: float = typer.Option(0.0, "--time-weight", min=0, callback=finite,
                                      help="USD a minute of waiting is worth to learned's plan (results with "
                                           "duration_s; 0: time is not weighed)."),
    race: int = typer.Option(0, "--race", min=0, metavar="N",
                             help="Replay with up to N arms started at once as a task's first step (cascade "
                                  "protocol; every raced arm paid; if all fail, escalation follows): each --policy "
                                  "(else learned) gains two rows, the race plan's choice (race<=N) and a race of N "
                                  "on every task (race=N)."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_HELP),
    protocol: Optional[str] = typer.Option(None, "--protocol",
                                           help="cascade (OOD176, its only one), single (ID2919's default: one "
                                                "action per task) or verify (ID2919: retry where execution-verified). "
                                                "A results folder: cascade when every score is 0 or 1, else single."),
    cost_weight: float = typer.Option(0.1, "--cost-weight", min=0, callback=finite,
                                      help="lambda in reward = score - lambda x USD."),
    orders: int = typer.Option(1, "--orders", min=1, max=MAX_ORDERS,
                               help="Replay N shuffled stream orders; report mean and sd."),
    context: Optional[str] = typer.Option(None, "--context",
                                          help="What the router sees of a task: labels (the benchmark's dimension and "
                                               "groups, the paper's setting; the default on ood176 and id2919) or "
                                               "prompt (only what `acr run` has: the prompt, classified as live, and "
                                               "the task's repository as its project; ood176). Your memory always "
                                               "replays with prompt: its tasks carry no labels."),
    seed: int = typer.Option(1, "--seed", help="Seed for shuffled orders and randomised policies."),
    k: int = typer.Option(2, "--k", min=0, help="acrouter: cheap attempts with apply_ok needed to escalate."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p",
                                          help=PROFILE_HELP + " Priors for `learned` (default: the benchmark's own, "
                                                               "coderouterbench-ood for OOD176, coderouterbench for "
                                                               "ID2919; on memory, your configured profile)."),
    memory: Optional[str] = typer.Option(None, "--memory",
                                          help="Record the replay's attempts and its summary in this file "
                                               "(default: attempts in a throw-away in-memory database, the "
                                               "summary in your memory)."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    csv_out: bool = typer.Option(False, "--csv", help="Print CSV."),
    md_out: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Draw cumulative regret to FILE.png or FILE.svg "
                                                            "(needs matplotlib in acr's environment: `pip install matplotlib`)."),
) -> None:
    from acr_cli.bench.runner import ReplayRequest, run_replays
    from acr_cli.cli.bench_render import check_formats, render

    if baselines is False and not policy and not all_arms:
        raise AcrError("--no-baselines without --policy leaves nothing to replay",
                       hint="name what to replay: --policy learned (repeatable)")
    req = ReplayRequest(benchmark=benchmark, policies=list(policy or []), baselines=baselines, data_dir=data_dir,
                        protocol=protocol, cost_weight=cost_weight, orders=orders, seed=seed, k=k,
                        profile=profile, memory=memory, context=context, every_arm=all_arms,
                        time_weight=time_weight, race=race)
    check_formats(json_out, csv_out, md_out)  # before a replay that may take minutes
    if plot:
        from acr_cli.bench.report import check_plot

        check_plot(plot)
    from acr_cli import interrupts

    # Ctrl-C, SIGTERM and SIGHUP are noted as well as raised: one that lands where Python cannot raise it (a
    # finalizer) still stops the replay at its next task (replay.replay), and exits 128 + its number
    interrupts.install()
    try:
        with _progress_bar() as on_progress:
            doc = run_replays(req, on_progress=on_progress, on_notice=lambda m: echo(f"acr: {m}", err=True))
    finally:
        interrupts.uninstall()
    render(doc, json_out=json_out, csv_out=csv_out, md_out=md_out, plot=plot,
           stored_in=str(memory) if memory else None)


@contextmanager
def _progress_bar() -> Iterator[Optional[Callable[[str, int, int], None]]]:
    """A progress bar on stderr whenever a person is watching it (a terminal), whatever stdout is: a file, a
    pipe, --json. It draws on stderr only, and is gone when the replay ends."""
    import sys

    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True, console=console(stderr=True)) as bar:
        task = bar.add_task("replaying", total=None)

        def update(label: str, done: int, total: int) -> None:
            bar.update(task, description=label, completed=done, total=total)

        yield update


@app.command()
def report(
    run: Optional[str] = typer.Argument(None, help="A run id or replay group id (default: the latest replay)."),
    list_runs: bool = typer.Option(False, "--list", help="List stored replays instead."),
    memory: Optional[str] = typer.Option(None, "--memory", help="Memory file holding the runs."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    csv_out: bool = typer.Option(False, "--csv", help="Print CSV."),
    md_out: bool = typer.Option(False, "--markdown", help="Print a markdown table."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Draw cumulative regret to FILE.png or FILE.svg."),
) -> None:
    """Re-render a stored replay (recomputed from its recorded attempts when the memory holds them).

    Example: acr bench report --list; acr bench report ood176-20261121-101500-a1b2c3
    """
    from acr_cli.bench.runner import list_groups, load_report
    from acr_cli.cli.bench_render import check_formats, render
    if list_runs:
        if run is not None:
            raise AcrError(f"--list lists every stored replay; it takes no run id (got {run!r})",
                           hint=f"`acr bench report {run}` shows that replay")
        if csv_out or md_out or plot:
            raise AcrError("--list prints the stored replays; of the output options it takes only --json")
        groups = list_groups(memory)
        if json_out:
            print_json(groups)
            return
        con = console()
        if not groups:
            con.print("No replays stored yet: run `acr bench replay ...`.")
        for g in groups:
            con.print(f"{g['group']}  {g['benchmark']:7} {g['started_at']}  {', '.join(g['policies'])}")
        return
    check_formats(json_out, csv_out, md_out)
    if plot:  # before anything is printed, as replay does
        from acr_cli.bench.report import check_plot

        check_plot(plot)
    render(load_report(run, memory), json_out=json_out, csv_out=csv_out, md_out=md_out, plot=plot, stored_note=False)


@app.command()
def download(
    dest: Optional[Path] = typer.Option(None, "--dest", help="Target folder (default: acr's cache dir)."),
    revision: str = typer.Option("main", "--revision", help="Dataset revision (branch, tag or commit)."),
    force: bool = typer.Option(False, "--force", help="Download again even if the files are present and valid."),
) -> None:
    """Fetch the CodeRouterBench files from Hugging Face (mirror: set ACR_HF_ENDPOINT).

    Example: acr bench download
    """
    from acr_cli.bench import data, spec
    if not revision.strip():
        raise AcrError("--revision is empty", hint="give a branch, tag or commit of the dataset (default: main)")
    target = dest or paths().bench_cache
    files = spec.all_files()
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(name: str, got: int, total: int | None) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=got)

        got = data.download(files, target, revision=revision, progress=progress, force=force)
    for p in got:
        echo(f"ok  {p}")
    if dest is None:
        echo(f"{len(got)} files in {target}; `acr bench replay ood176` now works without --data-dir")
    else:
        echo(f"{len(got)} files in {target}; replay them with `--data-dir {target}` "
             f"(or set ACR_BENCH_DATA={target})")
    echo("The paper's reference outputs (reference/: ACRouter's decisions and group map) are not part of "
         "the dataset; copy them into that folder from the paper's release to replay them.")
