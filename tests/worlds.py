"""Synthetic evaluation worlds: task x arm results matrices whose generating model is known.

A world writes a results folder that ``acr bench replay DIR`` reads (acr_cli.bench.results), so the
router is measured by the same code users run. The generating model is on purpose not the learned
router's own (a probit with one shared slope): a task's pass chance for an arm is a *logistic*
function of the task's ease with a slope of the arm's own, some tasks no arm solves, projects are
easier or harder as a whole, and an arm's cost grows when it fails.

* ``stationary``: every arm is there from the start and never changes.
* ``arrival``: the arms that give most reward per task arrive half-way through the stream
  (their results before that are missing: they could not be chosen).
* ``drift``: the arm that is best over the first half gets worse at half-way.

Each world also knows its **informed policy** (:func:`informed_regret`): acr's planner given the
world's true parameters. It knows the world but not the task's outcomes: the yardstick a learner
can at best reach.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("bug_fix", "feature", "refactor", "test_generation")
UNSOLVABLE = 0.12  # tasks no arm solves (a broken task, a missing dependency)
PROJECT_SD = 0.5  # how much easier or harder a project's tasks are as a whole
COST_WEIGHT = 0.1


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(x, 40.0), -40.0)))


@dataclass
class ArmTruth:
    name: str
    price_in: float  # USD per 1M tokens
    price_out: float
    slope: float  # how strongly its success depends on the task's ease
    skill: dict[str, float]  # per kind: the logit offset
    tokens: float  # typical tokens of one attempt
    arrives: int = 0  # the first task it can be chosen for
    worse_from: int | None = None  # from this task on its skill drops by ``drop``
    drop: float = 0.0

    def p(self, kind: str, ease: float, t: int) -> float:
        skill = self.skill[kind] - (self.drop if self.worse_from is not None and t >= self.worse_from else 0.0)
        return sigmoid(self.slope * ease + skill)

    def cost(self, tokens: float) -> float:
        return tokens * (0.95 * self.price_in + 0.05 * self.price_out) / 1e6


@dataclass
class World:
    name: str
    arms: list[ArmTruth]
    tasks: list[dict] = field(default_factory=list)  # task_id, kind, project, ease, solvable
    results: list[dict] = field(default_factory=list)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "tasks.jsonl", "w") as f:
            for t in self.tasks:
                f.write(json.dumps({"task_id": t["task_id"], "kind": t["kind"], "project": t["project"]}) + "\n")
        with open(folder / "results.jsonl", "w") as f:
            for r in self.results:
                f.write(json.dumps(r) + "\n")
        return folder


def make(kind: str = "stationary", n_arms: int = 24, n_tasks: int = 1200, seed: int = 1) -> World:
    """A world of ``kind`` (stationary, arrival, drift) with its tasks and every arm's result on each."""
    rng = random.Random(f"{kind}-{n_arms}-{n_tasks}-{seed}")
    arms = []
    for i in range(n_arms):
        tier = rng.uniform(0.0, 1.0)  # 0: cheapest, 1: dearest
        out = 0.3 * math.exp(tier * math.log(25 / 0.3))  # $0.3 .. $25 per 1M output tokens
        general = -0.6 + 1.6 * tier + rng.gauss(0, 0.7)  # dearer models are better, with many exceptions
        arms.append(ArmTruth(
            name=f"agent{i % 3}:model-{i:02d}", price_in=out / 5, price_out=out, slope=rng.uniform(0.8, 2.2),
            skill={k: general + rng.gauss(0, 0.6) for k in KINDS}, tokens=150_000 * math.exp(rng.gauss(0, 0.5))))
    projects = [f"org{j}/repo{j}" for j in range(12)]
    offset = {p: rng.gauss(0, PROJECT_SD) for p in projects}
    weights = [1.0 / (j + 1) for j in range(len(projects))]  # a few projects hold most tasks
    world = World(f"{kind}-{n_arms}x{n_tasks}-s{seed}", arms)
    half = n_tasks // 2
    if kind in ("arrival", "drift"):
        value = {a.name: _alone(a, KINDS, 0) for a in arms}
        ranked = sorted(arms, key=lambda a: -value[a.name])
        if kind == "arrival":
            for a in ranked[:3]:
                a.arrives = half
        else:
            ranked[0].worse_from, ranked[0].drop = half, 2.5
    for t in range(n_tasks):
        task_kind = rng.choice(KINDS)
        project = rng.choices(projects, weights)[0]
        ease = offset[project] + rng.gauss(0, 1)
        solvable = rng.random() >= UNSOLVABLE
        ref = f"t{t:05d}"
        world.tasks.append({"task_id": ref, "kind": task_kind, "project": project, "ease": ease, "solvable": solvable})
        for a in arms:
            if t < a.arrives:
                continue
            passed = solvable and rng.random() < a.p(task_kind, ease, t)
            tokens = a.tokens * math.exp(rng.gauss(0, 0.6)) * (1.0 if passed else 1.5)
            world.results.append({"task_id": ref, "arm": a.name, "resolved": int(passed),
                                  "cost_usd": round(a.cost(tokens), 6), "in_tok": int(0.95 * tokens),
                                  "out_tok": int(0.05 * tokens), "duration_s": round(tokens / 800, 1)})
    return world


