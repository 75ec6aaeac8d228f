"""``acr memory``: what acr has learned and what happened."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from acr_cli.cli.common import (
    JSON_HELP,
    MEMORY_HELP,
    PROFILE_HELP,
    check_kind,
    console,
    fmt_money,
    load_profile,
    open_local_memory,
    open_memory,
    parse_since,
    paths,
    print_json,
    task_state,
)
from acr_cli.cli.terminal import echo
from acr_cli.errors import AcrError

app = typer.Typer(help="What acr has learned (show), what happened (log), and moving memory around.",
                  no_args_is_help=True)


@app.command()
def show(
    kind: Optional[str] = typer.Option(None, "--kind", help="Only this task kind (bug_fix, feature, ...)."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Per task kind x arm: attempts, pass rate, posterior score, cost, time, the order acr would try now.

    Example: acr memory show --kind bug_fix
    """
    from acr_cli.cli.render import memory_table
    from acr_cli.context import Context, context_groups
    from acr_cli.domain import TaskState
    from acr_cli.routing.registry import live_policy

    kind = check_kind(kind)
    prof, _ = load_profile(profile, Path.cwd())
    mem = open_memory(memory, create=False, read_only=True, local_copy=True)
    try:
        rows = mem.kind_table("live", kind)
        policy = live_policy(prof, mem)
        kinds = sorted({r["kind"] for r in rows if r["kind"]} | ({kind} if kind else set()))
        by_key = {(r["kind"], f"{r['agent']}:{r['model']}"): r for r in rows}
        from acr_cli.memory.store import ArmStats

        merged = []
        for k in kinds:
            ctx = Context(prompt="", kind=k, groups=context_groups(k, None))
            limits = TaskState(max_attempts=prof.settings.max_attempts, max_cost=prof.settings.max_cost)
            for pos, rk in enumerate(policy.rank(ctx, limits), 1):
                row = by_key.pop((k, rk.arm.id), None) or {"kind": k, "agent": rk.arm.agent, "model": rk.arm.model,
                                                           "stats": ArmStats()}
                low, high = rk.interval
                row.update(mean=rk.mean, low=low, high=high, reward=rk.reward, rank=pos,
                           expected_cost=rk.cost)
                merged.append(row)
        merged += list(by_key.values())  # arms no longer in the profile
        from acr_cli.health.state import HealthBook

        if not mem.shared:
            health = HealthBook(mem).of(prof.arms)
        else:  # arm health is this machine's (its logins, its quota): the local file's
            local = open_local_memory(read_only=True, memory=memory)
            health = HealthBook(local).of(prof.arms) if local is not None else {}
            if local is not None:
                local.close()
    finally:
        mem.close()
    if json_out:
        out = []
        for r in merged:
            s = r["stats"]
            out.append({"kind": r["kind"], "agent": r["agent"], "model": r["model"], "attempts": s.n,
                        "judged": s.n_judged, "passed": s.n_passed, "unverified": s.n_unverified,
                        "pass_rate": s.n_passed / s.n_judged if s.n_judged else None,
                        "mean_cost_usd": s.mean_cost, "mean_duration_s": s.mean_duration, "last_used": s.last_used,
                        "posterior_mean": r.get("mean"), "interval90": [r.get("low"), r.get("high")],
                        "expected_cost_usd": r.get("expected_cost"), "expected_reward": r.get("reward"),
                        "order": r.get("rank"), "health": _health_json(health.get(f"{r['agent']}:{r['model']}"))})
        print_json({"profile": prof.name, "kinds": out})
    else:
        memory_table([r for r in merged if r["stats"].n or r.get("rank")], health)


def _health_json(h) -> dict | None:
    """An arm that cannot be tried now (set aside after a set-up error, cooling after transient ones)."""
    return None if h is None else {"state": h.state, "reason": h.reason, "fix": h.fix, "until": h.until,
                                   "errors": h.errors, "since": h.since}


