"""The latent-ease model's fit: the pass rate each arm is credited with, from its tasks' verdict patterns."""

from __future__ import annotations

import pytest

from acr_cli.routing.latent import Latent, Phi


def test_the_fit_recovers_each_arms_pass_rate_and_leaves_an_untried_arm_at_its_prior():
    # arm 0 passed 800 of 1,000 tasks, arm 1 200 of 1,000; arm 2 was never tried
    patterns = [([0], {0}, 800), ([0], set(), 200), ([1], {1}, 200), ([1], set(), 800)]
    mu, var = Latent(0.3).fit(patterns, [0.0, 0.0, 0.3], [1.0, 1.0, 0.5])
    assert Phi(mu[0]) == pytest.approx(0.8, abs=0.005) and Phi(mu[1]) == pytest.approx(0.2, abs=0.005)
    assert var[0] < 0.01 and var[1] < 0.01  # a thousand tasks pin it down
    assert (mu[2], var[2]) == (0.3, 0.5)
    assert Latent(0.3).fit([], [0.1], [0.2]) == ([0.1], [0.2])  # nothing seen: the prior


def test_an_arm_tried_only_after_another_failed_is_not_judged_on_hard_tasks_alone():
    # arm 1 was tried only where arm 0 failed (the harder tasks) and passed half of them: its
    # pass rate over all tasks is higher than that
    patterns = [([0], {0}, 600), ([0, 1], {1}, 200), ([0, 1], set(), 200)]
    mu, _ = Latent(0.3).fit(patterns, [0.0, 0.0], [1.0, 1.0])
    assert Phi(mu[0]) == pytest.approx(0.6, abs=0.005)
    assert Phi(mu[1]) > 0.6
    # with no correlation between arms the failures say nothing about the task: half is half
    mu, _ = Latent(1e-6).fit(patterns, [0.0, 0.0], [1.0, 1.0])
    assert Phi(mu[1]) == pytest.approx(0.5, abs=0.005)
