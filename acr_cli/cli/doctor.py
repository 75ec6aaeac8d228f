"""``acr doctor``: what is installed, what is usable, where things live."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from acr_cli.cli.common import JSON_HELP, MEMORY_HELP, PROFILE_HELP


def agent_versions(names: list[str], profile_agents: dict) -> dict[str, dict]:
    import shutil

    from acr_cli import agents, process

    out = {}
    for name in names:
        adapter = agents.get(name, profile_agents)
        path = shutil.which(adapter.executable)
        info = {"executable": adapter.executable, "path": path, "version": None, "found": path is not None}
        if path:
            res = process.run(adapter.version_argv(), cwd=Path.cwd(), timeout=20)
            text = (res.stdout or res.stderr).strip().splitlines()
            info["version"] = text[0] if text and not res.timed_out else None
            if res.timed_out:
                info["problem"] = "`--version` did not answer within 20 s"
        out[name] = info
    return out


def doctor(
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=PROFILE_HELP),
    check: bool = typer.Option(False, "--check", help="Run each installed agent CLI once against a throw-away "
                                                      "local mock model API and verify acr still understands it."),
    agent: Optional[List[str]] = typer.Option(None, "--agent", help="With --check: only this agent (repeatable)."),
    timeout: float = typer.Option(120.0, "--timeout", min=5, help="With --check: seconds per agent."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    memory: Optional[Path] = typer.Option(None, "--memory", help=MEMORY_HELP),
) -> None:
    """Which agent CLIs are installed (with versions), which arms are usable, where config and memory live.

    With --check, each installed CLI (claude, codex, opencode) runs one tiny task against a mock model
    API on 127.0.0.1 (nothing leaves the machine, no API key needed): a quick way to know whether an
    agent update changed something acr relies on. Exit 1 if a check fails.

    Examples: acr doctor; acr doctor --check --agent codex
    """
    from acr_cli.agents import BUILTIN
    from acr_cli.errors import AcrError

    if agent and not check:
        raise AcrError("--agent chooses which agents --check runs", hint="acr doctor --check --agent codex")
    from acr_cli.cli.common import console, load_profile, paths, print_json

    p = paths()
    prof, settings = load_profile(profile, Path.cwd())
    names = list(BUILTIN) + sorted(prof.agents)
    found = agent_versions(names, prof.agents)
    arms = [{"arm": a.id, "usable": found.get(a.agent, {}).get("found", False)} for a in prof.arms]
    mem_path = p.memory_path(memory)
    mem_info: dict = {"path": str(mem_path), "exists": mem_path.exists()}
    if mem_path.exists():
        from acr_cli.errors import MemoryFileError

        try:  # a broken memory is one more finding, not the end of the diagnosis
            mem_info.update(_memory_figures(memory, mem_path))
        except MemoryFileError as e:
            mem_info["problem"] = e.message + (f" ({e.hint})" if e.hint else "")
    report = {
        "agents": found,
        "profile": {"name": prof.name, "path": str(prof.path), "arms": arms},
        "paths": {"config": str(p.config_dir), "data": str(p.data_dir), "cache": str(p.cache_dir),
                  "logs": str(p.logs_dir), "profiles": str(p.profiles_dir), "resolved_from": p.source,
                  "project_config": str(settings.project_file) if settings.project_file else None},
        "memory": mem_info,
    }
    checks = _run_checks(agent, found, timeout, quiet=json_out) if check else None
    if checks is not None:
        report["checks"] = checks
    if json_out:
        print_json(report)
        _exit_on_failed(checks, mem_info, arms)
        return
    con = console()
    con.print("[bold]agents[/]")
    for name, info in found.items():
        if info["found"]:
            con.print(f"  [green]✓[/] {name:9} {info['version'] or '?'}  [dim]{info['path']}[/]")
        else:
            con.print(f"  [red]✗[/] {name:9} not found on PATH")
    usable = sum(a["usable"] for a in arms)
    con.print(f"[bold]profile[/] {prof.name}: {usable} of {len(arms)} arms usable")
    for a in arms:
        con.print(f"  {'[green]✓[/]' if a['usable'] else '[red]✗[/]'} {a['arm']}")
    con.print("[bold]paths[/]")
    for k, v in report["paths"].items():
        if v:
            con.print(f"  {k:15} {v}")
    size = mem_info.get("size_bytes")
    if mem_info.get("problem"):
        con.print(f"[bold]memory[/] {mem_path}\n  [red]✗[/] {mem_info['problem']}")
    else:
        con.print(f"[bold]memory[/] {mem_path}" + (
            f": {mem_info['tasks']} tasks, {mem_info['attempts']} attempts, {mem_info['bench_runs']} replays, "
            f"{size / 1024:.0f} KiB" if mem_info["exists"] else " (not created yet)"))
    if usable == 0:
        con.print("[yellow]no arm of this profile is usable: install an agent CLI "
                  "(npm install -g @openai/codex @anthropic-ai/claude-code opencode-ai)[/]")
    if checks is not None:
        con.print("[bold]check against a local mock model API[/]")
        for c in checks:
            if c["ok"]:
                s = c["seen"]
                cost = f"cost ${s['cost_usd']:.4f} reported" if s["cost_usd"] else "no cost reported: acr prices tokens"
                con.print(f"  [green]✓[/] {c['agent']:9} {c['version'] or '?'}: understood "
                          f"(tokens {s['tokens_in']}/{s['tokens_out']}, {cost}, tool call ran) in {c['duration_s']:.1f}s")
            else:
                con.print(f"  [red]✗[/] {c['agent']:9} {c['version'] or ''}")
                for p in c["problems"]:
                    con.print(f"      - {p}")
        if not checks:
            con.print("  no agent CLI installed to check")
    _exit_on_failed(checks, mem_info, arms)


def _memory_figures(memory: Optional[Path], mem_path: Path) -> dict:
    """Counts and size of the memory, after ``PRAGMA quick_check``: it reads every page, so damage that
    opening the file does not reach shows here too (raised as MemoryFileError)."""
    import sqlite3

    from acr_cli.cli.common import open_memory
    from acr_cli.memory.db import damaged

    mem = open_memory(memory, create=False, read_only=True)
    try:
        problems = [r[0] for r in mem.db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise damaged(mem_path, "; ".join(problems), what="is damaged")
        return {**mem.counts(), "size_bytes": mem.size_bytes()}
    except sqlite3.DatabaseError as e:
        raise damaged(mem_path, str(e), what="is damaged") from None
    finally:
        mem.close()


def _run_checks(only: Optional[List[str]], found: dict, timeout: float, quiet: bool) -> list[dict]:
    from dataclasses import asdict

    from acr_cli.agents import BUILTIN
    from acr_cli.agents.selfcheck import check_agent
    from acr_cli.errors import AcrError

    names = list(only or [a for a in BUILTIN if found.get(a, {}).get("found")])
    for n in names:
        if n not in BUILTIN:
            raise AcrError(f"--agent {n!r}: --check knows {', '.join(BUILTIN)}")
    out = []
    for n in names:
        if not quiet:
            typer.echo(f"checking {n}...", err=True)
        out.append(asdict(check_agent(n, timeout=timeout)))
    return out


def _exit_on_failed(checks: Optional[list], mem_info: dict, arms: list[dict]) -> None:
    """Exit 1 when a check failed, the memory cannot be read or no arm of the profile could run."""
    if (checks and not all(c["ok"] for c in checks)) or mem_info.get("problem") or not any(a["usable"] for a in arms):
        raise typer.Exit(1)
