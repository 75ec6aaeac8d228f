"""The learned router's model and planner, and its behaviour on a structured benchmark the test builds."""

from __future__ import annotations

import json
import random

import pytest
from benchdata import write_id, write_ood
from conftest import acr

from acr_cli.routing.latent import Latent, Phi, Phi_inv, hermite_nodes, tau2_of


def test_quadrature_and_normal_helpers():
    z, w = hermite_nodes(16)
    assert sum(w) == pytest.approx(1.0)
    assert sum(wi * zi * zi for zi, wi in zip(z, w)) == pytest.approx(1.0)
    for p in (0.01, 0.3, 0.5, 0.97):
        assert Phi(Phi_inv(p)) == pytest.approx(p, abs=1e-9)
    latent = Latent(0.5)
    assert sum(a * b for a, b in zip(latent.pz, latent.q(Phi_inv(0.3)))) == pytest.approx(0.3, abs=1e-6)


def simulate(mus, rho, n_tasks, seed=3):
    """Tasks where every arm is tried (full information), drawn from the latent-ease model itself."""
    rng = random.Random(seed)
    alpha = (rho / (1 - rho)) ** 0.5
    counts = {}
    for _ in range(n_tasks):
        z = rng.gauss(0, 1)
        passed = frozenset(i for i, mu in enumerate(mus)
                           if rng.random() < Phi(alpha * z + mu * (1 + alpha * alpha) ** 0.5))
        counts[passed] = counts.get(passed, 0) + 1
    return [(list(range(len(mus))), set(p), c) for p, c in counts.items()]


def test_em_recovers_the_pass_rates_and_the_prior_dominates_without_data():
    mus = [Phi_inv(p) for p in (0.2, 0.5, 0.8)]
    latent = Latent(0.5)
    weak = [tau2_of(0.0, 0.5)] * 3
    got, var = latent.fit(simulate(mus, 0.5, 3000), [0.0] * 3, weak)
    assert [Phi(m) for m in got] == pytest.approx([0.2, 0.5, 0.8], abs=0.03)
    assert all(v < 0.01 for v in var)
    same, _ = latent.fit([], [0.3, -0.2, 0.1], weak)
    assert same == [0.3, -0.2, 0.1]


def test_failures_lower_every_other_arms_chance():
    latent = Latent(0.5)
    q = [latent.q(0.0), latent.q(0.0)]
    prior = latent.posterior([])
    after_fail = latent.posterior([(q[0], False)])
    chance = lambda w: sum(a * b for a, b in zip(w, q[1]))  # noqa: E731
    assert chance(prior) == pytest.approx(0.5, abs=1e-6)
    assert chance(after_fail) < 0.45  # correlated: the task is probably hard


def test_planner_weighs_gain_against_cost_and_respects_limits():
    latent = Latent(0.5)
    w0 = latent.posterior([])
    good, cheap = latent.q(Phi_inv(0.8)), latent.q(Phi_inv(0.5))
    # cheap first, then the strong arm if it fails
    plan = latent.plan(w0, [good, cheap], [1.0, 0.01], [0, 0], 0.0, 0.1, force=True)
    assert plan == [1, 0]
    # when attempts cost more than anything they could win, stop (but a first attempt is forced)
    assert latent.plan(w0, [good, cheap], [20.0, 15.0], [0, 0], 0.0, 0.1, force=False) == []
    assert len(latent.plan(w0, [good, cheap], [20.0, 15.0], [0, 0], 0.0, 0.1, force=True)) == 1
    assert latent.plan(w0, [good, cheap], [1.0, 0.01], [0, 0], 0.0, 0.1, force=True, max_steps=1) == [0]
    assert latent.plan(w0, [good, cheap], [1.0, 0.01], [0, 0], 0.0, 0.1, force=True, budget=0.5) == [1]


def test_learned_finds_the_cheap_first_cascade_on_a_structured_benchmark(tmp_path):
    """Easy tasks: the cheap model suffices. Hard tasks: only the premium one. The learned
    router must beat every single model and the premium-first cascade on regret."""
    rng = random.Random(7)
    cells = {}
    for t in range(120):
        hard = rng.random() < 0.4
        cells[f"t{t:03d}"] = {"cheap": (0 if hard else 1, 1, 0.02), "mid": (0 if hard or rng.random() < 0.5 else 1, 1, 0.4),
                              "premium": (1 if rng.random() < 0.9 else 0, 1, 3.0)}
    d = write_ood(tmp_path / "data", cells)
    r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--json", "--policy", "learned",
            "--policy", "always:cheap", "--policy", "always:premium", "--policy", "cascade:premium,cheap")
    assert r.returncode == 0, r.stderr
    rows = {x["policy"]: x for x in json.loads(r.stdout)["results"]}
    learned = rows["learned"]["cum_regret"]
    for other in ("always:cheap", "always:premium", "cascade:premium,cheap"):
        assert learned < rows[other]["cum_regret"], (other, learned, rows[other]["cum_regret"])
    assert rows["learned"]["avg_steps"] > 1.0  # it escalates after failures


def test_a_source_no_model_solves_does_not_steer_single_action_routing(tmp_path):
    """One action per task. The stream opens with a source where every model fails; the
    cheap model, tried there first, is the best on the kind's other source. Its failures on
    the impossible source say nothing about it: the learned router must still find it."""
    cells, dims = {}, {}
    for i in range(30):
        cells[f"dim3_swebench_repo_{i}"] = {"cheap": (0.0, 0.001), "mid": (0.0, 0.01), "premium": (0.0, 0.1)}
    for i in range(60):
        cells[f"dim3_debugbench_{i}"] = {"cheap": (float(i % 10 != 9), 0.001), "mid": (float(i % 10 < 6), 0.01),
                                         "premium": (float(i % 10 < 7), 0.1)}
    dims = {t: "bug_fixing" for t in cells}
    d = write_id(tmp_path / "data", cells, dims)
    r = acr("bench", "replay", "id2919", "--data-dir", str(d), "--json", "--protocol", "single",
            "--policy", "learned", "--policy", "always:cheap", "--policy", "always:mid")
    assert r.returncode == 0, r.stderr
    rows = {x["policy"]: x for x in json.loads(r.stdout)["results"]}
    assert rows["learned"]["cum_regret"] < rows["always:mid"]["cum_regret"] - 10
    assert rows["learned"]["cum_regret"] <= rows["always:cheap"]["cum_regret"] + 3
