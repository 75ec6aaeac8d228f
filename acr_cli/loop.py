"""The C-A-F loop: Context -> Action -> Feedback -> Context.

``run_task`` is the whole routing loop for one task. It is the same for a
live ``acr run`` (an :class:`Environment` that runs agent CLIs) and for
``acr bench replay`` (an environment that looks up the benchmark matrix):

    decide with what memory knows -> act -> verify -> record -> decide again

It stops when an attempt passes (or, with no verifier, finishes: ``unverified``; so does a pass of a check whose
inputs the attempt changed, acr_cli.checks), the policy says stop, the attempts are
used up, ``max_cost`` would be exceeded, or the user cancels.

An attempt that never reached a model (a set-up error: not logged in, 401/403, an unknown model, a CLI that
cannot start; or a plan's usage limit: :data:`acr_cli.health.errors.BEFORE_MODEL`) is recorded but not
counted against ``max_attempts``, and its arm is not tried again in the task: the next arm is tried at once.
At most :data:`FREE_ATTEMPTS` of them a task are free; later ones count like any attempt. Five covers a
profile whose every provider of one CLI is refused (three to five arms a CLI in the built-in profiles) and
still bounds what a run with nothing set up does before it stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

from acr_cli import interrupts
from acr_cli.attempt_json import attempt_json
from acr_cli.context import Context
from acr_cli.domain import CANCELLED, Arm, AttemptAborted, Decision, Feedback, TaskState
from acr_cli.errors import AcrError
from acr_cli.health.errors import BEFORE_MODEL
from acr_cli.memory.store import Memory
from acr_cli.money import usd
from acr_cli.redact import redact
from acr_cli.routing.base import Policy

FREE_ATTEMPTS = 5


def never_reached_model(fb: Feedback) -> bool:
    """Did the attempt end before any model answered (its error a set-up problem or a usage limit)?"""
    return fb.problem is not None and fb.problem.kind in BEFORE_MODEL


class Environment(Protocol):
    def unavailable(self, arm: Arm) -> str | None:
        """Why ``arm`` cannot run here (e.g. its CLI is not installed), or None."""

    def attempt(self, arm: Arm, ctx: Context, state: TaskState, task_id: str, seq: int) -> Feedback:
        """Run one attempt and return its outcome (never raises for the attempt's own failures; a problem that
        must end the task once the attempt is recorded raises :class:`AttemptAborted` carrying the outcome)."""


Events = Callable[..., None]


@dataclass
class TaskResult:
    task_id: str
    passed: bool
    cost_usd: float
    steps: list[tuple[Decision, Feedback]] = field(default_factory=list)
    skipped: list[tuple[Arm, str]] = field(default_factory=list)
    stop_reason: str = ""
    cancelled: bool = False  # Ctrl-C, SIGTERM or SIGHUP ended the task
    accepted: bool = False  # an attempt ended the task and its changes are kept: passed, or unverified
    forgotten: bool = False  # `acr memory forget` removed the task while it ran: later attempts not recorded
    free: list[int] = field(default_factory=list)  # seq of the attempts not counted (they never reached a model)
    seqs: list[int] = field(default_factory=list)  # each step's seq (a race records its winner last)
    race: dict[str, Any] | None = None  # the race's attempts (seq), its winner's seq (None: none), its pick

    @property
    def counted(self) -> int:
        """Attempts counted against max_attempts."""
        return len(self.steps) - len(self.free)
    max_cost: float | None = None  # the task's budget (None: none)
    budget_stop: bool = False  # the budget ended the task while the policy had another arm to try

    @property
    def verdict(self) -> str:
        """The task's outcome: passed, unverified (accepted with no verifier), cancelled or failed."""
        if self.passed:
            return "passed"
        if self.accepted:
            return "unverified"
        return "cancelled" if self.cancelled else "failed"

    @property
    def score(self) -> float:
        return max((fb.score or 0.0 for _, fb in self.steps), default=0.0)


