"""How much a context group's parent is worth as its prior, estimated from memory's own groups.

The learned router shrinks a group's pass rates toward its parent's; the parent's estimate
counts as ``worth`` observations. If the groups one level down truly differ from their parent
with variance ``tau2`` in an arm's pass rate p, the Beta prior with that spread is worth
``p (1 - p) / tau2 - 1`` observations. So ``worth = 1 / rho - 1`` with ``rho = tau2 / (p (1 - p))``,
and rho is what the groups' records vary by beyond the noise of their few attempts: a moment
estimate (DerSimonian and Laird's between-group variance) pooled over every parent at that
depth and every arm::

    for a parent with sub-groups g (n_g judged attempts of the arm, mean score y_g, pooled rate
    ybar, v = ybar (1 - ybar)):
        Q = sum_g n_g (y_g - ybar)^2 / v          E[Q] = (k - 1) + rho * (N - sum_g n_g^2 / N)
    rho_hat = sum (Q - (k - 1)) / sum (N - sum_g n_g^2 / N)        (sums over parents and arms)

What a spread estimate is worth depends on how many groups were compared, not on how many
attempts they hold (two groups of a thousand tasks still show one difference): rho_hat has
``dof`` = sum over parents of (sub-groups compared - 1) degrees of freedom, where a sub-group is
compared when some arm has attempts in it and in another sub-group and a rate strictly between 0
and 1 (a parent whose groups show nothing adds nothing). A negative rho_hat (groups agreeing
better than their noise lets them) counts as 0, as DerSimonian and Laird truncate it. The
default ``N_HIER`` is a guess of rho (1 / (N_HIER + 1)) trusted to within a factor of two, a
relative error of about 0.7, which is what a variance estimate from ``PRIOR_DOF`` = 4 degrees
of freedom has (sqrt(2 / 4)); the two are averaged by their degrees of freedom::

    rho = (dof * max(rho_hat, 0) + PRIOR_DOF / (N_HIER + 1)) / (dof + PRIOR_DOF)

So with nothing to compare the default stands; a user whose projects behave alike gets a
parent worth much (a project's few tasks are mostly luck); one whose projects differ gets
projects that follow their own few tasks.

Depths count from the coarsest group (0); the worth at depth d (d >= 1) is that of a group at
depth d given its parent at d - 1. The input is a :class:`acr_cli.memory.aggregates.Chains`:
every group below one root, keyed by its chain of keys below the root.
"""

from __future__ import annotations

from typing import Mapping, Sequence

PRIOR_DOF = 4.0  # the default N_HIER trusted to within a factor of two (relative error sqrt(2 / 4))
RHO_RANGE = (1e-3, 0.5)  # a parent worth between 1 and 999 observations

Sums = Mapping[tuple[str, ...], Mapping[str, Sequence[float]]]


def moments(tasks: Mapping[tuple[str, ...], int], sums: Sums,
            arms: Sequence[str]) -> dict[int, tuple[float, float, float]]:
    """Per depth (>= 1) with sub-groups to compare: (sum (Q - (k - 1)), sum (N - sum n^2 / N), dof)."""
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key in tasks:
        if key:
            children.setdefault(key[:-1], []).append(key)
    out: dict[int, list[float]] = {}
    for parent, kids in children.items():
        seen = [k for k in kids if any(x[0] > 0 for x in sums.get(k, {}).values())]
        if len(seen) < 2:
            continue
        q, den, compared = _parent_moments(seen, sums, arms)
        if compared:  # (two at least: each arm compared here had two)
            acc = out.setdefault(len(parent) + 1, [0.0, 0.0, 0.0])
            acc[0] += q
            acc[1] += den
            acc[2] += len(compared) - 1
    return {d: (a, b, c) for d, (a, b, c) in out.items() if b > 0}


def _parent_moments(seen: list[tuple[str, ...]], sums: Sums,
                    arms: Sequence[str]) -> tuple[float, float, set[tuple[str, ...]]]:
    """One parent's sum over arms of (Q - (k - 1)) and of (N - sum n^2 / N), and the sub-groups compared."""
    q = den = 0.0
    compared: set[tuple[str, ...]] = set()  # the sub-groups some arm's comparison used
    for arm in arms:
        mine = [(k, sums.get(k, {}).get(arm)) for k in seen]
        mine = [(k, x) for k, x in mine if x is not None and x[0] > 0]
        if len(mine) < 2:
            continue
        n_all = sum(x[0] for _, x in mine)
        ybar = sum(x[1] for _, x in mine) / n_all
        v = ybar * (1 - ybar)
        if v <= 1e-9:  # every attempt alike: no spread to see at this rate
            continue
        q += sum(x[0] * (x[1] / x[0] - ybar) ** 2 for _, x in mine) / v - (len(mine) - 1)
        den += n_all - sum(x[0] * x[0] for _, x in mine) / n_all
        compared.update(k for k, _ in mine)
    return q, den, compared


def worth(found: tuple[float, float, float] | None, default: float, prior_dof: float = PRIOR_DOF) -> float:
    """The prior worth of a depth's parent, from its pooled moments (None: no groups to compare)."""
    rho0 = 1.0 / (default + 1.0)
    if found is None:
        rho = rho0
    else:
        num, den, dof = found
        # a variance is not negative: groups that agree more than their noise lets them show rho 0
        # (DerSimonian and Laird's truncation), before the estimate is averaged with the default
        rho = (dof * max(num / den, 0.0) + prior_dof * rho0) / (dof + prior_dof)
    rho = min(max(rho, RHO_RANGE[0]), RHO_RANGE[1])
    return 1.0 / rho - 1.0


def worths(tasks: Mapping[tuple[str, ...], int], sums: Sums, arms: Sequence[str], default: float,
           depths: int, prior_dof: float = PRIOR_DOF) -> list[float]:
    """The prior worth of a group at depth 1 .. depths (index 0 is depth 1). A depth deeper than
    any with sub-groups to compare (the similar earlier tasks below a task's finest group) takes
    the deepest estimate: a few related tasks depart from their group as the finest groups do."""
    found = moments(tasks, sums, arms)
    out: list[float] = []
    for d in range(1, depths + 1):
        deeper = d > 1 and not any(k >= d for k in found)
        out.append(out[-1] if deeper else worth(found.get(d), default, prior_dof))
    return out