@app.command()
def log(
    since: Optional[str] = typer.Option(None, "--since", help="Only tasks newer than this: 7d, 24h, 30m or a date."),
    kind: Optional[str] = typer.Option(None, "--kind", help="Only this task kind (bug_fix, feature, ...)."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Only tasks where this agent made an attempt."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="At most this many tasks."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Tasks and their attempts, newest first.

    Example: acr memory log --since 7d --json
    """
    kind = check_kind(kind)  # a typo must not look like "no such task"
    mem = open_memory(memory, create=False, read_only=True, local_copy=True)
    try:
        tasks = mem.tasks(since=parse_since(since), kind=kind, agent=agent, limit=limit)
    finally:
        mem.close()
    if json_out:
        from acr_cli.attempt_json import stored_attempt_json

        keep = ("id", "created_at", "kind", "language", "project", "prompt", "passed", "cost_usd")
        print_json({"tasks": [{**{k: t[k] for k in keep},
                               "passed": None if t["passed"] is None else bool(t["passed"]),
                               "state": task_state(t),
                               "attempts": [stored_attempt_json(a) for a in t["attempts"]]} for t in tasks]})
        return
    con = console()
    if not tasks:
        con.print("No task matches these filters." if since or kind or agent else "No tasks recorded yet.")
        return
    from rich.text import Text

    from acr_cli.cli.render import MARK, VERDICT_STYLE, headline
    from acr_cli.cli.terminal import terminal_safe

    for t in tasks:
        state = task_state(t)
        head = Text(f"{t['created_at']}  {t['id']}  {t['kind']}  {state}  {fmt_money(t['cost_usd'], None)}", style="bold")
        con.print(head)
        con.print(Text(terminal_safe("  " + headline(t["prompt"])[:100]),
                       style="italic"))
        for a in t["attempts"]:
            line = Text(f"  {MARK.get(a['verdict'], '?')} {a['seq']}. {a['agent']}:{a['model']}  {a['verdict']}  "
                        f"{fmt_money(a['cost_usd'], None)}  {a['duration_s'] or 0:.0f}s  {terminal_safe(a['detail'] or '')}",
                        style=VERDICT_STYLE.get(a["verdict"], ""))
            con.print(line)
        final = t["attempts"][-1] if t["attempts"] else None
        if final and final.get("text"):  # the answer that ended the task, its first line (`acr show` has it all)
            first = headline(final["text"])
            con.print(Text(terminal_safe(f"    answer: {first[:160]}"), style="dim"))
    con.print(Text("`acr show ID` shows a task whole: answers, verifier output, logs, kept work", style="dim"))


@app.command("export")
def export_(
    output: Optional[Path] = typer.Argument(None, help="File to write (default, or '-': stdout). Written whole "
                                                       "or not at all; a new file is readable by you only."),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Write the whole memory as JSONL (runs, then tasks with their attempts).

    Example: acr memory export backup.jsonl
    """
    from acr_cli.atomic import atomic_write
    from acr_cli.memory.db import sqlite_files

    to_stdout = output is None or str(output) in ("-", "/dev/stdout")
    location = paths().memory_choice(memory)
    if not to_stdout and not location.is_server:
        own = {p.resolve() for p in sqlite_files(location.path)}
        if output.resolve() in own or any(output.exists() and p.exists() and output.samefile(p) for p in own):
            raise AcrError(f"{output} is the memory itself (or its SQLite journal): an export there would destroy it",
                           hint="write the export to another file, e.g. acr memory export backup.jsonl")
    mem = open_memory(memory, create=False, read_only=True)
    try:
        if to_stdout:
            mem.export(sys.stdout)
        else:
            with atomic_write(output) as f:
                n = mem.export(f)
            echo(f"wrote {n} records to {output}", err=True)
    finally:
        mem.close()


@app.command("import")
def import_(
    source: Path = typer.Argument(..., help="A file written by `acr memory export` (- reads stdin)."),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Add the records of an export; tasks already in memory are skipped.

    Every record is checked first, down to the JSON acr keeps inside some fields (how a request
    was read, the baseline, an attempt's changes, a stored replay's report): a file with one record
    of another shape is refused whole, naming the line and the field, and nothing is imported.

    Examples: acr memory import backup.jsonl; acr memory export | acr memory import - --memory postgresql://...
    """
    stdin = str(source) == "-"
    if not stdin and not source.is_file():
        raise AcrError(f"{source} is a directory" if source.is_dir() else f"{source} does not exist",
                       hint="give a file written by `acr memory export`")
    from acr_cli.paths import memory_exists

    target = paths().memory_path(memory)
    new_file = not memory_exists(target)
    mem = open_memory(memory)
    try:
        if stdin:
            added, skipped = mem.import_(sys.stdin)
        else:
            with open(source, encoding="utf-8") as f:
                added, skipped = mem.import_(f)
    except BaseException as e:
        mem.close()
        if new_file and not target.is_server:  # nothing was imported (one transaction): no empty memory left
            from acr_cli.memory.db import sqlite_files

            for leftover in sqlite_files(target.path):
                leftover.unlink(missing_ok=True)
        if isinstance(e, UnicodeDecodeError):
            raise AcrError(f"{source} is not a text file written by `acr memory export`") from None
        if isinstance(e, AcrError):
            e.message = f"{source}: {e.message}"
        raise
    mem.close()
    echo(f"imported {added} records, skipped {skipped} already present")


@app.command()
def sync(
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Upload to the team's shared memory the tasks this machine recorded while its server was away, and
    refresh the local copy of the team's newest tasks (what `acr run` routes from when the server is away).

    Safe to repeat or to run on several machines at once: a task the server already has is skipped.

    Example: acr memory sync
    """
    from acr_cli.memory.team import open_team

    p = paths()
    location = p.memory_choice(memory)
    if not location.is_server:
        raise AcrError(f"the memory in effect is the file {location} (from {location.source}): there is no shared memory "
                       "to sync with", hint='name the team\'s server: memory = "postgresql://USER@HOST/DB" in '
                                            "config.toml or .acr.toml, ACR_MEMORY or --memory")
    try:
        team = open_team(location.target, p.local_copy(location), required=True)
    except AcrError as e:  # the server cannot be reached: --json still says so, and what waits
        if json_out:
            print_json({"server": location.label, **_unsynced(location.label, e.message, memory).to_json()})
        raise
    try:
        result = team.sync()
    finally:
        team.close()
    if json_out:
        print_json({"server": team.label, **result.to_json()})
    else:
        echo(f"{team.label}: uploaded {result.uploaded} task(s) ({result.already} were already there), "
             f"copied {result.downloaded} of the team's; {result.pending} pending")
    if result.error:
        raise AcrError(f"the sync stopped: {result.error}", hint="run `acr memory sync` again when the server is back")
    if result.refused:  # the others went; these wait, and the exit status says that not everything did
        from acr_cli.cli.render import refused_line

        for r in result.refused:
            echo(f"acr: warning: {refused_line(r)}", err=True)
        raise typer.Exit(1)


def _unsynced(label: str, why: str, memory: str | None):
    """A sync that could not start: what waits in the local file for the server named ``label``."""
    from acr_cli.memory.team import SyncResult, pending

    local = open_local_memory(read_only=True, memory=memory)
    try:
        return SyncResult(pending=pending(local, label) if local is not None else 0, error=why)
    finally:
        if local is not None:
            local.close()


@app.command()
def forget(
    task_ids: Optional[List[str]] = typer.Argument(None, help="Task ids to forget (see `acr memory log`)."),
    all_: bool = typer.Option(False, "--all", help="Forget everything (asks first unless --yes)."),
    bench: bool = typer.Option(False, "--bench", help="Forget all recorded benchmark replays."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Forget tasks (with their attempt logs): some by id, all benchmark replays, or everything.

    Example: acr memory forget 20261121-101500-a1b2c3
    """
    if not task_ids and not all_ and not bench:
        raise AcrError("say what to forget: task ids, --bench or --all")
    if sum(map(bool, (task_ids, all_, bench))) > 1:
        raise AcrError("say one thing to forget: task ids, --bench or --all, not several")
    task_ids = list(dict.fromkeys(task_ids or []))  # an id given twice is one task
    if all_ and not yes:
        _confirm_forget_all(memory)
    from acr_cli.memory.forgetting import forget as forget_tasks

    mem = open_memory(memory, create=False)
    local = None
    try:
        local = open_local_memory(memory=memory) if mem.shared and not bench else None
        done = forget_tasks(mem, local, paths(), task_ids, everything=all_, bench=bench)
    finally:
        mem.close()
        if local is not None:
            local.close()
    echo(f"forgot {done.tasks} task(s)" + (f" and {done.runs} stored replay run(s)" if all_ or bench else "")
         + (f"; removed the logs of {done.orphans} task(s) no longer in memory" if done.orphans else ""))
    if done.missing:
        raise AcrError(f"{done.missing} of the given task ids {'was' if done.missing == 1 else 'were'} not in memory",
                       hint="see `acr memory log` for ids",
                       exit_code=1)


def _confirm_forget_all(memory: Optional[str]) -> None:
    """Ask before forgetting everything (a usage error when nobody is at a terminal to answer)."""
    if not sys.stdin.isatty():
        raise AcrError("--all needs confirmation; pass --yes when not at a terminal")
    shared = paths().memory_choice(memory).is_server
    typer.confirm("Forget every task, attempt and replay in "
                  + ("the team's shared memory" if shared else "memory") + "?", abort=True)



