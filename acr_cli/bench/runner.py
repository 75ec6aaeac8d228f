"""Orchestrate ``acr bench replay`` / ``acr bench report``: resolve the data, build the policies,
replay them over the orders, store the summary. Nothing here prints."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from acr_cli import interrupts, profiles
from acr_cli.bench import contexts, data, from_memory, metrics, policies, results
from acr_cli.bench import matrix as matrix_mod
from acr_cli.bench import race as race_mod
from acr_cli.bench import replay as replay_mod
from acr_cli.bench import spec as spec_mod
from acr_cli.bench.matrix import Matrix
from acr_cli.bench.race import Racing
from acr_cli.bench.report import METRICS, aggregate
from acr_cli.config import Settings
from acr_cli.domain import Arm
from acr_cli.errors import AcrError
from acr_cli.memory.store import Memory, new_id
from acr_cli.paths import Paths, is_url, memory_exists
from acr_cli.profiles import Profile
from acr_cli.routing import registry
from acr_cli.routing.builders import Factory


def _paths():
    return Paths.from_env()


def _profile(name: str | None):
    return profiles.load(name or "coderouterbench", _paths().profiles_dir)


def _configured_profile() -> str:
    """The profile live runs use here (.acr.toml, config.toml, else the default profile)."""
    return Settings(_paths().config_file, Path.cwd()).resolve("profile", default=profiles.DEFAULT_PROFILE)[0]


@dataclass
class ReplayRequest:
    benchmark: str
    policies: list[str]
    baselines: bool | None = None  # add the standard baselines; None: only when no policy is named

    def with_baselines(self) -> bool:
        """Whether the standard baselines are replayed too: as ``--baselines/--no-baselines`` says, else when
        no ``--policy`` names what to replay."""
        return self.baselines if self.baselines is not None else not self.policies
    data_dir: Path | None = None
    protocol: str | None = None
    cost_weight: float = 0.1
    orders: int = 1
    seed: int = 1
    k: int = 2
    profile: str | None = None
    memory: Path | None = None
    # labels | prompt: what the router sees of a task (acr_cli.bench.contexts); None: labels on a benchmark,
    # prompt on your memory (the only one it has)
    context: str | None = None
    every_arm: bool = False  # --baselines all: every arm alone too (a results folder)
    time_weight: float = 0.0  # USD a minute of waiting is worth to the learned policy's plan
    race: int = 0  # >= 2: each --policy (else learned) also replayed with a race first (acr_cli.bench.race)


Progress = Callable[[str, int, int], None]  # (policy label, task-runs done, task-runs in all)
Notice = Callable[[str], None]  # something the user should know while it runs (e.g. a first download)


@dataclass
class Source:
    """What a replay runs on, resolved from the request: the matrix, the arms, the protocol."""

    matrix: Matrix
    arms: dict[str, Arm]
    profile: Profile
    protocol: str
    data_dir: Path
    title: str
    spec: Any = None  # the benchmark's spec (None: your memory)
    names: list[str] = field(default_factory=list)  # the policies asked for, with --baselines' rows
    live_tasks: list = field(default_factory=list)  # a memory replay: what acr run actually did
    warnings: list[str] = field(default_factory=list)
    context: str = "labels"  # what the router saw of each task (acr_cli.bench.contexts)
    hindsight: dict = field(default_factory=dict)  # a results folder: its best arm and two-arm cascade in hindsight


def run_replays(req: ReplayRequest, on_progress: Progress | None = None,
                on_notice: Notice | None = None) -> dict[str, Any]:
    """Replay every policy of ``req`` and return the report document.

    The library prints nothing: progress and notices reach the caller through the callbacks;
    warnings about the result are part of it (``doc["warnings"]``, shown beside the table)."""
    source = resolve(req, on_notice or (lambda message: None))
    if req.race and source.protocol != "cascade":
        raise AcrError(f"--race replays the cascade protocol only (this replay's is {source.protocol}): a race "
                       "needs a verdict to pick its winner and to escalate after", hint="add --protocol cascade")
    built = build_policies(req, source)
    store_path = req.memory if req.memory and req.benchmark != "memory" else None
    # a team's shared memory: replayed in a throw-away memory, then copied in (Transfer.copy_into), so that
    # the replay does not hold the team's write turn for its whole length, and a cut-off one leaves nothing
    shared = store_path is not None and is_url(str(store_path))
    mem = Memory.open(":memory:" if shared else store_path or ":memory:")
    try:
        group, order_seeds, results, curves = replay_all(req, source, built, mem, on_progress)
        if req.benchmark == "memory":
            results.insert(0, {**from_memory.actual(source.matrix, source.live_tasks, req.cost_weight), "run_ids": []})
            curves = {"actual": results[0].pop("curve"), **curves}
        doc = _document(source, req, order_seeds, results, group)
        doc["curves"] = curves
        if interrupts.requested():  # (a signal Python swallowed): a replay cut off is not stored
            raise KeyboardInterrupt
        try:
            with interrupts.deferred():  # stored whole: a signal now takes effect once it is
                _store_summary(mem if store_path else None, _paths().memory_path(req.memory), doc)
            if shared:
                server = Memory.open(str(store_path))
                try:
                    mem.copy_into(server)
                finally:
                    server.close()
        except AcrError as e:  # a broken memory must not lose the replay's output: say so beside it
            doc["not_stored"] = e.message
    finally:
        mem.close()
    return doc


def resolve(req: ReplayRequest, on_notice: Notice) -> Source:
    """The benchmark (or your memory) as a matrix, the profile's arms on it, the protocol and the policies."""
    if req.context is not None and req.context not in contexts.CONTEXTS:
        raise AcrError(f"--context {req.context!r}: expected one of {', '.join(contexts.CONTEXTS)}")
    if req.race == 1 or req.race < 0:
        raise AcrError(f"--race {req.race}: a race starts at least 2 arms at once (0: no race)")
    if req.benchmark == "memory":
        if req.context == "labels":
            raise AcrError("--context labels: your memory's tasks carry no benchmark labels; they replay with the "
                           "context `acr run` recorded for them (--context prompt)")
        return _memory_source(req)
    if req.benchmark not in spec_mod.NAMES and results.is_results_dir(req.benchmark):
        return _results_source(req)
    return _benchmark_source(req, on_notice)


