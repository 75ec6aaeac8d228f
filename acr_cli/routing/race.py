"""The race plan: whether to start several arms of a task at once, which, and how many.

A race of k starts the policy's first k arms together; the task passes if any of them passes, and if
all fail, the usual escalation follows over the arms left. A plan is a list of steps (a race, then one
arm at a time), and its expected reward is, summed over the steps::

    P(reach the step and it passes) - cost_weight x (E[USD of the step] + time_weight x E[minutes of it])

with a pass scoring 1 and a failure 0 (``time_weight``: USD a minute of waiting is worth, so minutes are
charged like money, as the learned planner charges them). A step is reached when every earlier step failed.

Rule: for each k from 1 to N, the race of the first k arms followed by the best escalation over the
rest (the best prefix of the ranking's remaining order, stopping when another arm no longer pays);
k = 1 is the sequential escalation itself. The race is chosen when its expected reward beats
escalation's by more than :data:`MARGIN`; the largest reward wins.

Where the numbers come from:

* **P(at least one passes).** With the learned policy's latent task ease (acr_cli.routing.latent), the
  arms' chances are correlated through the task: P(all of S fail) = sum over the ease nodes of
  w(z) x prod (1 - q_a(z)), the task's prior ease before any attempt. That is the joint estimate used
  whenever the ranking carries a probit rate; otherwise the arms are taken as independent (one node,
  q_a = the arm's mean). Independence overstates what a second arm adds when tasks are easy or hard
  for every arm alike, so the joint estimate races less.
* **Cost.** A race step pays every raced arm when all fail. When one passes, the winner is paid in full and
  each loser a share :data:`LOSER_SHARE` of its cost: 1 in a replay of the cascade protocol (every arm
  runs to its end) and 0.5 for a live race that stops the losers at the first pass (a loser stopped at a
  uniformly random point of its run has spent half of it on average; spending is taken as even over a
  run). The winner's cost is taken as the race's mean cost.
* **Time.** A race lasts as long as its slowest arm (every arm runs to its end in a replay; live, a pass
  can end it sooner, so this is the cautious figure). Unknown durations count as 0: with none known,
  time is not weighed and only pass chance and money decide, which never favours a race over trying
  the same arms in turn (a race pays for arms escalation only tries when the first fails).
* An arm whose cost the policy does not know counts 0 USD (it is shown as unknown). A policy that gives
  no pass chance (a fixed order) plans no race: there is nothing to weigh.

How many arms race (``--race`` and the ``race`` setting; :class:`RaceAsk`, :func:`choose`): one answer for
``acr route`` and ``acr run``, both asking :func:`choose` over the same ranking (the arms that can run now):

* ``N`` (an integer, 2 or more) is the user's explicit request: race exactly the first N arms that can run,
  whatever the plan above would say (``acr route`` shows what the planner would choose beside it, so the
  user sees what forcing costs). 1 means no race.
* ``auto`` (up to :data:`AUTO_CAP` arms) or ``auto:M`` (up to M): the planner chooses k in 1..M by the rule
  above; k = 1 is sequential escalation.
* Either way, at most ``max_attempts`` arms race (each raced attempt counts), and a race pays every raced
  arm: when the raced arms' expected costs summed (the cost if every one runs to its end) would exceed the
  budget left (``--max-cost``), arms are dropped from the end of the race until it fits, and a note says so
  (fewer than two left: no race).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from acr_cli.money import usd
from acr_cli.routing.base import Ranked

REPLAY, LIVE_FIRST = 1.0, 0.5  # LOSER_SHARE: a loser's share of its cost when the race passes
LOSER_SHARE = {"replay": REPLAY, "first": LIVE_FIRST}
MARGIN = 1e-9  # a race must beat escalation's expected reward by more than rounding
AUTO = "auto"
AUTO_CAP = 3  # ``--race auto``: the planner races at most this many arms (``auto:M`` sets another cap)


@dataclass(frozen=True)
class Entrant:
    """One arm as the race plan sees it: its id, pass chance on each ease node (``q``), USD and seconds."""

    arm: str
    q: tuple[float, ...]
    usd: float
    seconds: float


@dataclass(frozen=True)
class Outlook:
    """What a plan (steps of arms) is expected to give: its reward, pass chance, USD and minutes."""

    reward: float
    p_pass: float
    usd: float
    minutes: float


@dataclass(frozen=True)
class RacePlan:
    """The choice: ``arms`` raced (empty: no race, escalate), the race step's own figures
    (``p_any``, ``usd``, ``minutes``), and the expected reward of every k tried (k -> Outlook, 1 = escalation)."""

    arms: tuple[str, ...]
    p_any: float
    usd: float
    minutes: float | None
    joint: bool  # P(at least one passes) from the policy's latent task ease (else arms independent)
    options: dict[int, Outlook] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.arms)


def entrants(ranked: Sequence[Ranked], latent=None) -> tuple[list[Entrant], list[float], bool]:
    """The ranking as entrants, with the ease nodes' weights and whether they are joint. ``latent``: the
    policy's :class:`acr_cli.routing.latent.Latent` (its q on the probit rates); else arms independent."""
    joint = latent is not None and bool(ranked) and all(r.probit is not None for r in ranked)
    out = []
    for r in ranked:
        q = tuple(latent.q(r.probit[0])) if joint else (min(max(r.mean or 0.0, 0.0), 1.0),)
        out.append(Entrant(r.arm.id, q, r.cost or 0.0, r.duration or 0.0))
    return out, (list(latent.pz) if joint else [1.0]), joint


