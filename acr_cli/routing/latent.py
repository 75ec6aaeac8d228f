"""The mathematics of the learned router: a latent task-ease model, its fit, and the escalation planner.

Pure Python on small vectors (one entry per arm, or per quadrature node).

Success model. A task has a latent ease z ~ N(0, 1) shared by every arm::

    q_a(z) = P(arm a passes | z) = Phi(alpha * z + mu_a * sqrt(1 + alpha^2)),   alpha^2 = rho / (1 - rho)

so Phi(mu_a) is arm a's marginal pass rate and rho the correlation of two arms'
latent propensities on one task: when an arm fails, the task is probably hard,
and every other arm's chance drops. Integrals over z use Gauss-Hermite nodes.

Fit. mu is fitted per context group by EM on the group's table of verdict
patterns (how many tasks had tried set T and passed set P). That likelihood is
exact although arms are tried adaptively: the choice of the next arm depends
only on outcomes already observed. Each arm's mu has a normal prior (the parent
group's estimate) whose width is the probit-space equivalent of a Beta prior
with a pseudo-count.

Planner. Given the posterior over z after what happened on the task, an exact
dynamic program over subsets S of untried arms (S = tried next, all failed)::

    V(S) = max(0, max_{a not in S} [ p(a|S) (1 - b_S) + (1 - p(a|S)) max(f_a - b_S, 0)
                                     - lambda E[c_a] + (1 - p(a|S)) V(S + a) ])

where b_S is the best score so far and f_a the expected partial score of a
failed attempt. The next arm is the first of the best plan; the plan is empty
(stop) when no arm's expected gain pays for lambda times its expected cost.

The program is exponential in the arms it plans over, so it plans over at most
``EXACT_ARMS`` of them: all of them when there are no more, else the most promising
by three measures taken in turn (pass chance per unit of lambda x cost, which orders
the optimal cascade when arms fail independently; pass chance minus lambda x cost,
the best single try; pass chance alone, the strongest arm). The plan is made again
before every attempt from what is then known, so an arm left out now is weighed again
after the planned ones fail. The cost of a decision is then linear in the number of
arms plus a constant (at most 2^8 subsets).
"""

from __future__ import annotations

import math
import operator
from typing import Sequence

SQRT2 = math.sqrt(2.0)
# the exact planner's arms: 2^8 = 256 subsets at most (a few ms); every benchmark we know has 8 models,
# so on them the plan is the exact one over every arm
EXACT_ARMS = 8
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def Phi(x: float) -> float:
    return 0.5 * math.erfc(-x / SQRT2)


def phi(x: float) -> float:
    return INV_SQRT_2PI * math.exp(-0.5 * x * x)


def Phi_inv(p: float) -> float:
    """Normal quantile: a rational first guess refined by two Newton steps."""
    p = min(max(p, 1e-9), 1 - 1e-9)
    t = math.sqrt(-2.0 * math.log(min(p, 1 - p)))
    x = t - (2.30753 + 0.27061 * t) / (1.0 + 0.99229 * t + 0.04481 * t * t)
    x = -x if p < 0.5 else x
    for _ in range(2):
        x -= (Phi(x) - p) / max(phi(x), 1e-300)
    return x


def hermite_nodes(k: int) -> tuple[list[float], list[float]]:
    """Nodes and weights (summing to 1) for E[f(z)], z ~ N(0, 1): Gauss-Hermite by Newton's method."""
    xs, ws = [0.0] * k, [0.0] * k
    m = (k + 1) // 2
    z = 0.0
    for i in range(m):
        if i == 0:
            z = math.sqrt(2 * k + 1) - 1.85575 * (2 * k + 1) ** (-0.16667)
        elif i == 1:
            z -= 1.14 * k ** 0.426 / z
        elif i == 2:
            z = 1.86 * z - 0.86 * xs[0]
        elif i == 3:
            z = 1.91 * z - 0.91 * xs[1]
        else:
            z = 2.0 * z - xs[i - 2]
        for _ in range(100):
            p1, p2 = math.pi ** -0.25, 0.0
            for j in range(1, k + 1):
                p1, p2 = z * math.sqrt(2.0 / j) * p1 - math.sqrt((j - 1) / j) * p2, p1
            pp = math.sqrt(2.0 * k) * p2
            dz = p1 / pp
            z -= dz
            if abs(dz) < 1e-14:
                break
        xs[i], xs[k - 1 - i] = z, -z
        ws[i] = ws[k - 1 - i] = 2.0 / (pp * pp)
    total = sum(ws)
    return [x * SQRT2 for x in xs], [w / total for w in ws]


