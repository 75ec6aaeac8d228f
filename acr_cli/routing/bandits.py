"""Online contextual bandits: ``linucb``, ``lints``, ``knn`` (one action per task).

The paper describes these baselines and publishes no code for them; these are acr's
implementations. Reward = score - lambda x cost of the task's one (first) attempt. Linear
models: one-hot features of the two coarsest context groups plus a bias; LinUCB alpha = 1.0,
ridge 1.0; LinTS v = 0.35, ridge 1.0 (the values recorded in the paper's released LinTS
decisions). kNN: the k = 10 most similar earlier tasks, where similarity is the finest context
group shared (then the most recent first); an arm never tried yet is tried first.

They learn in the process that drives them (``task_done`` after each task). A live ``acr run`` is
a new process per task, so :func:`warm` first feeds them what memory holds: the first attempt of
each of the scope's newest finished tasks (the same window the learned policy reads). Only
attempts whose verdict judges the arm (passed, failed, timeout) teach them; an error or a cancel
says nothing about the arm's skill. A replay starts from an empty scope, so there it changes
nothing.
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from acr_cli.context import Context
from acr_cli.domain import JUDGED, Arm, TaskState
from acr_cli.routing.single import SingleAction


class Bandit(SingleAction):
    """A single-action policy that learns from each finished task's first attempt."""

    def __init__(self, arms: Sequence[Arm], cost_weight: float):
        self.arms = list(arms)
        self.cost_weight = cost_weight
        self._known = {a.id for a in self.arms}

    def observe(self, groups: Sequence[str], arm_id: str, reward: float) -> None:
        raise NotImplementedError

    def task_done(self, ctx: Context, state: TaskState) -> None:
        if not state.tried:
            return
        fb = state.tried[0]
        if fb.verdict in JUDGED and fb.arm.id in self._known:
            self.observe(ctx.groups, fb.arm.id, (fb.score or 0.0) - self.cost_weight * (fb.cost_usd or 0.0))


def warm(policy: Bandit, history: Sequence[tuple[Sequence[str], str, float, float]]) -> Bandit:
    """Feed ``policy`` earlier tasks, oldest first: (groups, arm id, score, cost) of each first attempt."""
    for groups, arm_id, score, cost in history:
        if arm_id in policy._known:
            policy.observe(groups, arm_id, score - policy.cost_weight * cost)
    return policy


class _Linear(Bandit):
    """Per-arm ridge regression of reward on one-hot context features (Sherman-Morrison updates)."""

    def __init__(self, arms: Sequence[Arm], cost_weight: float, ridge: float = 1.0):
        super().__init__(arms, cost_weight)
        self.ridge = ridge
        self.index: dict[str, int] = {"bias": 0}
        self.inv: dict[str, list[list[float]]] = {a.id: [[1.0 / ridge]] for a in self.arms}  # A^-1
        self.b: dict[str, list[float]] = {a.id: [0.0] for a in self.arms}

    def _features(self, groups: Sequence[str]) -> list[int]:
        idx = [0]
        for g in groups[:2]:
            if g not in self.index:
                self.index[g] = len(self.index)
                for a in self.arms:  # grow every arm's A^-1 and b by one dimension
                    for row in self.inv[a.id]:
                        row.append(0.0)
                    self.inv[a.id].append([0.0] * (len(self.index) - 1) + [1.0 / self.ridge])
                    self.b[a.id].append(0.0)
            idx.append(self.index[g])
        return idx

    def _stats(self, arm_id: str, x: list[int]) -> tuple[float, float]:
        """(mean prediction x'theta, variance term x'A^-1 x) for a one-hot x."""
        inv, b = self.inv[arm_id], self.b[arm_id]
        ax = [sum(inv[r][c] for c in x) for r in range(len(b))]  # A^-1 x
        mean = sum(ax[r] * b[r] for r in range(len(b)))
        var = sum(ax[c] for c in x)
        return mean, max(var, 0.0)

    def score(self, mean: float, var: float) -> float:
        """An arm's score from its predicted reward and that prediction's variance term."""
        raise NotImplementedError

    def _best(self, ctx: Context, avoid) -> tuple[float, Arm] | None:
        """The arm with the highest score (the first of equals, in arm order), with its score."""
        x = self._features(ctx.groups)
        scored = [(self.score(*self._stats(a.id, x)), a) for a in self.arms if a.id not in avoid]
        return max(scored, key=lambda s: s[0]) if scored else None

    def observe(self, groups: Sequence[str], arm_id: str, reward: float) -> None:
        x = self._features(groups)
        inv, b = self.inv[arm_id], self.b[arm_id]
        ax = [sum(inv[r][c] for c in x) for r in range(len(b))]
        denom = 1.0 + sum(ax[c] for c in x)
        n = len(b)
        for r in range(n):
            if ax[r]:
                f = ax[r] / denom
                row = inv[r]
                for c in range(n):
                    row[c] -= f * ax[c]
        for c in x:
            b[c] += reward


