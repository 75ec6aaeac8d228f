"""Every built-in agent CLI by name: the one table acr reads to know what an agent is.

Each entry names the module and class that own everything acr knows about that CLI: its argv and
output parsing, install and login hints, credential files and key variables, readiness check, error
patterns, self-check set-up and the provider its prices are looked up under (see
:class:`acr_cli.agents.base.Adapter`). Adding an agent is one module plus one line here. Classes are
imported only when used: ``--help`` and profile validation read the names only.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acr_cli.agents.base import Adapter

AGENTS: dict[str, str] = {
    "claude": "acr_cli.agents.claude:ClaudeAdapter",
    "codex": "acr_cli.agents.codex:CodexAdapter",
    "opencode": "acr_cli.agents.opencode:OpencodeAdapter",
    "gemini": "acr_cli.agents.gemini:GeminiAdapter",
}
NAMES = tuple(AGENTS)


def builtin(name: str) -> Adapter | None:
    """A fresh adapter of the built-in agent ``name``, or None when acr has none by that name."""
    cls = _class(name)
    return cls() if cls is not None else None


@lru_cache(maxsize=None)
def _class(name: str) -> type | None:
    path = AGENTS.get(name)
    if path is None:
        return None
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)


def agent(name: str) -> Adapter:
    """What acr knows about agent ``name``: its built-in adapter, else the generic defaults of
    :class:`~acr_cli.agents.base.Adapter` under that name (a profile's own ``agents:`` CLI)."""
    found = builtin(name)
    if found is not None:
        return found
    from acr_cli.agents.base import Adapter

    generic = Adapter()
    generic.name = generic.executable = name
    return generic
