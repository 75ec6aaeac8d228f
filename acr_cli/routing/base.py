"""The policy interface: the one object that decides, in live runs and in replays alike.

A policy is asked ``next(ctx, state)`` before every attempt of a task and
answers a :class:`~acr_cli.domain.Decision` or ``None`` (stop). A learning policy
reads what memory knows through an :class:`Evidence` source (SQL aggregates per
context group and arm, :class:`acr_cli.memory.aggregates.GroupCache`) and never
talks to agents or the benchmark itself, so the same object can be driven by
``acr run`` (agents answer) and ``acr bench replay`` (the matrix answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from acr_cli.context import Context
from acr_cli.domain import Arm, Decision, TaskState

if TYPE_CHECKING:
    from acr_cli.memory.aggregates import Bounds, Chains, GroupStats, Near


class Evidence(Protocol):
    """What the learned policy reads from memory, all of it for one scope (``live`` or a replay run)."""

    version: dict[str, int]  # group key -> a number that changes when the group's data changes
    position: int  # how far the scope's stream has come (changes with every finished task)

    def refresh(self) -> None:
        """Read what memory gained since the last read (the other methods, with ``refresh=False``, answer as
        of the last one)."""

    def get(self, keys: Sequence[str], refresh: bool = True) -> list[GroupStats]:
        """For each group key, coarse to fine: the aggregates of its newest finished tasks."""

    def overall(self, refresh: bool = True) -> GroupStats:
        """Per-arm token and cost sums over the whole scope (the cost prior's fallback)."""

    def bounds(self, refresh: bool = True) -> Bounds:
        """The largest cost and the most tokens of one attempt in the scope (what caps a cost estimate)."""

    def failures(self, prompt: str, project: str | None, hours: float) -> list[str]:
        """The arms that failed this very request in this project within ``hours``, newest first."""

    def chains(self, root: str, refresh: bool = True) -> Chains:
        """Every finished task under group ``root`` by its chain of finer groups."""

    def similar(self, text: str, project: str | None) -> list[Near]:
        """The finished tasks whose requests read most like ``text`` (same project first)."""

    def show_outcomes(self, near: Sequence[Near]) -> None:
        """Add to ``near``'s tasks the verdicts ``route --explain`` shows (never routed on)."""


@dataclass
class Ranked:
    """One arm's standing for a context: what ``route --explain`` and ``memory show`` print."""

    arm: Arm
    mean: float | None = None  # expected score if tried now
    cost: float | None = None  # expected USD of one attempt
    reward: float | None = None  # mean - lambda * cost
    attempts: int = 0  # attempts behind the estimate (in the finest group that has any)
    why: str = ""
    alpha: float | None = None  # Beta posterior of the score, when the policy keeps one
    beta: float | None = None
    probit: tuple[float, float] | None = None  # or (mean, variance) of the probit pass rate
    duration: float | None = None  # expected seconds of one attempt (None: never timed)

    @property
    def interval(self) -> tuple[float | None, float | None]:
        """90% credible interval of the score (computed on demand: only --explain needs it)."""
        if self.probit is not None:
            from acr_cli.routing.latent import Phi

            mu, var = self.probit
            sd = max(var, 0.0) ** 0.5
            return Phi(mu - 1.645 * sd), Phi(mu + 1.645 * sd)
        if self.alpha is None or self.beta is None:
            return None, None
        from acr_cli.routing.betadist import interval90

        return interval90(max(self.alpha, 1e-3), max(self.beta, 1e-3))


class Policy:
    name = "policy"
    exhausted = "no arm left worth trying"  # why a task stops when next() has nothing more

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        raise NotImplementedError

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        """Arms in the order the policy would try them now, with the numbers behind it."""
        raise NotImplementedError

    def similar_effect(self, ctx: Context, state: TaskState | None = None) -> tuple[list, dict[str, tuple[float, float]]]:
        """The similar earlier tasks the policy read for ``ctx`` and how they moved each arm's chance
        (arm id -> (without, with)); a policy that does not read them has none."""
        return [], {}

    def task_done(self, ctx: Context, state: TaskState) -> None:
        """Called after each task; policies that learn from memory need nothing here."""


def untried(arms: Sequence[Arm], state: TaskState) -> list[Arm]:
    done = state.tried_ids | state.excluded
    return [a for a in arms if a.id not in done]