@dataclass
class Budget:
    """The task's cost limit (``max_cost``; None: none), named in messages as ``name`` (the flag, or the
    file that set it). ``over`` keeps the arms set aside before the first attempt for costing more than
    the whole budget alone (arm id -> expected cost), so that a refusal can name the cheapest."""

    max_cost: float | None
    name: str = "--max-cost"
    over: dict[str, float] = field(default_factory=dict)

    def refuses(self, decision: Decision, state: TaskState) -> bool:
        """Before the first attempt, is ``decision`` an arm the policy itself expects to cost more than the
        whole budget? It is then not started (a plan made with the budget never proposes one; a single best
        pick may) and remembered in ``over``."""
        expected = decision.expected_cost or 0.0
        if self.max_cost is None or state.tried or expected <= self.max_cost:
            return False
        self.over[decision.arm.id] = expected
        return True

    def unestimated(self, decision: Decision, state: TaskState, policy: str) -> str | None:
        """A note when the first attempt has no cost estimate: the budget can then stop only the later ones.
        (The limit may be the profile's max_cost, not a flag the user passed: the note names both.)"""
        if self.max_cost is None or state.tried or decision.expected_cost is not None:
            return None
        return (f"no cost estimate for {decision.arm.id} ({policy} policy): the cost limit {usd(self.max_cost)} "
                "(--max-cost, or max_cost in the profile) can stop only the attempts after this one")

    def stops(self, decision: Decision, state: TaskState) -> str | None:
        """After the first attempt: why the budget ends the task before ``decision`` (spent, or the next
        attempt's expected cost would go over), or None."""
        if self.max_cost is None or not state.tried:
            return None
        if state.spent >= self.max_cost:
            return f"{self.name} {usd(self.max_cost)} is spent ({usd(state.spent)})"
        if state.spent + (decision.expected_cost or 0.0) > self.max_cost:
            return (f"{self.name} {usd(self.max_cost)} would be exceeded "
                    f"(spent {usd(state.spent)}, next ~{usd(decision.expected_cost or 0)})")
        return None


def run_task(
    ctx: Context,
    policy: Policy,
    env: Environment,
    memory: Memory,
    *,
    source: str = "live",
    max_attempts: int | None = None,
    max_cost: float | None = None,
    verifier: str | None = None,
    verified: bool = True,
    task_id: str | None = None,
    oracle: tuple[float, str] | None = None,
    on_event: Events | None = None,
    timestamp: str | None = None,
    unavailable: set[str] | frozenset[str] = frozenset(),
    budget_name: str = "--max-cost",
    race: Any = None,
    race_rule: Any = None,
) -> TaskResult:
    """Route one task to the end. ``timestamp`` pins the recorded times (replays use the run's start).

    ``verified=False``: no verifier judges the attempts (a live run without one), so the first attempt
    that finishes is accepted as ``unverified`` and the policy decides as for a single action.
    ``unavailable``: arm ids that cannot be chosen for this task (a results matrix with no result for them).
    ``budget_name``: how messages name ``max_cost`` (the flag, or the file that set it).
    ``race``: an :class:`acr_cli.race.Racer`: the first step starts the arms ``race_rule`` chooses at once
    (acr_cli.routing.race.RaceRule, the one ``acr route`` shows; without one, the racer's ``size`` first arms),
    then, if none was accepted, the task goes on one arm at a time with the arms left."""
    task = _Task(ctx, policy, env, memory, source=source, verifier=verifier, wanted_id=task_id, oracle=oracle,
                 timestamp=timestamp, emit=on_event or _ignore, budget=Budget(max_cost, budget_name),
                 state=TaskState(max_attempts=max_attempts, max_cost=max_cost, verified=verified,
                                 excluded=set(unavailable)),
                 result=TaskResult("", False, 0.0, max_cost=max_cost), race=race, race_rule=race_rule)
    while task.step():
        pass
    task.finish(begin=True)
    policy.task_done(ctx, task.state)
    return task.result


def run_task_after(ctx: Context, policy: Policy, env: Environment, memory: Memory, state: TaskState,
                   done: Sequence[tuple[Decision, Feedback]], *, source: str, task_id: str | None = None,
                   oracle: tuple[float, str] | None = None, timestamp: str | None = None) -> TaskResult:
    """Route one task whose first attempts ran outside the loop (a replayed race ran them side by side).

    ``done`` is recorded as attempts 1..n in its order, so its last attempt is the one that ends the task when
    it is accepted (or cancelled); otherwise the task goes on one arm at a time, as :func:`run_task` does,
    from ``state`` (the policy's view the first attempts were made in: its ``max_attempts`` and budget). No
    verifier is named and no events are emitted, as in a replay."""
    task = _Task(ctx, policy, env, memory, source=source, verifier=None, wanted_id=task_id, oracle=oracle,
                 timestamp=timestamp, emit=_ignore, budget=Budget(state.max_cost), state=state,
                 result=TaskResult("", False, 0.0, max_cost=state.max_cost))
    task.begin()
    for seq, (decision, fb) in enumerate(done, 1):
        task._record(seq, decision, fb)
    if not done or not task._ends(done[-1][1]):
        while task.step():
            pass
    task.finish(begin=True)
    policy.task_done(ctx, task.state)
    return task.result


