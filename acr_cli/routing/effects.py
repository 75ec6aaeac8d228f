"""Group effects: an arm's expected score on a single-action task, learned from every sub-group of its kind.

Used where a task gets one attempt (``acr run --max-attempts 1``, ID2919 ``single``,
the proxy-scored dimensions of ``verify``): the learned router takes the arm with the
best expected reward, and that expectation comes from this model.

For the tasks under one kind (the coarsest context group), with arms a = 1..K::

    eta_root = mu                          mu_a ~ N(p_a, v_a / w_a)
    eta_g    = eta_parent + b_g + d_g      b_g ~ N(0, tau_b) (one number, every arm alike)
                                           d_ga ~ N(0, v_a / n_hier)
    an attempt of arm a on a task whose finest group with effects is g scores ~ N(eta_ga, v_a)

* ``p_a``, ``w_a``: the profile's prior mean for the kind and its pseudo-count.
* ``v_a = p_a (1 - p_a)`` (p clipped into [0.05, 0.95]): the variance of one attempt's
  score; a score in [0, 1] with mean p varies at most that much.
* ``b_g``: how much easier or harder the tasks of sub-group g are than its parent's, for
  every arm alike. ``tau_b = pbar (1 - pbar)`` with pbar the mean prior: nothing is assumed
  beyond the spread a mean score can have. So a sub-group where every arm fails (a source no
  model solves) is explained by its b_g and does not count against whichever arms happened
  to be tried there, and an arm's good run on an easy sub-group does not make it look better
  than arms tried on a hard one.
* ``d_ga``: how much better arm a does in g than in the parent: after ``n_hier`` attempts
  a group's own figure counts as much as the parent's.
* A sub-group gets effects once it holds ``MIN_TASKS`` tasks; until then its tasks count
  as its parent's. With fewer, the group's mean score (known to about
  ±sqrt(0.25 / n)) cannot tell a real difference in difficulty from the difficulty of
  its few tasks, and every such group would only dilute what its tasks say about the arms.

Inference is exact. The posterior of the eta's is Gaussian and the groups form a tree:
one pass up the tree sums each group's data and its sub-groups' into a message to its
parent, and one pass down the task's own chain gives the posterior mean and variance of
eta at the task's group. Messages are cached by the number of tasks under each group
(memory only grows), so after one more task only the groups on its chain are recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MIN_TASKS = 5
CLIP = (0.05, 0.95)

Matrix = list[list[float]]


@dataclass
class _Node:
    tasks: int = 0
    children: list[tuple[str, ...]] = field(default_factory=list)


@dataclass
class _Up:
    """A group's summary: its subtree's information about its eta, and the message to its parent."""

    tasks: int
    j: Matrix
    h: list[float]
    msg_j: Matrix
    msg_h: list[float]


class Effects:
    """The fitted model of one kind: the posterior of each arm's mean score in any of its sub-groups."""

    def __init__(self, arm_ids: Sequence[str], prior_mean: Sequence[float], prior_weight: Sequence[float],
                 n_hier: float, min_tasks: int = MIN_TASKS):
        k = len(prior_mean)
        self.k = k
        p = [min(max(x, CLIP[0]), CLIP[1]) for x in prior_mean]
        self.v = [x * (1 - x) for x in p]
        pbar = sum(p) / k if k else 0.5
        self.tau_b = pbar * (1 - pbar)
        self.params = (tuple(arm_ids), tuple(prior_mean), tuple(prior_weight), n_hier, min_tasks)
        self.n_hier = n_hier
        w = [max(x, 1e-6) for x in prior_weight]
        self.j0 = _full([w[a] / self.v[a] for a in range(k)])
        self.h0 = [w[a] / self.v[a] * prior_mean[a] for a in range(k)]
        # a group's step from its parent has covariance Q = diag(v / n_hier) + tau_b 11'; its
        # inverse P = diag(e) - c r r' (Sherman-Morrison, r = e), which makes products with P O(K^2)
        self.q_diag = [self.tau_b + self.v[a] / n_hier for a in range(k)]
        self.e = [n_hier / self.v[a] for a in range(k)]
        self.c = 1.0 / (1.0 / self.tau_b + sum(self.e))
        e, c = self.e, self.c
        self.p = [[(e[a] if a == b else 0.0) - c * e[a] * e[b] for b in range(k)] for a in range(k)]
        self.up: dict[tuple[str, ...], _Up] = {}
        self.root_j: Matrix = self.j0
        self.root_h: list[float] = self.h0
        self._down: dict[tuple[str, ...], tuple[Matrix, list[float]]] = {}  # chain prefix -> posterior (cov, mean)

    def _message(self, j: Matrix, h: list[float], diagonal: list[float] | None = None) -> tuple[Matrix, list[float]]:
        """What information (j, h) about a group's eta says about its neighbour's eta, one step of Q away.

        With S = (P + j)^-1 that is (P - P S P, P S h). When j is a diagonal matrix, pass its
        ``diagonal``: S then follows from Sherman-Morrison too, in O(K^2).
        """
        e, c, k = self.e, self.c, self.k
        if diagonal is not None:  # P + j = diag(g) - c e e'
            g = [e[a] + diagonal[a] for a in range(k)]
            u = [e[a] / g[a] for a in range(k)]
            f = c / (1.0 - c * sum(e[a] * u[a] for a in range(k)))
            s = [[(1.0 / g[a] if a == b else 0.0) + f * u[a] * u[b] for b in range(k)] for a in range(k)]
        else:
            s = _inv(_add(self.p, j))
        es = [sum(e[a] * s[a][b] for a in range(k)) for b in range(k)]  # e' S
        ps = [[e[a] * s[a][b] - c * e[a] * es[b] for b in range(k)] for a in range(k)]  # P S
        pse = [sum(ps[a][b] * e[b] for b in range(k)) for a in range(k)]  # P S e
        msg = [[self.p[a][b] - (ps[a][b] * e[b] - c * pse[a] * e[b]) for b in range(k)] for a in range(k)]
        return msg, _mv(ps, h)

    def predict(self, chain: Sequence[str], near: dict[str, list] | None = None,
                near_worth: float | None = None) -> tuple[list[float], list[float]]:
        """Posterior mean and variance of each arm's mean score on a task of this chain of sub-groups.

        ``near``: {arm: [attempts, score sum]} of the task's similar earlier tasks, each counted as
        much as it is alike. They are one more sub-group below the chain, with its own shared
        difficulty and arm effects (whose spread is v / ``near_worth``, default ``n_hier``), and the
        task is scored as one of them."""
        depth = 0  # the finest group of the chain that has effects; the rest of the chain adds only steps of Q
        while depth < len(chain) and tuple(chain[:depth + 1]) in self.up:
            depth += 1
        cov, mean = self._posterior_at(tuple(chain[:depth]))
        extra = len(chain) - depth  # finer groups without effects yet: each adds one step of Q
        index = {a: i for i, a in enumerate(self.params[0])}
        data = {index[a]: x for a, x in (near or {}).items() if a in index and x[0] > 0}
        if not data:
            return list(mean), [cov[a][a] + extra * self.q_diag[a] for a in range(self.k)]
        return self._with_near(cov, mean, extra, data, near_worth or self.n_hier)

    def _posterior_at(self, prefix: tuple[str, ...]) -> tuple[Matrix, list[float]]:
        """Posterior (covariance, mean) of eta at the group ``prefix`` (cached: one pass down its chain)."""
        hit = self._down.get(prefix)
        if hit is None:
            j, h = self.root_j, self.root_h
            for i in range(1, len(prefix) + 1):
                node = self.up[prefix[:i]]
                cav_j, cav_h = _sub(j, node.msg_j), [x - y for x, y in zip(h, node.msg_h)]
                down_j, down_h = self._message(cav_j, cav_h)
                j, h = _add(node.j, down_j), [x + y for x, y in zip(node.h, down_h)]
            cov = _inv(j)
            hit = self._down[prefix] = (cov, _mv(cov, h))
        return hit

    def _with_near(self, cov: Matrix, mean: list[float], extra: int, data: dict[int, list],
                   worth: float) -> tuple[list[float], list[float]]:
        """The posterior after the similar earlier tasks (``data``: arm index -> [attempts, score sum]), one
        sub-group below the chain's ``extra`` steps of Q, each arm's effect there spread v / ``worth``."""
        k = self.k
        prior = [[cov[a][b] + extra * (self.tau_b + (self.v[a] / self.n_hier if a == b else 0.0))
                  + self.tau_b + (self.v[a] / worth if a == b else 0.0) for b in range(k)] for a in range(k)]
        pj = _inv(prior)
        ph = _mv(pj, mean)
        for a, (n, total) in data.items():
            pj[a][a] += n / self.v[a]
            ph[a] += total / self.v[a]
        cov = _inv(pj)
        return _mv(cov, ph), [cov[a][a] for a in range(k)]