class Latent:
    """The success model for one value of rho, on ``k`` quadrature nodes."""

    def __init__(self, rho: float, k: int = 16):
        self.rho = rho
        self.alpha = math.sqrt(rho / (1.0 - rho))
        self.scale = math.sqrt(1.0 + self.alpha ** 2)
        self.z, self.pz = hermite_nodes(k)
        self.logpz = [math.log(p) for p in self.pz]

    def q(self, mu: float) -> list[float]:
        """P(pass | z_k) for an arm whose marginal pass rate is Phi(mu)."""
        a, c = self.alpha, mu * self.scale
        return [min(max(Phi(a * z + c), 1e-12), 1 - 1e-12) for z in self.z]

    # ------------------------------------------------------------------ fitting

    def fit(self, patterns: Sequence[tuple[Sequence[int], Sequence[int], int]], mu0: list[float],
            tau2: list[float], start: list[float] | None = None, iters: int = 30,
            tol: float = 1e-3) -> tuple[list[float], list[float]]:
        """MAP of mu (one per arm) by EM; returns (mu, posterior variance of mu).

        ``patterns``: (indexes of tried arms, indexes of passed arms, number of tasks).
        The prior is mu_a ~ N(mu0_a, tau2_a).
        """
        mu = list(start if start is not None else mu0)
        if not patterns:
            return mu, list(tau2)
        z, a_, sc = self.z, self.alpha, self.scale
        info = [1.0 / t for t in tau2]
        hess = list(info)
        for _ in range(iters):
            etas = [[a_ * zk + m * sc for zk in z] for m in mu]
            qs = [[min(max(Phi(e), 1e-12), 1 - 1e-12) for e in row] for row in etas]
            wy, wn = self._expected_counts(patterns, qs)
            biggest = 0.0
            for a in range(len(mu0)):
                g, hess[a] = self._newton_terms(mu[a] - mu0[a], info[a], etas[a], qs[a], wy[a], wn[a])
                step = max(-1.0, min(1.0, g / hess[a]))
                mu[a] += step
                biggest = max(biggest, abs(step))
            if biggest < tol:
                break
        return mu, [1.0 / h for h in hess]

    def _expected_counts(self, patterns: Sequence[tuple[Sequence[int], Sequence[int], int]],
                         qs: list[list[float]]) -> tuple[list[list[float]], list[list[float]]]:
        """The E step: each arm's expected passes and fails at each node, given every pattern's verdicts."""
        k, add = len(self.z), operator.add
        logq = [[math.log(x) for x in row] for row in qs]
        log1q = [[math.log1p(-x) for x in row] for row in qs]
        wy = [[0.0] * k for _ in qs]
        wn = [[0.0] * k for _ in qs]
        weights = self._node_weights
        for tried, passed, count in patterns:
            w = weights(tried, passed, count, logq, log1q)
            for a in tried:
                if a in passed:
                    wy[a] = list(map(add, wy[a], w))
                else:
                    wn[a] = list(map(add, wn[a], w))
        return wy, wn

    def _node_weights(self, tried: Sequence[int], passed: Sequence[int], count: int, logq: list[list[float]],
                      log1q: list[list[float]]) -> list[float]:
        """Where on the nodes the ease of one pattern's tasks lies, scaled to its number of tasks."""
        ll = self.logpz
        for a in tried:
            ll = list(map(operator.add, ll, logq[a] if a in passed else log1q[a]))
        top = max(ll)
        w = [math.exp(x - top) for x in ll]
        s = count / sum(w)
        return [x * s for x in w]

    def _newton_terms(self, off: float, info: float, eta: list[float], q: list[float], yes: list[float],
                      no: list[float]) -> tuple[float, float]:
        """The M step for one arm: gradient and curvature of its log posterior in mu (``off``: mu - prior mean,
        ``info``: the prior's precision; ``yes``/``no``: its expected passes and fails at each node)."""
        sc = self.scale
        g = -off * info
        h = info
        for j in range(len(q)):
            if yes[j] or no[j]:
                ph = phi(eta[j])
                qj = q[j]
                g += (yes[j] * ph / qj - no[j] * ph / (1 - qj)) * sc
                h += (yes[j] + no[j]) * ph * ph / (qj * (1 - qj)) * sc * sc
        return g, h

    # ------------------------------------------------------------------ planning

    def posterior(self, observed: Sequence[tuple[list[float], bool]]) -> list[float]:
        """Weights over the nodes after verdicts (q of the arm, passed?) seen on the task."""
        w = list(self.pz)
        for q, passed in observed:
            w = [x * (qq if passed else 1 - qq) for x, qq in zip(w, q)]
        total = sum(w) or 1.0
        return [x / total for x in w]

    def plan(self, w0: list[float], qs: list[list[float]], cost: list[float], fail_score: list[float],
             best0: float, cost_weight: float, force: bool, max_steps: int | None = None,
             budget: float | None = None, spend: list[float] | None = None) -> list[int]:
        """The optimal escalation over the arms ``qs`` (indexes into them), first arm first.

        Empty when stopping is best (unless ``force``: then at least the best first arm).
        ``cost`` is what an attempt is charged (its USD, and its time's worth if that counts);
        ``max_steps`` caps the plan's length; ``budget`` drops arms expected to spend more USD
        (``spend``, default ``cost``).
        The dynamic program runs top-down over the subsets it needs, and skips a branch
        when even a certain pass after it could not beat the best plan found so far.
        """
        n = len(qs)
        if n == 0 or (max_steps is not None and max_steps <= 0):
            return []
        spend = cost if spend is None else spend
        arms = [j for j in range(n) if budget is None or spend[j] <= budget]
        penalty = [cost_weight * c for c in cost]
        if len(arms) > EXACT_ARMS:
            arms = candidates(w0, qs, penalty, fail_score, best0, arms, EXACT_ARMS)
        fails = [[1 - q for q in row] for row in qs]
        memo: dict[int, tuple[float, int]] = {}
        mul = operator.mul
        # mass of "every arm fails": the same at every node, since a node's weights are w0 times
        # the failure chances of the arms it has tried; it bounds what a plan can still gain
        none = list(w0)
        for j in arms:
            none = list(map(mul, none, fails[j]))
        none_mass = sum(none)

        def solve(s: int, w: list[float], best: float, depth: int, forced: bool) -> tuple[float, int]:
            hit = memo.get(s)
            if hit is not None:
                return hit
            if max_steps is not None and depth >= max_steps:
                memo[s] = (0.0, -1)
                return memo[s]
            mass = sum(w)
            rest = [j for j in arms if not s >> j & 1]
            all_fail = none_mass / mass if mass > 0 else 1.0
            top_fail = 0.0
            for j in rest:
                if fail_score[j] > top_fail:
                    top_fail = fail_score[j]
            options = []
            for j in rest:
                p = sum(map(mul, w, qs[j])) / mass if mass > 0 else 0.0
                f = fail_score[j]
                b = f if f > best else best
                now = p * (1 - best) + ((1 - p) * (f - best) if f > best else 0.0) - penalty[j]
                # (1 - p) V(child) <= P(a later arm passes, j failed) (1 - b) + any partial credit left
                later = (1 - p) - all_fail
                bound = now + (later * (1 - b) if later > 0 else 0.0) + ((1 - p) * (top_fail - b) if top_fail > b else 0.0)
                options.append((bound, now, p, j))
            options.sort(key=lambda o: (-o[0], -o[1], -o[2], o[3]))  # ties: the caller's order
            top, arg = (-math.inf if forced else 0.0), -1
            for bound, now, p, j in options:
                if bound <= top:
                    break
                v = now
                if p < 1.0:
                    child = s | (1 << j)
                    sub = memo.get(child)
                    if sub is None:
                        f = fail_score[j]
                        sub = solve(child, list(map(mul, w, fails[j])), f if f > best else best, depth + 1, False)
                    v += (1 - p) * sub[0]
                if v > top + 1e-12:
                    top, arg = v, j
            memo[s] = (top if arg >= 0 else 0.0, arg)
            return memo[s]

        solve(0, list(w0), best0, 0, force)
        plan, s = [], 0
        while s in memo and memo[s][1] >= 0:
            j = memo[s][1]
            plan.append(j)
            s |= 1 << j
        return plan


