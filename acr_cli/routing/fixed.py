"""Fixed orders: ``--arms`` exactly as given, or the profile's order for the task kind."""

from __future__ import annotations

from typing import Callable, Sequence

from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState
from acr_cli.routing.base import Policy, Ranked, untried


class FixedOrder(Policy):
    """Try arms in a fixed order until one passes."""

    name = "fixed"
    exhausted = "every arm in the order was tried"

    def __init__(self, order: Sequence[Arm] | Callable[[Context], Sequence[Arm]], why: str = "fixed order"):
        self._order = order
        self._why = why

    def arms_for(self, ctx: Context) -> list[Arm]:
        return list(self._order(ctx) if callable(self._order) else self._order)

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        arms = self.arms_for(ctx)
        left = untried(arms, state)
        if not left:
            return None
        pos = arms.index(left[0]) + 1
        return Decision(left[0], f"{self._why}: #{pos} of {len(arms)}", 0.0 if left[0].costs_nothing else None)

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        return [Ranked(a, cost=0.0 if a.costs_nothing else None, why=f"{self._why} #{i}")
                for i, a in enumerate(self.arms_for(ctx), 1)]
