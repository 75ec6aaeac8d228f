"""The builders of the policies that run live as well as in a replay (see :mod:`acr_cli.routing.registry`).

A builder gets a :class:`Setup` and the policy's argument and returns ``(label, factory)``; the
factory makes a fresh policy for one stream of tasks from the memory and scope it will read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from acr_cli.errors import AcrError
from acr_cli.memory.aggregates import GroupCache, first_attempts
from acr_cli.routing import bandits
from acr_cli.routing.base import Policy
from acr_cli.routing.fixed import FixedOrder
from acr_cli.routing.learned import LearnedPolicy
from acr_cli.routing.single import Always, RandomChoice

if TYPE_CHECKING:
    from acr_cli.domain import Arm
    from acr_cli.memory.store import Memory
    from acr_cli.profiles import Profile

Factory = Callable[["Memory", str], Policy]


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
    time_weight: float = 0.0  # USD a minute of waiting is worth (the learned policy's plan)
    results: bool = False  # a replay of a results folder (anyone's matrix, not CodeRouterBench)


def catalog_prices(arms: Sequence[Arm]) -> list[tuple[float, float] | None]:
    """Per arm with no price of its own, the price catalog's (USD per 1M input, output tokens), else None.
    The catalog is read only when some arm lacks a price (it costs about 0.15 s to load)."""
    out: list[tuple[float, float] | None] = [None] * len(arms)
    if all(a.price_in is not None and a.price_out is not None for a in arms):
        return out
    from acr_cli.pricing import catalog_price

    for i, a in enumerate(arms):
        if a.price_in is None or a.price_out is None:
            pin, pout = catalog_price(a.agent, a.model, 1_000_000, 0), catalog_price(a.agent, a.model, 0, 1_000_000)
            if pin is not None and pout is not None:
                out[i] = (pin, pout)
    return out



def learned(setup: Setup, arg: str) -> tuple[str, Factory]:
    prices = catalog_prices(setup.arms) if setup.live else None

    def make(memory: Memory, scope: str) -> Policy:
        return LearnedPolicy(setup.arms, GroupCache(memory, scope), cost_weight=setup.cost_weight,
                             prior_weight=setup.prior_weight, tie_order=setup.order,
                             typical_tokens=setup.typical_tokens, prices=prices, seed=setup.seed,
                             time_weight=setup.time_weight, say_exploring=setup.live)

    return "learned", make


def fixed(setup: Setup, arg: str) -> tuple[str, Factory]:
    order = setup.order or (lambda ctx: list(setup.arms))
    why = "profile order" if setup.order else "benchmark order"
    return "fixed", lambda memory, scope: FixedOrder(order, why=why)


def always(setup: Setup, arg: str) -> tuple[str, Factory]:
    arm = setup.resolve(arg)
    return f"always:{arm.model}", lambda memory, scope: Always(arm)


def random_choice(setup: Setup, arg: str) -> tuple[str, Factory]:
    return "random", lambda memory, scope: RandomChoice(setup.arms, setup.seed)


def cascade(setup: Setup, arg: str) -> tuple[str, Factory]:
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


def bandit(cls_name: str) -> Callable[[Setup, str], tuple[str, Factory]]:
    """The builder of a contextual bandit, warmed from memory (:func:`acr_cli.routing.bandits.warm`)."""
    def build(setup: Setup, arg: str) -> tuple[str, Factory]:
        cls = getattr(bandits, cls_name)

        def make(memory: Memory, scope: str) -> Policy:
            extra = {"seed": setup.seed} if cls is bandits.LinTS else {}
            return bandits.warm(cls(setup.arms, setup.cost_weight, **extra), first_attempts(memory, scope))

        return cls.name, make

    return build


linucb, lints, knn = bandit("LinUCB"), bandit("LinTS"), bandit("KNN")
