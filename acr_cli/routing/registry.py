"""Every routing policy by name: the one table behind ``--policy`` and a profile's ``policy:`` setting.

A policy is named as ``NAME`` or ``NAME:ARG`` (``always:codex:gpt-5.4``, ``cascade:A,B``); only
the first ``:`` separates, so an arm id may follow. Each entry says whether it takes an argument,
whether it needs the benchmark (its matrix, models or files: those replay only), where its
parameters come from, and how to build it. The same parser serves ``acr run``/``acr route``
``--policy``, a profile's ``settings.policy`` and ``acr bench replay --policy``; errors list the
names valid where the name was given.

A builder (:mod:`acr_cli.routing.builders`; the replay-only ones in :mod:`acr_cli.bench.policies`)
gets a ``Setup`` (the arms and settings of the run or replay) and the argument, and returns
``(label, factory)``: the factory makes a fresh policy for one stream of tasks from the memory and
scope it will read (a replay builds one per run; ``acr run`` one per task). Builders are imported
only when used: every command's ``--help`` reads this table, so it must cost nothing to import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Sequence

from acr_cli.errors import AcrError

if TYPE_CHECKING:
    from acr_cli.domain import Arm
    from acr_cli.memory.store import Memory
    from acr_cli.profiles import Profile
    from acr_cli.routing.base import Policy
    from acr_cli.routing.builders import Factory, Setup


class Entry:
    """One policy: its name, what it does, its argument's metavar ("" = takes none), why it cannot run
    live ("" = it can), whether it is CodeRouterBench's own, where a replay takes its parameters from,
    whether its choices depend on the seed, and ``module:function`` of its builder (imported on use)."""

    __slots__ = ("name", "help", "builder", "arg", "replay_only", "paper_only", "set_by", "seeded")

    def __init__(self, name: str, help: str, builder: str, *, arg: str = "", replay_only: str = "",
                 paper_only: bool = False, set_by: str = "", seeded: bool = False):
        self.name, self.help, self.builder, self.arg = name, help, builder, arg
        self.replay_only, self.paper_only, self.set_by, self.seeded = replay_only, paper_only, set_by, seeded

    @property
    def usage(self) -> str:
        return f"{self.name}:{self.arg}" if self.arg else self.name

    def build(self, setup: Setup, arg: str) -> tuple[str, Factory]:
        module, _, function = self.builder.partition(":")
        return getattr(importlib.import_module(module), function)(setup, arg)


_ONE = "one attempt per task (the bandit setting); "
POLICIES: dict[str, Entry] = {e.name: e for e in (
    Entry("learned", "acr's learned router: Bayesian estimates per context group, explores, escalates",
          "acr_cli.routing.builders:learned", set_by="priors come from --profile NAME; its draws' seed is --seed N",
          seeded=True),
    Entry("fixed", "the profile's order for the task's kind, until one passes", "acr_cli.routing.builders:fixed"),
    Entry("always", "always the same arm", "acr_cli.routing.builders:always", arg="ARM"),
    Entry("cascade", "these arms in this order, until one passes", "acr_cli.routing.builders:cascade", arg="A1,A2,..."),
    Entry("random", _ONE + "an arm uniformly at random", "acr_cli.routing.builders:random_choice", set_by="seed is --seed N",
          seeded=True),
    Entry("linucb", _ONE + "linear upper confidence bound on score - lambda x cost", "acr_cli.routing.builders:linucb"),
    Entry("lints", _ONE + "linear Thompson sampling on score - lambda x cost", "acr_cli.routing.builders:lints",
          set_by="seed is --seed N", seeded=True),
    Entry("knn", _ONE + "the best mean reward among the 10 most similar earlier tasks", "acr_cli.routing.builders:knn"),
    Entry("oracle", "the best single model in hindsight", "acr_cli.bench.policies:oracle",
          replay_only="it reads every outcome in hindsight"),
    Entry("acrouter", "the paper's OOD cascade with escalation to claude-opus-4-6",
          "acr_cli.bench.policies:acrouter", replay_only="it routes among the paper's models",
          paper_only=True, set_by="k is --k N"),
    Entry("map", "a group -> model map like the paper's ID router", "acr_cli.bench.policies:group_map",
          arg="FILE", replay_only="it maps the benchmark's task groups", paper_only=True),
    Entry("decisions", "another router's recorded decisions (JSONL)", "acr_cli.bench.policies:decisions",
          arg="FILE", replay_only="it reads decisions per benchmark task", paper_only=True),
    Entry("dimension-best", "per dimension, the best model on the probing split",
          "acr_cli.bench.policies:dimension_best", replay_only="it is fitted on the benchmark's probing split"),
)}


def usages(live: bool) -> list[str]:
    """The names valid where a policy is chosen, with their argument (``always:ARM``)."""
    return [e.usage for e in POLICIES.values() if not (live and e.replay_only)]


def help_text(live: bool) -> str:
    return ", ".join(usages(live))


def parse(spec: str, *, live: bool, option: str = "--policy") -> tuple[Entry, str]:
    """(entry, argument) for ``spec``, or an AcrError that lists the valid names."""
    name, colon, arg = spec.strip().partition(":")
    arg = arg.strip()
    entry = POLICIES.get(name.strip())
    valid = f"policies: {help_text(live)}"
    if entry is None:
        what = "".join(f"\n    {e.usage}: {e.help}" for e in POLICIES.values() if not (live and e.replay_only))
        raise AcrError(f"{option} {spec!r}: expected one of {help_text(live)}",
                       hint=f"unknown policy {name.strip()!r}; the policies (NAME:ARG where one takes an argument):{what}")
    if entry.arg and not arg:
        raise AcrError(f"{option} {spec!r}: {entry.name} needs an argument: {entry.usage}", hint=valid)
    if colon and not entry.arg:
        takes = [e.usage for e in POLICIES.values() if e.arg and not (live and e.replay_only)]
        takes = ", ".join(takes[:-1]) + " and " + takes[-1] if len(takes) > 1 else takes[0]
        raise AcrError(f"{option} {spec!r}: policy {entry.name} takes no argument",
                       hint=f"only {takes} take one"
                       + (f"; {entry.name}'s {entry.set_by}" if entry.set_by and not live else ""))
    if live and entry.replay_only:
        raise AcrError(f"{option} {spec!r}: {entry.name} replays on CodeRouterBench only ({entry.replay_only})",
                       hint=f"live: {help_text(True)}; replay it with `acr bench replay ood176 --policy {spec}`")
    return entry, arg


def build(spec: str, setup: Setup, *, option: str = "--policy") -> tuple[str, Factory]:
    """(label, factory) for one policy name, for a live run (``setup.live``) or a replay."""
    entry, arg = parse(spec, live=setup.live, option=option)
    if (setup.on_memory or setup.results) and entry.paper_only:
        where = "your memory" if setup.on_memory else "a results folder"
        raise AcrError(f"policy {entry.name} is CodeRouterBench's own (its models, its files): it replays on "
                       f"ood176 and id2919, not on {where}",
                       hint="on your memory: " + ", ".join(e.usage for e in POLICIES.values() if not e.paper_only))
    return entry.build(setup, arg)


def live_setup(profile: Profile) -> Setup:
    """A live run's setup: the profile's arms, its order for the task's kind and its settings."""
    from acr_cli.routing.builders import Setup

    s = profile.settings
    return Setup(arms=profile.arms, resolve=_profile_arm(profile), cost_weight=s.cost_weight,
                 prior_weight=s.prior_weight, typical_tokens=s.typical_tokens,
                 order=lambda ctx: profile.order_for(ctx.kind), profile=profile, live=True,
                 time_weight=s.time_weight)


