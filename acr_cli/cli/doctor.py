"""``acr doctor``: what is installed, what is usable, where things live."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from acr_cli.cli.common import JSON_HELP, MEMORY_HELP, PROFILE_HELP, console, load_profile, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_PROBLEMS, AcrError, Reported
from acr_cli.health.report import DoctorReport, any_runnable, diagnose, readiness_summary
from acr_cli.money import usd


def doctor(
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    check: bool = typer.Option(False, "--check", help="Run each installed agent CLI once against a throw-away "
                                                      "local mock model API and verify acr still understands it."),
    agent: Optional[List[str]] = typer.Option(None, "--agent", help="With --check: only this agent (repeatable)."),
    timeout: float = typer.Option(120.0, "--timeout", min=5, help="With --check: seconds per agent."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[str] = typer.Option(None, "--memory", help=MEMORY_HELP),
    refresh: bool = typer.Option(False, "--refresh", help="Ask the CLIs again instead of using the cached "
                                                          "readiness and versions."),
    reset: bool = typer.Option(False, "--reset", help="Forget arm health: arms set aside after a set-up error "
                                                      "and arms cooling down after transient ones are tried again."),
) -> None:
    """Which agent CLIs are installed (with versions), which arms are ready, where config and memory live.

    Each arm of the profile is ready (its CLI is installed and has credentials for its provider),
    not ready (with what to do), or unknown (a check could not tell: the arm is still tried). The
    answers of the CLIs' login status commands are cached until the CLI or its credential files or
    API-key variables change; --refresh asks again.

    With --check, each installed CLI (claude, codex, opencode) runs one tiny task against a mock model
    API on 127.0.0.1 (nothing leaves the machine, no API key needed): a quick way to know whether an
    agent update changed something acr relies on.

    Exit codes: 0 nothing wrong; 1 a problem was found: without --check, a memory that cannot be
    read or no arm of the profile that can run (none installed, or none ready or unknown); with
    --check, only the checks count: a CLI acr did not understand, or none installed to check (arms
    not logged in do not make --check fail). 2 usage or configuration error (a bad profile).

    Arms acr set aside after a set-up error (not logged in, 401, unknown model, quota) or is cooling
    down after transient ones (429, 5xx) are shown with the reason and until when; --reset forgets
    that (a changed CLI, credential file or API-key variable brings a set-aside arm back by itself).

    Examples: acr doctor; acr doctor --refresh; acr doctor --reset; acr doctor --check --agent codex
    """
    if agent and not check:
        raise AcrError("--agent chooses which agents --check runs", hint="acr doctor --check --agent codex")
    p = paths()
    prof, settings = load_profile(profile, Path.cwd())
    report = diagnose(prof, settings, p, memory, refresh=refresh, reset=reset, check=check,
                      only=agent, timeout=timeout,
                      on_check=None if json_out else lambda name: echo(f"checking {name}...", err=True))
    box = _sandbox_state(prof, settings, report)
    lanes = _lanes_state(settings, report)
    if json_out:
        print_json({**report.as_json(), "sandbox": box, "race_lanes": lanes})
    else:
        _render(report, box, lanes)
    if report.problems:
        raise Reported(EXIT_PROBLEMS)


def _sandbox_state(prof, settings, report: DoctorReport) -> dict:
    """The sandbox: its setting (and where it comes from), whether bubblewrap can start one here. A sandbox that
    is on and cannot start is a problem: ``acr run`` refuses to start then."""
    from acr_cli import sandbox

    mode, source = settings.resolve("sandbox", None, prof.settings.sandbox, "none")
    source = f"profile {prof.name}" if source == "profile" else source
    state = {"setting": mode, "source": source, **sandbox.state()}
    if mode == "bwrap" and state["problem"]:
        report.problems = [*(report.problems or []), f"sandbox = \"bwrap\" (from {source}): {state['problem']}"]
    return state


def _lanes_state(settings, report: DoctorReport) -> dict:
    """How ``acr run --race`` makes its lanes here: the race_lanes setting, whether overlays can be mounted (asked
    of a child process), and what ``auto`` uses. ``overlay`` where overlays cannot be mounted is a problem:
    a race refuses to start then."""
    from acr_cli.workspace import overlay

    mode, source = settings.resolve("race_lanes", None, None, "auto")
    why = overlay.probe() if mode != "worktree" else None
    uses = "worktree" if mode == "worktree" or why else "overlay"
    if mode == "overlay" and why:
        report.problems = [*(report.problems or []), f'race_lanes = "overlay" (from {source}): {why}']
    return {"setting": mode, "source": source, "lanes": uses, "problem": why}


def _print_lanes(con, lanes: dict) -> None:
    """One line: how race lanes are made here, and why not as overlays."""
    from rich.markup import escape

    said = "copy-on-write overlays of your repository"
    if lanes["lanes"] != "overlay":
        said = "git worktrees (full checkouts)" + (f": {escape(lanes['problem'])}" if lanes["problem"] else "")
    con.print(f"[bold]race lanes[/] {lanes['setting']} [dim](from {escape(lanes['source'])})[/]\n  {said}")


def _print_sandbox(con, box: dict) -> None:
    """One line: the sandbox's setting and whether it can start here."""
    from rich.markup import escape

    mark = "[green]✓[/]" if box["available"] else ("[red]✗[/]" if box["setting"] == "bwrap" else "[dim]-[/]")
    said = f"bubblewrap ready ({box['bwrap']})" if box["available"] else escape(box["problem"] or "")
    con.print(f"[bold]sandbox[/] {box['setting']} [dim](from {escape(box['source'])})[/]\n  {mark} {said}")


