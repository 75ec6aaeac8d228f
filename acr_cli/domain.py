"""The nouns of the C-A-F loop, shared by live runs and benchmark replays.

* :class:`Arm`: an (agent, model) pair with its prices and priors from the profile.
* :class:`Feedback`: what one attempt produced (verdict, score, tokens, cost...): a value, never changed
  once made (``dataclasses.replace`` derives another).
* :class:`AttemptAborted`: an attempt that ran but must end its task, carrying its outcome.
* :class:`Decision`: the arm a policy picked and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (not imported at run time: `acr route` starts without the health modules)
    from acr_cli.health.errors import Problem

PASSED, FAILED, ERROR, TIMEOUT, CANCELLED = "passed", "failed", "error", "timeout", "cancelled"
# Accepted on the agent's own word: it finished without an error and no verifier checked its work (there
# was none, or the attempt changed what the verifier reads: Feedback.check_changed, acr_cli.checks).
# It ends the task like a pass, but it is weak evidence of skill (memory.sql.UNVERIFIED_WEIGHT).
UNVERIFIED = "unverified"
VERDICTS = (PASSED, UNVERIFIED, FAILED, ERROR, TIMEOUT, CANCELLED)
# Verdicts that say something about the arm's ability (an error or a cancel does not).
JUDGED = (PASSED, FAILED, TIMEOUT)

# What an agent may touch (the routing policies are named in acr_cli.routing.registry).
PERMISSIONS = ("read-only", "workspace-write", "full")

# How an arm is paid for: per token ("api"), or by a subscription ("plan": an attempt's marginal cost is $0
# for routing and budgets; its tokens are recorded and its would-be API cost reported, Feedback.api_cost_usd)
BILLING = ("api", "plan")

# where an attempt's cost comes from: the agent's report, the profile's prices, the price catalog
# (acr_cli.pricing, for a model the profile gives no price for), or nowhere
COST_REPORTED, COST_PRICED, COST_CATALOG, COST_UNKNOWN = "reported", "priced", "catalog", "unknown"
COST_PLAN = "plan"  # an arm billed by a subscription: $0 an attempt


def parse_arm_id(text: str) -> tuple[str, str]:
    """``"codex:gpt-5.4"`` -> ``("codex", "gpt-5.4")``.

    Only the first ``:`` separates: the model part may itself contain ``:`` or
    ``/`` (``opencode:openrouter/qwen/qwen3-coder:free``).
    """
    agent, sep, model = text.strip().partition(":")
    if not sep or not agent or not model:
        raise ValueError(f"{text!r} is not AGENT:MODEL (for example codex:gpt-5.4)")
    return agent.strip(), model.strip()


@dataclass(frozen=True)
class Arm:
    agent: str
    model: str
    price_in: float | None = None  # USD per 1M input tokens
    price_out: float | None = None  # USD per 1M output tokens
    args: tuple[str, ...] = ()
    prior: tuple[tuple[str, float], ...] = ()  # (kind, prior mean score); "default" applies to any kind
    prior_weight: float | None = None  # pseudo-count of the prior; None = the profile's setting
    billing: str = "api"  # BILLING

    @property
    def on_plan(self) -> bool:
        return self.billing == "plan"

    @property
    def id(self) -> str:
        return f"{self.agent}:{self.model}"

    @property
    def free(self) -> bool:
        """Priced at $0 for input and output in the profile: a model on the user's own server."""
        return self.price_in == 0 and self.price_out == 0

    @property
    def costs_nothing(self) -> bool:
        """An attempt costs nothing more: a free arm, or one a subscription pays for (``billing: plan``)."""
        return self.free or self.on_plan

    def price(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """USD for the given tokens, or None when tokens or prices are unknown (a free arm: always 0)."""
        if self.free:
            return 0.0
        if tokens_in is None or tokens_out is None or self.price_in is None or self.price_out is None:
            return None
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6

    def prior_for(self, kind: str | None, sure: float = 1.0) -> float | None:
        """The prior mean score on a task of ``kind``, when the kind is right with probability ``sure``
        (acr_cli.context.KIND_PRECISION): sure x the kind's + (1 - sure) x any kind's, where any kind's
        is ``default``, else the mean over the kinds."""
        table = dict(self.prior)
        p = table[kind] if kind is not None and kind in table else table.get("default")
        if p is None or sure >= 1:
            return p
        any_kind = table.get("default", sum(table.values()) / len(table))
        return sure * p + (1 - sure) * any_kind


@dataclass(frozen=True)
class Feedback:
    """The outcome of one attempt, as the policy and the memory see it. Frozen: the environment makes it
    once, and the loop, memory and the JSON read the same value."""

    arm: Arm
    verdict: str
    score: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    cost_source: str = COST_UNKNOWN
    duration_s: float = 0.0
    apply_ok: bool | None = None  # did the attempt change the workspace
    exit_code: int | None = None
    reason: str = ""  # why it ended so: error message, verifier summary...
    session_id: str | None = None
    final_text: str | None = None
    verifier_tail: str | None = None
    log_path: str | None = None
    # what the attempt changed besides the work tree: the repository's own files (.git/config, hooks,
    # info/; put back by a rollback, kept with a passing attempt), lock files it left, files outside the
    # project changed through a symlink (never restored)
    side_effects: list[str] = field(default_factory=list)
    # a kept attempt changed the user's uncommitted work: where the work tree before it is kept (a ref), and how
    kept_before: str | None = None
    # an error's kind (acr_cli.health.errors.Problem: set-up or transient), and what acr now does about
    # the arm ("set aside...", "cooling down until..."): arm health, never evidence of skill
    problem: Problem | None = None
    health: str | None = None
    # a rolled-back attempt's work: "<acr's store>#<name>" (acr_cli.workspace.kept.command shows it), or from acr
    # before that store a ref in the project, refs/acr/attempts/<task>-<n> (`git diff <base_tree> <attempt_ref>`)
    attempt_ref: str | None = None
    base_tree: str | None = None
    # a failed verifier printed what it printed on the untouched tree (timings aside): the attempt did
    # not change what the verifier checks (None: no baseline to compare with)
    verifier_unchanged: bool | None = None
    # a kept attempt's change: (path, lines added, lines deleted; None for binary files)
    diffstat: list = field(default_factory=list)
    # a passing check the attempt had changed the inputs of (acr_cli.checks): (path, why) each; its verdict is
    # then unverified. tests_added: test files the attempt added, which the check also ran (named, the pass stands)
    check_changed: list[tuple[str, str]] = field(default_factory=list)
    tests_added: list[str] = field(default_factory=list)
    # an arm on a plan (cost_usd 0, cost_source "plan"): what the attempt would have cost on the API, when known
    api_cost_usd: float | None = None

    @property
    def passed(self) -> bool:
        """A verifier checked the work and it passed."""
        return self.verdict == PASSED

    @property
    def accepted(self) -> bool:
        """The attempt ends the task and its changes are kept: it passed, or it finished with no verifier."""
        return self.verdict in (PASSED, UNVERIFIED)


class AttemptAborted(Exception):
    """An attempt ran, and a problem must end its task once the attempt is recorded (e.g. its rollback failed):
    the loop records ``outcome`` whole, ends the task, then raises ``cause`` (the error the user sees)."""

    def __init__(self, outcome: Feedback, cause: Exception):
        super().__init__(str(cause))
        self.outcome, self.cause = outcome, cause


@dataclass(frozen=True)
class Decision:
    arm: Arm
    reason: str
    expected_cost: float | None = None  # the policy's estimate, used to honour --max-cost before running


@dataclass
class TaskState:
    """What happened so far on the task being routed."""

    tried: list[Feedback] = field(default_factory=list)
    # attempts that never reached a model (acr_cli.loop.FREE_ATTEMPTS): not counted against max_attempts,
    # their arms excluded for the rest of the task
    free: list[Feedback] = field(default_factory=list)
    excluded: set[str] = field(default_factory=set)  # arm ids that cannot run (e.g. CLI missing)
    max_attempts: int | None = None
    max_cost: float | None = None
    # a verifier judges each attempt; without one the first attempt that finishes ends the task, so a
    # policy should pick the arm with the best expected score, not plan an escalation on verdicts
    verified: bool = True

    @property
    def spent(self) -> float:
        return sum(f.cost_usd or 0.0 for f in (*self.tried, *self.free))

    @property
    def tried_ids(self) -> set[str]:
        return {f.arm.id for f in self.tried}

    @property
    def best_score(self) -> float:
        return max((f.score or 0.0 for f in self.tried), default=0.0)
