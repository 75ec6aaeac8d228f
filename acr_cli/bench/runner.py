"""Orchestrate ``acr bench replay`` / ``acr bench report``: data, policies, orders, storage."""

from __future__ import annotations

import random
import secrets
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acr_cli.bench import from_memory, matrix as matrix_mod, policies, replay as replay_mod, spec as spec_mod
from acr_cli.bench.report import METRICS, aggregate
from acr_cli.errors import AcrError
from acr_cli.memory.store import Memory


@dataclass
class ReplayRequest:
    benchmark: str
    policies: list[str]
    baselines: bool = False
    data_dir: Path | None = None
    protocol: str | None = None
    cost_weight: float = 0.1
    orders: int = 1
    seed: int = 1
    k: int = 2
    profile: str | None = None
    memory: Path | None = None
    context: str = "labels"  # labels | prompt: what the router sees of a task (acr_cli.bench.contexts)


def _paths():
    from acr_cli.paths import Paths

    return Paths.from_env()


def _profile(name: str | None):
    from acr_cli import profiles

    return profiles.load(name or "coderouterbench", _paths().profiles_dir)


def _configured_profile() -> str:
    """The profile live runs use here (.acr.toml, config.toml, else balanced)."""
    from acr_cli.config import Settings

    return Settings(_paths().config_file, Path.cwd()).resolve("profile", default="balanced")[0]


def _progress(enabled: bool):
    """A progress bar on stderr when a person is watching, else nothing."""
    if not enabled or not sys.stderr.isatty():
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    transient=True)


def run_replays(req: ReplayRequest, progress: bool = True) -> dict[str, Any]:
    from acr_cli.bench import contexts

    if req.context not in contexts.CONTEXTS:
        raise AcrError(f"--context {req.context!r}: expected one of {', '.join(contexts.CONTEXTS)}")
    paths = _paths()
    warnings: list[str] = []
    user_memory_path = paths.memory_path(req.memory)
    if req.benchmark == "memory":
        live = Memory.open(paths.memory_path(req.memory), create=False) if paths.memory_path(req.memory).exists() \
            else None
        if live is None:
            raise AcrError("no memory yet: `acr bench replay memory` replays the attempts `acr run` recorded")
        try:
            matrix, live_tasks = from_memory.load(live, _profile(req.profile or _configured_profile()))
        finally:
            live.close()
        if not matrix.tasks:
            raise AcrError("memory holds no judged live attempt yet (passed, failed or timeout)")
        spec = None
        prof = _profile(req.profile or _configured_profile())
        data_dir = Path(".")
        protocol = req.protocol or "cascade"
        if protocol != "cascade":
            raise AcrError("--protocol: your memory replays with `cascade` only")
        names = req.policies or ["oracle", "learned", "random", "linucb", "lints", "knn"]
        title = "Your memory (live runs)"
    else:
        spec = spec_mod.load(req.benchmark)
        prof = _profile(req.profile or spec.profile)
        protocol = req.protocol or spec.default_protocol
        if protocol not in spec.protocols:
            known = {"cascade", "single", "verify"}
            what = "does not apply to" if protocol in known else "is not a protocol of"
            raise AcrError(f"--protocol {protocol!r} {what} {spec.name} (use {', '.join(spec.protocols)})")
        from acr_cli.bench import data

        files = {f.name: f.sha256 for f in spec.files.values()}
        try:
            found = data.locate(files, req.data_dir, paths.bench_cache)
        except AcrError:
            if req.data_dir is not None or data.env_data_dir() is not None:
                raise
            _download_first(files, paths.bench_cache, progress)  # first use: fetch into the cache
            found = data.locate(files, None, paths.bench_cache)
        warnings += found.warnings
        data_dir = found.path
        matrix = matrix_mod.load(spec, data_dir)
        if req.context == "prompt":
            matrix = contexts.with_prompt_context(matrix)
        names = list(req.policies)
        if req.baselines or not names:
            names += [p for p in policies.baseline_set(spec.name, data_dir) if p not in names]
            if spec.name != "ood176" and not any(n.startswith("map:") for n in names):
                warnings.append(f"no reference/acrouter_id_group_map.json in {data_dir} (it comes with the paper's "
                                "release, not the Hugging Face dataset): the paper's ACRouter row is left out")
        title = spec.title
    arms = replay_mod.bench_arms(matrix, prof)
    if req.context == "prompt" and req.benchmark != "memory":  # priors per dimension -> per live kind
        arms = {m: contexts.rekey_priors(a) for m, a in arms.items()}
    built, asked_as = [], {}
    for n in names:
        label, make = policies.build(n, matrix, arms, data_dir=data_dir, profile=prof, cost_weight=req.cost_weight,
                                     seed=req.seed, k=req.k)
        if label in asked_as:  # e.g. -P always:Claude-Opus-4-6 beside --baselines' always:claude-opus-4-6
            twice = f"{asked_as[label]} and {n}" if asked_as[label] != n else f"{n} twice"
            warnings.append(f"{label} was asked for as {twice}: replayed once")
            continue
        asked_as[label] = n
        built.append((label, make))

    group = f"{matrix.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
    order_seeds: list[int | None] = [None]
    if req.orders > 1:
        rng = random.Random(req.seed)
        order_seeds = [rng.randrange(2**31) for _ in range(req.orders)]
    store_path = req.memory if req.memory and req.benchmark != "memory" else None
    mem = Memory.open(store_path or ":memory:")
    results, curves = [], {}
    try:
        with _progress(progress) as b:
            task_id = b.add_task("replaying", total=len(built) * len(order_seeds) * len(matrix.tasks)) if b else None
            done_before = 0
            for label, make in built:
                runs = []
                for order_seed in order_seeds:
                    if b:
                        b.update(task_id, description=f"{label}")
                    base = done_before

                    def tick(n: int, base: int = base) -> None:
                        if b:
                            b.update(task_id, completed=base + n)

                    seeded = make
                    if order_seed is not None and label in ("random", "lints"):
                        _, seeded = policies.build(label, matrix, arms, data_dir=data_dir, profile=prof,
                                                   cost_weight=req.cost_weight, seed=order_seed, k=req.k)
                    res = replay_mod.replay(matrix, seeded, mem, label=label, protocol=protocol,
                                            cost_weight=req.cost_weight, order_seed=order_seed,
                                            params={"k": req.k, "seed": req.seed, "profile": prof.name},
                                            group=group, progress=tick)
                    done_before += len(matrix.tasks)
                    runs.append({"run_id": res.run_id, "policy": label, **res.metrics, "unscorable": res.unscorable,
                                 **res.extra})
                row = aggregate(runs)
                curves[label] = _mean_curve([r.get("curve") or [] for r in runs])
                results.append(row)
    finally:
        if store_path is None:
            mem.close()
    if req.benchmark == "memory":
        results.insert(0, {**from_memory.actual(matrix, live_tasks, req.cost_weight), "run_ids": []})
        curves = {"actual": results[0].pop("curve"), **curves}
    doc = _document(matrix, spec, title, protocol, req, order_seeds, results, warnings, group, data_dir)
    doc["curves"] = curves
    try:
        _store_summary(mem if store_path else None, user_memory_path, doc)
    except AcrError as e:  # a broken memory must not lose the replay's output: say so beside it
        doc["not_stored"] = e.message
    finally:
        if store_path:
            mem.close()
    return doc


