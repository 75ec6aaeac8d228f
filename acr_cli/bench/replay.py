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
from acr_cli.bench.race import Racing, elapsed, race_task
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
                        duration_s=cell.duration or 0.0, apply_ok=cell.apply_ok,
                        reason="resolved" if passed else "not resolved")


def bench_arms(matrix: Matrix, profile=None, catalog=None) -> dict[str, Arm]:
    """One arm per benchmark model: prices from the dataset, priors from the profile's matching arm.

    A model the dataset gives no price for (a results folder's) takes the profile's arm's price, else
    ``catalog(model)``'s (the price catalog), else none: the router then learns its cost as it goes."""
    arms = {}
    for model, price in matrix.prices.items():
        prior, weight, own = (), None, None
        if profile is not None:
            for a in profile.arms:
                try:
                    if a.id == model or matrix.normalize(a.model) == model:
                        prior, weight = a.prior, a.prior_weight
                        own = (a.price_in, a.price_out) if a.price_in is not None and a.price_out is not None else None
                        break
                except AcrError:
                    continue
        if price is None:
            price = own or (catalog(model) if catalog else None)
        pin, pout = price if price is not None else (None, None)
        arms[model] = Arm(BENCH_AGENT, model, pin, pout, (), prior, weight)
    return arms


def premium_of(matrix: Matrix) -> str:
    """The dearest model (the paper's "escalation" is reaching it): by list price, else by its mean recorded cost."""
    priced = {m: sum(p) for m, p in matrix.prices.items() if p is not None}
    if priced:
        return max(priced, key=lambda m: priced[m])
    spent: dict[str, list[float]] = {}
    for row in matrix.cells.values():
        for m, c in row.items():
            s = spent.setdefault(m, [0.0, 0])
            s[0] += c.cost
            s[1] += 1
    return max(matrix.models, key=lambda m: spent[m][0] / spent[m][1] if m in spent else 0.0)


def max_attempts_for(matrix: Matrix, protocol: str, dimension: str) -> int:
    if protocol == "single":
        return 1
    if protocol == "verify" and matrix.spec is not None and not matrix.spec.verified(dimension):
        return 1
    return len(matrix.models)


@dataclass
class _Waits:
    """A racing replay's tally: tasks that raced, and the seconds its tasks kept the user waiting."""

    races: int = 0
    seconds: float = 0.0
    timed: bool = False

    def add(self, result, raced: int) -> None:
        """One task's result and how many of its first attempts raced."""
        self.races += raced > 0
        took = elapsed(result, raced)
        if took is not None:
            self.seconds += took
            self.timed = True

    def figures(self) -> dict[str, Any]:
        """The run's figures: tasks raced, hours waited (None: no attempt recorded a duration)."""
        return {"races": self.races, "wait_hours": self.seconds / 3600 if self.timed else None}


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
           group: str | None = None, progress: Callable[[int], None] | None = None,
           racing: Racing | None = None) -> RunResult:
    """Replay every task of ``matrix`` through ``run_task``; returns the run's metrics. ``racing``: each task's
    first step a race (acr_cli.bench.race); the figures then say how many tasks raced and, where the matrix
    records durations, the hours its tasks kept the user waiting (``wait_hours``: a race counts as its slowest arm)."""
    run_id = new_id(matrix.name)
    source = f"bench:{matrix.name}:{run_id}"
    order = list(range(len(matrix.tasks)))
    if order_seed is not None:
        random.Random(order_seed).shuffle(order)
    order_label = "canonical" if order_seed is None else f"shuffled (seed {order_seed})"
    premium = premium_of(matrix)  # escalations: reaching this model
    memory.add_run(run_id, matrix.name, label, {**(params or {}), "protocol": protocol, "order": order_label,
                                               "cost_weight": cost_weight, "group": group, "premium": premium})
    policy = make_policy(memory, source)
    env = MatrixEnvironment(matrix)
    unscorable = 0
    waits = _Waits()
    started = now_iso()
    with memory.transaction():
        for done, i in enumerate(order, 1):
            if interrupts.requested():  # a signal Python swallowed (raised inside a finalizer): stop here
                raise KeyboardInterrupt
            task = matrix.tasks[i]
            ctx = Context(prompt=task.prompt, kind=task.kind or task.dimension, groups=task.groups, ref=task.ref,
                          project=task.project, kind_sure=task.kind_sure)
            absent: set[str] = set()
            if matrix.unavailable_when_missing:  # an arm with no result here could not be chosen for this task
                row = matrix.cells[task.ref]
                absent = {f"{BENCH_AGENT}:{m}" for m in matrix.models if m not in row}
            try:
                limit = max_attempts_for(matrix, protocol, task.dimension)
                oracle = matrix.oracle(task.ref, cost_weight)
                if racing is None:
                    run_task(ctx, policy, env, memory, source=source, task_id=f"{run_id}/{i}", max_attempts=limit,
                             oracle=oracle, timestamp=started, unavailable=absent)
                else:
                    waits.add(*race_task(racing, ctx, policy, env, memory, source=source, task_id=f"{run_id}/{i}",
                                         max_attempts=limit, oracle=oracle, timestamp=started, unavailable=absent))
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
    if racing is not None:
        extra.update(waits.figures())
    report = {"policy": label, "order": order_label, "protocol": protocol, **figures, "unscorable": unscorable, **extra}
    memory.finish_run(run_id, figures.get("n", 0), report)
    return RunResult(run_id, label, order_label, figures, unscorable, extra)