class LinUCB(_Linear):
    name = "linucb"

    def __init__(self, arms, cost_weight, alpha: float = 1.0, ridge: float = 1.0):
        super().__init__(arms, cost_weight, ridge)
        self.alpha = alpha

    def score(self, mean: float, var: float) -> float:
        return mean + self.alpha * math.sqrt(var)

    def choose(self, ctx, avoid=frozenset()):
        best = self._best(ctx, avoid)
        return (best[1], f"upper confidence bound {best[0]:+.3f}") if best else None


class LinTS(_Linear):
    name = "lints"

    def __init__(self, arms, cost_weight, seed: int, v: float = 0.35, ridge: float = 1.0):
        super().__init__(arms, cost_weight, ridge)
        self.v = v
        self.rng = random.Random(seed)

    def score(self, mean: float, var: float) -> float:
        # Only x'theta matters for the decision, and for theta ~ N(theta_hat, v^2 A^-1) it is
        # exactly N(x'theta_hat, v^2 x'A^-1 x): sample that scalar per arm.
        return self.rng.gauss(mean, self.v * math.sqrt(var))

    def choose(self, ctx, avoid=frozenset()):
        best = self._best(ctx, avoid)
        return (best[1], f"Thompson sample {best[0]:+.3f}") if best else None


class KNN(Bandit):
    name = "knn"

    def __init__(self, arms: Sequence[Arm], cost_weight: float, k: int = 10):
        super().__init__(arms, cost_weight)
        self.k = k
        self.history: list[tuple[str, float]] = []  # (arm id, reward) per finished task
        self.by_group: dict[str, list[int]] = {}  # group key -> indexes into history
        self.totals: dict[str, list[float]] = {a.id: [0.0, 0] for a in self.arms}

    def neighbours(self, ctx: Context) -> list[int]:
        """The k most similar earlier tasks: finest shared group first, most recent first."""
        picked: list[int] = []
        seen: set[int] = set()
        for key in reversed(ctx.groups):
            for i in reversed(self.by_group.get(key, [])):
                if len(picked) >= self.k:
                    return picked
                if i not in seen:
                    seen.add(i)
                    picked.append(i)
        return picked

    def choose(self, ctx, avoid=frozenset()):
        arms = [a for a in self.arms if a.id not in avoid]
        if not arms:
            return None
        untried = [a for a in arms if self.totals[a.id][1] == 0]
        if untried:
            return untried[0], "not tried yet"
        near = self.neighbours(ctx)
        sums: dict[str, list[float]] = {}
        for i in near:
            arm_id, r = self.history[i]
            s = sums.setdefault(arm_id, [0.0, 0])
            s[0] += r
            s[1] += 1
        best, best_val = None, -math.inf
        for a in arms:
            s = sums.get(a.id) or self.totals[a.id]
            val = s[0] / s[1]
            if val > best_val:
                best, best_val = a, val
        return best, f"best mean reward among {len(near)} similar tasks ({best_val:+.3f})"

    def observe(self, groups, arm_id, reward):
        self.history.append((arm_id, reward))
        for key in groups:
            self.by_group.setdefault(key, []).append(len(self.history) - 1)
        t = self.totals[arm_id]
        t[0] += reward
        t[1] += 1