def fit(tasks: dict[tuple[str, ...], int], sums: dict[tuple[str, ...], dict[str, list]], arm_ids: Sequence[str],
        prior_mean: Sequence[float], prior_weight: Sequence[float], n_hier: float,
        warm: Effects | None = None, min_tasks: int = MIN_TASKS) -> Effects:
    """Fit the model to the groups below one kind (``Chains.tasks`` and ``Chains.sums``).

    ``warm``: the previous fit of the same kind; its summaries of groups whose tasks did
    not change are reused.
    """
    eff = Effects(arm_ids, prior_mean, prior_weight, n_hier, min_tasks)
    index = {a: i for i, a in enumerate(arm_ids)}
    nodes = _tree(tasks, min_tasks)
    old = warm.up if warm is not None and warm.params == eff.params else {}
    for key in sorted(nodes, key=len, reverse=True):  # sub-groups before their parents
        node = nodes[key]
        cached = old.get(key)
        if key and cached is not None and cached.tasks == node.tasks:
            eff.up[key] = cached
            continue
        jd, hd = _own_data(eff, index, sums, key, node.children)
        j, h = _full(jd), hd
        for child in node.children:
            up = eff.up[child]
            j = _add(j, up.msg_j)
            h = [x + y for x, y in zip(h, up.msg_h)]
        if not key:
            eff.root_j = _add(eff.j0, j)
            eff.root_h = [x + y for x, y in zip(eff.h0, h)]
            continue
        msg_j, msg_h = eff._message(j, h, diagonal=None if node.children else jd)
        eff.up[key] = _Up(node.tasks, j, h, msg_j, msg_h)
    return eff