# ---------------------------------------------------------------- the informed policy

_NODES = None


def _nodes() -> tuple[list[float], list[float]]:
    """Gauss-Hermite nodes and weights for E[f(ease)], ease ~ N(0, 1 + PROJECT_SD^2)."""
    global _NODES
    if _NODES is None:
        from acr_cli.routing.latent import hermite_nodes

        z, w = hermite_nodes(24)
        sd = math.sqrt(1 + PROJECT_SD ** 2)
        _NODES = ([x * sd for x in z], w)
    return _NODES


def _expected_cost(a: ArmTruth, p: float) -> float:
    # tokens ~ lognormal(mean 0.18 on the log scale): E = T e^{0.18}, x 1.5 on a failure
    return a.cost(a.tokens * math.exp(0.18)) * (p + 1.5 * (1 - p))


def chain_value(chain: list[ArmTruth], kind: str, t: int) -> float:  # (how the worlds pick their special arms)
    """Expected reward of trying ``chain`` in turn on a task of ``kind`` at stream position ``t``: over the
    task's ease, and over whether it can be solved at all (an unsolvable task fails, and costs, every arm)."""
    zs, ws = _nodes()
    solvable = 0.0
    for z, w in zip(zs, ws):
        alive, value = 1.0, 0.0
        for a in chain:
            p = a.p(kind, z, t)
            value += alive * (p - COST_WEIGHT * _expected_cost(a, p))
            alive *= 1 - p
        solvable += w * value
    unsolvable = -COST_WEIGHT * sum(_expected_cost(a, 0.0) for a in chain)
    return (1 - UNSOLVABLE) * solvable + UNSOLVABLE * unsolvable


def _alone(a: ArmTruth, kinds, t: int) -> float:
    return sum(chain_value([a], k, t) for k in kinds) / len(kinds)


def informed_regret(world: World, cost_weight: float = COST_WEIGHT) -> float:
    """The informed policy's cumulative regret on the world's realised results (against the best arm there).

    The informed policy is acr's own planner (:func:`acr_cli.routing.latent.Latent.plan`) given the
    world's true parameters instead of estimates: per task, each arm's pass chance on every node of
    the task's ease (and 0 on one more node, the unsolvable tasks), its expected cost, and after each
    failure the posterior of the ease. It knows the world, not the task's outcomes: what a learner
    could at best reach with this planner (its plan is exact over at most 8 arms at a time, and it
    plans each arm's cost as its mean whether it passes or not)."""
    from acr_cli.routing.latent import Latent

    planner = Latent(0.5)  # only its planner is used: the nodes and chances come from the world
    zs, ws = _nodes()
    w0 = [w * (1 - UNSOLVABLE) for w in ws] + [UNSOLVABLE]
    cells: dict[str, dict[str, dict]] = {}
    for r in world.results:
        cells.setdefault(r["task_id"], {})[r["arm"]] = r
    regret = 0.0
    for t, task in enumerate(world.tasks):
        row = cells[task["task_id"]]
        oracle = max(c["resolved"] - cost_weight * c["cost_usd"] for c in row.values())
        there = [a for a in world.arms if a.name in row]
        qs = [[a.p(task["kind"], z, t) for z in zs] + [0.0] for a in there]
        costs = [sum(w * _expected_cost(a, q) for w, q in zip(w0, qs[i])) for i, a in enumerate(there)]
        w = list(w0)
        left = list(range(len(there)))
        score = spent = 0.0
        while left:
            plan = planner.plan(w, [qs[i] for i in left], [costs[i] for i in left], [0.0] * len(left), 0.0,
                                cost_weight, force=spent == 0.0 and len(left) == len(there))
            if not plan:
                break
            i = left.pop(plan[0])
            c = row[there[i].name]
            spent += c["cost_usd"]
            if c["resolved"]:
                score = 1.0
                break
            w = [x * (1 - q) for x, q in zip(w, qs[i])]
        regret += oracle - (score - cost_weight * spent)
    return regret
