#!/usr/bin/env python3
"""The learned router in worlds it has never seen: python bench/generality.py [--quick] [--swebench-pro CSV].

Replays, through ``acr bench replay DIR`` (the code users run), results matrices made for this:

* synthetic worlds from ``tests/worlds.py`` (24 arms, 1,200 tasks, no priors, no prices in any
  catalog): ``stationary``, ``arrival`` (the three best arms arrive half-way) and ``drift`` (the
  best arm gets worse half-way), each with several seeds. Their generating model is not the
  router's own; each knows its informed policy (the router's planner given the true parameters).
* with ``--swebench-pro CSV``: a public matrix assembled from real results, the per-run file of
  nilenso/swe-bench-pro-cost-token-time-analysis (``data/agent_runs_data.csv``, commit adde7ee:
  14 SWE-agent runs of 11 models on the 731 tasks of SWE-bench Pro, resolved or not, and the
  turns each run took). The file records no cost, so a cost is modelled from the turns and each
  model's list price (the price catalog acr uses, else the published price written below):
  each turn re-reads the conversation, which starts at 10k tokens and grows by 2k a turn, read at
  a quarter of the input price (a cached prefix), and writes 300 tokens. Durations: 15 s a turn.
  Two worlds: ``swebench-pro`` (stream order shuffled by each --orders seed) and
  ``swebench-pro-arrival`` (the three runs with the most resolved tasks arrive half-way;
  tasks shuffled within each half).

Prints, per world: the cumulative regret of the best single arm and of the best two-arm cascade
in hindsight, of the informed policy (synthetic worlds), of random, linucb and learned, learned's
time, and learned's margin over the best of the two hindsight baselines. Nothing here is fitted:
the worlds are fixed by their seeds, and the router runs with its defaults.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import worlds  # noqa: E402  (tests/worlds.py)

from acr_cli.bench.runner import ReplayRequest, run_replays  # noqa: E402

POLICIES = ["random", "linucb", "learned"]

# SWE-bench Pro runs -> (arm name, catalog provider/model or a list price (in, out) USD per 1M tokens)
RUNS = {
    "GPT-5 High - paper": ("gpt-5-high", "openai/gpt-5"),
    "GPT-5 - 10132025": ("gpt-5", "openai/gpt-5"),
    "GPT-5 Codex -- debug-oct22": ("gpt-5-codex", "openai/gpt-5-codex"),
    "GPT-4o - paper": ("gpt-4o", "openai/gpt-4o"),
    "GPT OSS - paper": ("gpt-oss-120b", "openai/gpt-oss-120b"),
    "Claude 4.5 Sonnet - 10132025": ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
    "Claude 4 Sonnet - 10132025": ("claude-sonnet-4", "anthropic/claude-sonnet-4"),
    "Claude Sonnet 4 - paper": ("claude-sonnet-4-paper", "anthropic/claude-sonnet-4"),
    "Claude 4.5 Haiku -- 10222025": ("claude-haiku-4-5", "anthropic/claude-haiku-4-5"),
    "Claude Opus 4.1 - paper": ("claude-opus-4-1", "anthropic/claude-opus-4-1"),
    "Gemini 2.5 Pro Preview -- debug-oct22": ("gemini-2.5-pro", "google/gemini-2.5-pro"),
    "Gemini 2.5 Pro Preview - paper": ("gemini-2.5-pro-paper", "google/gemini-2.5-pro"),
    "Kimi - paper": ("kimi-k2", "moonshotai/kimi-k2"),
    "GLM-4.5 -- 10222025": ("glm-4.5", (0.6, 2.2)),  # Z.ai's published list price
}


def price(spec) -> tuple[float, float]:
    if isinstance(spec, tuple):
        return spec
    from acr_cli.pricing import catalog_price

    return catalog_price("", spec, 1_000_000, 0), catalog_price("", spec, 0, 1_000_000)


def modelled_cost(turns: int, pin: float, pout: float) -> float:
    tokens_in = turns * 10_000 + 2_000 * turns * (turns + 1) / 2
    return (0.25 * tokens_in * pin + 300 * turns * pout) / 1e6


def swebench_pro(csv_path: Path, out: Path, arrival: bool, seed: int) -> Path:
    rows = list(csv.DictReader(open(csv_path, encoding="utf-8")))
    prices = {run: price(spec) for run, (_, spec) in RUNS.items()}
    cells: dict[str, dict[str, dict]] = {}
    for r in rows:
        run = r["metadata.model_name"]
        if run not in RUNS:
            continue
        arm = RUNS[run][0]
        turns = int(r["metadata.turns"] or 0)
        ref = r["metadata.instance_id"]
        pin, pout = prices[run]
        cells.setdefault(ref, {})[arm] = {"task_id": ref, "model": arm,
                                          "resolved": int(r["metadata.resolved"] == "true"),
                                          "cost_usd": round(modelled_cost(turns, pin, pout), 6),
                                          "duration_s": 15 * turns}
    refs = sorted(cells)
    rng = random.Random(seed)
    rng.shuffle(refs)
    late: set[str] = set()
    if arrival:
        rate = {}
        for row in cells.values():
            for arm, c in row.items():
                s = rate.setdefault(arm, [0, 0])
                s[0] += c["resolved"]
                s[1] += 1
        late = set(sorted(rate, key=lambda a: -rate[a][0] / rate[a][1])[:3])
    half = len(refs) // 2
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "tasks.jsonl", "w") as tf, open(out / "results.jsonl", "w") as rf:
        for t, ref in enumerate(refs):
            repo = ref.removeprefix("instance_").split("__")
            project = f"{repo[0]}/{repo[1].split('-')[0]}" if len(repo) > 1 else None
            tf.write(json.dumps({"task_id": ref, "project": project}) + "\n")
            for arm, c in cells[ref].items():
                if t < half and arm in late:
                    continue
                rf.write(json.dumps(c) + "\n")
    return out


def replay(folder: Path, orders: int, seed: int) -> dict[str, dict]:
    req = ReplayRequest(benchmark=str(folder), policies=list(POLICIES), baselines=True, orders=orders, seed=seed,
                        memory=None)
    start = time.perf_counter()
    doc = run_replays(req)
    secs = time.perf_counter() - start
    rows = {r["policy"]: r for r in doc["results"]}
    h = doc["hindsight"]
    out = {"best arm": rows[h["arm"]]["cum_regret"], "best cascade": rows[h["cascade"]]["cum_regret"]}
    for p in POLICIES:
        out[p] = rows[p]["cum_regret"]
    out["learned AvgPerf"] = rows["learned"]["avg_perf"]
    out["secs"] = secs
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed per world, 600 tasks (a few minutes)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per synthetic world")
    ap.add_argument("--arms", type=int, default=24)
    ap.add_argument("--tasks", type=int, default=1200)
    ap.add_argument("--worlds", default="stationary,arrival,drift", help="synthetic worlds to run")
    ap.add_argument("--swebench-pro", type=Path, help="nilenso's data/agent_runs_data.csv (see the docstring)")
    ap.add_argument("--orders", type=int, default=5, help="orders (seeds) of the SWE-bench Pro worlds")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the learned policy for a sensitivity row (explore=false, explore_width=finest, "
                         "population=false, stale=0); repeatable")
    args = ap.parse_args()
    if args.set:
        from acr_cli.routing import builders, learned

        overrides = {}
        for item in args.set:
            key, _, value = item.partition("=")
            overrides[key] = {"true": True, "false": False}.get(value, value)
            if key in ("stale",):
                overrides[key] = float(value)
        base = learned.LearnedPolicy

        class Moved(base):
            def __init__(self, *a, **k):
                super().__init__(*a, **{**k, **overrides})

        builders.LearnedPolicy = Moved
        print(f"learned with {overrides}")
    seeds = 1 if args.quick else args.seeds
    n_tasks = 600 if args.quick else args.tasks
    import os

    os.environ.setdefault("ACR_HOME", tempfile.mkdtemp(prefix="acr-worlds-"))  # replays' summaries stay out of yours
    work = Path(tempfile.mkdtemp(prefix="acr-worlds-data-"))
    cols = ["best arm", "best cascade", "informed", "random", "linucb", "learned"]
    print(f"{'world':34} " + " ".join(f"{c:>12}" for c in cols) + f" {'margin':>8} {'AvgPerf':>7} {'secs':>5}")
    summary: dict[str, list[float]] = {}

    def show(name: str, got: dict) -> None:
        margin = min(got["best arm"], got["best cascade"]) - got["learned"]
        summary.setdefault(name.split("-s")[0].split(" ")[0], []).append(margin)
        print(f"{name:34} " + " ".join(f"{got[c]:12.1f}" if c in got else f"{'-':>12}" for c in cols)
              + f" {margin:8.1f} {got['learned AvgPerf']:7.2f} {got['secs']:5.0f}", flush=True)

    for kind in [w.strip() for w in args.worlds.split(",") if w.strip()]:
        for seed in range(1, seeds + 1):
            world = worlds.make(kind, args.arms, n_tasks, seed)
            folder = world.write(work / world.name)
            got = replay(folder, 1, seed)
            got["informed"] = worlds.informed_regret(world)
            show(world.name, got)
    if args.swebench_pro:
        for arrival in (False, True):
            name = "swebench-pro" + ("-arrival" if arrival else "")
            runs = []
            for seed in range(1, args.orders + 1):
                folder = swebench_pro(args.swebench_pro, work / f"{name}-{seed}", arrival, seed)
                runs.append(replay(folder, 1, seed))
            mean = {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
            show(f"{name} ({args.orders} orders)", mean)
    print("\nmargin = min(best arm, best cascade) - learned: > 0 where learned beats both hindsight baselines")
    for name, margins in summary.items():
        print(f"  {name:24} mean margin {statistics.fmean(margins):7.1f} over {len(margins)} world(s), "
              f"worst {min(margins):7.1f}")
    print(f"(worlds written to {work})")


if __name__ == "__main__":
    main()
