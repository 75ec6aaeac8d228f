#!/usr/bin/env python3
"""The learned router against its targets, with sensitivity: python bench/learned.py [--orders N] [--sensitivity].

``--context prompt`` replays OOD176 as ``acr bench replay --context prompt`` does (the router sees only
the prompt, classified as live, and the task's repository); ``--by-source`` splits OOD176's regret by
the benchmark source a task comes from (old112, featurebench, longcli, swe_ci): the canonical order's
and the mean over the shuffled orders. The sources are only reported, never shown to the router.

Prints, for OOD176 (cascade), ID2919 single and ID2919 verify: the canonical-order
CumReg / AvgPerf / $ and the mean +- sd (and standard error) over N shuffled orders
(seeds from one RNG seeded --seed, default 1, as `acr bench replay --orders N --seed 1`).
Many orders from another seed (--orders 100 --seed 2) estimate the expected regret
over random orders, free of the luck of one 20-order sample. With --sensitivity, each
setting of the learned policy is moved one at a time and the same figures printed.
Every figure is computed by the same replay code as `acr bench replay`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acr_cli import profiles  # noqa: E402
from acr_cli.bench import contexts  # noqa: E402
from acr_cli.bench import matrix as matrix_mod  # noqa: E402
from acr_cli.bench import replay as rp
from acr_cli.bench import spec as spec_mod
from acr_cli.memory import Memory  # noqa: E402
from acr_cli.memory.aggregates import GroupCache  # noqa: E402
from acr_cli.routing import effects, learned, spread  # noqa: E402

TARGETS = {("ood176", "cascade"): "CumReg <= 12.5 (canonical and 20-order mean), AvgPerf >= 76",
           ("id2919", "single"): "canonical <= 265, 20-order mean <= 280",
           ("id2919", "verify"): "canonical <= 70, AvgPerf >= 57"}


def run(m, prof, protocol, order_seed, per_task=None, context="labels", no_priors=False, seed=1, **overrides):
    """One replay's metrics; with ``per_task`` (a dict), also fills it with each task's regret by ref.
    ``no_priors``: every arm without the profile's priors (a cold start on the same arms). The policy's
    draws are seeded as `acr bench replay --seed SEED` seeds them: the order's seed, else ``seed``."""
    arms = rp.bench_arms(m, prof)
    if context == "prompt":
        arms = contexts.prompt_arms(arms)
    if no_priors:
        arms = {k: replace(a, prior=(), prior_weight=None) for k, a in arms.items()}
    ordered = [arms[x] for x in m.models]

    def make(mem, src):
        kw = dict(cost_weight=0.1, prior_weight=prof.settings.prior_weight,
                  typical_tokens=prof.settings.typical_tokens, seed=seed if order_seed is None else order_seed)
        kw.update(overrides)
        return learned.LearnedPolicy(ordered, GroupCache(mem, src), **kw)

    mem = Memory.open(":memory:")
    try:
        res = rp.replay(m, make, mem, label="learned", protocol=protocol, cost_weight=0.1, order_seed=order_seed)
        if per_task is not None:
            for t in mem.task_results(f"bench:{m.name}:{res.run_id}"):
                per_task[t["ref"]] = t["oracle_reward"] - (t["score"] or 0.0) + 0.1 * (t["cost_usd"] or 0.0)
    finally:
        mem.close()
    return res.metrics


def evaluate(m, prof, protocol, orders, seed=1, per_task=None, shuffled=None, **overrides):
    """Canonical metrics and the shuffled orders' regrets; ``per_task`` gets the canonical order's regret
    per task, ``shuffled`` (a list) one such dict per shuffled order."""
    start = time.perf_counter()
    can = run(m, prof, protocol, None, per_task, seed=seed, **overrides)
    rng = random.Random(seed)
    seeds = [rng.randrange(2**31) for _ in range(orders)]
    regs = []
    for s in seeds:
        mine = {} if shuffled is not None else None
        regs.append(run(m, prof, protocol, s, mine, seed=seed, **overrides)["cum_regret"])
        if mine is not None:
            shuffled.append(mine)
    return can, regs, time.perf_counter() - start