def _render(report: DoctorReport, box: dict, lanes: dict) -> None:
    """The report for a person: agents, the profile's arms, paths, memory, the sandbox and the --check results."""
    from rich.markup import escape

    con = console()
    if report.health_reset is not None:
        con.print(f"forgot the health of {report.health_reset} arm(s) or credential scope(s): every arm is tried again")
    _print_agents(con, report.agents)
    arms = report.profile["arms"]
    con.print("[bold]profile[/] " + escape(readiness_summary(report.profile["name"],
                                                              report.profile["readiness"]).removeprefix("profile ")))
    width = max((len(a["arm"]) for a in arms), default=0)
    for a in arms:
        _print_arm(con, a, width)
    con.print("[bold]paths[/]")
    for k, v in report.paths.items():
        if v:
            con.print(f"  {k:15} {v}")
    _print_memory(con, report.memory)
    _print_sandbox(con, box)
    _print_lanes(con, lanes)
    if not any(a["usable"] for a in arms):
        con.print("[yellow]no arm of this profile is usable: install an agent CLI "
                  "(npm install -g @openai/codex @anthropic-ai/claude-code opencode-ai)[/]")
    elif not any_runnable(arms):
        con.print("[yellow]no arm of this profile is ready: do what the arms above say, then `acr doctor`[/]")
    if report.checks is not None:
        _print_checks(con, report.checks)


def _print_agents(con, found: dict) -> None:
    """Each agent CLI: its version and path, or why it cannot start, or that it is not on PATH."""
    from rich.markup import escape

    con.print("[bold]agents[/]")
    for name, info in found.items():
        if info["found"] and (info.get("problem") or "").startswith("cannot start"):
            con.print(f"  [red]✗[/] {name:9} {escape(info['problem'])}  [dim]{info['path']}[/]")
        elif info["found"]:
            con.print(f"  [green]✓[/] {name:9} {info['version'] or '?'}  [dim]{info['path']}[/]")
        else:
            con.print(f"  [red]✗[/] {name:9} not found on PATH")


def _print_memory(con, mem_info: dict) -> None:
    """The memory: a team's server, or the file with its figures, or what is wrong with it."""
    if mem_info.get("shared"):
        _print_shared(con, mem_info)
    elif mem_info.get("problem"):
        con.print(f"[bold]memory[/] {mem_info['path']}\n  [red]✗[/] {mem_info['problem']}")
    else:
        size = mem_info.get("size_bytes")
        con.print(f"[bold]memory[/] {mem_info['path']}" + (
            f": {mem_info['tasks']} tasks, {mem_info['attempts']} attempts, {mem_info['bench_runs']} replays, "
            f"{size / 1024:.0f} KiB" if mem_info["exists"] else " (not created yet)"))