def outlook(steps: Sequence[Sequence[Entrant]], weights: Sequence[float], cost_weight: float,
            time_weight: float, loser_share: float) -> Outlook:
    """The expected reward of trying ``steps`` in turn until one passes (a step of several arms: a race)."""
    mass = list(weights)
    reward = p_pass = usd = minutes = 0.0
    for step in steps:
        reach = sum(mass)
        fail = list(mass)
        for e in step:
            fail = [m * (1 - q) for m, q in zip(fail, e.q)]
        passed = reach - sum(fail)
        total = sum(e.usd for e in step)
        mean = total / len(step)
        money = sum(fail) * total + passed * (mean + loser_share * (total - mean))
        took = reach * max(e.seconds for e in step) / 60
        reward += passed - cost_weight * (money + time_weight * took)
        p_pass, usd, minutes = p_pass + passed, usd + money, minutes + took
        mass = fail
    return Outlook(reward, p_pass, usd, minutes)


def best_tail(first: Sequence[Entrant], rest: Sequence[Entrant], weights: Sequence[float], cost_weight: float,
              time_weight: float, loser_share: float) -> Outlook:
    """``first`` as one step, then the prefix of ``rest`` (one arm a step) with the best expected reward."""
    steps = [list(first)] if first else []
    best = outlook(steps, weights, cost_weight, time_weight, loser_share) if steps else None
    for j in range(1, len(rest) + 1):
        o = outlook(steps + [[e] for e in rest[:j]], weights, cost_weight, time_weight, loser_share)
        if best is None or o.reward > best.reward:
            best = o
    return best or Outlook(0.0, 0.0, 0.0, 0.0)


def plan_race(ranked: Sequence[Ranked], n: int, *, cost_weight: float, time_weight: float = 0.0,
              loser_share: float = REPLAY, latent=None) -> RacePlan:
    """Race the first k (2 <= k <= ``n``) of ``ranked`` (the policy's order) when that is expected to beat
    escalating one arm at a time; see the module's docstring for the rule."""
    field_, weights, joint = entrants(ranked, latent)
    options: dict[int, Outlook] = {}
    if any(r.mean is None for r in ranked[:n]):  # a policy that gives no pass chance (a fixed order): no race
        return RacePlan((), 0.0, 0.0, None, joint, options)
    for k in range(1, min(n, len(field_)) + 1):
        options[k] = best_tail(field_[:k], field_[k:], weights, cost_weight, time_weight, loser_share)
    if not options:
        return RacePlan((), 0.0, 0.0, None, joint, options)
    k = max(options, key=lambda i: (options[i].reward, -i))
    if k < 2 or options[k].reward <= options[1].reward + MARGIN:
        k = 1
    return race_figures(field_[:k] if k >= 2 else [], weights, joint, options, loser_share)


def race_figures(raced: Sequence[Entrant], weights: Sequence[float], joint: bool, options: dict[int, Outlook],
                 loser_share: float) -> RacePlan:
    """The race step's own figures (P(at least one passes), expected USD and minutes); no race: zeros."""
    if not raced:
        return RacePlan((), 0.0, 0.0, None, joint, options)
    step = outlook([list(raced)], weights, 0.0, 0.0, loser_share)
    timed = any(e.seconds for e in raced)
    return RacePlan(tuple(e.arm for e in raced), step.p_pass, step.usd, step.minutes if timed else None, joint,
                    options)


def forced(ranked: Sequence[Ranked], n: int, *, loser_share: float = REPLAY, latent=None) -> RacePlan:
    """A race of the first ``n`` arms whatever it is expected to give (``acr bench replay --race N`` measures
    racing itself beside the plan's own choice)."""
    field_, weights, joint = entrants(ranked, latent)
    raced = field_[:n] if len(field_) >= 2 and n >= 2 else []
    return race_figures(raced, weights, joint, {}, loser_share)


@dataclass(frozen=True)
class RaceAsk:
    """How many arms the user asked to race: exactly ``n`` (``auto`` False), or the planner's choice of 1..n."""

    n: int
    auto: bool = False

    @property
    def label(self) -> str:
        """As the user writes it: ``3``, ``auto`` (the default cap) or ``auto:4``."""
        if not self.auto:
            return str(self.n)
        return AUTO if self.n == AUTO_CAP else f"{AUTO}:{self.n}"


