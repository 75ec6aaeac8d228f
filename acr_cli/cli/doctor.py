"""``acr doctor``: what is installed, what is usable, where things live."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from acr_cli.cli.common import JSON_HELP, MEMORY_HELP, PROFILE_HELP, console, load_profile, open_memory, paths, print_json
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_PROBLEMS, AcrError, MemoryFileError, Reported
from acr_cli.money import usd


def agent_versions(names: list[str], profile_agents: dict, cache_dir: Optional[Path] = None,
                   refresh: bool = False) -> dict[str, dict]:
    """Each agent's executable, where it is and its version (cached in ``cache_dir`` until the
    executable changes: see :func:`acr_cli.health.readiness.installed_version`)."""
    from acr_cli import agents
    from acr_cli.health.readiness import START_PROBLEMS, VERSION_TIMEOUT_S, installed_version, located

    out = {}
    for name in names:
        adapter = agents.get(name, profile_agents)
        path = located(adapter.executable)
        info = {"executable": adapter.executable, "path": path, "version": None, "found": path is not None}
        if path:
            info["version"] = installed_version(adapter.executable, cache_dir=cache_dir,
                                                version_argv=adapter.version_argv(), refresh=refresh)
            if info["version"] is None and path in START_PROBLEMS:
                info["problem"] = f"cannot start: {START_PROBLEMS[path]}"
            elif info["version"] is None:
                info["problem"] = f"`--version` did not answer within {VERSION_TIMEOUT_S:.0f} s, or said nothing"
        out[name] = info
    return out


def arm_readiness(prof, cache_dir: Path, refresh: bool = False) -> list[dict]:
    """Per arm of ``prof``: installed (version), readiness (state, reason, fix), priced.

    One status command per credential scope (``readiness.scope``), cached in ``cache_dir`` until what
    it depends on changes (``readiness.fingerprint``); ``refresh`` asks again."""
    from acr_cli import agents
    from acr_cli.health import readiness

    out = []
    for arm in prof.arms:
        adapter = agents.get(arm.agent, prof.agents)
        r = readiness.check(arm.agent, arm.model, adapter.executable, cache_dir=cache_dir, refresh=refresh,
                            version_argv=adapter.version_argv(), args=arm.args)
        priced = arm.price_in is not None and arm.price_out is not None
        from acr_cli.pricing import known

        catalog = not priced and known(arm.agent, arm.model)
        out.append({"arm": arm.id, "agent": arm.agent, "model": arm.model,
                    "scope": readiness.scope(arm.agent, arm.model, arm.args),
                    "usable": r.version is not None,  # the CLI is installed (kept for scripts that read it)
                    "installed": r.version is not None, "version": r.version,
                    "state": r.state, "reason": r.reason, "fix": r.fix,
                    "priced": priced or catalog,
                    "price_note": None if priced else ("priced from the catalog (genai-prices)" if catalog
                                                       else "no price in the profile or the catalog")})
    return out


def readiness_counts(arms: list[dict]) -> dict[str, int]:
    """Arms per readiness state; an arm acr set aside or is cooling down (its ``health``) counts as held,
    whatever its state, since it is not tried now."""
    from acr_cli.health.readiness import STATES

    free = [a for a in arms if not a.get("health")]
    return {"total": len(arms), **{s: sum(a["state"] == s for a in free) for s in STATES},
            "held": len(arms) - len(free)}


def readiness_summary(name: str, counts: dict[str, int]) -> str:
    """"profile balanced: 3 of 8 arms ready, 2 unknown, 3 not ready, 1 set aside, cooling down or held"."""
    extra = [f"{counts[k]} {label}" for k, label in (("unknown", "unknown"), ("not_ready", "not ready"),
                                                      ("held", "set aside, cooling down or held")) if counts.get(k)]
    return f"profile {name}: {counts['ready']} of {counts['total']} arms ready" + "".join(", " + e for e in extra)


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
    from acr_cli.agents import BUILTIN
    if agent and not check:
        raise AcrError("--agent chooses which agents --check runs", hint="acr doctor --check --agent codex")
    p = paths()
    prof, settings = load_profile(profile, Path.cwd())
    names = list(BUILTIN) + sorted(prof.agents)
    found = agent_versions(names, prof.agents, cache_dir=p.cache_dir, refresh=refresh)
    arms = arm_readiness(prof, p.cache_dir, refresh=refresh)
    mem_path = p.memory_path(memory)
    shared = isinstance(mem_path, str)
    health_memory = str(p.local_copy(mem_path)) if shared else memory  # arm health is this machine's: the local file's
    forgotten = _arm_health(health_memory, prof, arms, reset)
    counts = readiness_counts(arms)
    mem_info: dict = {"path": str(mem_path), "exists": True} if not shared else _shared_figures(mem_path, p)
    if not shared:
        mem_info["exists"] = mem_path.exists()
    if not shared and mem_path.exists():
        try:  # a broken memory is one more finding, not the end of the diagnosis
            mem_info.update(_memory_figures(memory))
        except MemoryFileError as e:
            mem_info["problem"] = e.message + (f" ({e.hint})" if e.hint else "")
    from acr_cli import __version__
    from acr_cli.memory.db import SCHEMA_VERSION

    report = {
        "acr": {"version": __version__, "memory_schema": SCHEMA_VERSION},
        "agents": found,
        "profile": {"name": prof.name, "path": str(prof.path), "arms": arms, "readiness": counts},
        "paths": {"config": str(p.config_dir), "data": str(p.data_dir), "cache": str(p.cache_dir),
                  "logs": str(p.logs_dir), "profiles": str(p.profiles_dir), "resolved_from": p.source,
                  "project_config": str(settings.project_file) if settings.project_file else None},
        "memory": mem_info,
    }
    checks = _run_checks(agent, found, timeout, quiet=json_out) if check else None
    if checks is not None:
        report["checks"] = checks
    if forgotten is not None:
        report["health_reset"] = forgotten
    report["problems"] = problems(checks, mem_info, arms)
    if json_out:
        print_json(report)
        _exit_on_problems(report["problems"])
        return
    con = console()
    if forgotten is not None:
        con.print(f"forgot the health of {forgotten} arm(s) or credential scope(s): every arm is tried again")
    from rich.markup import escape

    con.print("[bold]agents[/]")
    for name, info in found.items():
        if info["found"] and (info.get("problem") or "").startswith("cannot start"):
            con.print(f"  [red]✗[/] {name:9} {escape(info['problem'])}  [dim]{info['path']}[/]")
        elif info["found"]:
            con.print(f"  [green]✓[/] {name:9} {info['version'] or '?'}  [dim]{info['path']}[/]")
        else:
            con.print(f"  [red]✗[/] {name:9} not found on PATH")
    usable = sum(a["usable"] for a in arms)

    con.print("[bold]profile[/] " + escape(readiness_summary(prof.name, counts).removeprefix("profile ")))
    width = max((len(a["arm"]) for a in arms), default=0)
    for a in arms:
        _print_arm(con, a, width)
    con.print("[bold]paths[/]")
    for k, v in report["paths"].items():
        if v:
            con.print(f"  {k:15} {v}")
    size = mem_info.get("size_bytes")
    if shared:
        _print_shared(con, mem_info)
    elif mem_info.get("problem"):
        con.print(f"[bold]memory[/] {mem_path}\n  [red]✗[/] {mem_info['problem']}")
    else:
        con.print(f"[bold]memory[/] {mem_path}" + (
            f": {mem_info['tasks']} tasks, {mem_info['attempts']} attempts, {mem_info['bench_runs']} replays, "
            f"{size / 1024:.0f} KiB" if mem_info["exists"] else " (not created yet)"))
    if usable == 0:
        con.print("[yellow]no arm of this profile is usable: install an agent CLI "
                  "(npm install -g @openai/codex @anthropic-ai/claude-code opencode-ai)[/]")
    elif not _any_runnable(arms):
        con.print("[yellow]no arm of this profile is ready: do what the arms above say, then `acr doctor`[/]")
    if checks is not None:
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
    _exit_on_problems(report["problems"])


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


def _arm_health(memory: Optional[Path], prof, arms: list[dict], reset: bool) -> int | None:
    """Add to each arm what memory knows of its health (set aside, cooling down); with ``reset``, forget
    all of it first and return how many entries went (None without ``reset``)."""
    from acr_cli.health.state import HealthBook

    try:
        mem = open_memory(memory, create=reset, read_only=not reset)
    except AcrError:
        if reset:
            raise
        return None  # a memory that cannot be read is reported below, with the other memory figures
    try:
        book = HealthBook(mem)
        forgotten = book.reset() if reset else None
        health = book.of(prof.arms)
    finally:
        mem.close()
    for a in arms:
        h = health.get(a["arm"])
        a["health"] = None if h is None else {"state": h.state, "reason": h.reason, "fix": h.fix,
                                              "until": h.until, "since": h.since, "text": h.describe(),
                                              "label": h.label()}
    return forgotten


def _any_runnable(arms: list[dict]) -> bool:
    counts = readiness_counts(arms)  # held arms are neither ready nor unknown there
    return counts["ready"] + counts["unknown"] > 0


def _memory_figures(memory: Optional[Path]) -> dict:
    """Counts and size of the memory, after a check that reads every page, so damage that opening the
    file does not reach shows here too (raised as MemoryFileError)."""
    mem = open_memory(memory, create=False, read_only=True)
    try:
        mem.check()
        return {**mem.counts(), "size_bytes": mem.size_bytes()}
    finally:
        mem.close()


def _shared_figures(url: str, p) -> dict:
    """A team's shared memory: the server, its latency and counts, and what the local file still has to upload."""
    from acr_cli.memory.team import latency_ms, open_team, pending

    try:
        team = open_team(url, p.local_copy(url))
    except MemoryFileError as e:
        from acr_cli.memory.postgres import masked

        return {"path": masked(url), "exists": True, "shared": True, "problem": e.message}
    try:
        info: dict = {"path": team.label, "exists": True, "shared": True, "local": str(p.local_copy(url)),
                      "pending": pending(team.local, team.label)}
        cached = team.local.db.execute("SELECT at FROM downloads WHERE target = ?", (team.label,)).fetchone()
        info["local_copy_at"] = cached[0] if cached else None
        if team.server is None:
            info["problem"] = team.offline
            return info
        server = team.server
        info["server_version"] = server.db.execute("SHOW server_version").fetchone()[0]
        info["latency_ms"] = round(latency_ms(server), 2)
        info.update(server.counts())
        info["size_bytes"] = server.size_bytes()
        return info
    finally:
        team.close()


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


