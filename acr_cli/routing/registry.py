"""Every routing policy by name: the one table behind ``--policy`` and a profile's ``policy:`` setting.

A policy is named as ``NAME`` or ``NAME:ARG`` (``always:codex:gpt-5.4``, ``cascade:A,B``); only
the first ``:`` separates, so an arm id may follow. Each entry says whether it takes an argument,
whether it needs the benchmark (its matrix, models or files: those replay only), where its
parameters come from, and how to build it. The same parser serves ``acr run``/``acr route``
``--policy``, a profile's ``settings.policy`` and ``acr bench replay --policy``; errors list the
names valid where the name was given.

A builder gets a :class:`Setup` (the arms and settings of the run or replay) and the argument,
and returns ``(label, factory)``: the factory makes a fresh policy for one stream of tasks from
the memory and scope it will read (a replay builds one per run; ``acr run`` one per task). The
replay-only builders live in :mod:`acr_cli.bench.policies` and are imported only when used, so
reading this table costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from acr_cli.errors import AcrError

if TYPE_CHECKING:
    from acr_cli.domain import Arm
    from acr_cli.memory.store import Memory
    from acr_cli.profiles import Profile
    from acr_cli.routing.base import Policy

Factory = Callable[["Memory", str], "Policy"]


@dataclass
class Setup:
    """What a builder may use. ``matrix``/``data_dir`` are set in a replay of CodeRouterBench only."""

    arms: Sequence[Arm]  # every arm, in the profile's (or the benchmark's) order
    resolve: Callable[[str], Arm]  # a name the user typed -> the arm (raises AcrError)
    cost_weight: float = 0.1
    prior_weight: float = 2.0
    typical_tokens: float | None = None
    order: Callable[[Any], Sequence[Arm]] | None = None  # ctx -> arms in the profile's order for its kind
    seed: int | None = None  # None: a fresh seed (live)
    k: int = 2
    profile: Profile | None = None
    matrix: Any = None  # acr_cli.bench.matrix.Matrix
    arm_of: dict[str, Arm] = field(default_factory=dict)  # benchmark model -> arm (replay)
    data_dir: Path | None = None
    live: bool = False
    on_memory: bool = False  # a replay of your own memory (not CodeRouterBench)


@dataclass(frozen=True)
class Entry:
    name: str
    help: str
    build: Callable[[Setup, str], tuple[str, Factory]]
    arg: str = ""  # the argument's metavar ("ARM", "A1,A2,..."); "" = takes none
    replay_only: str = ""  # why it cannot run live (it reads the benchmark); "" = usable live
    paper_only: bool = False  # CodeRouterBench's own models or files: not on a replay of your memory
    set_by: str = ""  # where a replay takes its parameters from, for the error when an argument is given
    seeded: bool = False  # its choices depend on the seed (a replay of N orders reseeds it per order)

    @property
    def usage(self) -> str:
        return f"{self.name}:{self.arg}" if self.arg else self.name


def _lazy(module: str, function: str) -> Callable[[Setup, str], tuple[str, Factory]]:
    def build(setup: Setup, arg: str) -> tuple[str, Factory]:
        return getattr(importlib.import_module(module), function)(setup, arg)

    return build


# --------------------------------------------------------------------------- the policies usable live


def _learned(setup: Setup, arg: str) -> tuple[str, Factory]:
    from acr_cli.memory.aggregates import GroupCache
    from acr_cli.routing.learned import LearnedPolicy

    def make(memory: Memory, scope: str) -> Policy:
        return LearnedPolicy(setup.arms, GroupCache(memory, scope), cost_weight=setup.cost_weight,
                             prior_weight=setup.prior_weight, tie_order=setup.order,
                             typical_tokens=setup.typical_tokens)

    return "learned", make


def _fixed(setup: Setup, arg: str) -> tuple[str, Factory]:
    from acr_cli.routing.fixed import FixedOrder

    order = setup.order or (lambda ctx: list(setup.arms))
    why = "profile order" if setup.order else "benchmark order"
    return "fixed", lambda memory, scope: FixedOrder(order, why=why)


def _always(setup: Setup, arg: str) -> tuple[str, Factory]:
    from acr_cli.routing.single import Always

    arm = setup.resolve(arg)
    return f"always:{arm.model}", lambda memory, scope: Always(arm)


def _random(setup: Setup, arg: str) -> tuple[str, Factory]:
    from acr_cli.routing.single import RandomChoice

    return "random", lambda memory, scope: RandomChoice(setup.arms, setup.seed)


def _cascade(setup: Setup, arg: str) -> tuple[str, Factory]:
    from acr_cli.routing.fixed import FixedOrder

    names = [m.strip() for m in arg.split(",")]
    if "" in names:
        raise AcrError(f"policy cascade:{arg}: a name is empty", hint="cascade:ARM1,ARM2,... with no empty entries")
    chain = [setup.resolve(m) for m in names]
    repeated = sorted({a.id if setup.live else a.model for a in chain if chain.count(a) > 1})
    if repeated:
        again = "" if setup.live else " (a benchmark cell cannot change on a second try)"
        raise AcrError(f"policy cascade:{arg}: {', '.join(repeated)} appears twice{again}", hint="name each arm once")
    label = "cascade:" + ",".join(a.id if setup.live else a.model for a in chain)

    def make(memory: Memory, scope: str) -> Policy:
        policy = FixedOrder(chain, why="cascade")
        policy.name = label
        return policy

    return label, make


def _bandit(cls_name: str) -> Callable[[Setup, str], tuple[str, Factory]]:
    def build(setup: Setup, arg: str) -> tuple[str, Factory]:
        from acr_cli.memory.aggregates import first_attempts
        from acr_cli.routing import bandits

        cls = getattr(bandits, cls_name)

        def make(memory: Memory, scope: str) -> Policy:
            extra = {"seed": setup.seed} if cls is bandits.LinTS else {}
            return bandits.warm(cls(setup.arms, setup.cost_weight, **extra), first_attempts(memory, scope))

        return cls.name, make

    return build


_ONE = "one attempt per task (the bandit setting); "
POLICIES: dict[str, Entry] = {e.name: e for e in (
    Entry("learned", "acr's learned router: Bayesian estimates per context group, escalates", _learned,
          set_by="priors come from --profile NAME"),
    Entry("fixed", "the profile's order for the task's kind, until one passes", _fixed),
    Entry("always", "always the same arm", _always, arg="ARM"),
    Entry("cascade", "these arms in this order, until one passes", _cascade, arg="A1,A2,..."),
    Entry("random", _ONE + "an arm uniformly at random", _random, set_by="seed is --seed N",
          seeded=True),
    Entry("linucb", _ONE + "linear upper confidence bound on score - lambda x cost", _bandit("LinUCB")),
    Entry("lints", _ONE + "linear Thompson sampling on score - lambda x cost", _bandit("LinTS"),
          set_by="seed is --seed N", seeded=True),
    Entry("knn", _ONE + "the best mean reward among the 10 most similar earlier tasks", _bandit("KNN")),
    Entry("oracle", "the best single model in hindsight", _lazy("acr_cli.bench.policies", "oracle"),
          replay_only="it reads every outcome in hindsight"),
    Entry("acrouter", "the paper's OOD cascade with escalation to claude-opus-4-6",
          _lazy("acr_cli.bench.policies", "acrouter"), replay_only="it routes among the paper's models",
          paper_only=True, set_by="k is --k N"),
    Entry("map", "a group -> model map like the paper's ID router", _lazy("acr_cli.bench.policies", "group_map"),
          arg="FILE", replay_only="it maps the benchmark's task groups", paper_only=True),
    Entry("decisions", "another router's recorded decisions (JSONL)", _lazy("acr_cli.bench.policies", "decisions"),
          arg="FILE", replay_only="it reads decisions per benchmark task", paper_only=True),
    Entry("dimension-best", "per dimension, the best model on the probing split",
          _lazy("acr_cli.bench.policies", "dimension_best"), replay_only="it is fitted on the benchmark's probing split"),
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
        raise AcrError(f"{option} {spec!r}: expected one of {help_text(live)}",
                       hint=f"unknown policy {name.strip()!r} (a policy that takes an argument is NAME:ARG)")
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
    if setup.on_memory and entry.paper_only:
        raise AcrError(f"policy {entry.name} is CodeRouterBench's own (its models, its files): it replays on "
                       "ood176 and id2919, not on your memory",
                       hint="on your memory: " + ", ".join(e.usage for e in POLICIES.values() if not e.paper_only))
    return entry.build(setup, arg)


def live_setup(profile: Profile) -> Setup:
    """A live run's setup: the profile's arms, its order for the task's kind and its settings."""
    s = profile.settings
    return Setup(arms=profile.arms, resolve=_profile_arm(profile), cost_weight=s.cost_weight,
                 prior_weight=s.prior_weight, typical_tokens=s.typical_tokens,
                 order=lambda ctx: profile.order_for(ctx.kind), profile=profile, live=True)


def live_policy(profile: Profile, memory: Memory, *, arms: Sequence[str] | None = None,
                policy: str | None = None, scope: str = "live") -> Policy:
    """The policy of an ``acr run`` / ``acr route`` / ``memory show``: ``--arms`` (tried in that order),
    else ``--policy``, else the profile's ``policy`` setting."""
    from acr_cli.routing.fixed import FixedOrder

    if arms:
        return FixedOrder([profile.resolve_arm(a) for a in arms], why="--arms order")
    option = "--policy" if policy else f"profile {profile.name}: settings.policy"
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
