"""The learned policy: decide with what memory knows, plan the escalation, update after every attempt.

The same object routes ``acr run`` (live) and the ``learned`` row of ``acr bench replay``.
All it knows across tasks is what :mod:`acr_cli.memory.aggregates` computes from the
attempts in memory; priors come only from the profile (prices, per-kind prior means
and their pseudo-count).

For a task with context groups g_1 (coarse) ... g_n (fine):

1. **Hierarchy.** Fit g_1, then g_2, ... Each level is fitted on its own tasks that are
   not in the next finer group (every task counts once) with the coarser level as its
   prior; the profile's prior means are the prior of g_1, worth the profile's
   ``prior_weight``. What a parent's pass rates are worth at each depth is estimated from
   how far memory's groups at that depth depart from their parents
   (:mod:`acr_cli.routing.spread`), starting from ``N_HIER`` observations; costs and the
   single-action model use ``N_HIER``.
2. **Success.** Latent task ease (see :mod:`acr_cli.routing.latent`): per level, the
   arms' marginal pass rates are fitted by EM on the verdict patterns. On this task,
   every failure shifts the posterior of the task's ease and lowers every untried
   arm's chance. Single-action tasks (one attempt, no verdict to escalate on) use the
   mean score instead, from the group-effects model of :mod:`acr_cli.routing.effects`:
   every sub-group of the kind has a difficulty shared by all arms and an effect per
   arm, so an arm is judged against the difficulty of the tasks it was tried on.
3. **Cost.** ln(cost) per arm and level (a hurdle for zero-cost attempts), shrunk the
   same way; before an arm has a cost, its price times the group's token level. Costs
   already paid on this task predict the others (their ln-costs correlate across arms,
   estimated from arms tried on the same tasks).
   An arm with no price (neither the profile's nor the catalog's) and no cost observed has
   an ``unknown`` cost: it is shown as unknown and planned as one more draw from the known
   arms' spread of ln(cost) (their median when not exploring; on skill alone when no cost
   is known), never with a made-up figure, and ``--max-cost`` cannot stop its first
   attempt (the loop says so). No estimate exceeds the dearest attempt recorded, nor the
   dearest price times the most tokens an attempt has used.
4. **Explore.** Before the first attempt of a task the planner draws each arm's pass rate
   and plans with the draw. The draw is where the coarsest level's estimate of the arm could
   be after one more attempt (the predictive distribution of that posterior mean: a normal of
   variance v^2 / (v + t), v the estimate's posterior variance and t one verdict's variance as
   evidence on it, p (1 - p) / phi(mu)^2): an arm memory knows nothing about is drawn as
   widely as the arms' population, one tried a few times much less, one tried often hardly
   at all. So an arm that could be the best is tried within a few tasks, and a known one is
   not sampled again and again for the little each try still teaches (plain posterior
   sampling, drawing from the whole posterior, did that and cost every world we measured;
   drawing from the finest group's posterior, a project's few tasks, made every arm worth a
   try in every new project). The draw is seeded by the task (its request's words, project
   and how far memory has come), so ``acr route`` shows the plan ``acr run`` will follow, and
   a replay is reproducible. The money a plan may spend is always the posterior mean, so
   ``--max-cost`` holds whatever is drawn. A single-action decision (no verifier, or one
   attempt allowed) does not draw: with no second try on the task, a try that only teaches
   costs the whole task, and against good priors exploring there cost more than it taught
   (ID2919: 268.8 -> 322.4; bench/README.md); it takes the best expected reward, an arm
   known nothing about starting at a pass rate of 0.5 (optimistic where arms pass less).
5. **Plan.** A dynamic program over the untried arms (exact over at most
   ``latent.EXACT_ARMS`` of them, see :mod:`acr_cli.routing.latent`): the next arm is worth
   trying only while its expected score gain beats lambda x its expected cost (plus
   ``time_weight`` x its expected minutes), given what already failed and what could still
   follow. The first attempt of a task is always made; later ones stop when the best plan
   is empty, the attempts are used up, or the expected cost would break ``--max-cost``.
   Arms that failed this very request in this project in the last ``RECENT_HOURS`` come
   after every other arm, and their failures count as evidence that the task is hard.

Settings (fixed from first principles, bench/README.md "The learned router" explains each):
``N_HIER`` 20 (and ``spread.PRIOR_DOF`` 4), ``RHO`` 0.5, cost prior worth 1 attempt with a spread of one e-fold,
cost correlation prior 0 worth 2 pairs, partial credit of a failure prior 0 worth 1;
single-action: ``effects.MIN_TASKS`` 5, a group's shared difficulty as wide as a mean score;
exploration by drawing where an estimate could be after one more attempt (no setting to tune);
the spread of one arm's ln(cost) at most ``COST_S2_MAX`` (a factor of 10 per standard deviation);
``STALE`` 0.05 (a long-lived process refits a context once its coarsest group grew by 5%).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from acr_cli.context import Context
from acr_cli.domain import CANCELLED, Arm, Decision, TaskState
from acr_cli.memory import similar
from acr_cli.memory.aggregates import ArmAgg, GroupStats, Near
from acr_cli.money import usd
from acr_cli.routing import effects, spread
from acr_cli.routing.base import Evidence, Policy, Ranked
from acr_cli.routing.latent import Latent, Phi_inv, plan_value, tau2_of

N_HIER = 20.0  # a child group's own rate is known to about +-0.11 (sqrt(0.25/20)) after 20 tasks
# (the default of a parent's worth: spread.worths replaces it as memory's groups show their spread)
RHO = 0.5  # half of an arm's latent propensity is the task's, half the arm's own
UNKNOWN_PRIOR = 0.5  # no prior mean for this kind: maximal uncertainty
COST_PSEUDO = 1.0  # the price-based cost guess ignores how verbose a model is: worth one attempt
COST_SPREAD = 1.0  # prior variance of ln(cost) around that guess: one e-fold
COST_CORR_PRIOR, COST_CORR_PSEUDO = 0.0, 2.0  # do not carry a task's cost level across arms until seen
FAIL_SCORE_PRIOR, FAIL_SCORE_PSEUDO = 0.0, 1.0  # no partial credit for a failure until observed
# The similar earlier tasks' level is worth at most what its group says: as many observations as
# there can be neighbours, so that NEIGHBOURS copies of this very request weigh as much as the group
NEAR_WORTH = float(similar.NEIGHBOURS)
PROB_CLIP = (0.02, 0.98)
INPUT_SHARE = 0.95  # with only a profile's typical_tokens: agents read far more than they write
# one arm's attempts cost within a factor of 10 of each other per standard deviation of ln(cost): a few
# odd observations (or a price far from what the arm spends) must not blow the mean of exp() up
COST_S2_MAX = math.log(10.0) ** 2
DURATION_PSEUDO = 1.0  # an arm's mean duration starts from every arm's, worth one attempt
RECENT_HOURS = 24.0  # an arm that failed this very request within a day is tried after the others
STALE = 0.05  # a fit is made again once its coarsest group has grown by 5% (at least one task): see fit
ALL = "*"  # every task (what a context without groups depends on)
POPULATION_WORTH = 1e9  # an unseen arm's prior is the arms' population, whose width is all its uncertainty


@dataclass
class Fit:
    """The posterior for one task context, per arm index."""

    mu: list[float]  # probit marginal pass rate
    vmu: list[float]
    fail_score: list[float]
    m: list[float | None] | None  # mean ln cost given cost > 0 (None: no cost known for the arm, or for any)
    s2: list[float]
    vm: list[float]
    ppos: list[float]  # P(cost > 0)
    attempts: list[int]  # attempts behind the estimate in the finest group with data
    corr: float = COST_CORR_PRIOR  # correlation of ln(cost) across arms on one task
    qs: list[list[float]] | None = None  # P(pass | task ease) per arm, on the quadrature nodes
    score: list[float] = field(default_factory=list)  # single-action decisions: mean score (group effects)
    n_score: list[float] = field(default_factory=list)  # ... and its Beta-equivalent pseudo-count
    score_var: list[float] = field(default_factory=list)  # ... and its posterior variance
    # the posterior variance of the coarsest level's pass rates: what an exploring draw is as wide as
    vmu_root: list[float] = field(default_factory=list)
    durations: list[float | None] = field(default_factory=list)  # expected seconds of an attempt per arm
    ceiling: float | None = None  # the most an attempt can be expected to cost (LearnedPolicy.ceiling)


class LearnedPolicy(Policy):
    name = "learned"

    def __init__(self, arms: Sequence[Arm], stats: Evidence, *, cost_weight: float = 0.1,
                 prior_weight: float = 2.0, tie_order: Callable[[Context], Sequence[Arm]] | None = None,
                 typical_tokens: float | None = None, n_hier: float | None = None, rho: float = RHO,
                 min_tasks: int = effects.MIN_TASKS, spread_prior: float = spread.PRIOR_DOF,
                 prices: Sequence[tuple[float, float] | None] | None = None, explore: bool = True,
                 seed: int | None = None, time_weight: float = 0.0, say_exploring: bool = False,
                 explore_width: str = "next", population: bool = True, stale: float = STALE):
        """``prices``: per arm, (USD per 1M input, output tokens) where the arm itself has none (the
        price catalog's), or None; ``explore``: plan on a posterior draw (else on the means);
        ``seed``: of the draws (None: live); ``time_weight``: USD a minute of waiting is worth;
        ``say_exploring``: name an exploring choice in its reason (costs a second plan: live only).
        ``explore_width`` (``next``: after one more attempt, the default; ``root``: the coarsest level's
        whole posterior; ``finest``: the finest group's; ``unseen``: only arms never tried),
        ``population`` and ``stale`` exist for the sensitivity tables of bench/ (see the module's
        docstring for what the defaults are and why)."""
        self.arms = list(arms)
        self.index = {a.id: i for i, a in enumerate(self.arms)}
        self.stats = stats
        self.cost_weight = cost_weight
        self.prior_weight = prior_weight
        self.tie_order = tie_order
        self.typical_tokens = typical_tokens
        self.n_hier = n_hier  # None: pass rates' worth estimated per depth (worths); costs use N_HIER
        self.hier = N_HIER if n_hier is None else n_hier
        self.spread_prior = spread_prior
        self.min_tasks = min_tasks
        self.latent = Latent(rho)
        own = [(a.price_in, a.price_out) if a.price_in is not None and a.price_out is not None else None
               for a in self.arms]
        found = list(prices) if prices is not None else [None] * len(self.arms)
        self.price = [o if o is not None else f for o, f in zip(own, found)]  # None: no price anywhere
        self.pin = [p[0] if p else 0.0 for p in self.price]
        self.pout = [p[1] if p else 0.0 for p in self.price]
        self.explore, self.seed, self.time_weight, self.say_exploring = explore, seed, time_weight, say_exploring
        self.explore_width, self.population, self.stale = explore_width, population, stale
        self._warm: dict[tuple, list[float]] = {}
        self._fits: dict[tuple, tuple] = {}  # (groups, kind, kind_sure, verified) -> (epoch, (Fit, _Prior))
        self._cores: dict[tuple, tuple] = {}  # the same for the groups with data: (epoch, (Fit, _Prior))
        self._effects: dict[tuple, tuple] = {}  # (root group, kind) -> (chains version, Effects)
        self._worths: dict[tuple, tuple] = {}  # (root group, depths) -> (chains version, worths)
        self._population: tuple[float, float] | None = None  # (mean, variance) of an unseen arm's probit rate
        self._done: dict[str, int] = {}  # group key -> tasks finished under it in this process (task_done)
        self._epochs: dict[str, tuple[int, int, int]] = {}  # root group -> (epoch, tasks done then, its size then)

    # ------------------------------------------------------------------ fitting

    def _prior(self, ctx: Context) -> tuple[list[float], list[float]]:
        means, weights = [], []
        for a in self.arms:
            p = a.prior_for(ctx.kind, ctx.kind_sure)  # a guessed kind: P(pass | read as K)
            means.append(min(max(UNKNOWN_PRIOR if p is None else p, PROB_CLIP[0]), PROB_CLIP[1]))
            weights.append(self.prior_weight if a.prior_weight is None else a.prior_weight)
        return means, weights

    def task_done(self, ctx: Context, state: TaskState) -> None:
        for g in (*ctx.groups, ALL):  # what makes a fit made before this task stale (see fit)
            self._done[g] = self._done.get(g, 0) + 1

    def _epoch(self, root: str) -> int:
        """The epoch of what this process read of memory under ``root`` (see :meth:`fit`); -1 before any."""
        found = self._epochs.get(root)
        return found[0] if found else -1

    def fit(self, ctx: Context, verified: bool, near: bool = True) -> Fit:
        """The posterior for this task: its context groups' and, with ``near``, its similar tasks'.

        Within one process (a replay, a long-lived host), the fit of a context is made again once the
        tasks finished under its coarsest group since it was made reach ``STALE`` of that group's
        tasks (at least one): what one more task would move is a small fraction of what is known, and
        a replay of thousands of tasks would otherwise refit for every one of them."""
        key = (ctx.groups, ctx.kind, ctx.kind_sure, verified)
        epoch = self._epoch_now(ctx)
        cached = self._fits.get(key)
        if cached and cached[0] == epoch:
            base, prior = cached[1]
        else:
            base, prior = self._group_fit(ctx, verified, epoch)
            if not verified:
                fitted = self.group_effects(ctx)
                base.score, base.score_var = fitted.predict(ctx.groups[1:])
                base.n_score = [_pseudo_count(p, v) for p, v in zip(base.score, base.score_var)]
            self._fits[key] = (epoch, (base, prior))
        found = self.similar(ctx) if near else []
        if not found:
            return base
        # the similar tasks are one more level below the finest group: each counts as much as it is
        # alike (1: the same request again), and the group's fit is their prior, worth what the finest
        # groups' parents are worth (spread.worths), at most NEAR_WORTH
        own = GroupStats()
        for t in found:
            own.add(t.stats, t.task.similarity)
        prior = replace(prior, n=[min(x, NEAR_WORTH) for x in prior.n])
        fit, _ = self._level(prior, own, verified, (ctx.groups[-1] if ctx.groups else None, "similar"))
        fit.corr, fit.attempts, fit.vmu_root = base.corr, base.attempts, base.vmu_root
        fit.durations, fit.ceiling = base.durations, base.ceiling
        if verified:
            fit.qs = [self.latent.q(mu) for mu in fit.mu]
        else:
            sums: dict[str, list] = {}
            for t in found:
                for arm, (n, sc) in t.scores.items():
                    mine = sums.setdefault(arm, [0.0, 0.0])
                    mine[0] += t.task.similarity * n
                    mine[1] += t.task.similarity * sc
            fit.score, fit.score_var = self.group_effects(ctx).predict(ctx.groups[1:], near=sums,
                                                                       near_worth=NEAR_WORTH)
            fit.n_score = [_pseudo_count(p, v) for p, v in zip(fit.score, fit.score_var)]
        return fit

    def similar(self, ctx: Context) -> list[Near]:
        """The earlier tasks most like this request (acr_cli.memory.similar), with their outcomes."""
        if not ctx.prompt:
            return []
        return self.stats.similar(ctx.prompt, ctx.project)

    def group_effects(self, ctx: Context) -> effects.Effects:
        """The single-action score model of the context's kind (see :mod:`acr_cli.routing.effects`)."""
        means, weights = self._prior(ctx)
        if not ctx.groups:
            return effects.fit({}, {}, [a.id for a in self.arms], means, weights, self.hier,
                               min_tasks=self.min_tasks)
        root = ctx.groups[0]
        chains = self.stats.chains(root, refresh=False)
        key = (root, ctx.kind, ctx.kind_sure)
        cached = self._effects.get(key)
        epoch = self._epoch(root)
        if cached and cached[0] == epoch:
            return cached[1]
        fitted = effects.fit(chains.tasks, chains.sums, [a.id for a in self.arms], means, weights, self.hier,
                             warm=cached[1] if cached else None, min_tasks=self.min_tasks)
        self._effects[key] = (epoch, fitted)
        return fitted

    def _epoch_now(self, ctx: Context) -> int:
        """The epoch of the context's coarsest group, a new one (memory read again) once the tasks finished
        under it since the last reach ``stale`` of its size (see :meth:`fit`)."""
        root = ctx.groups[0] if ctx.groups else ALL
        epoch = self._epochs.get(root)
        if epoch is None or self._done.get(root, 0) - epoch[1] >= max(1.0, self.stale * epoch[2]):
            self.stats.refresh()
            size = self.stats.get(ctx.groups[:1], refresh=False)[0].n_tasks if ctx.groups else 0
            epoch = self._epochs[root] = ((epoch[0] + 1) if epoch else 0, self._done.get(root, 0), size)
        return epoch[0]

    def _group_fit(self, ctx: Context, verified: bool, epoch: int) -> tuple[Fit, "_Prior"]:
        """The fit of the context's groups (a copy: the caller may add to it), shared by contexts that differ
        only in finer groups with no task yet (such levels add nothing)."""
        levels = self.stats.get(ctx.groups, refresh=False)
        used = len(levels)
        while used > 1 and not levels[used - 1].n_tasks and not levels[used - 1].arms:
            used -= 1
        key = (ctx.groups[:used], ctx.kind, ctx.kind_sure, verified)
        core = self._cores.get(key)
        if core is None or core[0] != epoch:
            base, prior = self._fit(ctx, levels, verified)
            base.durations = self._durations(levels[0] if levels else GroupStats())
            base.ceiling = self.ceiling()
            base.corr = self._cost_correlation(levels[0]) if levels else COST_CORR_PRIOR
            if verified:
                base.qs = [self.latent.q(mu) for mu in base.mu]
            core = self._cores[key] = (epoch, (base, prior))
        return replace(core[1][0]), core[1][1]

    def _fit(self, ctx: Context, levels: list[GroupStats], verified: bool) -> tuple[Fit, "_Prior"]:
        """The fit of the context's finest group, and the prior it makes for a level below it."""
        n = len(self.arms)
        mu0, v0, n0 = self._root_prior(ctx, verified)
        prior = _Prior(mu0, v0, n0, [FAIL_SCORE_PRIOR] * n,
                       [FAIL_SCORE_PSEUDO] * n, None, [COST_PSEUDO] * n, [COST_SPREAD] * n, [1.0] * n,
                       [COST_PSEUDO] * n, [0] * n)
        fit = None
        worth = self.worths(ctx.groups, below=1)
        for depth, (group, stats) in enumerate(zip(ctx.groups, levels)):
            finer = levels[depth + 1] if depth + 1 < len(levels) else None
            own = stats.minus(finer) if finer is not None else stats
            if own.n_tasks < 0 or any(a.n < 0 or a.n_cost < 0 for a in own.arms.values()):
                own = stats  # groups read with different windows: count the overlap twice, never negative
            if own.n_tasks == 0 and not own.arms:
                continue  # nothing of its own beyond the finer group: skip this level
            wkey = (group, ctx.groups[depth + 1] if finer is not None else None)
            coarsest = fit is None
            fit, prior = self._level(prior, own, verified, wkey, worth[depth])
            if coarsest:
                root_var = list(fit.vmu)
                if depth == 0 and verified:
                    self._population = self._arms_population(fit, own)
        if fit is None:  # no data at any level: the profile itself (and its typical_tokens, if any)
            m0 = self._price_prior(GroupStats())
            fit = Fit(prior.mu, [tau2_of(prior.mu[i], prior.n[i]) for i in range(n)], prior.f, m0,
                      prior.s2, [COST_SPREAD / COST_PSEUDO] * n, prior.pp, prior.attempts)
            root_var = list(fit.vmu)
        fit.vmu_root = [min(a, b) for a, b in zip(root_var, fit.vmu)]
        return fit, prior

    def _root_prior(self, ctx: Context, verified: bool) -> tuple[list[float], list[float], list[float]]:
        """The coarsest level's prior per arm: probit mean, variance beyond its worth, worth. The profile's
        prior; for an arm it has none for, the arms' population when verdicts decide (see _arms_population)."""
        p0, n0 = self._prior(ctx)
        mu0, v0 = [Phi_inv(p) for p in p0], [0.0] * len(p0)
        if verified and self.population and self._population is not None:
            m, s2 = self._population
            for i, a in enumerate(self.arms):
                if a.prior_for(ctx.kind, ctx.kind_sure) is None:
                    mu0[i], v0[i], n0[i] = m, s2, POPULATION_WORTH
        return mu0, v0, list(n0)

    def _arms_population(self, fit: Fit, own: GroupStats) -> tuple[float, float] | None:
        """What an arm is like before anything is known of it, from the arms memory has seen at the root:
        the mean of their probit pass rates and how far they spread beyond the noise of their estimates,
        each averaged with the default (a pass rate of 0.5 worth ``prior_weight``) by its degrees of
        freedom, the default counting ``spread.PRIOR_DOF`` as a parent's worth does. None: fewer than
        two arms seen (nothing to learn a population from)."""
        seen = [i for i, a in enumerate(self.arms) if own.arm(a.id).n > 0]
        k = len(seen)
        if k < 2:
            return None
        mus = [fit.mu[i] for i in seen]
        mean = sum(mus) / k
        spread_ = max(sum((x - mean) ** 2 for x in mus) / (k - 1) - sum(fit.vmu[i] for i in seen) / k, 0.0)
        default_mean, default_var = Phi_inv(UNKNOWN_PRIOR), tau2_of(Phi_inv(UNKNOWN_PRIOR), self.prior_weight)
        dof = self.spread_prior
        return ((k * mean + dof * default_mean) / (k + dof),
                ((k - 1) * spread_ + dof * default_var) / (k - 1 + dof))

    def worths(self, groups: Sequence[str], below: int = 0) -> list[float]:
        """What a group at depth 1 .. len(groups) + below counts its parent as (observations of a pass
        rate): ``n_hier`` if fixed, else estimated from the groups below this root
        (:mod:`acr_cli.routing.spread`). ``below=1``: also the level of the similar earlier tasks."""
        if not groups:
            return []
        depths = len(groups) + below
        if self.n_hier is not None:
            return [self.n_hier] * depths
        chains = self.stats.chains(groups[0], refresh=False)
        key = (groups[0], depths)
        cached = self._worths.get(key)
        epoch = self._epoch(groups[0])
        if cached and cached[0] == epoch:
            return cached[1]
        found = spread.worths(chains.tasks, chains.sums, [a.id for a in self.arms], N_HIER, depths,
                              self.spread_prior)
        self._worths[key] = (epoch, found)
        return found

    def _level(self, par: "_Prior", own: GroupStats, verified: bool, wkey: tuple,
               worth: float | None = None) -> tuple[Fit, "_Prior"]:
        """Fit one level on its own tasks (``own``) with the coarser level (``par``) as its prior;
        returns the level's fit and the prior it makes for the next finer level, whose pass rates
        count it as ``worth`` observations."""
        n = len(self.arms)
        aggs = [own.arm(a.id) for a in self.arms]
        tau2 = [tau2_of(par.mu[i], par.n[i]) + par.v[i] for i in range(n)]
        if verified:
            mu, vmu = self.latent.fit(self._patterns(own), par.mu, tau2, start=self._warm.get(wkey))
            self._warm[wkey] = mu
        else:
            mu, vmu = list(par.mu), tau2
        fsc = [_shrink(par.f[i], par.n_f[i], aggs[i].s_fscore, aggs[i].n_fail) for i in range(n)]
        n_fsc = [par.n_f[i] + aggs[i].n_fail for i in range(n)]
        m_par, n_m_par = self._cost_prior(par, own)
        costs = [_log_cost(aggs[i], None if m_par is None else m_par[i], n_m_par[i], par.s2[i]) for i in range(n)]
        m: list[float | None] = [c[0] for c in costs]
        s2, vm, n_m = [c[1] for c in costs], [c[2] for c in costs], [c[3] for c in costs]
        ppos = [_shrink(par.pp[i], par.n_pp[i], aggs[i].n_pos, aggs[i].n_cost) for i in range(n)]
        attempts = [round(aggs[i].n) if aggs[i].n else par.attempts[i] for i in range(n)]
        fit = Fit(mu, vmu, fsc, m, s2, vm, ppos, attempts)
        return fit, self._next_prior(par, aggs, fit, n_fsc, m_par is not None, n_m, worth)

    def _next_prior(self, par: "_Prior", aggs: list[ArmAgg], fit: Fit, n_fsc: list[float], priced: bool,
                    n_m: list[float], worth: float | None) -> "_Prior":
        """A level's fit as the prior of the next finer one: its pass rates worth ``worth`` observations
        (None: N_HIER), the rest at most N_HIER; its costs are a scale once some are known (``priced``:
        the level's prior had one)."""
        n = len(self.arms)
        return _Prior(fit.mu, fit.vmu, [self.hier if worth is None else worth] * n, fit.fail_score,
                      [min(self.hier, x) for x in n_fsc],
                      fit.m if priced or any(x is not None for x in fit.m) else None,
                      [min(self.hier, x) for x in n_m], fit.s2, fit.ppos,
                      [min(self.hier, par.n_pp[i] + aggs[i].n_cost) for i in range(n)], fit.attempts)

    def _cost_prior(self, par: "_Prior", own: GroupStats) -> tuple[list[float | None] | None, list[float]]:
        """The prior mean ln cost of each arm and its worth: the coarser level's, else the one the group's
        token level and the arms' prices make (worth nothing while no token level is observed)."""
        m_par, n_m_par = par.m, par.n_m
        if m_par is None:
            m_par = self._price_prior(own)
            if m_par is None:  # no token level observed yet: costs only known up to a factor
                n_m_par = [0.0] * len(self.arms)
        return m_par, n_m_par

    def _patterns(self, stats: GroupStats) -> list[tuple[list[int], set[int], int]]:
        out = []
        for (tried, passed), count in stats.patterns.items():
            t = sorted(self.index[a] for a in tried if a in self.index)  # a set's order: the hash seed's
            if t:
                out.append((t, {self.index[a] for a in passed if a in self.index}, count))
        return out

    def _price_prior(self, stats: GroupStats) -> list[float | None] | None:
        """ln cost of an arm never seen: the group's token level x the arm's price (None for an arm
        with no price: its cost is unknown until it is observed).

        Token level = mean ln(tokens) of the attempts with tokens and cost (the group's, else
        the whole scope's); the input share of those tokens is solved from their cost and
        their arm's prices. With no such attempt, the tokens the costs of priced arms stand for
        (cost / price: results that record a cost and no tokens); else the profile's
        ``typical_tokens`` (if any); else the cost scale is unknown (None).
        """
        src = stats if any(a.n_tok for a in stats.arms.values()) else self.stats.overall(refresh=False)
        n_tok = s_ltok = 0.0
        share_sum = share_n = 0.0
        for arm_id, a in src.arms.items():
            if not a.n_tok:
                continue
            n_tok += a.n_tok
            s_ltok += a.s_ltok
            i = self.index.get(arm_id)
            if i is not None and self.price[i] is not None and self.pout[i] != self.pin[i]:
                per_token = 1e6 * a.s_ptok / a.n_tok
                share = (self.pout[i] - per_token) / (self.pout[i] - self.pin[i])
                share_sum += min(max(share, 0.0), 1.0) * a.n_tok
                share_n += a.n_tok
        if not n_tok:  # no attempt with tokens: the tokens a priced arm's costs stand for (cost / price)
            for arm_id, a in stats.arms.items():
                i = self.index.get(arm_id)
                if a.n_pos and i is not None and self.price[i] is not None:
                    price = INPUT_SHARE * self.pin[i] + (1 - INPUT_SHARE) * self.pout[i]
                    if price > 0:
                        n_tok += a.n_pos
                        s_ltok += a.s_lc - a.n_pos * math.log(price / 1e6)
            share_sum, share_n = INPUT_SHARE * n_tok, n_tok
        if not n_tok:
            if not self.typical_tokens:
                return None
            n_tok, s_ltok, share_sum, share_n = 1.0, math.log(self.typical_tokens), INPUT_SHARE, 1.0
        w = share_sum / share_n if share_n else INPUT_SHARE
        level = s_ltok / n_tok
        out: list[float | None] = []
        for i in range(len(self.arms)):
            if self.price[i] is None:
                out.append(None)
                continue
            price = w * self.pin[i] + (1 - w) * self.pout[i]
            out.append(level + math.log(max(price, 1e-12) / 1e6))
        return out

    def ceiling(self) -> float | None:
        """The most one attempt can be expected to cost: the dearest attempt recorded, or the dearest
        price (its output price) times the most tokens an attempt used (else ``typical_tokens``);
        None when nothing bounds it yet (then no estimate exists either)."""
        b = self.stats.bounds(refresh=False)
        tokens = b.tokens or self.typical_tokens or 0.0
        top = max((max(p) for p in self.price if p is not None), default=0.0)
        bound = max(b.cost, top * tokens / 1e6)
        return bound if bound > 0 else None

    def _cost_correlation(self, stats: GroupStats) -> float:
        num = den = total = 0.0
        pairs = stats.pairs
        for (a, b), (n, s, ss, sx) in pairs.items():
            other = pairs.get((b, a))
            if n < 2 or other is None:
                continue
            ma, mb = s / n, other[1] / other[0]
            va, vb = ss / n - ma * ma, other[2] / other[0] - mb * mb
            d = math.sqrt(max(va * vb, 0.0))
            if d <= 1e-12:
                continue
            num += n * (sx / n - ma * mb)
            den += n * d
            total += n
        if den <= 0:
            return COST_CORR_PRIOR
        r = (num / den * total + COST_CORR_PSEUDO * COST_CORR_PRIOR) / (total + COST_CORR_PSEUDO)
        return min(max(r, 0.0), 0.95)

    def expected_costs(self, fit: Fit, state: TaskState | None, corr: float) -> list[float | None]:
        """Each arm's expected USD for one attempt (None: unknown), given the costs already paid on this
        task; never above :meth:`ceiling`; $0 for an arm on a plan (``billing: plan``)."""
        n = len(self.arms)
        if fit.m is None:  # no cost scale yet; an arm that costs nothing more (local, on a plan) costs nothing all the same
            return [0.0 if a.costs_nothing else None for a in self.arms]
        m = fit.m
        sd = [math.sqrt(max(v, 1e-6)) for v in fit.s2]
        resid = []
        for f in (state.tried if state else []):
            i = self.index.get(f.arm.id)
            if i is not None and m[i] is not None and f.cost_usd and f.cost_usd > 0 and f.verdict != CANCELLED:
                resid.append((math.log(f.cost_usd) - m[i]) / sd[i])
        top = fit.ceiling
        k = len(resid)
        kappa = k * corr / (1 + (k - 1) * corr) if k else 0.0
        shift = kappa * sum(resid) / k if k else 0.0
        out: list[float | None] = []
        for i in range(n):
            mi = m[i]
            if self.arms[i].costs_nothing:  # $0 a million tokens, or paid by a subscription: nothing more to pay
                out.append(0.0)
                continue
            if mi is None:
                out.append(None)
                continue
            mean = mi + sd[i] * shift
            var = fit.s2[i] * (1 - corr * kappa)
            value = fit.ppos[i] * math.exp(min(mean + 0.5 * (var + fit.vm[i]), 50.0))
            out.append(min(value, top) if top is not None else value)
        return out

    def _durations(self, root: GroupStats) -> list[float | None]:
        """Each arm's expected seconds for one attempt, from the coarsest group's timed attempts: the
        arm's mean shrunk toward every arm's (worth ``DURATION_PSEUDO`` attempts); None: never timed."""
        n_all = sum(a.n_dur for a in root.arms.values())
        if not n_all:
            return [None] * len(self.arms)
        mean = sum(a.s_dur for a in root.arms.values()) / n_all
        out: list[float | None] = []
        for arm in self.arms:
            a = root.arm(arm.id)
            out.append((DURATION_PSEUDO * mean + a.s_dur) / (DURATION_PSEUDO + a.n_dur))
        return out

    def draw(self, ctx: Context) -> list[float]:
        """Two standard normals per arm (its pass rate's, then its cost's where that is unknown), the same
        for every decision of one task on one memory: seeded by
        the policy's seed, the task (its benchmark id, project and request) and how far the memory's
        stream has come, so ``acr route`` and the ``acr run`` after it draw alike, and a replay draws
        alike whatever else its memory holds."""
        words = " ".join(ctx.prompt.split())  # the same request, however it was typed or piped in
        rng = random.Random(f"{self.seed}|{self.stats.position}|{ctx.ref}|{ctx.project}|{words}")
        return [rng.gauss(0.0, 1.0) for _ in range(2 * len(self.arms))]

    # ------------------------------------------------------------------ deciding

    def _analyse(self, ctx: Context, state: TaskState | None, near: bool = True, explore: bool | None = None,
                 compare: bool = False) -> tuple[Fit, list[float | None], bool, list[int], dict]:
        """The fit, each arm's expected cost, whether verdicts decide, the plan (arm indexes, first
        first) and what explains it (``info``). ``explore``: plan on the posterior draw (default: the
        policy's setting); ``compare``: also the plan on the posterior means, and what the draw's
        plan is expected to give up against it."""
        # escalation on verdicts needs a verifier and room for a second attempt; else one action decides
        verified = state is None or (state.verified and (state.max_attempts is None or state.max_attempts > 1))
        fit = self.fit(ctx, verified, near)
        z = self.draw(ctx) if (self.explore if explore is None else explore) else None
        cost = self.expected_costs(fit, state, fit.corr)
        charge = self._charges(fit, cost, z)
        left, failed = self._untried(ctx, state)
        pool = [i for i in left if i not in failed] or left  # an arm that failed this request lately comes last
        info: dict = {"verified": verified, "charge": charge, "minutes": fit.durations, "failed_before": failed}
        if not left:
            return fit, cost, verified, [], info
        if not verified:  # one action: the best expected reward (no draw: see the module's docstring)
            info["p"] = {i: fit.score[i] for i in left}
            return fit, cost, verified, sorted(pool, key=lambda i: -(fit.score[i] - self.cost_weight * charge[i]))[:1], info
        # attempts on this task judged so far, and this very request's recent failures: evidence on its ease
        seen = [(self.index[f.arm.id], f.passed) for f in (state.tried if state else [])
                if f.arm.id in self.index and f.verdict in ("passed", "failed", "timeout")]
        seen += [(i, False) for i in failed]
        escalate = _Escalation(self, fit, state, pool, seen, charge, [cost[i] or 0.0 for i in range(len(cost))])
        plan = self._escalation_plan(escalate, z, left, info, compare)
        return fit, cost, verified, plan, info

    def _charges(self, fit: Fit, cost: list[float | None], z: Sequence[float] | None) -> list[float]:
        """What the plan charges per arm: the USD it weighs, plus its expected minutes' worth when time counts."""
        money = self._planned_money(cost, z[len(self.arms):] if z else None)
        if self.time_weight > 0:
            return [c + self.time_weight * (d or 0.0) / 60 for c, d in zip(money, fit.durations)]
        return list(money)

    def _escalation_plan(self, escalate: "_Escalation", z: Sequence[float] | None, left: list[int], info: dict,
                         compare: bool) -> list[int]:
        """The plan on the drawn pass rates (``z``; None: on the means). Puts each arm's pass chance on the
        means into ``info``, and with ``compare`` the means' plan and what the drawn one gives up against it."""
        fit = escalate.fit
        qs_mean = fit.qs
        w0, plan = escalate.plan(qs_mean if z is None else self._drawn(fit, z))
        w_mean = w0 if z is None else self.latent.posterior([(qs_mean[i], ok) for i, ok in escalate.seen])
        info["p"] = {i: sum(w * q for w, q in zip(w_mean, qs_mean[i])) for i in left}
        if compare and z is not None:
            info["mean_plan"] = escalate.plan(qs_mean)[1]
            info["exploring"] = escalate.value(w_mean, qs_mean, info["mean_plan"]) - escalate.value(w_mean, qs_mean, plan)
        return plan

    def _planned_money(self, cost: list[float | None], z: Sequence[float] | None) -> list[float]:
        """The USD the plan weighs per arm: its expected cost; an unknown one as one more draw (``z``) from the
        known arms' spread of ln(cost), or their median; with no cost known at all, a tie-break by list price."""
        logs = [math.log(c) for c in cost if c is not None and c > 0]
        if logs:
            mean = sum(logs) / len(logs)
            var = (sum((x - mean) ** 2 for x in logs) + COST_PSEUDO * COST_SPREAD) / (len(logs) - 1 + COST_PSEUDO)
            return [c if c is not None else math.exp(mean + (z[i] * math.sqrt(var) if z else 0.0))
                    for i, c in enumerate(cost)]
        if any(c is not None for c in cost):  # only free arms known
            return [c if c is not None else 0.0 for c in cost]
        return [1e-9 * (self.pin[i] + self.pout[i]) for i in range(len(cost))]

    def _untried(self, ctx: Context, state: TaskState | None) -> tuple[list[int], list[int]]:
        """The arms this task may still try, in the profile's order for its kind (what breaks ties), and
        those of them that failed this very request lately."""
        done = (state.tried_ids | state.excluded) if state else set()
        left = [i for i, a in enumerate(self.arms) if a.id not in done]
        if self.tie_order is not None:
            rank = {a.id: k for k, a in enumerate(self.tie_order(ctx))}
            left.sort(key=lambda i: rank.get(self.arms[i].id, len(rank)))
        failed = [self.index[a] for a in self.stats.failures(ctx.prompt, ctx.project, RECENT_HOURS)
                  if a in self.index] if ctx.prompt else []
        return left, [i for i in failed if i in left]

    def _drawn(self, fit: Fit, z: Sequence[float]) -> list[list[float]]:
        """Each arm's pass chances on the nodes of the task's ease, its rate drawn (see the module's docstring)."""
        if self.explore_width == "next":  # where the coarsest level's estimate could be after one more attempt
            width = [v * v / (v + _one_attempt(mu)) for v, mu in zip(fit.vmu_root, fit.mu)]
        elif self.explore_width == "unseen":
            width = [v if not n else 0.0 for v, n in zip(fit.vmu_root, fit.attempts)]
        else:
            width = fit.vmu_root if self.explore_width == "root" else fit.vmu
        return [self.latent.q(mu + x * math.sqrt(max(w, 0.0))) for mu, x, w in zip(fit.mu, z, width)]

    def next(self, ctx: Context, state: TaskState) -> Decision | None:
        fit, cost, verified, plan, info = self._analyse(ctx, state, compare=self.say_exploring)
        if not plan:
            return None
        i = plan[0]
        p = info["p"][i]
        what = "pass chance" if verified else "expected score"
        money = f"~{usd(cost[i], 3)}" if cost[i] is not None else "cost unknown"
        tail = f"; plan: {' > '.join(self.arms[j].id for j in plan)}" if len(plan) > 1 else ""
        return Decision(self.arms[i], f"{what} {p:.2f}, {money}{tail}{_exploring(self, info, plan)}", cost[i])

    def similar_effect(self, ctx: Context, state: TaskState | None = None) -> tuple[list, dict[str, tuple[float, float]]]:
        """The similar earlier tasks read for this request, and how they moved each arm's chance:
        arm id -> (without them, with them)."""
        found = self.similar(ctx)
        if not found:
            return [], {}
        self.stats.show_outcomes(found)  # only shown, never routed on
        with_them = self._analyse(ctx, state, explore=False)[4].get("p", {})
        without = self._analyse(ctx, state, near=False, explore=False)[4].get("p", {})
        return found, {self.arms[i].id: (without[i], with_them[i]) for i in with_them if i in without}

    def _why(self, ctx: Context, fit: Fit, cost: list[float | None], info: dict, plan: list[int], pos: int,
             i: int) -> str:
        """Why arm ``i`` stands at ``pos`` of the ranking (``plan`` first, then the rest)."""
        in_plan = pos < len(plan)
        why = ("planned" if in_plan else "not worth trying now") if info["verified"] else "best expected reward"
        if pos == 0 and in_plan:
            why += _exploring(self, info, plan)
        if i in info["failed_before"]:
            why += "; failed this very request lately: tried after the others"
        if fit.attempts[i]:
            why += f"; {fit.attempts[i]} attempt{'s' if fit.attempts[i] != 1 else ''} in its finest group"
        elif self.arms[i].prior_for(ctx.kind) is None:
            why += "; no prior for this kind"
        if cost[i] is None:
            why += "; cost unknown (no price, none observed)"
        return why

    def rank(self, ctx: Context, state: TaskState | None = None) -> list[Ranked]:
        fit, cost, verified, plan, info = self._analyse(ctx, state, compare=True)
        left = [i for i in range(len(self.arms)) if i in info.get("p", {})]
        charge = info["charge"]
        value = {i: info["p"][i] - self.cost_weight * charge[i] for i in left}
        tie = {a.id: k for k, a in enumerate(self.tie_order(ctx) if self.tie_order else self.arms)}
        rest = sorted((i for i in left if i not in plan), key=lambda i: (-value[i], tie.get(self.arms[i].id, 0)))
        out = []
        for pos, i in enumerate(plan + rest):
            why = self._why(ctx, fit, cost, info, plan, pos, i)
            p = info["p"][i]
            mu = fit.mu[i] if verified else None
            r = Ranked(self.arms[i], p, cost[i], value[i] if cost[i] is not None else p, fit.attempts[i], why,
                       duration=info["minutes"][i])
            if verified:
                r.probit = (mu, fit.vmu[i])
            else:
                n = fit.n_score[i]
                r.alpha, r.beta = p * n, (1 - p) * n
            out.append(r)
        return out


class _Escalation:
    """One task's escalation plan over ``pool``, given what was seen on it (``seen``: arm, passed)."""

    def __init__(self, policy: LearnedPolicy, fit: Fit, state: TaskState | None, pool: list[int],
                 seen: list[tuple[int, bool]], charge: list[float], spend: list[float]):
        self.policy, self.fit, self.pool, self.seen, self.charge, self.spend = policy, fit, pool, seen, charge, spend
        self.best0 = state.best_score if state else 0.0
        self.force = not (state and state.tried)  # the first attempt of a task is always made
        self.steps = self.budget = None
        if state is not None and state.max_attempts is not None:
            self.steps = state.max_attempts - len(state.tried)
        if state is not None and state.max_cost is not None:
            self.budget = state.max_cost - state.spent

    def plan(self, qs: list[list[float]]) -> tuple[list[float], list[int]]:
        """The weights of the task's ease after what was seen, and the plan (arm indexes), for pass chances ``qs``."""
        latent, pool = self.policy.latent, self.pool
        w0 = latent.posterior([(qs[i], ok) for i, ok in self.seen])
        found = latent.plan(w0, [qs[i] for i in pool], [self.charge[i] for i in pool],
                            [self.fit.fail_score[i] for i in pool], self.best0, self.policy.cost_weight,
                            force=self.force, max_steps=self.steps, budget=self.budget,
                            spend=[self.spend[i] for i in pool])  # the budget holds whatever is drawn
        return w0, [pool[j] for j in found]

    def value(self, w0: list[float], qs: list[list[float]], plan: list[int]) -> float:
        """What trying ``plan`` in turn is expected to gain, under pass chances ``qs``."""
        lam = self.policy.cost_weight
        return plan_value(w0, [qs[i] for i in plan], [lam * self.charge[i] for i in plan],
                          [self.fit.fail_score[i] for i in plan], self.best0)


def _exploring(policy: LearnedPolicy, info: dict, plan: list[int]) -> str:
    """"; exploring ..." when the draw put another arm first than the posterior means would, with what
    that is expected to cost in reward ("" when it did not, or it was not compared)."""
    mean_plan = info.get("mean_plan")
    if not plan or mean_plan is None or (mean_plan and mean_plan[0] == plan[0]):
        return ""
    instead = policy.arms[mean_plan[0]].id if mean_plan else "stopping"
    return (f"; exploring: the posterior draw put it first (on the means: {instead}); expected to give up "
            f"{max(info.get('exploring', 0.0), 0.0):.3f} in reward")


@dataclass
class _Prior:
    """What a level of the hierarchy starts from: the coarser level's posterior and what it is worth."""

    mu: list[float]  # probit pass rate ...
    v: list[float]  # ... its posterior variance
    n: list[float]  # ... and its worth in observations
    f: list[float]  # partial score of a failure, and its worth
    n_f: list[float]
    m: list[float] | None  # mean ln cost (None: no cost scale yet), its worth and spread
    n_m: list[float]
    s2: list[float]
    pp: list[float]  # P(cost > 0), and its worth
    n_pp: list[float]
    attempts: list[int]  # attempts behind the estimate in the finest group with data


def _one_attempt(mu: float) -> float:
    """The variance of one attempt's verdict as evidence on a probit pass rate mu (the inverse of its Fisher
    information): p (1 - p) / phi(mu)^2."""
    from acr_cli.routing.latent import phi

    p = min(max(0.5 * math.erfc(-mu / math.sqrt(2)), 1e-6), 1 - 1e-6)
    return p * (1 - p) / max(phi(mu) ** 2, 1e-12)


def _log_cost(a: ArmAgg, base: float | None, worth: float, prior_s2: float) -> tuple[float | None, float, float, float]:
    """One arm's ln cost at a level: (mean, spread, variance of the mean, worth), from its attempts there
    (``a``) and the prior mean ``base`` worth ``worth``; the mean is None with no price and no cost observed."""
    w = worth if base is not None else 0.0
    if base is None and not a.n_pos:  # no price and no cost observed: unknown
        return None, prior_s2, COST_SPREAD, 0.0
    mi = ((w * base if base is not None else 0.0) + a.s_lc) / (w + a.n_pos)
    # the spread of the arm's own attempts around their own mean (how far its mean is from the prior's
    # is the mean's business, not the spread's)
    own_mean = a.s_lc / a.n_pos if a.n_pos else mi
    dev = max(a.ss_lc - 2 * own_mean * a.s_lc + a.n_pos * own_mean * own_mean, 0.0)
    ws = max(w, COST_PSEUDO)  # the spread's prior counts even when the mean's does not
    si = min((ws * prior_s2 + dev) / (ws + a.n_pos), COST_S2_MAX)
    return mi, si, si / (w + a.n_pos), w + a.n_pos


def _shrink(prior: float, weight: float, total: float, count: float) -> float:
    """Posterior mean of ``count`` observations summing to ``total`` under a prior worth ``weight``."""
    return (weight * prior + total) / (weight + count) if weight + count > 0 else prior


def _pseudo_count(mean: float, var: float) -> float:
    """The pseudo-count of a Beta with this mean and variance (how many attempts the estimate is worth)."""
    p = min(max(mean, PROB_CLIP[0]), PROB_CLIP[1])
    return max(p * (1 - p) / max(var, 1e-9) - 1, 0.0)
