"""Every setting of ``config.toml`` and ``.acr.toml`` in one table: its type and what it means.

``acr config set --help``, the settings files' checks (acr_cli.config) and the error hints are made from it;
it imports nothing, so every command's ``--help`` can read it for free. What an untrusted project file may
set is acr_cli.trust's to say.
"""

from __future__ import annotations


class RaceCount:
    """The ``race`` setting's type: a whole number (arms at once) or the string ``auto`` / ``auto:M``."""


TYPE_NAMES = {int: "whole number", float: "number", str: "string", bool: "true or false",
              list: "list of strings", RaceCount: 'whole number, "auto" or "auto:M"'}

# key -> (type, what it means)
TABLE: dict[str, tuple[type, str]] = {
    "profile": (str, "the profile: a name (built-in or yours) or a YAML file"),
    "verify": (str, "command that checks an attempt (exit 0 = pass); \"\" runs none"),
    "timeout": (float, "seconds per attempt before the agent is killed"),
    "verify_timeout": (float, "seconds for the verifier"),
    "max_attempts": (int, "attempts per task at most"),
    "max_cost": (float, "USD a task may spend at most"),
    "permissions": (str, "what the agent may do: read-only, workspace-write or full"),
    # a file, or a team's postgresql:// URL (acr_cli.paths, acr_cli.memory.team)
    "memory": (str, "the memory: a SQLite file, or a team's postgresql:// URL"),
    # false: request texts and agents' answers stay in the local file (acr_cli.memory.team)
    "share_prompts": (bool, "whether a team's server receives request texts and answers"),
    # the verifier on the untouched tree (acr_cli.session)
    "baseline": (str, "the verifier on the untouched tree first: check, accept or off"),
    # an attempt that changes a matching path fails (acr_cli.checks.protected)
    "protect": (list, "globs of paths an attempt must not change"),
    # the agent and its verifier in bubblewrap (acr_cli.sandbox); an untrusted file may only turn it on
    "sandbox": (str, "bwrap: the agent and its verifier write only the work tree (Linux); none: no sandbox"),
    # the routing settings: acr_cli.routing_settings
    "arms": (list, "the only arms (AGENT:MODEL of the profile) routing may use"),
    "exclude": (list, "agents or arms (AGENT:MODEL) never to use"),
    "policy": (str, "routing policy, e.g. learned, fixed, cascade:A,B, always:ARM"),
    "time_weight": (float, "USD a minute of waiting is worth to the learned router"),
    # acr run --race (acr_cli.race)
    "race": (RaceCount, "arms acr run starts at once, each in its own worktree: N exactly (1: none), or auto "
                        "(auto:M): the plan chooses up to 3 (M)"),
    "race_copy": (list, "globs of ignored files copied into each race worktree, e.g. .env"),
    "race_lanes": (str, "auto: copy-on-write overlays where Linux allows, else worktrees; overlay; worktree"),
    "race_setup": (str, "command run in each race worktree before its agent, e.g. npm ci; \"\" runs none"),
}


def help_text() -> str:
    """The keys as ``acr config set --help`` lists them: one line each, with the value's type."""
    return "\n".join(f"{key}: {meaning} ({TYPE_NAMES[kind]})" for key, (kind, meaning) in TABLE.items())