def _run_checks(only: Optional[List[str]], found: dict, timeout: float, quiet: bool) -> list[dict]:
    from dataclasses import asdict

    from acr_cli.agents.selfcheck import check_agent, checkable
    known = checkable()
    names = list(only or [a for a in known if found.get(a, {}).get("found")])
    for n in names:
        if n not in known:
            raise AcrError(f"--agent {n!r}: --check knows {', '.join(known)}")
    out = []
    for n in names:
        if not quiet:
            echo(f"checking {n}...", err=True)
        out.append(asdict(check_agent(n, timeout=timeout)))
    return out


def problems(checks: Optional[list], mem_info: dict, arms: list[dict]) -> list[str]:
    """Why ``acr doctor`` exits 1 (empty: exit 0).

    With ``--check`` (``checks`` not None) only the checks count: a CLI acr did not understand, or no CLI
    to check. That question ("does acr still understand the installed CLIs?") is asked after an upgrade
    or in CI, where nothing need be logged in; the profile's readiness and the memory are still shown.
    Without it: a memory that cannot be read, no arm whose CLI is installed, or none ready or unknown."""
    if checks is not None:
        if not checks:
            return ["no agent CLI installed to check"]
        return [f"--check: acr did not understand {c['agent']}" for c in checks if not c["ok"]]
    out = []
    if mem_info.get("problem"):
        out.append(f"memory: {mem_info['problem']}")
    if not any(a["usable"] for a in arms):
        out.append("no arm of this profile is usable: no agent CLI of its arms is installed")
    elif not _any_runnable(arms):
        out.append("no arm of this profile is ready")
    return out


def _check_verdict(checks: list[dict]) -> str:
    """The last line of ``--check``: what its exit code says."""
    failed = [c["agent"] for c in checks if not c["ok"]]
    if not checks:
        return "[red]check failed[/]: nothing to check (exit 1)"
    if failed:
        return f"[red]check failed[/] for {', '.join(failed)} of {len(checks)} CLI(s) (exit 1)"
    return (f"[green]check passed[/]: acr understood all {len(checks)} CLI(s) (exit 0; whether an arm is "
            "logged in is the readiness above, not this check)")


def _exit_on_problems(found: list[str]) -> None:
    if found:
        raise Reported(EXIT_PROBLEMS)
