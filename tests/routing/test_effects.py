"""The single-action score model: shared group difficulty, arm effects per group, exact inference."""

from __future__ import annotations

import random

import pytest

from acr_cli.memory.aggregates import Chains
from acr_cli.routing import effects

ARMS = ["a", "b", "c"]


def chains_of(outcomes: list[tuple[tuple[str, ...], str, float]]) -> Chains:
    """One task per outcome: (chain of groups below the kind, arm tried, score)."""
    ch = Chains("kind")
    for chain, arm, score in outcomes:
        ch.add_task(("kind", *chain), {arm: [1, score]})
    return ch


def fit(ch: Chains, prior=(0.5, 0.5, 0.5), weight=20.0, n_hier=20.0, warm=None) -> effects.Effects:
    return effects.fit(ch.tasks, ch.sums, ARMS, list(prior), [weight] * len(ARMS), n_hier, warm=warm)


def run(group: str, arm: str, n: int, rate: float) -> list[tuple[tuple[str, ...], str, float]]:
    return [((group,), arm, float(i < round(rate * n))) for i in range(n)]


def test_a_group_where_every_arm_fails_does_not_count_against_the_arms_tried_there():
    # a and b do equally well on the easy source; only b was also tried on a source nobody solves
    ch = chains_of(run("easy", "a", 20, 0.9) + run("easy", "b", 20, 0.9) + run("hard", "b", 20, 0.0))
    mean, _ = fit(ch).predict(("easy",))
    assert mean[0] == pytest.approx(mean[1], abs=0.02)
    hard, _ = fit(ch).predict(("hard",))
    assert max(hard) < 0.25  # the hard source is hard for every arm, tried there or not


def test_an_arm_better_in_one_group_is_preferred_there_only():
    ch = chains_of(run("s1", "a", 20, 0.9) + run("s1", "b", 20, 0.3) + run("s2", "a", 20, 0.3)
                   + run("s2", "b", 20, 0.9))
    e = fit(ch)
    s1, s2, new = e.predict(("s1",))[0], e.predict(("s2",))[0], e.predict(("s3",))[0]
    assert s1[0] > s1[1] + 0.3 and s2[1] > s2[0] + 0.3
    assert new[0] == pytest.approx(new[1], abs=0.02)  # a new source: no reason to prefer either


def test_without_data_the_profile_prior_and_small_groups_pool_with_their_parent():
    prior = (0.2, 0.5, 0.8)
    mean, var = fit(Chains("kind"), prior=prior).predict(("x", "y"))
    assert mean == pytest.approx(list(prior))
    # fewer than MIN_TASKS tasks: no effects of their own, so the group's data is the kind's
    few = chains_of(run("tiny", "c", effects.MIN_TASKS - 1, 0.0))
    assert fit(few).predict(("tiny",))[0] == pytest.approx(fit(few).predict(("elsewhere",))[0])
    enough = chains_of(run("tiny", "c", effects.MIN_TASKS, 0.0))
    assert fit(enough).predict(("tiny",))[0][2] < fit(enough).predict(("elsewhere",))[0][2]
    # more data, less uncertainty
    assert fit(enough).predict(())[1][2] < var[2]


def test_message_passing_equals_the_joint_posterior():
    """The tree pass gives the mode of the whole model, solved here as one linear system."""
    rng = random.Random(4)
    outcomes = []
    for _ in range(150):
        src = rng.choice(["s1", "s2"])
        chain = (src, src + rng.choice(["x", "y", "rare" + str(rng.randrange(40))]))
        outcomes.append((chain, rng.choice(ARMS), rng.random()))
    ch = chains_of(outcomes)
    prior, w, nh = [0.3, 0.5, 0.7], 20.0, 20.0
    e = fit(ch, prior=prior, weight=w, n_hier=nh)
    # unknowns: mu (3), then per group with effects: b, d (3)
    groups = sorted(k for k, n in ch.tasks.items() if k and n >= effects.MIN_TASKS)
    col = {g: 3 + 4 * i for i, g in enumerate(groups)}
    size = 3 + 4 * len(groups)
    v = [p * (1 - p) for p in prior]
    tau_b = (sum(prior) / 3) * (1 - sum(prior) / 3)
    a_mat = [[0.0] * size for _ in range(size)]
    rhs = [0.0] * size
    for i in range(3):
        a_mat[i][i] += w / v[i]
        rhs[i] += w / v[i] * prior[i]
    for g in groups:
        a_mat[col[g]][col[g]] += 1 / tau_b
        for i in range(3):
            a_mat[col[g] + 1 + i][col[g] + 1 + i] += nh / v[i]

    def design(chain, arm):
        x = [0.0] * size
        x[arm] = 1.0
        for depth in range(1, len(chain) + 1):
            g = chain[:depth]
            if g in col:
                x[col[g]] = x[col[g] + 1 + arm] = 1.0
        return x

    for chain, arm, score in outcomes:
        x = design(chain, ARMS.index(arm))
        for r in range(size):
            rhs[r] += x[r] * score / v[ARMS.index(arm)]
            for c in range(size):
                a_mat[r][c] += x[r] * x[c] / v[ARMS.index(arm)]
    theta = solve(a_mat, rhs)
    for chain in [("s1", "s1x"), ("s2", "s2y"), ("s1", "s1rare3"), ("s9",)]:
        want = [sum(x * t for x, t in zip(design(chain, i), theta)) for i in range(3)]
        assert e.predict(chain)[0] == pytest.approx(want, abs=1e-9)
    # refitting after one more task, reusing the untouched groups' summaries, changes nothing else
    ch.add_task(("kind", "s1", "s1x"), {"a": [1, 1.0]})
    warm, cold = fit(ch, prior=prior, warm=e), fit(ch, prior=prior)
    assert warm.predict(("s2", "s2y"))[0] == pytest.approx(cold.predict(("s2", "s2y"))[0], abs=1e-12)


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]