def _ignore(*args: Any, **kwargs: Any) -> None:
    """The event callback when the caller gives none."""


@dataclass
class _Task:
    """One task being routed: what :func:`run_task` was given, the policy's view (``state``) and the
    result so far. The task is recorded in memory only once it is certain not to be refused (``begin``),
    and always finished there, whatever ends it (an error, a signal, an abort)."""

    ctx: Context
    policy: Policy
    env: Environment
    memory: Memory
    source: str
    verifier: str | None
    wanted_id: str | None
    oracle: tuple[float, str] | None
    timestamp: str | None
    emit: Events
    budget: Budget
    state: TaskState
    result: TaskResult
    race: Any = None
    race_rule: Any = None

    def step(self) -> bool:
        """Decide and make at most one attempt (or one race); False once the task is over (its stop reason set)."""
        limit = self.state.max_attempts
        if limit is not None and len(self.state.tried) >= limit:
            self.result.stop_reason = f"max attempts ({limit}) reached"
            return False
        if self.race is not None and not self.result.steps:
            racer, self.race = self.race, None  # one race a task; what follows is sequential
            decisions = self._race_decisions(racer.size)
            if len(decisions) >= 2:
                return not self._race(racer, decisions)
        decision = self._decide()
        if decision is None:
            self._stop_with_no_arm()
            return False
        if self._set_aside(decision):
            return True
        stop = self.budget.stops(decision, self.state)
        if stop:
            self.result.stop_reason, self.result.budget_stop = stop, True
            return False
        return not self._ends(self._attempt(decision))

    def begin(self) -> str:
        """The task's id in memory, recording the task the first time."""
        if not self.result.task_id:
            ctx, oracle = self.ctx, self.oracle
            self.result.task_id = self.memory.begin_task(
                source=self.source, kind=ctx.kind, groups=ctx.groups, prompt=ctx.prompt or None,
                project=ctx.project, language=ctx.language, size=ctx.size, ref=ctx.ref, policy=self.policy.name,
                task_id=self.wanted_id, oracle_reward=oracle[0] if oracle else None,
                oracle_arm=oracle[1] if oracle else None, created_at=self.timestamp,
            )
        return self.result.task_id

    def finish(self, begin: bool = False) -> None:
        """Record the task's end (``begin``: recording the task first if no attempt did), whatever signal arrives."""
        with interrupts.deferred():
            if begin:
                self.begin()
            _finish(self.memory, self.result, self.state)

    def _decide(self) -> Decision | None:
        try:
            return self.policy.next(self.ctx, self.state)
        except BaseException:  # routing failed (a memory that went away): the task must not stay "running"
            if self.result.task_id:
                self.finish()
            raise

    def _stop_with_no_arm(self) -> None:
        """The policy has nothing more to try: refuse the task (nothing fits in the budget, or nothing can
        run: a usage error) if no attempt was made, else say why it stopped."""
        state, result = self.state, self.result
        if not state.tried and not state.free:
            refusal = _refusal(self.ctx, self.policy, self.env, state, self.budget.max_cost, self.budget.over,
                               result.skipped, self.budget.name)
            if refusal is not None:
                raise refusal
        stop = _budget_stop(self.ctx, self.policy, self.env, state, self.budget.name) if state.tried else None
        result.budget_stop = stop is not None
        result.stop_reason = stop or _no_arm_left(self.policy, state)

    def _set_aside(self, decision: Decision) -> bool:
        """Is the chosen arm excluded instead of run (it cannot run here, or alone costs more than the budget)?"""
        arm = decision.arm
        why_not = self.env.unavailable(arm)
        if why_not:
            self.state.excluded.add(arm.id)
            self.result.skipped.append((arm, why_not))
            self.emit("skipped", arm=arm, reason=why_not)
            return True
        if self.budget.refuses(decision, self.state):
            self.state.excluded.add(arm.id)
            return True
        note = self.budget.unestimated(decision, self.state, self.policy.name)
        if note:
            self.emit("note", message=note)
        return False

    def _race_decisions(self, size: int) -> list[Decision]:
        """The arms the race starts: :meth:`RaceRule.choose <acr_cli.routing.race.RaceRule.choose>` over the
        policy's ranking of the arms that can run now, within the attempts and the budget left, exactly as
        ``acr route`` shows it (no rule: the first ``size`` arms). Empty: no race, the task goes one arm at a
        time. A race the budget cut says so in a note; arms that cannot run and rank above a raced one are set
        aside as a run one arm at a time would set them aside."""
        from acr_cli.routing.race import RaceAsk, RaceRule

        state = self.state
        rule = self.race_rule or RaceRule(RaceAsk(size), 0.0)
        ranked = [r for r in self.policy.rank(self.ctx, state) if r.arm.id not in state.excluded]
        blocked = {r.arm.id: self.env.unavailable(r.arm) for r in ranked}
        left = None if state.max_attempts is None else state.max_attempts - len(state.tried)
        budget = None if state.max_cost is None else state.max_cost - state.spent
        choice = rule.choose([r for r in ranked if not blocked[r.arm.id]], max_attempts=left, budget=budget,
                             budget_name=self.budget.name)
        if choice.note:
            self.emit("note", message=choice.note)
        if choice.plan.size < 2:
            if not choice.note:
                self.emit("note", message=f"--race {choice.ask.label}: no race, {choice.why_none}")
            return []
        raced = set(choice.plan.arms)
        last = max(i for i, r in enumerate(ranked) if r.arm.id in raced)
        for r in ranked[:last]:
            if blocked[r.arm.id]:
                self.state.excluded.add(r.arm.id)
                self.result.skipped.append((r.arm, blocked[r.arm.id]))
                self.emit("skipped", arm=r.arm, reason=blocked[r.arm.id])
        return [Decision(r.arm, _race_reason(choice, r), r.cost) for r in ranked if r.arm.id in raced]

    def _race(self, racer: Any, decisions: list[Decision]) -> bool:
        """Race ``decisions`` (acr_cli.race), record every attempt, and say whether the race ends the task."""
        first = len(self.result.steps) + 1
        task_id = self.begin()
        for i, decision in enumerate(decisions):
            self.emit("attempt", seq=first + i, decision=decision, task_id=task_id)
        try:
            run = racer.run(decisions, self.ctx, self.state, task_id, first, self.emit)
        except BaseException:
            self.finish()
            raise
        self.result.race = {"attempts": [seq for seq, _, _ in sorted(run.entries, key=lambda e: e[0])],
                            "winner": run.winner, "pick": racer.pick, "note": run.note or None}
        for seq, decision, fb in run.entries:
            self._record(seq, decision, fb)
        if run.note:
            self.emit("note", message=run.note)
        if run.abort is not None:
            self.finish()
            raise run.abort
        if run.winner is not None:
            return self._ends(run.entries[-1][2])
        if interrupts.requested():
            self.result.cancelled = True
            self.result.stop_reason = f"cancelled ({interrupts.describe()})"
            return True
        return False

    def _attempt(self, decision: Decision) -> Feedback:
        """Run one attempt, record it whole and count it. An attempt that must end the task
        (:class:`AttemptAborted`) is recorded the same way, then the task is finished and its cause raised."""
        seq = len(self.result.steps) + 1
        task_id = self.begin()
        self.emit("attempt", seq=seq, decision=decision, task_id=task_id)
        try:
            fb = self.env.attempt(decision.arm, self.ctx, self.state, task_id, seq)
        except AttemptAborted as aborted:
            cause = aborted.cause
            self._record(seq, decision, aborted.outcome)
        except BaseException:  # nothing to record about the attempt, but the task must not stay "running"
            self.finish()
            raise
        else:
            self._record(seq, decision, fb)
            return fb
        self.finish()
        raise cause

    def _record(self, seq: int, decision: Decision, fb: Feedback) -> None:
        """Keep an attempt that ran: in memory (whatever signal arrives), in the counts, the steps and the events."""
        with interrupts.deferred():
            if not self.memory.add_attempt(self.result.task_id, seq, decision, fb, policy=self.policy.name,
                                           verifier=self.verifier, started_at=self.timestamp):
                self.result.forgotten = True
        self._count(seq, fb)
        self.result.steps.append((decision, fb))
        self.result.seqs.append(seq)
        self.emit("feedback", seq=seq, decision=decision, feedback=fb, counted=seq not in self.result.free,
                  raced=self.result.race is not None and seq in self.result.race["attempts"])

    def _count(self, seq: int, fb: Feedback) -> None:
        """An attempt that never reached a model is free (up to FREE_ATTEMPTS) and its arm is not tried again;
        any other counts against max_attempts."""
        if never_reached_model(fb) and len(self.state.free) < FREE_ATTEMPTS:
            self.state.free.append(fb)
            self.state.excluded.add(fb.arm.id)
            self.result.free.append(seq)
        else:
            self.state.tried.append(fb)

    def _ends(self, fb: Feedback) -> bool:
        """Does this attempt end the task (accepted, or cancelled)?"""
        if fb.accepted:
            self.result.passed, self.result.accepted = fb.passed, True
            self.result.stop_reason = ("passed" if fb.passed else
                                       "the check passed, but the attempt changed what it reads (unverified)"
                                       if fb.check_changed else "accepted without a verifier (unverified)")
            return True
        if fb.verdict == CANCELLED or interrupts.requested():
            self.result.cancelled = True
            self.result.stop_reason = f"cancelled ({interrupts.describe()})"
            return True
        return False