def _benchmark_source(req: ReplayRequest, on_notice: Notice) -> Source:
    """A named benchmark (CodeRouterBench OOD176 or ID2919), its files found or fetched into the cache."""
    context = req.context or "labels"
    paths = _paths()
    spec = spec_mod.load(req.benchmark)
    prof = _profile(req.profile or spec.profile)
    protocol = req.protocol or spec.default_protocol
    if protocol not in spec.protocols:
        known = {"cascade", "single", "verify"}
        what = "does not apply to" if protocol in known else "is not a protocol of"
        raise AcrError(f"--protocol {protocol!r} {what} {spec.name} (use {', '.join(spec.protocols)})")
    found = _locate(spec, req.data_dir, paths.bench_cache, on_notice)
    warnings = list(found.warnings)
    matrix = matrix_mod.load(spec, found.path)
    if context == "prompt":
        matrix = contexts.with_prompt_context(matrix)
    names = list(req.policies)
    if req.with_baselines():
        names += [p for p in policies.baseline_set(spec.name, found.path) if p not in names]
        if spec.name != "ood176" and not any(n.startswith("map:") for n in names):
            warnings.append(f"no reference/acrouter_id_group_map.json in {found.path} (it comes with the paper's "
                            "release, not the Hugging Face dataset): the paper's ACRouter row is left out")
    arms = replay_mod.bench_arms(matrix, prof)
    if context == "prompt":  # priors per dimension -> per live kind
        arms = contexts.prompt_arms(arms)
    return Source(matrix, arms, prof, protocol, found.path, spec.title, spec=spec, names=names, warnings=warnings,
                  context=context)


def _locate(spec: spec_mod.BenchSpec, data_dir: Path | None, cache: Path, on_notice: Notice) -> data.DataDir:
    """The benchmark's files: in ``data_dir``, $ACR_BENCH_DATA or the ``cache``; on first use (neither
    given) downloaded into the cache."""
    files = {f.name: f.sha256 for f in spec.files.values()}
    try:
        return data.locate(files, data_dir, cache)
    except AcrError:
        if data_dir is not None or data.env_data_dir() is not None:
            raise
        _download_first(files, cache, on_notice)  # first use: fetch into the cache
        return data.locate(files, None, cache)


