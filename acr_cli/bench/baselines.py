"""The policies that read the benchmark itself: the paper's own routers and ways to score others.

Every class here is a :class:`~acr_cli.routing.base.Policy`, driven by the same loop as live
runs, but each needs CodeRouterBench (its matrix, its models or its files), so they replay only
(see :mod:`acr_cli.routing.registry`). The matrix-free baselines (``always``, ``random``,
``cascade``, ``linucb``, ``lints``, ``knn``) live in :mod:`acr_cli.routing` and also run live.

* ``oracle``: the best single model in hindsight (it reads every outcome).
* ``acrouter``: the paper's OOD cascade MiniMax-M2.7 -> kimi-k2.5 -> gpt-5.4 -> glm-5,
  stop at the first pass; then claude-opus-4-6 if still unresolved and at least
  ``k`` (2) of the cheap attempts changed the repository (``apply_ok``).
* ``map:FILE``: a hierarchical group map like the paper's ID router.
* ``decisions:FILE``: replay any router's JSONL decisions (``task_id``,
  ``chosen_model``, optional ``chain_run``: models tried in order until one passes).
* ``dimension-best``: per dimension, the model with the best mean score on the
  probing split (``id_probing_results_long.csv`` when present in the data dir,
  else the profile's priors, which for ``coderouterbench`` are the paper's
  Table 10 = the probing-split means).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from acr_cli.bench.matrix import Matrix, first3, source_of
from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState
from acr_cli.errors import AcrError
from acr_cli.routing.base import Policy, Ranked
from acr_cli.routing.single import SingleAction

ACROUTER_CHAIN = ("MiniMax-M2.7", "kimi-k2.5", "gpt-5.4", "glm-5")
ACROUTER_PREMIUM = "claude-opus-4-6"


# The paper's baselines it describes but publishes no code for: these rows are acr's implementations.
REIMPLEMENTED = ("random", "linucb", "lints", "knn", "dimension-best")


class Oracle(SingleAction):
    name = "oracle"

    def __init__(self, matrix: Matrix, arms: dict[str, Arm], cost_weight: float):
        self.matrix, self.arms, self.cost_weight = matrix, arms, cost_weight

    def choose(self, ctx, avoid=frozenset()):
        reward, model = self.matrix.oracle(ctx.ref, self.cost_weight)
        return self.arms[model], f"best single model in hindsight (reward {reward:+.3f})"


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

    def choose(self, ctx, avoid=frozenset()):
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

    def choose(self, ctx, avoid=frozenset()):
        arm = self.best.get(ctx.kind, self.fallback)
        return arm, f"best mean score for {ctx.kind} on {self.fitted_on}"