def _race_reason(choice: Any, r: Any) -> str:
    """Why an arm runs in the race: the race as asked and chosen, and its own pass chance and cost."""
    plan = choice.plan
    odds = f"P(at least one passes) {plan.p_any:.2f}, " if r.mean is not None else ""
    own = f"; pass chance {r.mean:.2f}" if r.mean is not None else ""
    return (f"race of {plan.size} (--race {choice.ask.label}): {odds}~{usd(plan.usd, 3)} for all of them"
            f"{own}, ~{usd(r.cost, 3) if r.cost is not None else 'cost unknown'}")


def _no_arm_left(policy: Policy, state: TaskState) -> str:
    """Why the task stopped when the policy had no next arm and the budget is not why."""
    if state.tried:
        return policy.exhausted
    if state.free:
        return f"no arm left that can run ({len(state.free)} attempt(s) never reached a model)"
    return "no usable arm"


def first_refusal(ctx: Context, policy: Policy, env: Environment, *, max_attempts: int | None = None,
                  max_cost: float | None = None, verified: bool = True, budget_name: str = "--max-cost",
                  unavailable: set[str] | frozenset[str] = frozenset()) -> AcrError | None:
    """The error :func:`run_task` would refuse this task with before its first attempt (a budget below every
    arm's expected cost, no arm of the plan that can run here), or None when it would start one.

    Asks only the policy and ``env.unavailable``: no agent, no verifier, nothing recorded. ``acr run`` asks it
    before the baseline check, which may take minutes on a real suite; run_task still checks the same."""
    state = TaskState(max_attempts=max_attempts, max_cost=max_cost, verified=verified, excluded=set(unavailable))
    skipped: list[tuple[Arm, str]] = []
    over_budget: dict[str, float] = {}
    while True:
        decision = policy.next(ctx, state)
        if decision is None:
            return _refusal(ctx, policy, env, state, max_cost, over_budget, skipped, budget_name)
        why_not = env.unavailable(decision.arm)
        if why_not:
            skipped.append((decision.arm, why_not))
        elif max_cost is not None and (decision.expected_cost or 0.0) > max_cost:
            over_budget[decision.arm.id] = decision.expected_cost or 0.0
        else:
            return None
        state.excluded.add(decision.arm.id)


