"""Build the policy for a live run from the profile, the command line and memory."""

from __future__ import annotations

from typing import Sequence

from acr_cli.memory.aggregates import GroupCache
from acr_cli.memory.store import Memory
from acr_cli.profiles import Profile
from acr_cli.routing.base import Policy
from acr_cli.routing.fixed import FixedOrder
from acr_cli.routing.learned import LearnedPolicy


def live_policy(profile: Profile, memory: Memory, *, arms: Sequence[str] | None = None,
                policy: str | None = None, scope: str = "live") -> Policy:
    if arms:
        return FixedOrder([profile.resolve_arm(a) for a in arms], why="--arms order")
    name = policy or profile.settings.policy
    if name == "fixed":
        return FixedOrder(lambda ctx: profile.order_for(ctx.kind), why="profile order")
    return LearnedPolicy(profile.arms, GroupCache(memory, scope), cost_weight=profile.settings.cost_weight,
                         prior_weight=profile.settings.prior_weight, tie_order=lambda ctx: profile.order_for(ctx.kind),
                         typical_tokens=profile.settings.typical_tokens)