def _tree(tasks: dict[tuple[str, ...], int], min_tasks: int) -> dict[tuple[str, ...], _Node]:
    """The groups with effects (the root, and every group of ``min_tasks`` tasks), each with its sub-groups.

    A group's parent has effects whenever the group does: it holds a superset of its tasks."""
    nodes = {key: _Node(n) for key, n in tasks.items() if not key or n >= min_tasks}
    nodes.setdefault((), _Node())
    for key in nodes:
        if key:
            nodes[key[:-1]].children.append(key)
    return nodes


def _own_data(eff: Effects, index: dict[str, int], sums: dict[tuple[str, ...], dict[str, list]],
              key: tuple[str, ...], children: list[tuple[str, ...]]) -> tuple[list[float], list[float]]:
    """The information (diagonal, linear term) of a group's own tasks: those no sub-group with effects holds."""
    own = {arm: list(x) for arm, x in sums.get(key, {}).items()}
    for child in children:
        for arm, (n, s) in sums.get(child, {}).items():
            own[arm][0] -= n
            own[arm][1] -= s
    jd, hd = [0.0] * eff.k, [0.0] * eff.k
    for arm, (n, s) in own.items():
        a = index.get(arm)
        if a is not None and n > 0:
            jd[a] += n / eff.v[a]
            hd[a] += s / eff.v[a]
    return jd, hd


# ---------------------------------------------------------------- small dense linear algebra (K x K)

def _add(x: Matrix, y: Matrix) -> Matrix:
    return [[a + b for a, b in zip(rx, ry)] for rx, ry in zip(x, y)]


def _sub(x: Matrix, y: Matrix) -> Matrix:
    return [[a - b for a, b in zip(rx, ry)] for rx, ry in zip(x, y)]


def _mv(x: Matrix, v: Sequence[float]) -> list[float]:
    return [sum(a * b for a, b in zip(row, v)) for row in x]


def _full(diagonal: Sequence[float]) -> Matrix:
    k = len(diagonal)
    return [[diagonal[a] if a == b else 0.0 for b in range(k)] for a in range(k)]


def _inv(x: Matrix) -> Matrix:
    """Inverse of a symmetric positive-definite matrix, by its Cholesky factor L (x = L L')."""
    n = len(x)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        li = low[i]
        for j in range(i + 1):
            lj = low[j]
            t = x[i][j] - sum(li[m] * lj[m] for m in range(j))
            if i == j:
                if t <= 0.0:
                    raise ValueError("the group-effects model met a matrix that is not positive definite")
                li[i] = t ** 0.5
            else:
                li[j] = t / lj[j]
    # W = L^-1 (lower triangular), then x^-1 = W' W
    w = [[0.0] * n for _ in range(n)]
    for i in range(n):
        w[i][i] = 1.0 / low[i][i]
        for j in range(i):
            w[i][j] = -sum(low[i][m] * w[m][j] for m in range(j, i)) / low[i][i]
    return [[sum(w[m][i] * w[m][j] for m in range(max(i, j), n)) for j in range(n)] for i in range(n)]
