"""Reference policies for replays: the paper's baselines and ways to score other routers.

Every class here is a :class:`~acr_cli.routing.base.Policy`, driven by the same
loop as live runs. Single-action baselines answer one arm and then stop.

* ``oracle``: the best single model in hindsight (replay only: it reads the matrix).
* ``always:MODEL``, ``random`` (``--seed``).
* ``acrouter``: the paper's OOD cascade MiniMax-M2.7 -> kimi-k2.5 -> gpt-5.4 -> glm-5,
  stop at the first pass; then claude-opus-4-6 if still unresolved and at least
  ``k`` (2) of the cheap attempts changed the repository (``apply_ok``).
* ``cascade:M1,M2,...``: try in order until one passes.
* ``map:FILE``: a hierarchical group map like the paper's ID router.
* ``decisions:FILE``: replay any router's JSONL decisions (``task_id``,
  ``chosen_model``, optional ``chain_run``: models tried in order until one passes).
* ``dimension-best``: per dimension, the model with the best mean score on the
  probing split (``id_probing_results_long.csv`` when present in the data dir,
  else the profile's priors, which for ``coderouterbench`` are the paper's
  Table 10 = the probing-split means).
* ``linucb``, ``lints``, ``knn``: online contextual bandits, one action per task,
  reward = score - lambda * cost. Our implementations (the paper's appendix gives
  the idea, not code). Linear models: one-hot features of the two coarsest
  context groups (dimension, and source or bench) plus a bias; LinUCB alpha =
  1.0, ridge 1.0; LinTS v = 0.35, ridge 1.0 (the values recorded in the paper's
  released LinTS decisions). kNN: the k = 10 most similar earlier tasks, where
  similarity is the finest context group shared (then the most recent first);
  an arm never tried yet is tried first.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Sequence

from acr_cli.bench.matrix import Matrix, first3, source_of
from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState
from acr_cli.errors import AcrError
from acr_cli.routing.base import Policy, Ranked

ACROUTER_CHAIN = ("MiniMax-M2.7", "kimi-k2.5", "gpt-5.4", "glm-5")
ACROUTER_PREMIUM = "claude-opus-4-6"


# The paper's baselines it describes but publishes no code for: these rows are acr's implementations.
REIMPLEMENTED = ("random", "linucb", "lints", "knn", "dimension-best")

class SingleAction(Policy):
    """Base for baselines that pick one arm per task."""

    def choose(self, ctx: Context) -> tuple[Arm, str] | None:
        raise NotImplementedError

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        if state.tried:
            return None
        picked = self.choose(ctx)
        return Decision(picked[0], picked[1]) if picked else None

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        picked = self.choose(ctx)
        return [Ranked(picked[0], why=picked[1])] if picked else []


class Oracle(SingleAction):
    name = "oracle"

    def __init__(self, matrix: Matrix, arms: dict[str, Arm], cost_weight: float):
        self.matrix, self.arms, self.cost_weight = matrix, arms, cost_weight

    def choose(self, ctx):
        reward, model = self.matrix.oracle(ctx.ref, self.cost_weight)
        return self.arms[model], f"best single model in hindsight (reward {reward:+.3f})"


class Always(SingleAction):
    def __init__(self, arm: Arm):
        self.arm = arm
        self.name = f"always:{arm.model}"

    def choose(self, ctx):
        return self.arm, "always"


class RandomChoice(SingleAction):
    name = "random"

    def __init__(self, arms: Sequence[Arm], seed: int):
        self.arms = list(arms)
        self.rng = random.Random(seed)

    def choose(self, ctx):
        return self.rng.choice(self.arms), "uniformly at random"


class ACRouter(Policy):
    name = "acrouter"

    def __init__(self, chain: Sequence[Arm], premium: Arm, k: int = 2):
        self.chain, self.premium, self.k = list(chain), premium, k

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        done = state.tried_ids
        for i, arm in enumerate(self.chain):
            if arm.id not in done:
                return Decision(arm, f"cheap cascade step {i + 1}")
        applied = sum(1 for f in state.tried if f.apply_ok)
        if self.premium.id not in done and applied >= self.k:
            return Decision(self.premium, f"escalate: {applied} cheap attempts applied a patch (k={self.k})")
        return None

    def rank(self, ctx, state=None):
        return [Ranked(a, why="cheap cascade") for a in self.chain] + [Ranked(self.premium, why="escalation")]


class GroupMap(SingleAction):
    """The paper's hierarchical group -> model map (``reference/acrouter_id_group_map.json``)."""

    def __init__(self, path: Path, arms: dict[str, Arm], normalize):
        hint = 'expected {"levels": [{"mode": ..., "mapping": {GROUP: MODEL, ...}}, ...], "fallback_model": MODEL}'
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AcrError(f"map:{path}: not a group map ({e})", hint=hint) from None
        levels = data.get("levels") if isinstance(data, dict) else None
        if not isinstance(levels, list) or not isinstance(data.get("fallback_model"), str):
            raise AcrError(f"map:{path}: not a group map (it needs a list of levels and a fallback_model)", hint=hint)
        self.levels = []
        for i, lv in enumerate(levels):
            mapping = lv.get("mapping") if isinstance(lv, dict) else None
            if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
                raise AcrError(f"map:{path}: not a group map (levels[{i}].mapping must map groups to model names)",
                               hint=hint)
            if lv.get("mode") not in ("first3", "source", "dimension"):
                raise AcrError(f"map:{path}: unknown level mode {lv.get('mode')!r} (first3, source, dimension)")
            self.levels.append((lv["mode"], {k: normalize(v) for k, v in mapping.items()}))
        self.fallback = normalize(data["fallback_model"])
        self.arms = arms
        self.name = f"map:{path.name}"

    def choose(self, ctx):
        for mode, mapping in self.levels:
            key = {"first3": first3(ctx.ref), "source": source_of(ctx.ref), "dimension": ctx.kind}[mode]
            if key in mapping:
                return self.arms[mapping[key]], f"{mode} {key}"
        return self.arms[self.fallback], "fallback"


