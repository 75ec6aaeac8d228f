"""A replayed race: a task's first step starts several arms at once (``acr bench replay --race N``).

On the cascade protocol every raced arm runs to its end and is paid; the task passes if any of them
passes and scores its best. If all fail, the usual escalation follows over the arms left, within the
task's max attempts (each raced attempt counts as one). Every raced attempt is recorded in memory, so the
policy learns from each of them as from any attempt.

Two ways to choose the race (``Racing.mode``):

* ``forced``: the policy's first N arms, every task: what racing itself gives and costs;
* ``planned``: the race plan's choice (acr_cli.routing.race): a race of k <= N only where its expected
  reward beats escalation's, else the task escalates as without ``--race``.

A race's attempts are recorded losers first and the winner (the passing attempt with the best score,
then the cheapest) last, so the task's final arm is the one whose change a live race would keep. A race
takes as long as its slowest arm: :func:`elapsed` is a task's waiting time, the raced attempts counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from acr_cli.context import Context
from acr_cli.domain import Decision, Feedback, TaskState
from acr_cli.loop import Environment, TaskResult, run_task, run_task_after
from acr_cli.memory.store import Memory
from acr_cli.money import usd
from acr_cli.routing import race as race_plan
from acr_cli.routing.base import Policy, Ranked

MODES = ("forced", "planned")


@dataclass(frozen=True)
class Racing:
    """A replay's racing: up to ``n`` arms at once, ``mode`` (see the module's docstring), and the
    weights the plan weighs reward with."""

    n: int
    mode: str
    cost_weight: float
    time_weight: float = 0.0

    @property
    def label(self) -> str:
        """The suffix of the replayed policy's row: ``race=N`` (forced) or ``race<=N`` (planned)."""
        return f"race={self.n}" if self.mode == "forced" else f"race<={self.n}"


def choose(racing: Racing, policy: Policy, ctx: Context, env: Environment, state: TaskState,
           max_attempts: int | None) -> tuple[list[Ranked], race_plan.RacePlan]:
    """The arms the task would race (the policy's ranking, those that can run here) and the race plan."""
    ranked = [r for r in policy.rank(ctx, state) if r.arm.id not in state.excluded and not env.unavailable(r.arm)]
    n = min(racing.n, max_attempts) if max_attempts is not None else racing.n
    latent = getattr(policy, "latent", None)
    if racing.mode == "forced":
        return ranked, race_plan.forced(ranked, n, latent=latent)
    return ranked, race_plan.plan_race(ranked, n, cost_weight=racing.cost_weight, time_weight=racing.time_weight,
                                       latent=latent)


def race_task(racing: Racing, ctx: Context, policy: Policy, env: Environment, memory: Memory, *, source: str,
              task_id: str, max_attempts: int | None, oracle: tuple[float, str] | None, timestamp: str | None,
              unavailable: set[str]) -> tuple[TaskResult, int]:
    """Route one replayed task with a race first (or, when the plan races nothing, as :func:`run_task`
    does); returns its result and how many of its first attempts ran at once (0: none)."""
    state = TaskState(max_attempts=max_attempts, verified=True, excluded=set(unavailable))
    ranked, plan = choose(racing, policy, ctx, env, state, max_attempts)
    if plan.size < 2:
        return run_task(ctx, policy, env, memory, source=source, max_attempts=max_attempts, task_id=task_id,
                        oracle=oracle, timestamp=timestamp, unavailable=unavailable), 0
    by_id = {r.arm.id: r for r in ranked}
    reason = (f"race of {plan.size}: P(at least one passes) {plan.p_any:.2f}, "
              f"~{usd(plan.usd, 3)} for all of them")
    decisions = [Decision(by_id[a].arm, reason, by_id[a].cost) for a in plan.arms]
    # every answer first: a task the matrix cannot answer (MissingCell) leaves nothing recorded
    outcomes = [(d, env.attempt(d.arm, ctx, state, task_id, seq)) for seq, d in enumerate(decisions, 1)]
    result = run_task_after(ctx, policy, env, memory, state, in_record_order(outcomes), source=source,
                            task_id=task_id, oracle=oracle, timestamp=timestamp)
    return result, plan.size


def in_record_order(outcomes: Sequence[tuple[Decision, Feedback]]) -> list[tuple[Decision, Feedback]]:
    """The race's attempts with its winner last: the passing one with the best score, then the cheapest
    (none passed: the policy's order kept)."""
    passed = [o for o in outcomes if o[1].passed]
    if not passed:
        return list(outcomes)
    best = max(passed, key=lambda o: (o[1].score or 0.0, -(o[1].cost_usd or 0.0)))
    return [o for o in outcomes if o is not best] + [best]


def elapsed(result: TaskResult, raced: int) -> float | None:
    """Seconds a task kept its user waiting: its raced attempts as long as the slowest, the others one
    after another; None when no attempt recorded a duration."""
    times = [fb.duration_s for _, fb in result.steps]
    if not any(times):
        return None
    return (max(times[:raced]) if raced else 0.0) + sum(times[raced:])