def _memory_source(req: ReplayRequest) -> Source:
    path = _paths().memory_path(req.memory)
    if not memory_exists(path):
        raise AcrError("no memory yet: `acr bench replay memory` replays the attempts `acr run` recorded")
    prof = _profile(req.profile or _configured_profile())
    live = Memory.open(path, create=False, read_only=True)  # only read: a read-only memory replays too
    try:
        matrix, live_tasks = from_memory.load(live, prof)
    finally:
        live.close()
    if not matrix.tasks:
        raise AcrError("memory holds no judged live attempt yet (passed, failed or timeout)")
    if (req.protocol or "cascade") != "cascade":
        raise AcrError("--protocol: your memory replays with `cascade` only")
    names = list(req.policies)
    if req.with_baselines():
        names += [p for p in ("oracle", "learned", "random", "linucb", "lints", "knn") if p not in names]
    return Source(matrix, replay_mod.bench_arms(matrix, prof), prof, "cascade", Path("."), "Your memory (live runs)",
                  names=names, live_tasks=live_tasks, context="prompt")


def _results_source(req: ReplayRequest) -> Source:
    """A folder of anyone's results (acr_cli.bench.results): its arms with no priors unless --profile names them."""
    folder = Path(req.benchmark).expanduser()
    context = req.context or "labels"
    matrix = results.load(folder, context)
    protocol = req.protocol or ("cascade" if matrix.binary else "single")
    if protocol not in results.PROTOCOLS:
        raise AcrError(f"--protocol {protocol!r} does not apply to a results folder (use {', '.join(results.PROTOCOLS)})")
    prof = _profile(req.profile) if req.profile else profiles.bare("results", f"the arms of {folder}")
    names = list(req.policies)
    best, pair = policies.hindsight(matrix, req.cost_weight, cascade=protocol == "cascade")
    if req.with_baselines() or req.every_arm:
        names += [p for p in policies.results_baselines(matrix, req.cost_weight, protocol, req.every_arm)
                  if p not in names]
    warnings = []
    if matrix.skipped:
        warnings.append(f"{matrix.skipped} task(s) of {results.TASKS} have no result at all and are left out")
    arms = replay_mod.bench_arms(matrix, prof if req.profile else None, catalog=results.price_of)
    unpriced = [m for m, a in arms.items() if a.price_in is None]
    if unpriced:
        warnings.append(f"no price for {len(unpriced)} arm(s) ({', '.join(unpriced[:3])}"
                        f"{', ...' if len(unpriced) > 3 else ''}): learned takes their costs from the results as it "
                        "meets them")
    return Source(matrix, arms, prof, protocol, folder, f"Results in {folder}", names=names, warnings=warnings,
                  context=context, hindsight={"arm": f"always:{best}",
                                              "cascade": f"cascade:{pair[0]},{pair[1]}" if pair else None})


@dataclass
class Built:
    label: str
    make: Factory
    reseed: Callable[[int], Factory] | None  # a policy whose choices depend on the seed: one per order's seed
    races: bool = False  # --race: also replayed with a race first (a --policy row, else learned's)


def build_policies(req: ReplayRequest, source: Source) -> list[Built]:
    """One factory per distinct policy (a policy asked for twice is replayed once, with a warning)."""
    setup = policies.replay_setup(source.matrix, source.arms, data_dir=source.data_dir, profile=source.profile,
                                  cost_weight=req.cost_weight, seed=req.seed, k=req.k, time_weight=req.time_weight)
    built: list[Built] = []
    asked_as: dict[str, str] = {}
    for n in source.names:
        entry, _ = registry.parse(n, live=False)
        label, make = registry.build(n, setup)
        if label in asked_as:  # e.g. -P always:Claude-Opus-4-6 beside --baselines' always:claude-opus-4-6
            twice = f"{asked_as[label]} and {n}" if asked_as[label] != n else f"{n} twice"
            source.warnings.append(f"{label} was asked for as {twice}: replayed once")
            continue
        asked_as[label] = n
        reseed = (lambda seed, n=n: registry.build(n, replace(setup, seed=seed))[1]) if entry.seeded else None
        races = req.race >= 2 and (n in req.policies if req.policies else label == "learned")
        built.append(Built(label, make, reseed, races))
    return built


def racings(req: ReplayRequest, b: Built) -> list[Racing | None]:
    """How policy ``b`` is replayed: as it is (None), then with --race: the race plan's choice, and a race of
    N on every task."""
    if not b.races:
        return [None]
    return [None] + [Racing(req.race, mode, req.cost_weight, req.time_weight) for mode in race_mod.MODES[::-1]]