def parse_ask(value: Any) -> RaceAsk | None:
    """``--race`` or the ``race`` setting as given (an int, or a string: ``N``, ``auto``, ``auto:M``) as a
    :class:`RaceAsk`; None: no race (unset, or N below 2). Raises ValueError with what is expected."""
    if value is None or isinstance(value, bool):
        return None if value is None else _bad(value)
    if isinstance(value, int):
        return _exact(value)
    text = str(value).strip().lower()
    if text.isdigit():
        return _exact(int(text))
    if text == AUTO:
        return RaceAsk(AUTO_CAP, auto=True)
    head, _, cap = text.partition(":")
    if head == AUTO and cap.isdigit() and int(cap) >= 2:
        return RaceAsk(int(cap), auto=True)
    return _bad(value)


def _exact(n: int) -> RaceAsk | None:
    """N arms exactly; 0 and 1 race nothing (0: as ``acr route --race 0`` always meant)."""
    if n < 0:
        _bad(n)
    return RaceAsk(n) if n >= 2 else None


def _bad(value: Any) -> Any:
    raise ValueError(f"expected N (arms at once, 1: no race), auto or auto:M (the plan chooses up to M, "
                     f"at least 2), got {value!r}")


@dataclass(frozen=True)
class RaceChoice:
    """The answer to "how many arms race": ``plan`` starts (no arms: none, one arm at a time), ``planner`` is
    what ``auto`` would have chosen (beside a forced race; None for auto), ``note`` why fewer race than asked."""

    ask: RaceAsk
    plan: RacePlan
    planner: RacePlan | None = None
    note: str | None = None

    @property
    def why_none(self) -> str | None:
        """Why no race starts (``acr route`` and ``acr run`` say the same words), or None when one does."""
        if self.plan.arms:
            return None
        if self.ask.auto and self.plan.options:
            return "escalating one arm at a time is expected to do better"
        if self.ask.auto:
            return "the policy gives no pass chance to weigh a race with"
        return "fewer than 2 arms can race (those that can run, max_attempts, the budget)"


@dataclass(frozen=True)
class RaceRule:
    """What the choice weighs besides the ranking: the ask, the profile's weights and the policy's latent ease."""

    ask: RaceAsk
    cost_weight: float
    time_weight: float = 0.0
    latent: Any = None

    def choose(self, ranked: Sequence[Ranked], *, max_attempts: int | None, budget: float | None,
               budget_name: str = "--max-cost") -> RaceChoice:
        """:func:`choose` with this rule's ask and weights."""
        return choose(ranked, self.ask, max_attempts=max_attempts, budget=budget, budget_name=budget_name,
                      cost_weight=self.cost_weight, time_weight=self.time_weight, latent=self.latent)


def choose(ranked: Sequence[Ranked], ask: RaceAsk, *, max_attempts: int | None, budget: float | None,
           cost_weight: float, time_weight: float = 0.0, latent=None, budget_name: str = "--max-cost") -> RaceChoice:
    """The race ``acr route`` shows and ``acr run`` starts, over ``ranked`` (the policy's order, the arms that can
    run now), as a live race (losers stopped at the first pass); see the module's docstring for the rule."""
    n = ask.n if max_attempts is None else min(ask.n, max_attempts)
    fits = affordable(ranked[:n], budget)
    weigh = {"cost_weight": cost_weight, "time_weight": time_weight, "loser_share": LIVE_FIRST, "latent": latent}
    planner = plan_race(ranked, fits, **weigh)
    if ask.auto:
        wanted = plan_race(ranked, n, **weigh) if fits < n else planner
        return RaceChoice(ask, planner, None, _budget_note(ranked, wanted, planner, budget, budget_name))
    plan = forced(ranked, fits, loser_share=LIVE_FIRST, latent=latent)
    wanted = forced(ranked, n, loser_share=LIVE_FIRST, latent=latent) if fits < n else plan
    return RaceChoice(ask, plan, planner, _budget_note(ranked, wanted, plan, budget, budget_name))


def affordable(raced: Sequence[Ranked], budget: float | None) -> int:
    """How many of the first arms of ``raced`` fit in ``budget`` together (each paid in full: the cost if every
    one runs to its end; an unknown cost counts 0). No budget: all of them."""
    if budget is None:
        return len(raced)
    total = 0.0
    for k, r in enumerate(raced):
        total += r.cost or 0.0
        if total > budget:
            return k
    return len(raced)


def full_cost(ranked: Sequence[Ranked], arms: Sequence[str]) -> float:
    """The summed expected USD of ``arms`` (each run to its end), as the budget check counts it."""
    by_id = {r.arm.id: r.cost or 0.0 for r in ranked}
    return sum(by_id.get(a, 0.0) for a in arms)


def _budget_note(ranked: Sequence[Ranked], wanted: RacePlan, plan: RacePlan, budget: float | None,
                 name: str) -> str | None:
    """Why the race is smaller than the one asked for (the budget), or None."""
    if budget is None or wanted.size <= plan.size:
        return None
    what = f"racing {plan.size}: {', '.join(plan.arms)}" if plan.size >= 2 else "no race, one arm at a time"
    return (f"a race of {wanted.size} pays every raced arm: ~{usd(full_cost(ranked, wanted.arms), 3)} for "
            f"{', '.join(wanted.arms)}, over the {usd(budget, 3)} {name} leaves; {what}")
