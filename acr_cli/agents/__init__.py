"""Agent adapters: one module per CLI, listed in :mod:`acr_cli.agents.registry`, plus a generic ``command``
adapter for a CLI a profile describes under ``agents:``.

``get(name, profile_agents)`` is the only way to obtain one; an unknown name is
an error that lists the valid names.
"""

from __future__ import annotations

from typing import Any

from acr_cli.agents import registry
from acr_cli.agents.base import Adapter, AgentResult, Invocation
from acr_cli.errors import ConfigError

BUILTIN = registry.NAMES


def get(name: str, profile_agents: dict[str, dict[str, Any]] | None = None) -> Adapter:
    found = registry.builtin(name)
    if found is not None:
        return found
    if profile_agents and name in profile_agents:
        from acr_cli.agents.command import CommandAdapter

        return CommandAdapter(name, profile_agents[name])
    valid = ", ".join(list(BUILTIN) + sorted(profile_agents or {}))
    raise ConfigError(f"unknown agent {name!r}", hint=f"valid agents: {valid} (add others under `agents:` in a profile)")


def unavailable(name: str, profile_agents: dict[str, dict[str, Any]] | None = None) -> str | None:
    """Why agent ``name`` cannot run here (unknown to the profile, or its CLI not on PATH), or None."""
    import shutil

    try:
        adapter = get(name, profile_agents)
    except ConfigError as e:
        return e.message
    if shutil.which(adapter.executable) is None:
        return f"`{adapter.executable}` is not installed (not found on PATH)"
    return None


__all__ = ["Adapter", "AgentResult", "Invocation", "get", "unavailable", "BUILTIN"]