def by_source(m, canonical, shuffled):
    """OOD176's regret per benchmark source: canonical order, and the mean over the shuffled orders."""
    refs: dict[str, list[str]] = {}
    for t in m.tasks:
        refs.setdefault(t.meta.get("bench") or "?", []).append(t.ref)
    print(f"  {'source':14} {'tasks':>5} {'canonical':>9} {'mean':>7}")
    for b, mine in sorted(refs.items(), key=lambda kv: -len(kv[1])):
        mean = statistics.fmean(sum(d.get(r, 0.0) for r in mine) for d in shuffled) if shuffled else float("nan")
        print(f"  {b:14} {len(mine):5d} {sum(canonical.get(r, 0.0) for r in mine):9.2f} {mean:7.2f}")


def by_kind(m, protocol, regret):
    """Per kind: the regret of the best fixed model in hindsight (per kind, and per kind/source),
    and the learned router's on the canonical order (``regret``: per task): where its regret comes from."""
    rows = {}
    for level in (0, 1):
        groups: dict[str, list] = {}
        for t in m.tasks:
            groups.setdefault(t.groups[level], []).append(t)
        for tasks in groups.values():
            oracle = sum(m.oracle(t.ref, 0.1)[0] for t in tasks)
            best = max(sum(m.cells[t.ref][x].score - 0.1 * m.cells[t.ref][x].cost for t in tasks) for x in m.models)
            row = rows.setdefault(tasks[0].dimension, [0, 0.0, 0.0, 0.0])
            row[level + 1] += oracle - best
    for t in m.tasks:
        rows[t.dimension][0] += 1
        rows[t.dimension][3] += regret.get(t.ref, 0.0)
    print(f"\n{m.name} {protocol}, canonical order: regret of the best fixed model per group in hindsight, and learned's")
    print(f"{'kind':20} {'tasks':>5} {'per kind':>9} {'per source':>10} {'learned':>8} {'excess':>7}")
    total = [0, 0.0, 0.0, 0.0]
    for kind, row in rows.items():
        print(f"{kind:20} {row[0]:5d} {row[1]:9.2f} {row[2]:10.2f} {row[3]:8.2f} {row[3] - row[1]:7.2f}")
        total = [a + b for a, b in zip(total, row)]
    print(f"{'all':20} {total[0]:5d} {total[1]:9.2f} {total[2]:10.2f} {total[3]:8.2f} {total[3] - total[1]:7.2f}")