def replay_all(req: ReplayRequest, source: Source, built: list[Built], mem: Memory,
               on_progress: Progress | None) -> tuple[str, list[int | None], list[dict], dict[str, list[float]]]:
    """Every policy over every order, recorded in ``mem``: (group id, order seeds, rows, mean regret curves)."""
    matrix = source.matrix
    group = new_id(matrix.name)
    order_seeds: list[int | None] = [None]
    if req.orders > 1:
        rng = random.Random(req.seed)
        order_seeds = [rng.randrange(2**31) for _ in range(req.orders)]
    rows = [(b, racing) for b in built for racing in racings(req, b)]
    total = len(rows) * len(order_seeds) * len(matrix.tasks)
    results, curves = [], {}
    done = 0
    for b, racing in rows:
        label = b.label if racing is None else f"{b.label} {racing.label}"
        runs = []
        for order_seed in order_seeds:
            make = b.reseed(order_seed) if order_seed is not None and b.reseed else b.make

            def tick(n: int, base: int = done, label: str = label) -> None:
                if on_progress:
                    on_progress(label, base + n, total)

            params = {"k": req.k, "seed": req.seed, "profile": source.profile.name}
            if racing is not None:
                params.update(race=racing.n, race_mode=racing.mode, time_weight=racing.time_weight)
            res = replay_mod.replay(matrix, make, mem, label=label, protocol=source.protocol,
                                    cost_weight=req.cost_weight, order_seed=order_seed, params=params,
                                    group=group, progress=tick, racing=racing)
            done += len(matrix.tasks)
            runs.append({"run_id": res.run_id, "policy": label, **res.metrics, "unscorable": res.unscorable,
                         **res.extra})
        curves[label] = _mean_curve([r.get("curve") or [] for r in runs])
        results.append(aggregate(runs))
    return group, order_seeds, results, curves


def _download_first(files: dict[str, str | None], cache: Path, on_notice: Notice) -> None:
    on_notice(f"downloading CodeRouterBench into {cache} (first use; --data-dir DIR uses a local copy)")
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


def _document(source: Source, req: ReplayRequest, order_seeds, results, group) -> dict[str, Any]:
    spec, matrix, warnings = source.spec, source.matrix, source.warnings
    for r in results:
        pub = (spec.published.get(r["policy"]) if spec else None) or {}
        if pub:
            r["published"] = {m: v for m, v in pub.items() if m in METRICS}
    order = "canonical" if order_seeds == [None] else f"{len(order_seeds)} shuffled orders (seed {req.seed})"
    doc = {"benchmark": matrix.name, "title": source.title, "n_tasks": len(matrix.tasks), "order": order,
           "protocol": source.protocol, "context": source.context, "cost_weight": req.cost_weight, "group": group,
           "data_dir": str(source.data_dir),
           "results": results, "warnings": warnings,
           "published_note": spec.published_note if spec else ""}
    if source.hindsight:
        doc["hindsight"] = source.hindsight
        doc["missing_cells"] = matrix.missing
    elif matrix.name == "memory":
        doc["missing_cells"] = matrix.missing
        if matrix.missing:
            warnings.append(f"{matrix.missing} task x arm cells were never observed; policies needing them "
                            "leave those tasks unscored")
    return doc


def _store_summary(replay_memory: Memory | None, user_memory: Path, doc: dict[str, Any]) -> None:
    """Keep the rendered figures as runs in memory so `acr bench report` can show them again."""
    mem = replay_memory or Memory.open(user_memory)
    try:
        with mem.transaction():  # a group's summary is there whole or not at all (list_groups reads it)
            _store_results(mem, doc, own=replay_memory is None)
    finally:
        if replay_memory is None:
            mem.close()


def _store_results(mem: Memory, doc: dict[str, Any], own: bool) -> None:
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
            if own:
                mem.add_run(run_id, doc["benchmark"], r["policy"], {"group": doc["group"]})
            previous = (mem.run(run_id) or {}).get("report") or {}
            mem.finish_run(run_id, r["n"], {**previous, **stored})


def list_groups(memory: Path | None) -> list[dict[str, Any]]:
    path = _paths().memory_path(memory)
    if not memory_exists(path):
        if memory is not None:
            raise AcrError(f"no memory at {path}", hint="check the path given to --memory")
        return []
    mem = Memory.open(path)
    try:
        groups: dict[str, dict[str, Any]] = {}
        for r in mem.runs():
            # a replay cut off (Ctrl-C), or one still running, is not a stored replay: its group's summary
            # (each run's "result", written in one transaction when every policy is done) is what says so
            if not r.get("finished_at") or not (r.get("damaged") or "result" in (r.get("report") or {})):
                continue
            g = (r.get("params") or {}).get("group") or r["id"]
            entry = groups.setdefault(g, {"group": g, "benchmark": r["benchmark"], "started_at": r["started_at"],
                                          "policies": [], "runs": []})
            if r["policy"] not in entry["policies"]:
                entry["policies"].append(r["policy"])
            entry["runs"].append(r["id"])
        return list(groups.values())
    finally:
        mem.close()