def live_policy(profile: Profile, memory: Memory, *, arms: Sequence[str] | None = None,
                policy: str | None = None, scope: str = "live", option: str | None = None) -> Policy:
    """The policy of an ``acr run`` / ``acr route`` / ``memory show``: ``--arms`` (tried in that order),
    else ``policy`` (``--policy``, or a settings file's: ``option`` names it in errors), else the profile's
    ``policy`` setting."""
    from acr_cli.routing.fixed import FixedOrder

    if arms:
        return FixedOrder([profile.resolve_arm(a) for a in arms], why="--arms order")
    option = option or ("--policy" if policy else f"profile {profile.name}: settings.policy")
    _, make = build(policy or profile.settings.policy, live_setup(profile), option=option)
    return make(memory, scope)


def _profile_arm(profile: Profile) -> Callable[[str], Arm]:
    def resolve(text: str) -> Arm:
        found = profile.arm(text.strip())
        by_model = [a for a in profile.arms if a.model == text.strip()]
        if found is None and len(by_model) == 1:  # a model name one arm of the profile has
            found = by_model[0]
        if found is None:
            raise AcrError(f"{text.strip()!r} is not an arm of profile {profile.name}",
                           hint="arms: " + ", ".join(a.id for a in profile.arms))
        return found

    return resolve