def _download_first(files: dict[str, str | None], cache: Path, progress: bool) -> None:
    from acr_cli.bench import data

    print(f"acr: downloading CodeRouterBench into {cache} (first use; --data-dir DIR uses a local copy)",
          file=sys.stderr)
    try:
        data.download(files, cache)
    except AcrError as e:
        raise AcrError(f"the benchmark files are not here and could not be downloaded: {e.message}",
                       hint="point at a local copy with --data-dir DIR (or ACR_BENCH_DATA), "
                            "or set ACR_HF_ENDPOINT to a mirror") from None


def _mean_curve(curves: list[list[float]]) -> list[float]:
    curves = [c for c in curves if c]
    if not curves:
        return []
    n = min(len(c) for c in curves)
    return [sum(c[i] for c in curves) / len(curves) for i in range(n)]


def _document(matrix, spec, title, protocol, req, order_seeds, results, warnings, group, data_dir) -> dict[str, Any]:
    for r in results:
        pub = (spec.published.get(r["policy"]) if spec else None) or {}
        if pub:
            r["published"] = {m: v for m, v in pub.items() if m in METRICS}
    order = "canonical" if order_seeds == [None] else f"{len(order_seeds)} shuffled orders (seed {req.seed})"
    doc = {"benchmark": matrix.name, "title": title, "n_tasks": len(matrix.tasks), "order": order,
           "protocol": protocol, "context": req.context, "cost_weight": req.cost_weight, "group": group,
           "data_dir": str(data_dir),
           "results": results, "warnings": warnings,
           "published_note": spec.published_note if spec else ""}
    if matrix.name == "memory":
        doc["missing_cells"] = matrix.missing
        if matrix.missing:
            warnings.append(f"{matrix.missing} task x arm cells were never observed; policies needing them "
                            "leave those tasks unscored")
    return doc


