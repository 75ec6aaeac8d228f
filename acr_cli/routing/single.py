"""Policies that pick one arm per task and stop: ``always:ARM``, ``random``, and the base of the bandits.

One action per task is the bandit setting of the paper's baselines (and of ID2919's ``single``
protocol). Live, such a policy makes one attempt; if it fails, the task ends (``learned``, ``fixed``
and ``cascade`` escalate). An arm that cannot run here (not installed, not logged in, cooling down)
is never picked twice: the loop marks it excluded and the policy chooses among the others.
"""

from __future__ import annotations

import random
from typing import AbstractSet, Sequence

from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState
from acr_cli.routing.base import Policy, Ranked


class SingleAction(Policy):
    """Base for policies that pick one arm per task."""

    exhausted = "this policy makes one attempt per task"

    def choose(self, ctx: Context, avoid: AbstractSet[str] = frozenset()) -> tuple[Arm, str] | None:
        """The arm for ``ctx`` (never one whose id is in ``avoid``) and why, or None."""
        raise NotImplementedError

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        if state.tried:
            return None
        picked = self.choose(ctx, state.excluded)
        if picked is None or picked[0].id in state.excluded:
            return None
        return Decision(picked[0], picked[1])

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        picked = self.choose(ctx, state.excluded if state else frozenset())
        return [Ranked(picked[0], why=picked[1])] if picked else []


class Always(SingleAction):
    def __init__(self, arm: Arm):
        self.arm = arm
        self.name = f"always:{arm.model}"

    def choose(self, ctx, avoid=frozenset()):
        return (self.arm, "always") if self.arm.id not in avoid else None


class RandomChoice(SingleAction):
    name = "random"

    def __init__(self, arms: Sequence[Arm], seed: int | None):
        self.arms = list(arms)
        self.rng = random.Random(seed)  # None (live): a fresh seed each run

    def choose(self, ctx, avoid=frozenset()):
        arms = [a for a in self.arms if a.id not in avoid]
        return (self.rng.choice(arms), "uniformly at random") if arms else None