def _print_checks(con, checks: list[dict]) -> None:
    """--check: what acr understood of each CLI, and the verdict its exit code follows."""
    con.print("[bold]check against a local mock model API[/]")
    for c in checks:
        if c["ok"]:
            s = c["seen"]
            cost = f"cost {usd(s['cost_usd'])} reported" if s["cost_usd"] else "no cost reported: acr prices tokens"
            con.print(f"  [green]✓[/] {c['agent']:9} {c['version'] or '?'}: understood "
                      f"(tokens {s['tokens_in']}/{s['tokens_out']}, {cost}, tool call ran) in {c['duration_s']:.1f}s")
        else:
            con.print(f"  [red]✗[/] {c['agent']:9} {c['version'] or ''}")
            for p in c["problems"]:
                con.print(f"      - {p}")
    if not checks:
        con.print("  [red]✗[/] no agent CLI installed to check")
    con.print(_check_verdict(checks))


_MARK = {"ready": "[green]✓[/]", "unknown": "[yellow]?[/]", "not_ready": "[red]✗[/]"}
_LABEL = {"ready": "ready", "unknown": "unknown", "not_ready": "not ready"}


def _print_arm(con, a: dict, width: int) -> None:
    """One arm: mark, id, state and why; the fix of a not-ready arm; a missing price."""
    from rich.markup import escape

    head = f"  {_MARK[a['state']]} {escape(a['arm'].ljust(width))}  {_LABEL[a['state']]}"
    if a.get("health"):  # whatever its login says, acr does not try it now
        held = a["health"]["label"]
        head = f"  [yellow]![/] {escape(a['arm'].ljust(width))}  {held} ({_LABEL[a['state']]} by its login)"
    if a["state"] == "ready":  # why, on the same line as far as it fits (all of it in --json)
        con.print(f"{head}  [dim]{escape(a['reason'])}[/]", no_wrap=True, overflow="ellipsis")
    else:
        con.print(head)
        con.print(f"      {escape(a['reason'])}")
        if a["state"] == "not_ready" and a["fix"]:
            con.print(f"      fix: {escape(a['fix'])}")
        elif a["state"] == "unknown":
            con.print("      [dim]still tried" + (f"; to find out: {escape(a['fix'])}" if a["fix"] else "") + "[/]")
    if a.get("health"):
        con.print(f"      [yellow]{escape(a['health']['text'])}[/]")
    if not a["priced"]:
        con.print("      [yellow]price unknown[/]: no price in the profile or the catalog (its cost is recorded "
                  "as unknown unless the agent reports one)")


def _print_shared(con, m: dict) -> None:
    from rich.markup import escape

    con.print(f"[bold]memory[/] {escape(m['path'])} [dim](a team's shared memory)[/]")
    if m.get("problem"):
        con.print(f"  [red]✗[/] {escape(m['problem'])}")
    else:
        con.print(f"  [green]✓[/] PostgreSQL {escape(m['server_version'])}, {m['latency_ms']:.1f} ms a round trip; "
                  f"{m['tasks']} tasks, {m['attempts']} attempts, {m['size_bytes'] / 1024 / 1024:.1f} MiB")
    if "pending" in m:
        con.print(f"  local {escape(m['local'])}: {m['pending']} task(s) to upload"
                  + (" (`acr memory sync`)" if m["pending"] else "")
                  + f"; copy of the team's newest tasks as of {m['local_copy_at'] or 'never'}")


def _check_verdict(checks: list[dict]) -> str:
    """The last line of ``--check``: what its exit code says."""
    failed = [c["agent"] for c in checks if not c["ok"]]
    if not checks:
        return "[red]check failed[/]: nothing to check (exit 1)"
    if failed:
        return f"[red]check failed[/] for {', '.join(failed)} of {len(checks)} CLI(s) (exit 1)"
    return (f"[green]check passed[/]: acr understood all {len(checks)} CLI(s) (exit 0; whether an arm is "
            "logged in is the readiness above, not this check)")