def _store_summary(replay_memory: Memory | None, user_memory: Path, doc: dict[str, Any]) -> None:
    """Keep the rendered figures as runs in memory so `acr bench report` can show them again."""
    mem = replay_memory or Memory.open(user_memory)
    try:
        for r in doc["results"]:
            stored = {k: v for k, v in doc.items() if k not in ("results", "curves")}
            stored["result"] = r
            stored["curve"] = doc["curves"].get(r["policy"], [])
            if r["policy"] == "actual" or not r.get("run_ids"):
                run_id = f"{doc['group']}-actual"
                mem.add_run(run_id, doc["benchmark"], r["policy"], {"group": doc["group"]})
                mem.finish_run(run_id, r["n"], stored)
                continue
            for run_id in r["run_ids"]:
                if replay_memory is None:
                    mem.add_run(run_id, doc["benchmark"], r["policy"], {"group": doc["group"]})
                previous = (mem.run(run_id) or {}).get("report") or {}
                mem.finish_run(run_id, r["n"], {**previous, **stored})
    finally:
        if replay_memory is None:
            mem.close()


def list_groups(memory: Path | None) -> list[dict[str, Any]]:
    path = _paths().memory_path(memory)
    if not path.exists():
        if memory is not None:
            raise AcrError(f"no memory at {path}", hint="check the path given to --memory")
        return []
    mem = Memory.open(path)
    try:
        groups: dict[str, dict[str, Any]] = {}
        for r in mem.runs():
            g = (r.get("params") or {}).get("group") or r["id"]
            entry = groups.setdefault(g, {"group": g, "benchmark": r["benchmark"], "started_at": r["started_at"],
                                          "policies": [], "runs": []})
            if r["policy"] not in entry["policies"]:
                entry["policies"].append(r["policy"])
            entry["runs"].append(r["id"])
        return list(groups.values())
    finally:
        mem.close()


def load_report(run: str | None, memory: Path | None) -> dict[str, Any]:
    """The document of a stored replay group (or single run), recomputed from attempts when present."""
    from acr_cli.bench import metrics

    groups = list_groups(memory)
    if not groups:
        raise AcrError("no replay stored yet", hint="run `acr bench replay ood176 --baselines` first")
    chosen = None
    if run is None:
        chosen = groups[-1]
    else:
        for g in groups:
            if run == g["group"] or run in g["runs"]:
                chosen = g
                break
    if chosen is None:
        raise AcrError(f"no stored replay {run!r}", hint="see `acr bench report --list`")
    mem = Memory.open(_paths().memory_path(memory))
    try:
        runs = [mem.run(r) for r in chosen["runs"] if run is None or run == chosen["group"] or r == run]
        by_policy: dict[str, list[dict]] = {}
        doc: dict[str, Any] = {}
        for r in runs:
            rep = r.get("report") or {}
            if not doc:
                doc = {k: v for k, v in rep.items() if k not in ("result", "curve")}
            source = f"bench:{r['benchmark']}:{r['id']}"
            if mem.task_outcomes(source):  # the attempts are here: recompute
                premium = (r.get("params") or {}).get("premium")
                figures = metrics.compute(mem, source, doc.get("cost_weight", 0.1), premium)
                by_policy.setdefault(r["policy"], []).append({"run_id": r["id"], "policy": r["policy"], **figures})
            else:
                res = rep.get("result") or {}
                by_policy.setdefault(r["policy"], []).append({**res, "curve": rep.get("curve", []),
                                                              "run_id": r["id"], "aggregated": True})
        results, curves = [], {}
        for label, items in by_policy.items():
            if items[0].get("aggregated"):
                row = {k: v for k, v in items[0].items() if k not in ("curve", "aggregated")}
                curves[label] = items[0].get("curve", [])
            else:
                row = aggregate(items)
                curves[label] = _mean_curve([i.get("curve") or [] for i in items])
            stored_pub = None
            for r in runs:
                res = (r.get("report") or {}).get("result") or {}
                if res.get("policy") == label and res.get("published"):
                    stored_pub = res["published"]
            if stored_pub:
                row["published"] = stored_pub
            results.append(row)
        doc["results"] = results
        doc["curves"] = curves
        doc.setdefault("benchmark", chosen["benchmark"])
        doc.setdefault("title", chosen["benchmark"])
        doc.setdefault("n_tasks", results[0]["n"] if results else 0)
        doc.setdefault("order", "?")
        doc.setdefault("protocol", "?")
        doc.setdefault("cost_weight", 0.1)
        return doc
    finally:
        mem.close()