def _choose_group(groups: list[dict[str, Any]], run: str | None) -> dict[str, Any]:
    """The stored group ``run`` names (its group id or one of its run ids); the latest when ``run`` is None."""
    if not groups:
        raise AcrError("no replay stored yet", hint="run `acr bench replay ood176 --baselines` first")
    if run is None:
        return groups[-1]
    for g in groups:
        if run == g["group"] or run in g["runs"]:
            return g
    raise AcrError(f"no stored replay {run!r}", hint="see `acr bench report --list`")


def _stored_figures(r: dict[str, Any]) -> dict[str, Any]:
    """A run's figures as its report stored them (its attempts are gone); a damaged report is an error."""
    rep = r.get("report") or {}
    res = rep.get("result") or {}
    if r.get("damaged") or not isinstance(res.get("policy"), str) or not isinstance(res.get("n"), int):
        raise AcrError(f"the stored replay {r['id']} is damaged: its report cannot be read",
                       hint="`acr memory forget --bench` forgets stored replays; replay it again")
    return {**res, "curve": rep.get("curve", []), "run_id": r["id"], "aggregated": True}


def _figures_by_policy(mem: Memory, runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """The group's header (the first non-empty stored report without its figures) and each policy's runs'
    figures: recomputed from the attempts when memory holds them, else as stored."""
    by_policy: dict[str, list[dict]] = {}
    doc: dict[str, Any] = {}
    for r in runs:
        if not doc:
            doc = {k: v for k, v in (r.get("report") or {}).items() if k not in ("result", "curve")}
        source = f"bench:{r['benchmark']}:{r['id']}"
        if mem.task_results(source):
            premium = (r.get("params") or {}).get("premium")
            figures = metrics.compute(mem, source, doc.get("cost_weight", 0.1), premium)
            item = {"run_id": r["id"], "policy": r["policy"], **figures}
        else:
            item = _stored_figures(r)
        by_policy.setdefault(r["policy"], []).append(item)
    return doc, by_policy


def _published(runs: list[dict[str, Any]], label: str) -> Any:
    """The paper's figures a stored report kept for policy ``label`` (the last run's that has them), or None."""
    stored_pub = None
    for r in runs:
        res = (r.get("report") or {}).get("result") or {}
        if res.get("policy") == label and res.get("published"):
            stored_pub = res["published"]
    return stored_pub


def _policy_row(items: list[dict[str, Any]]) -> tuple[dict[str, Any], list[float]]:
    """One policy's table row and regret curve: as stored, or the mean over its recomputed runs."""
    if items[0].get("aggregated"):
        return {k: v for k, v in items[0].items() if k not in ("curve", "aggregated")}, items[0].get("curve", [])
    return aggregate(items), _mean_curve([i.get("curve") or [] for i in items])


def _with_defaults(doc: dict[str, Any], chosen: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill what an old or partial stored report lacks, so every report renders the same header."""
    doc.setdefault("benchmark", chosen["benchmark"])
    doc.setdefault("title", chosen["benchmark"])
    doc.setdefault("n_tasks", results[0]["n"] if results else 0)
    doc.setdefault("order", "?")
    doc.setdefault("protocol", "?")
    doc.setdefault("cost_weight", 0.1)
    return doc


def load_report(run: str | None, memory: Path | None) -> dict[str, Any]:
    """The document of a stored replay group (or single run), recomputed from attempts when present."""
    chosen = _choose_group(list_groups(memory), run)
    mem = Memory.open(_paths().memory_path(memory))
    try:
        runs = [mem.run(r) for r in chosen["runs"] if run is None or run == chosen["group"] or r == run]
        doc, by_policy = _figures_by_policy(mem, runs)
        results, curves = [], {}
        for label, items in by_policy.items():
            row, curves[label] = _policy_row(items)
            stored_pub = _published(runs, label)
            if stored_pub:
                row["published"] = stored_pub
            results.append(row)
        doc["results"] = results
        doc["curves"] = curves
        return _with_defaults(doc, chosen, results)
    finally:
        mem.close()
