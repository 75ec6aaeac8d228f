"""Agent adapters: one per CLI (claude, codex, opencode) plus a generic ``command`` adapter.

``get(name, profile_agents)`` is the only way to obtain one; an unknown name is
an error that lists the valid names.
"""

from __future__ import annotations

from typing import Any

from acr_cli.agents.base import Adapter, AgentResult, Invocation
from acr_cli.errors import ConfigError

BUILTIN = ("claude", "codex", "opencode")


def get(name: str, profile_agents: dict[str, dict[str, Any]] | None = None) -> Adapter:
    if name == "claude":
        from acr_cli.agents.claude import ClaudeAdapter

        return ClaudeAdapter()
    if name == "codex":
        from acr_cli.agents.codex import CodexAdapter

        return CodexAdapter()
    if name == "opencode":
        from acr_cli.agents.opencode import OpencodeAdapter

        return OpencodeAdapter()
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