def _refusal(ctx: Context, policy: Policy, env: Environment, state: TaskState, max_cost: float | None,
             over_budget: dict[str, float], skipped: list[tuple[Arm, str]], budget_name: str) -> AcrError | None:
    """Why a task the policy has nothing to start for is refused (None: it is not, and ends "no usable arm")."""
    if max_cost is not None:
        refusal = _budget_refusal(ctx, policy, state, max_cost, over_budget, budget_name)
        instead = None if refusal else _budget_stop(ctx, policy, env, state, budget_name, first=True)
        if instead:  # the policy plans within the budget, and its plan is empty
            refusal = AcrError(f"{budget_name} {usd(max_cost)} leaves no arm the {policy.name} policy would try "
                               f"first ({instead}); nothing was run",
                               hint="raise the budget or leave it out; `acr route --explain` shows what each arm is "
                                    "expected to cost")
        if refusal is not None:
            return refusal
    if skipped:  # every arm it would try cannot run here: nothing to record
        why = "; ".join(f"{arm.id}: {reason}" for arm, reason in skipped)
        return AcrError(f"no arm of the plan can run here ({why}); no agent was run",
                        hint="`acr doctor` says what each one needs")
    return None


def _budget_stop(ctx: Context, policy: Policy, env: Environment, state: TaskState, budget_name: str,
                 first: bool = False) -> str | None:
    """When the policy has no next arm: the stop reason naming the budget if the budget is why (without it, the
    policy would try an arm that can run), else None. ``first``: only what it would try, for a refusal."""
    if state.max_cost is None:
        return None
    free = replace(state, max_cost=None, tried=list(state.tried), free=list(state.free), excluded=set(state.excluded))
    decision = policy.next(ctx, free)
    if decision is None or env.unavailable(decision.arm):
        return None
    cost = (f"expected to cost ~{usd(decision.expected_cost)}" if decision.expected_cost is not None
            else "of unknown cost")
    if first:
        return f"without it, {decision.arm.id}, {cost}"
    return (f"stopped by the budget: {budget_name} {usd(state.max_cost)}, {usd(state.spent)} spent; the next "
            f"arm, {decision.arm.id}, is {cost}")


