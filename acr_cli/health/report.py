"""What ``acr doctor`` finds: installed agent CLIs, each arm's readiness and health, where things live, the
memory's figures and, on request, a check of each CLI against a local mock model API.

:func:`diagnose` gathers it all into a :class:`DoctorReport`; the command only renders it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from acr_cli.errors import AcrError, MemoryFileError
from acr_cli.memory.opening import open_memory
from acr_cli.paths import MemoryLocation


@dataclass
class DoctorReport:
    """Everything ``acr doctor`` shows; :meth:`as_json` is its ``--json`` object."""

    acr: dict
    agents: dict
    profile: dict  # name, path, arms (one dict each), readiness (counts)
    paths: dict
    memory: dict
    checks: list[dict] | None = None  # with --check
    health_reset: int | None = None  # with --reset: the health entries forgotten
    problems: list[str] | None = None  # why the command exits 1 (empty: exit 0)

    def as_json(self) -> dict:
        out = {"acr": self.acr, "agents": self.agents, "profile": self.profile, "paths": self.paths,
               "memory": self.memory}
        if self.checks is not None:
            out["checks"] = self.checks
        if self.health_reset is not None:
            out["health_reset"] = self.health_reset
        out["problems"] = self.problems or []
        return out


def diagnose(prof, settings, p, memory: Optional[str], *, refresh: bool = False,
             reset: bool = False, check: bool = False, only: Optional[List[str]] = None, timeout: float = 120.0,
             on_check: Callable[[str], None] | None = None) -> DoctorReport:
    """The report for profile ``prof`` (with its ``settings``) and paths ``p``: ``memory`` is the --memory
    choice; ``reset`` forgets arm health first; ``check`` runs the CLIs (``only`` these) against the mock
    API, calling ``on_check(name)`` before each."""
    from acr_cli import __version__
    from acr_cli.agents import BUILTIN
    from acr_cli.memory.db import SCHEMA_VERSION

    found = agent_versions(list(BUILTIN) + sorted(prof.agents), prof.agents, cache_dir=p.cache_dir, refresh=refresh)
    arms = arm_readiness(prof, p.cache_dir, refresh=refresh)
    location = p.memory_choice(memory)
    # arm health is this machine's: with a team's server, the local file's (named: it must exist to be read)
    health_at = MemoryLocation(p.local_copy(location), source="the team's local copy") if location.is_server \
        else location
    forgotten = _arm_health(health_at, prof, arms, reset)
    mem_info = _shared_figures(location, p) if location.is_server else _local_figures(location)
    checks = _run_checks(only, found, timeout, on_check) if check else None
    return DoctorReport(
        acr={"version": __version__, "memory_schema": SCHEMA_VERSION},
        agents=found,
        profile={"name": prof.name, "path": str(prof.path), "arms": arms, "readiness": readiness_counts(arms)},
        paths={"config": str(p.config_dir), "data": str(p.data_dir), "cache": str(p.cache_dir),
               "logs": str(p.logs_dir), "profiles": str(p.profiles_dir), "resolved_from": p.source,
               "project_config": str(settings.project_file) if settings.project_file else None},
        memory=mem_info, checks=checks, health_reset=forgotten, problems=problems(checks, mem_info, arms))


def _local_figures(location: MemoryLocation) -> dict:
    """A memory file: where it is, whether it exists, its figures, or what is wrong with it (a broken memory
    is one more finding, not the end of the diagnosis)."""
    info: dict = {"path": str(location.path), "exists": location.path.exists()}
    if info["exists"]:
        try:
            info.update(_memory_figures(location))
        except MemoryFileError as e:
            info["problem"] = e.message + (f" ({e.hint})" if e.hint else "")
    return info


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


def _arm_health(location: MemoryLocation, prof, arms: list[dict], reset: bool) -> int | None:
    """Add to each arm what memory knows of its health (set aside, cooling down); with ``reset``, forget
    all of it first and return how many entries went (None without ``reset``)."""
    from acr_cli.health.state import HealthBook

    try:
        mem = open_memory(location, create=reset, read_only=not reset)
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


def any_runnable(arms: list[dict]) -> bool:
    """Is any arm ready or unknown (and so tried)?"""
    counts = readiness_counts(arms)  # held arms are neither ready nor unknown there
    return counts["ready"] + counts["unknown"] > 0


def _memory_figures(location: MemoryLocation) -> dict:
    """Counts and size of the memory, after a check that reads every page, so damage that opening the
    file does not reach shows here too (raised as MemoryFileError)."""
    mem = open_memory(location, create=False, read_only=True)
    try:
        mem.check()
        return {**mem.counts(), "size_bytes": mem.size_bytes()}
    finally:
        mem.close()


def _shared_figures(location: MemoryLocation, p) -> dict:
    """A team's shared memory: the server, its latency and counts, and what the local file still has to upload."""
    from acr_cli.memory.team import latency_ms, open_team, server_version

    try:
        team = open_team(location.target, p.local_copy(location))
    except MemoryFileError as e:
        return {"path": location.label, "exists": True, "shared": True, "problem": e.message}
    try:
        info: dict = {"path": team.label, "exists": True, "shared": True, "local": str(p.local_copy(location)),
                      "pending": team.pending()}
        info["local_copy_at"] = team.copied_at()
        if team.server is None:
            info["problem"] = team.offline
            return info
        server = team.server
        info["server_version"] = server_version(server)
        info["latency_ms"] = round(latency_ms(server), 2)
        info.update(server.counts())
        info["size_bytes"] = server.size_bytes()
        return info
    finally:
        team.close()


def _run_checks(only: Optional[List[str]], found: dict, timeout: float,
                on_check: Callable[[str], None] | None) -> list[dict]:
    """Each chosen CLI (by default each installed one acr can check) run against the mock API; an unknown
    name is a usage error, raised before any runs."""
    from dataclasses import asdict

    from acr_cli.agents.selfcheck import check_agent, checkable
    known = checkable()
    names = list(only or [a for a in known if found.get(a, {}).get("found")])
    for n in names:
        if n not in known:
            raise AcrError(f"--agent {n!r}: --check knows {', '.join(known)}")
    out = []
    for n in names:
        if on_check is not None:
            on_check(n)
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
    elif not any_runnable(arms):
        out.append("no arm of this profile is ready")
    return out