def line(label, can, regs, secs):
    mean = statistics.fmean(regs) if regs else float("nan")
    sd = statistics.stdev(regs) if len(regs) > 1 else 0.0
    return (f"{label:38} canonical CumReg {can['cum_regret']:7.2f} AvgPerf {can['avg_perf']:6.2f} "
            f"${can['cost_usd']:7.2f} steps {can['avg_steps']:.2f} | {len(regs)}-order mean {mean:7.2f} sd {sd:5.2f}"
            f"  ({secs:.0f}s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1,
                    help="seed of the order stream; another seed with many --orders estimates the expected regret")
    ap.add_argument("--verify-orders", type=int, default=5, help="orders for ID verify (slowest)")
    ap.add_argument("--cases", default="ood176-cascade,id2919-single,id2919-verify",
                    help="comma-separated benchmark-protocol pairs to run")
    ap.add_argument("--sensitivity", action="store_true")
    ap.add_argument("--by-kind", action="store_true",
                    help="for single-action cases: per kind, the best fixed model's regret in hindsight beside learned's")
    ap.add_argument("--by-source", action="store_true",
                    help="for OOD176: learned's regret per benchmark source (canonical and order mean)")
    ap.add_argument("--n-hier", type=float, default=None,
                    help="fix every parent's worth at this many observations (as before issue 20) instead of "
                         f"estimating it from memory's groups (default {learned.N_HIER:g} until groups show a spread)")
    ap.add_argument("--no-priors", action="store_true", help="replay with every prior removed (a cold start)")
    ap.add_argument("--context", choices=contexts.CONTEXTS, default="labels",
                    help="what the router sees of an OOD176 task (ID2919 has no prompts: always labels)")
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ACR_BENCH_DATA",
                                                                         "../shared/coderouterbench")))
    args = ap.parse_args()
    cases = [tuple(c.strip().split("-", 1)) for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in TARGETS]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {', '.join('-'.join(k) for k in TARGETS)}")
    loaded = {}
    for name in ("ood176", "id2919"):
        spec = spec_mod.load(name)
        m = matrix_mod.load(spec, args.data_dir)
        if name == "ood176" and args.context == "prompt":
            m = contexts.with_prompt_context(m)
        loaded[name] = (m, profiles.load(spec.profile, Path("/nonexistent")))
    print(f"learned router, defaults: N_HIER {learned.N_HIER:g} (estimated per depth, PRIOR_DOF "
          f"{spread.PRIOR_DOF:g}), RHO {learned.RHO:g}, "
          f"MIN_TASKS {effects.MIN_TASKS}, profile prior weights "
          f"OOD {loaded['ood176'][1].settings.prior_weight:g} / ID {loaded['id2919'][1].settings.prior_weight:g}; "
          f"OOD176 context: {args.context}")
    for name, protocol in cases:
        m, prof = loaded[name]
        n = args.verify_orders if protocol == "verify" else args.orders
        split = args.by_source and name == "ood176"
        regret = {} if (args.by_kind and protocol == "single") or split else None
        shuffled: list | None = [] if split else None
        ctx = args.context if name == "ood176" else "labels"
        moved = {"n_hier": args.n_hier} if args.n_hier is not None else {}
        if args.no_priors:
            moved["no_priors"] = True
        can, regs, secs = evaluate(m, prof, protocol, n, args.seed, regret, shuffled, context=ctx, **moved)
        label = (f"{name} {protocol}" + (f" n_hier={args.n_hier:g}" if args.n_hier is not None else "")
                 + (" no priors" if args.no_priors else ""))
        print(line(label, can, regs, secs) + f"   target: {TARGETS[(name, protocol)]}")
        if split:
            by_source(m, regret, shuffled)
        elif regret is not None:
            by_kind(m, protocol, regret)
    if not args.sensitivity:
        return
    print("\nsensitivity (one setting moved at a time)")
    variants = [("spread_prior", 1.0), ("spread_prior", 16.0), ("n_hier", 3.0), ("n_hier", 5.0), ("n_hier", 10.0),
                ("n_hier", 20.0), ("n_hier", 40.0), ("rho", 0.3), ("rho", 0.7),
                ("min_tasks", 2), ("min_tasks", 10), ("explore", False), ("explore_width", "finest"),
                ("population", False), ("stale", 0.0), ("stale", 0.2)]
    for name, protocol in [c for c in cases if c[1] != "verify"]:
        m, prof = loaded[name]
        ctx = args.context if name == "ood176" else "labels"
        for key, value in variants:
            if protocol == "single" and key in ("rho", "spread_prior"):
                continue  # single-action decisions use neither the latent model nor estimated worths
            if protocol != "single" and key == "min_tasks":
                continue  # only the single-action model has sub-group effects
            if protocol == "single" and key in ("explore", "explore_width", "population"):
                continue  # single-action decisions do not draw, and take no population prior
            if isinstance(value, str) or isinstance(value, bool):
                can, regs, secs = evaluate(m, prof, protocol, args.orders, args.seed, context=ctx, **{key: value})
                print(line(f"{name} {protocol} {key}={value}", can, regs, secs))
                continue
            can, regs, secs = evaluate(m, prof, protocol, args.orders, args.seed, context=ctx, **{key: value})
            print(line(f"{name} {protocol} {key}={value:g}", can, regs, secs))
        base = prof.settings.prior_weight
        for factor in (0.5, 2.0):
            can, regs, secs = evaluate(m, prof, protocol, args.orders, args.seed, context=ctx,
                                       prior_weight=base * factor)
            print(line(f"{name} {protocol} prior_weight={base * factor:g}", can, regs, secs))


if __name__ == "__main__":
    main()
