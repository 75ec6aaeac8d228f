"""One plan for ``acr route`` and ``acr run``, and one answer to "can this arm run now?".

:class:`Plan` is what both commands decide before anything runs: the profile narrowed by the project's
routing settings, every run option with its source, the policy over memory, how the request is read, and
the ranked arms with why each one cannot run now (:class:`ArmGate`). ``acr route`` renders it; ``acr run``
starts from it (acr_cli.session.prepare), so the two never disagree.

:class:`ArmGate` is the only place that says why an arm cannot be tried: its CLI is missing (or unknown to
the profile), memory holds it (set aside, cooling down, held after a usage limit), or ``acr doctor`` found
it not ready and nothing it depends on changed since. The live environment, the route and the run's
set-up check all ask it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from acr_cli import agents, routing_settings
from acr_cli.config import Option, Settings, resolve_options
from acr_cli.context import Context, classify
from acr_cli.domain import Arm, TaskState
from acr_cli.errors import AcrError
from acr_cli.health.state import HELD, HealthBook
from acr_cli.profiles import Profile, parse_arms
from acr_cli.routing_settings import Routing


@dataclass(frozen=True)
class Blocked:
    """Why an arm cannot be tried now; ``held_until``: the UTC ISO time a usage limit holding it resets."""

    reason: str
    held_until: str | None = None


class ArmGate:
    """Whether an arm can be tried now, from the profile (which CLI runs it), memory's arm health
    (``health``; None: none kept) and the readiness ``acr doctor`` cached (``cache_dir``; default: acr's)."""

    def __init__(self, profile: Profile, health: HealthBook | None = None, cache_dir: Path | None = None):
        self.profile, self.health = profile, health
        self._cache_dir = cache_dir

    @property
    def cache_dir(self) -> Path:
        if self._cache_dir is None:
            from acr_cli.paths import Paths

            self._cache_dir = Paths.from_env().cache_dir
        return self._cache_dir

    def agent_why_not(self, agent: str) -> str | None:
        """Why agent ``agent`` cannot start at all (unknown to the profile, or its CLI not on PATH), or None."""
        return agents.unavailable(agent, self.profile.agents)

    def why_not(self, arm: Arm) -> str | None:
        """Why ``arm`` cannot be tried now, or None."""
        blocked = self.check(arm)
        return blocked.reason if blocked else None

    def check(self, arm: Arm) -> Blocked | None:
        """Why ``arm`` cannot be tried now, with the reset time when a usage limit holds it; None: it can."""
        return self.check_all([arm])[0]

    def check_all(self, arms: list[Arm]) -> list[Blocked | None]:
        """:meth:`check` for each of ``arms``, memory's arm health read once. The checks go from cheap to dear:
        the CLI on PATH, memory's arm health, then the cached readiness (which may try one connection to a
        local model server)."""
        missing = [self.agent_why_not(a.agent) for a in arms]
        found = [a for a, why in zip(arms, missing) if not why]
        health = self.health.of(found) if self.health is not None and found else {}
        return [Blocked(why) if why else self._held_or_not_ready(a, health.get(a.id)) for a, why in zip(arms, missing)]

    def _held_or_not_ready(self, arm: Arm, health: Any) -> Blocked | None:
        """Why an installed arm cannot run: memory holds it (``health``), or ``acr doctor`` found it not ready."""
        if health is not None:
            return Blocked(health.describe(), health.until if health.state == HELD else None)
        from acr_cli.health import readiness

        why = readiness.known_not_ready(arm.agent, arm.model, agents.get(arm.agent, self.profile.agents).executable,
                                        self.cache_dir, args=arm.args)
        return Blocked(why) if why else None


@dataclass
class Planned:
    """One arm of the plan's order: its standing (acr_cli.routing.base.Ranked) and why it cannot run now."""

    ranked: Any
    blocked: Blocked | None = None

    @property
    def arm(self) -> Arm:
        return self.ranked.arm


@dataclass
class Plan:
    """What ``acr route`` shows and ``acr run`` starts from, decided before any agent runs.

    ``store`` is the memory (acr_cli.memory.interface.MemoryStore: a file, or a team's server, which routing
    then reads); ``memory`` is where runs record and arm health is read (a team's local copy).
    The policy and the reading of the request are made on first use: ``acr run`` checks the verifier and takes
    the work tree's lock first."""

    text: str
    project: Path
    kind: str | None
    profile: Profile
    settings: Settings
    routing: Routing
    options: dict[str, Option]
    arm_ids: list[str] | None
    memory: Any = None
    store: Any = None  # the MemoryStore (acr_cli.memory.interface): a file, or a team's server
    health: HealthBook | None = None
    notes: list[str] = field(default_factory=list)

    @cached_property
    def gate(self) -> ArmGate:
        return ArmGate(self.profile, self.health)

    @cached_property
    def policy(self) -> Any:
        """The policy to route by: over the team's server when there is one (the local copy if it goes away)."""
        from acr_cli.routing.registry import live_policy

        def make(memory: Any) -> Any:
            return live_policy(self.profile, memory, arms=self.arm_ids, policy=self.routing.policy,
                               option=self.routing.policy_option)

        return make(self.memory) if self.store is None else self.store.policy(make)

    @cached_property
    def ctx(self) -> Context:
        """How the request is read (its kind, language, size, project)."""
        return classify(self.text, self.project, kind=self.kind)

    @property
    def max_attempts(self) -> int:
        """Attempts at most; with ``--arms a,b,c`` (and no max_attempts on the command line) each may be tried."""
        opt = self.options["max_attempts"]
        n = int(opt.value)
        if self.arm_ids and opt.source != "command line":
            n = max(n, len(self.arm_ids))
        return n

    @property
    def max_cost(self) -> float | None:
        return self.options["max_cost"].value

    @property
    def budget_name(self) -> str:
        """How messages name the budget: as the user gave it (the flag, or the file that set it)."""
        opt = self.options["max_cost"]
        return "--max-cost" if opt.source == "command line" else f"max_cost (from {opt.source})"

    def state(self, verified: bool = True) -> TaskState:
        """The task's state before its first attempt, as the run routes it."""
        return TaskState(max_attempts=self.max_attempts, max_cost=self.max_cost, verified=verified)

    def order(self) -> list[Planned]:
        """Every arm the policy ranks, best first, each with why it cannot run now (planned as for a run
        with a verifier: a run without one takes the arm with the best expected score)."""
        ranked = self.policy.rank(self.ctx, self.state())
        return [Planned(r, b) for r, b in zip(ranked, self.gate.check_all([r.arm for r in ranked]))]

    def similar(self) -> tuple[list, dict]:
        """The similar earlier tasks the policy reads, and how they moved each arm's chance."""
        return self.policy.similar_effect(self.ctx, self.state())

    @property
    def race_ask(self) -> Any:
        """How many arms the run races, from ``--race`` or the ``race`` setting (acr_cli.routing.race.RaceAsk;
        None: no race). Checked where it was read; a value that slipped past says where it came from."""
        from acr_cli.routing.race import parse_ask

        opt = self.options["race"]
        try:
            return parse_ask(opt.value)
        except ValueError as e:
            raise AcrError(f"race (from {opt.source}): {e}") from None

    def race_rule(self) -> Any:
        """What ``acr route`` and ``acr run`` both choose the race with (None: no race asked): the ask, the
        profile's cost and time weights and the policy's latent task ease (acr_cli.routing.race.RaceRule)."""
        from acr_cli.routing.race import RaceRule

        ask = self.race_ask
        if ask is None:
            return None
        s = self.profile.settings
        return RaceRule(ask, s.cost_weight, s.time_weight, getattr(self.policy, "latent", None))

    def race_choice(self, order: list[Planned]) -> Any:
        """The race ``acr run`` would start now over ``order`` (:meth:`order`): the arms that can run, at most
        ``max_attempts`` of them, within the budget (acr_cli.routing.race.choose); None: no race asked."""
        rule = self.race_rule()
        if rule is None:
            return None
        return rule.choose([p.ranked for p in order if not p.blocked], max_attempts=self.max_attempts,
                           budget=self.max_cost, budget_name=self.budget_name)

    def close(self) -> None:
        """Close the memory (the team's, which closes its local copy too)."""
        target = self.store if self.store is not None else self.memory
        if target is not None:
            target.close()

    def first_refusal(self, env: Any, verified: bool) -> AcrError | None:
        """The error the run would refuse this task with before its first attempt (acr_cli.loop.first_refusal).

        Only the refusal is kept, not the decision: the run asks the policy again as its first attempt starts,
        after the baseline check (which may take minutes). By then a parallel run may have recorded attempts or
        a usage limit, so the first arm is chosen with what memory knows when it starts; the early ask only
        makes a refusal that needs no verifier cost nothing."""
        from acr_cli.loop import first_refusal

        return first_refusal(self.ctx, self.policy, env, max_attempts=self.max_attempts, max_cost=self.max_cost,
                             verified=verified, budget_name=self.budget_name)


@dataclass
class RunRequest:
    """What the user asked for; None means "not given on the command line"."""

    text: str
    project: Path
    verify: str | None = None
    arms: str | None = None  # --arms as given: "AGENT:MODEL,AGENT:MODEL"
    profile: str | None = None
    policy: str | None = None
    kind: str | None = None
    max_cost: float | None = None
    max_attempts: int | None = None
    timeout: float | None = None
    verify_timeout: float | None = None
    permissions: str | None = None
    baseline: str | None = None  # check | accept | off
    rollback: bool = True
    interactive: bool = False
    memory: Path | None = None
    sandbox: str | None = None  # bwrap | none (acr_cli.sandbox)
    race: int | str | None = None  # --race: N, auto or auto:M (acr_cli.routing.race), each arm in its own worktree
    race_pick: str = "first"  # first | cheapest | smallest
    race_copy: tuple[str, ...] = ()  # globs of ignored files copied into each race worktree (a .env)
    race_setup: str | None = None  # --race-setup: a command run in each race worktree before its agent


def settle(req: RunRequest, load_profile: Callable[[str | None, Path], tuple[Profile, Settings]]) -> Plan:
    """The settings half of the plan (no memory opened yet): the profile narrowed to the arms this project may
    use (``arms``, ``exclude``, ``--arms``), its policy and time weight, and every option with its source."""
    profile, settings = load_profile(req.profile, req.project)
    arm_ids = parse_arms(req.arms, profile)
    routing = routing_settings.apply(profile, settings, cli_arms=arm_ids, cli_policy=req.policy)
    options = resolve_options(settings, routing.profile, {
        "verify": req.verify, "timeout": req.timeout, "verify_timeout": req.verify_timeout,
        "max_attempts": req.max_attempts, "max_cost": req.max_cost, "permissions": req.permissions,
        "baseline": req.baseline, "sandbox": req.sandbox, "race": req.race,
        "race_setup": req.race_setup})
    return Plan(req.text, req.project, req.kind, routing.profile, settings, routing, options, arm_ids)


def open_plan_memory(plan: Plan, req: RunRequest, open_memory: Callable[..., Any]) -> None:
    """Give the plan its memory: the team's (routing reads its server, the rest the local copy) when the project
    uses one, else the one ``open_memory`` opens (--memory, ACR_MEMORY or config.toml)."""
    store = open_memory(req.memory, project=req.project, settings=plan.settings)  # a file, or a team's server
    plan.store, plan.memory = store, store.records
    plan.health = HealthBook(plan.memory)
    if store.note:
        plan.notes.append(store.note)


def plan(req: RunRequest, *, load_profile: Callable[[str | None, Path], tuple[Profile, Settings]],
         open_memory: Callable[..., Any]) -> Plan:
    """The plan ``acr route`` shows and ``acr run`` starts from; close it with :meth:`Plan.close`."""
    made = settle(req, load_profile)
    open_plan_memory(made, req, open_memory)
    return made
