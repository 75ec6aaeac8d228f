"""The learned policy (first version): hierarchical Beta posteriors, cost-aware ordering.

For each arm, the posterior mean score is built top-down along the context's
groups (coarse to fine): the profile's prior mean (pseudo-count
``prior_weight``) is updated with the coarsest group's attempts; that
posterior mean becomes the prior of the next group with pseudo-count
``CHILD_WEIGHT``; and so on. Expected cost is shrunk the same way from the
price-based guess. The next arm is the untried one with the best
``mean - lambda * cost``; the loop stops when the best remaining expected gain
no longer pays for its expected cost.
"""

from __future__ import annotations

from typing import Callable, Sequence

from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState
from acr_cli.memory.store import ArmStats
from acr_cli.routing.base import Policy, Ranked, Stats, untried

DEFAULT_PRIOR = 0.5  # no prior in the profile: maximal uncertainty about the pass rate
CHILD_WEIGHT = 4.0  # pseudo-count a parent group's estimate carries into a child group
DEFAULT_TOKENS = (100_000, 5_000)  # an agentic coding session's tokens (in, out) before any is observed


class LearnedPolicy(Policy):
    name = "learned"

    def __init__(self, arms: Sequence[Arm], stats: Stats, *, cost_weight: float = 0.1, prior_weight: float = 2.0,
                 tie_order: Callable[[Context], Sequence[Arm]] | None = None):
        self.arms = list(arms)
        self.stats = stats
        self.cost_weight = cost_weight
        self.prior_weight = prior_weight
        self.tie_order = tie_order

    # ------------------------------------------------------------------ estimates

    def estimate(self, ctx: Context, arm: Arm, levels: list[dict[str, ArmStats]]) -> Ranked:
        prior = arm.prior_for(ctx.kind)
        mean = DEFAULT_PRIOR if prior is None else prior
        weight = self.prior_weight if arm.prior_weight is None else arm.prior_weight
        guess = arm.price(*DEFAULT_TOKENS)
        cost = guess
        n_finest = 0
        alpha, beta = mean * weight, (1 - mean) * weight
        for i, level in enumerate(levels):
            s = level.get(arm.id)
            w = weight if i == 0 else CHILD_WEIGHT
            n = s.n_judged if s else 0
            total = s.score_sum if s else 0.0
            alpha, beta = mean * w + total, (1 - mean) * w + (n - total)
            mean = alpha / (alpha + beta) if alpha + beta > 0 else mean
            if s and s.n_cost:
                cost = (s.cost_sum + (cost if cost is not None else s.mean_cost) * CHILD_WEIGHT) / (s.n_cost + CHILD_WEIGHT) \
                    if cost is not None else s.mean_cost
            if s and s.n:
                n_finest = s.n
        reward = mean - self.cost_weight * (cost or 0.0)
        why = f"prior {'%.2f' % prior if prior is not None else 'none'}"
        if n_finest:
            why += f", {n_finest} attempts in memory"
        return Ranked(arm, mean, cost, reward, n_finest, why, alpha, beta)

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        levels = self.stats.get(ctx.groups)
        ranked = [self.estimate(ctx, a, levels) for a in self.arms]
        pos = {a.id: i for i, a in enumerate(self.tie_order(ctx) if self.tie_order else self.arms)}
        ranked.sort(key=lambda r: (-(r.reward or 0.0), pos.get(r.arm.id, len(pos))))
        return ranked

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        left = {a.id for a in untried(self.arms, state)}
        ranked = [r for r in self.rank(ctx, state) if r.arm.id in left]
        if not ranked:
            return None
        best = ranked[0]
        if state.tried:
            gain = (best.mean or 0.0) * (1.0 - state.best_score)
            if gain <= self.cost_weight * (best.cost or 0.0):
                return None
        return Decision(best.arm, f"best expected reward {best.reward:+.3f} (score {best.mean:.2f}, "
                                  f"~${best.cost or 0:.2f}; {best.why})", best.cost)
