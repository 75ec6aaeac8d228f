"""A replay is the routing loop with the benchmark matrix answering attempts.

``MatrixEnvironment`` implements the same ``Environment`` interface as the
live agent runner; ``replay()`` feeds the benchmark's tasks through
:func:`acr_cli.loop.run_task` with a policy and a memory, exactly as
``acr run`` does for one request, then computes the metrics from what was
recorded.

Protocols:

* ``cascade`` (OOD176): a router may try models one after another; an
  attempt passes when the task is resolved; every attempt is paid for.
* ``single`` (ID2919, the paper's protocol): one action per task.
* ``verify`` (ID2919): where the dimension is execution-verified, an attempt
  passes at score 1.0 and the router may try another model; elsewhere one action.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from acr_cli import interrupts
from acr_cli.bench import metrics
from acr_cli.bench.matrix import Matrix
from acr_cli.context import Context
from acr_cli.domain import COST_REPORTED, FAILED, PASSED, Arm, Feedback, TaskState
from acr_cli.errors import AcrError
from acr_cli.loop import run_task
from acr_cli.memory.store import Memory, new_id, now_iso
from acr_cli.routing.base import Policy

BENCH_AGENT = "bench"


class MissingCell(Exception):
    """A memory replay asked for a task x arm result that was never observed."""


class MatrixEnvironment:
    def __init__(self, matrix: Matrix):
        self.matrix = matrix

    def unavailable(self, arm: Arm) -> str | None:
        return None if arm.model in self.matrix.prices else f"{arm.model} is not in this benchmark"

    def attempt(self, arm: Arm, ctx: Context, state: TaskState, task_id: str, seq: int) -> Feedback:
        cell = self.matrix.cells[ctx.ref].get(arm.model)
        if cell is None:
            raise MissingCell(arm.model)
        passed = cell.score >= 1.0
        return Feedback(arm, PASSED if passed else FAILED, score=cell.score, tokens_in=cell.tokens_in,
                        tokens_out=cell.tokens_out, cost_usd=cell.cost, cost_source=COST_REPORTED,
                        apply_ok=cell.apply_ok, reason="resolved" if passed else "not resolved")


def bench_arms(matrix: Matrix, profile=None) -> dict[str, Arm]:
    """One arm per benchmark model: prices from the dataset, priors from the profile's matching arm."""
    arms = {}
    for model, (pin, pout) in matrix.prices.items():
        prior, weight = (), None
        if profile is not None:
            for a in profile.arms:
                try:
                    if a.id == model or matrix.normalize(a.model) == model:
                        prior, weight = a.prior, a.prior_weight
                        break
                except AcrError:
                    continue
        arms[model] = Arm(BENCH_AGENT, model, pin, pout, (), prior, weight)
    return arms


def max_attempts_for(matrix: Matrix, protocol: str, dimension: str) -> int:
    if protocol == "single":
        return 1
    if protocol == "verify" and matrix.spec is not None and not matrix.spec.verified(dimension):
        return 1
    return len(matrix.models)


@dataclass
class RunResult:
    run_id: str
    policy: str
    order: str
    metrics: dict[str, Any]
    unscorable: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def replay(matrix: Matrix, make_policy: Callable[[Memory, str], Policy], memory: Memory, *, label: str,
           protocol: str, cost_weight: float, order_seed: int | None = None, params: dict | None = None,
           group: str | None = None, progress: Callable[[int], None] | None = None) -> RunResult:
    """Replay every task of ``matrix`` through ``run_task``; returns the run's metrics."""
    run_id = new_id(matrix.name)
    source = f"bench:{matrix.name}:{run_id}"
    order = list(range(len(matrix.tasks)))
    if order_seed is not None:
        random.Random(order_seed).shuffle(order)
    order_label = "canonical" if order_seed is None else f"shuffled (seed {order_seed})"
    premium = max(matrix.prices, key=lambda m: sum(matrix.prices[m]))  # escalations: reaching this model
    memory.add_run(run_id, matrix.name, label, {**(params or {}), "protocol": protocol, "order": order_label,
                                               "cost_weight": cost_weight, "group": group, "premium": premium})
    policy = make_policy(memory, source)
    env = MatrixEnvironment(matrix)
    unscorable = 0
    started = now_iso()
    with memory.transaction():
        for done, i in enumerate(order, 1):
            if interrupts.requested():  # a signal Python swallowed (raised inside a finalizer): stop here
                raise KeyboardInterrupt
            task = matrix.tasks[i]
            ctx = Context(prompt=task.prompt, kind=task.kind or task.dimension, groups=task.groups, ref=task.ref,
                          project=task.project, kind_sure=task.kind_sure)
            try:
                run_task(ctx, policy, env, memory, source=source, task_id=f"{run_id}/{i}",
                         max_attempts=max_attempts_for(matrix, protocol, task.dimension),
                         oracle=matrix.oracle(task.ref, cost_weight), timestamp=started)
            except MissingCell:
                memory.forget([f"{run_id}/{i}"])
                unscorable += 1
            if progress:
                progress(done)
        if interrupts.requested():
            raise KeyboardInterrupt
    figures = metrics.compute(memory, source, cost_weight, premium)
    extra = {}
    missing = getattr(policy, "missing", None)
    if missing:
        extra["missing_decisions"] = len(missing)
    report = {"policy": label, "order": order_label, "protocol": protocol, **figures, "unscorable": unscorable, **extra}
    memory.finish_run(run_id, figures.get("n", 0), report)
    return RunResult(run_id, label, order_label, figures, unscorable, extra)