class Decisions(Policy):
    """Another router's decisions, from JSONL."""

    def __init__(self, path: Path, arms: dict[str, Arm], normalize):
        self.by_task: dict[str, list[Arm]] = {}
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    d = json.loads(line)
                    chain = d.get("chain_run")
                    if chain is not None and not (isinstance(chain, list) and all(isinstance(m, str) for m in chain)):
                        raise AcrError(f"decisions:{path}: line {n}: chain_run must be a list of models, got {chain!r}",
                                       hint='e.g. "chain_run": ["kimi-k2.5", "glm-5"]')
                    chain = chain or [d["chosen_model"]]
                    self.by_task[d["task_id"]] = [arms[normalize(m)] for m in chain]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise AcrError(f"decisions:{path}: cannot read line {locals().get('n', 0)} ({e})",
                           hint="one JSON object per line with task_id and chosen_model (optional chain_run)") from None
        self.name = f"decisions:{path.name}"
        self.missing: set[str] = set()

    def fresh(self) -> "Decisions":
        """The same decisions with no tasks counted as missing yet (one per replayed order)."""
        import copy

        again = copy.copy(self)
        again.missing = set()
        return again

    def next(self, ctx, state):
        chain = self.by_task.get(ctx.ref)
        if chain is None:
            self.missing.add(ctx.ref)
            return None
        for arm in chain:
            if arm.id not in state.tried_ids:
                return Decision(arm, "from the decisions file")
        return None

    def rank(self, ctx, state=None):
        return [Ranked(a, why="decisions file") for a in self.by_task.get(ctx.ref, [])]


class DimensionBest(SingleAction):
    name = "dimension-best"

    def __init__(self, best: dict[str, Arm], fallback: Arm, fitted_on: str):
        self.best, self.fallback, self.fitted_on = best, fallback, fitted_on

    def choose(self, ctx):
        arm = self.best.get(ctx.kind, self.fallback)
        return arm, f"best mean score for {ctx.kind} on {self.fitted_on}"


# --------------------------------------------------------------------------- online bandits


class _Linear(SingleAction):
    """Per-arm ridge regression of reward on one-hot context features (Sherman-Morrison updates)."""

    def __init__(self, arms: Sequence[Arm], cost_weight: float, ridge: float = 1.0):
        self.arms = list(arms)
        self.cost_weight = cost_weight
        self.ridge = ridge
        self.index: dict[str, int] = {"bias": 0}
        self.inv: dict[str, list[list[float]]] = {a.id: [[1.0 / ridge]] for a in self.arms}  # A^-1
        self.b: dict[str, list[float]] = {a.id: [0.0] for a in self.arms}

    def _features(self, ctx: Context) -> list[int]:
        idx = [0]
        for g in ctx.groups[:2]:
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

    def task_done(self, ctx: Context, state: TaskState) -> None:
        if not state.tried:
            return
        fb = state.tried[0]
        reward = (fb.score or 0.0) - self.cost_weight * (fb.cost_usd or 0.0)
        x = self._features(ctx)
        inv, b = self.inv[fb.arm.id], self.b[fb.arm.id]
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

    def choose(self, ctx):
        x = self._features(ctx)
        scored = []
        for a in self.arms:
            mean, var = self._stats(a.id, x)
            scored.append((mean + self.alpha * math.sqrt(var), a))
        best = max(scored, key=lambda s: s[0])
        return best[1], f"upper confidence bound {best[0]:+.3f}"


class LinTS(_Linear):
    name = "lints"

    def __init__(self, arms, cost_weight, seed: int, v: float = 0.35, ridge: float = 1.0):
        super().__init__(arms, cost_weight, ridge)
        self.v = v
        self.rng = random.Random(seed)

    def choose(self, ctx):
        x = self._features(ctx)
        # Only x'theta matters for the decision, and for theta ~ N(theta_hat, v^2 A^-1) it is
        # exactly N(x'theta_hat, v^2 x'A^-1 x): sample that scalar per arm.
        scored = []
        for a in self.arms:
            mean, var = self._stats(a.id, x)
            scored.append((self.rng.gauss(mean, self.v * math.sqrt(var)), a))
        best = max(scored, key=lambda s: s[0])
        return best[1], f"Thompson sample {best[0]:+.3f}"


class KNN(SingleAction):
    name = "knn"

    def __init__(self, arms: Sequence[Arm], cost_weight: float, k: int = 10):
        self.arms, self.cost_weight, self.k = list(arms), cost_weight, k
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

    def choose(self, ctx):
        untried = [a for a in self.arms if self.totals[a.id][1] == 0]
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
        for a in self.arms:
            s = sums.get(a.id) or self.totals[a.id]
            val = s[0] / s[1]
            if val > best_val:
                best, best_val = a, val
        return best, f"best mean reward among {len(near)} similar tasks ({best_val:+.3f})"

    def task_done(self, ctx, state):
        if not state.tried:
            return
        fb = state.tried[0]
        reward = (fb.score or 0.0) - self.cost_weight * (fb.cost_usd or 0.0)
        self.history.append((fb.arm.id, reward))
        for key in ctx.groups:
            self.by_group.setdefault(key, []).append(len(self.history) - 1)
        t = self.totals[fb.arm.id]
        t[0] += reward
        t[1] += 1