def plan_value(w0: list[float], qs: list[list[float]], penalty: list[float], fail_score: list[float],
               best: float) -> float:
    """The expected reward gained by trying the arms ``qs`` in this order until one passes (``w0``: the
    weights of the task's ease on the nodes; ``penalty``: lambda x each arm's cost)."""
    w, total = list(w0), 0.0
    mass0 = sum(w) or 1.0
    for q, pen, f in zip(qs, penalty, fail_score):
        mass = sum(w)
        if mass <= 0:
            break
        p = sum(map(operator.mul, w, q)) / mass
        total += mass / mass0 * (p * (1 - best) + (1 - p) * max(f - best, 0.0) - pen)
        best = max(best, f)
        w = [x * (1 - y) for x, y in zip(w, q)]
    return total


def candidates(w0: list[float], qs: list[list[float]], penalty: list[float], fail_score: list[float],
               best: float, arms: list[int], k: int) -> list[int]:
    """The ``k`` arms worth planning over exactly, out of ``arms``: the best by pass chance per unit
    of penalty (lambda x cost), by pass chance minus penalty, and by pass chance, taken in turn."""
    mul = operator.mul
    p = {j: sum(map(mul, w0, qs[j])) for j in arms}
    gain = {j: p[j] * (1 - best) + (1 - p[j]) * max(fail_score[j] - best, 0.0) for j in arms}
    orders = [sorted(arms, key=lambda j: (-gain[j] / max(penalty[j], 1e-12), j)),
              sorted(arms, key=lambda j: (-(gain[j] - penalty[j]), j)),
              sorted(arms, key=lambda j: (-p[j], penalty[j], j))]
    out: list[int] = []
    for rank in range(len(arms)):
        for order in orders:
            if order[rank] not in out:
                out.append(order[rank])
            if len(out) == k:
                return sorted(out)
    return sorted(out)


def tau2_of(mu0: float, pseudo: float) -> float:
    """Probit-space variance equivalent to a Beta prior of mean Phi(mu0) worth ``pseudo`` observations."""
    p = Phi(mu0)
    return p * (1 - p) / ((pseudo + 1.0) * max(phi(mu0), 1e-12) ** 2)