def _budget_refusal(ctx: Context, policy: Policy, state: TaskState, max_cost: float,
                    over_budget: dict[str, float], budget_name: str = "--max-cost") -> AcrError | None:
    """Why no first attempt fits in ``max_cost``, naming the cheapest arm and its expected cost; None when
    the budget is not what stopped the task (no arm can run at all)."""
    unavailable = state.excluded - set(over_budget)
    probe = TaskState(excluded=set(unavailable), max_attempts=state.max_attempts, verified=state.verified)
    # the arms that could run, estimated without the budget (a fixed order ranks every arm it has)
    ranked = [r for r in policy.rank(ctx, probe) if r.arm.id not in unavailable]
    if not ranked and not over_budget:
        return None
    costs = {r.arm.id: r.cost for r in ranked if r.cost is not None}
    costs.update(over_budget)
    hint = ("raise --max-cost or leave it out (a budget can also come from .acr.toml, config.toml or the "
            "profile's settings); `acr route --explain` shows what each arm is expected to cost")
    if not costs:  # the policy has no cost estimate to name
        return AcrError(f"{budget_name} {usd(max_cost)} leaves no arm to try; nothing was run", hint=hint)
    arm, cost = min(costs.items(), key=lambda kv: (kv[1], kv[0]))
    if cost <= max_cost:  # something fits: the budget is not why the policy stopped
        return None
    return AcrError(f"{budget_name} {usd(max_cost)} is less than any arm is expected to cost: the cheapest, {arm}, "
                    f"~{usd(cost)} an attempt; nothing was run", hint=hint)



def _finish(memory: Memory, result: TaskResult, state: TaskState) -> None:
    result.cost_usd = state.spent
    final = result.steps[-1][1].arm.id if result.steps else None
    unverified = result.accepted and not result.passed  # nobody knows whether it passed: NULL, not 0
    memory.finish_task(result.task_id, passed=None if unverified else result.passed,
                       score=result.score if result.steps and not unverified else None,
                       cost_usd=result.cost_usd, final_arm=final)


def summary(result: TaskResult, *, policy: str | None = None, verifier: str | None = None) -> dict[str, Any]:
    """The ``acr run --json`` object; its attempts in the shape of :func:`acr_cli.attempt_json.attempt_json`
    (``policy``, ``verifier``: the run's, said in each attempt)."""
    return {
        "task_id": result.task_id,
        "passed": result.passed,
        "verdict": result.verdict,
        "cost_usd": round(result.cost_usd, 6),
        "stop_reason": redact(result.stop_reason),
        # attempts counted against max_attempts, and those that never reached a model (at most FREE_ATTEMPTS free)
        "attempts_counted": result.counted,
        "attempts_free": len(result.free),
        "attempts_free_max": FREE_ATTEMPTS,
        "budget": None if result.max_cost is None else {"max_cost": result.max_cost, "spent": round(result.cost_usd, 6),
                                                        "stopped": result.budget_stop},
        "attempts": [attempt_json(fb, seq=seq, reason=d.reason, counted=seq not in result.free, policy=policy,
                                  verifier=verifier)
                     for seq, (d, fb) in zip(result.seqs or range(1, len(result.steps) + 1), result.steps)],
        "skipped": [{"agent": a.agent, "model": a.model, "reason": redact(why)} for a, why in result.skipped],
        # the attempts that ran at once (--race) and the winner, by seq; None: no race
        "race": None if result.race is None else {**result.race, "note": redact(result.race["note"])},
    }
