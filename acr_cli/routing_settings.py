"""A project's routing settings (``arms``, ``exclude``, ``policy``, ``time_weight``) applied to the profile.

``acr run`` and ``acr route`` both route with :func:`apply`'s result, so they never disagree about which arms
a project may use. How each setting combines (the command line first, then a trusted ``.acr.toml``, the
user's ``config.toml``, the profile):

* ``--arms`` names exactly the arms to try: ``arms`` and ``exclude`` from files do not apply to it;
* ``arms``: the only arms of the profile routing may use; the highest source that sets it wins (an untrusted
  project file may not set it: acr_cli.trust.TRUSTED_ONLY);
* ``exclude``: agents (``claude``) or arms (``codex:gpt-5.4``) never to use. It only takes arms away, so the
  lists of ``config.toml`` and ``.acr.toml`` add up, and an untrusted project file's counts too;
* ``policy`` and ``time_weight``: the highest source wins (``--policy`` over the files over the profile).

An item of ``arms`` or ``exclude`` that names neither an arm of the profile nor (for ``exclude``) an agent acr
knows is an error naming the file and the key: a typo must not leave an arm in that was meant to be out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from acr_cli.config import Settings
from acr_cli.errors import AcrError, ConfigError
from acr_cli.profiles import BUILTIN_AGENTS, Profile
from acr_cli.routing import registry


@dataclass(frozen=True)
class Routing:
    """The profile narrowed to the arms this project may use, with the policy to route them by."""

    profile: Profile
    policy: str | None = None  # the policy to build; None: the profile's own (or --arms)
    policy_option: str | None = None  # how errors name where ``policy`` came from
    excluded: dict[str, str] = field(default_factory=dict)  # arm id -> the setting that took it out


def apply(profile: Profile, settings: Settings, *, cli_arms: list[str] | None = None,
          cli_policy: str | None = None) -> Routing:
    """The arms, policy and time weight a run or a route in this project uses (see the module docstring)."""
    if cli_arms:  # exactly these, as asked
        return Routing(profile, cli_policy, "--policy" if cli_policy else None)
    excluded = _not_in_arms(profile, settings)
    for arm_id, why in _excluded(profile, settings).items():
        excluded.setdefault(arm_id, why)
    kept = tuple(a for a in profile.arms if a.id not in excluded)
    if not kept:
        raise ConfigError(f"no arm of profile {profile.name} is left to use: "
                          + "; ".join(dict.fromkeys(excluded.values())),
                          hint="name at least one of its arms there: " + ", ".join(a.id for a in profile.arms))
    policy, source = settings.resolve("policy", cli_policy, None)
    time_weight, _ = settings.resolve("time_weight", None, profile.settings.time_weight)
    ids = {a.id for a in kept}
    order = {kind: tuple(i for i in listed if i in ids) for kind, listed in profile.order.items()}
    narrowed = replace(profile, arms=kept, order=order,
                       settings=replace(profile.settings, policy=policy or profile.settings.policy,
                                        time_weight=float(time_weight)))
    option = None if policy is None else ("--policy" if source == "command line" else f"policy (from {source})")
    _check_policy_arms(policy or profile.settings.policy, option or f"profile {profile.name}: settings.policy",
                       excluded)
    return Routing(narrowed, policy, option, excluded)


def _not_in_arms(profile: Profile, settings: Settings) -> dict[str, str]:
    """Arms left out by the ``arms`` setting (arm id -> why), after checking each item names an arm."""
    chosen, source = settings.resolve("arms")
    if chosen is None:
        return {}
    for item in chosen:
        if profile.arm(item.strip()) is None:
            raise ConfigError(f"{source}: arms: {item!r} is not an arm of profile {profile.name}",
                              hint="its arms: " + ", ".join(a.id for a in profile.arms))
    wanted = {item.strip() for item in chosen}
    return {a.id: f"arms ({source}), which does not list it" for a in profile.arms if a.id not in wanted}


def _excluded(profile: Profile, settings: Settings) -> dict[str, str]:
    """Arms ``exclude`` takes out (arm id -> why): the user's list and the project's, both."""
    agents = set(BUILTIN_AGENTS) | set(profile.agents)
    out: dict[str, str] = {}
    for values, source in ((settings.project.get("exclude"), settings.project_file),
                           (settings.user.get("exclude"), settings.user_file)):
        for item in (x.strip() for x in values or ()):
            if item in agents:
                hit = [a.id for a in profile.arms if a.agent == item]
            elif profile.arm(item) is not None:
                hit = [item]
            else:
                raise ConfigError(f"{source}: exclude: {item!r} is neither an agent ({', '.join(sorted(agents))}) "
                                  f"nor an arm of profile {profile.name}",
                                  hint="its arms: " + ", ".join(a.id for a in profile.arms))
            for arm_id in hit:
                out.setdefault(arm_id, f"exclude = {item!r} ({source})")
    return out


def _check_policy_arms(spec: str, option: str, excluded: dict[str, str]) -> None:
    """A policy that names arms (``always:ARM``, ``cascade:A,B``) may not name one the settings took out."""
    if not excluded:
        return
    entry, arg = registry.parse(spec, live=True, option=option)
    if not entry.arg:
        return
    for arm_id in (x.strip() for x in arg.split(",")):
        if arm_id in excluded:
            raise AcrError(f"{option} {spec!r} names {arm_id}, which this project does not use: {excluded[arm_id]}",
                           hint=f"`--arms {arm_id}` runs it anyway; or change the setting")
