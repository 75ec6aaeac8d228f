"""Turn ``--policy`` strings into policies for a replay."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Callable

from acr_cli.bench import baselines as bl
from acr_cli.bench.matrix import Matrix, read_text
from acr_cli.errors import AcrError
from acr_cli.memory.aggregates import GroupCache
from acr_cli.memory.store import Memory
from acr_cli.profiles import Profile
from acr_cli.routing.base import Policy
from acr_cli.routing.fixed import FixedOrder

SIMPLE = ("oracle", "random", "acrouter", "dimension-best", "linucb", "lints", "knn", "learned")
WITH_ARG = ("always", "cascade", "map", "decisions")
SET_BY = {"random": "seed is --seed N", "lints": "seed is --seed N", "acrouter": "k is --k N",
          "learned": "priors come from --profile NAME"}  # what a suffix on these might have meant


def baseline_set(benchmark: str, data_dir: Path) -> list[str]:
    """The standard rows of ``--baselines``."""
    common = ["oracle", "always:claude-opus-4-6", "always:kimi-k2.5", "always:qwen3.5-plus", "random",
              "linucb", "lints", "knn"]
    if benchmark == "ood176":
        return ["oracle", "acrouter"] + common[1:] + ["learned"]
    extra = ["map:reference/acrouter_id_group_map.json"] if (data_dir / "reference" /
                                                             "acrouter_id_group_map.json").is_file() else []
    return ["oracle"] + extra + ["dimension-best"] + common[1:] + ["learned"]


def _file(arg: str, data_dir: Path) -> Path:
    for candidate in (Path(arg).expanduser(), data_dir / arg):
        if candidate.is_file():
            return candidate
    raise AcrError(f"file {arg!r} not found (looked in the current directory and in {data_dir})")


def _fit_dimension_best(matrix: Matrix, arms: dict, data_dir: Path, profile: Profile | None):
    probing = data_dir / "id_probing_results_long.csv"
    means: dict[str, dict[str, list[float]]] = {}
    if probing.is_file():
        for row in csv.DictReader(io.StringIO(read_text(probing), newline="")):
            try:
                model = matrix.normalize(row["model"])
                s = means.setdefault(row["dimension"], {}).setdefault(model, [0.0, 0])
                s[0] += float(row["score"] or 0)
                s[1] += 1
            except (AcrError, ValueError, KeyError, TypeError):
                continue
        fitted_on = "the probing split"
        table = {d: {m: v[0] / v[1] for m, v in ms.items() if v[1]} for d, ms in means.items()}
    else:
        fitted_on = "the profile's priors (Table 10: probing-split means)"
        table = {}
        for model, arm in arms.items():
            for dim, mean in arm.prior:
                table.setdefault(dim, {})[model] = mean
    if not table:
        raise AcrError("dimension-best needs a probing split (id_probing_results_long.csv) or a profile with priors")
    price = {m: sum(p) for m, p in matrix.prices.items()}
    best = {d: arms[max(ms, key=lambda m: (ms[m], -price[m]))] for d, ms in table.items()}
    overall = max(arms, key=lambda m: sum(ms.get(m, 0) for ms in table.values()))
    return bl.DimensionBest(best, arms[overall], fitted_on)


def build(spec: str, matrix: Matrix, arms: dict, *, data_dir: Path, profile: Profile | None, cost_weight: float,
          seed: int, k: int) -> tuple[str, Callable[[Memory, str], Policy]]:
    """(label, factory) for one ``--policy`` string; the factory gets the memory and the run's scope."""
    name, colon, arg = spec.partition(":")
    if name not in SIMPLE + WITH_ARG or (name in WITH_ARG and not arg):
        raise AcrError(f"unknown policy {spec!r}", hint="policies: oracle, always:MODEL, random, acrouter, "
                       "cascade:M1,M2,..., map:FILE, decisions:FILE, dimension-best, linucb, lints, knn, learned")
    if colon and name in SIMPLE:
        raise AcrError(f"policy {name} takes no argument (got {spec!r})",
                       hint="only always:MODEL, cascade:M1,M2,..., map:FILE and decisions:FILE take one"
                            + (f"; {name}'s {SET_BY[name]}" if name in SET_BY else ""))

    if matrix.name == "memory" and name in PAPER_ONLY:
        raise AcrError(f"policy {name} is CodeRouterBench's own (its models, its files): it replays on ood176 "
                       "and id2919, not on your memory",
                       hint="on your memory: oracle, always:ARM, random, cascade:A1,A2, linucb, lints, knn, learned")

    def arm(model: str):
        return arms[matrix.normalize(model)]

    def norm(model: str) -> str:
        return matrix.normalize(model)

    ordered = [arms[m] for m in matrix.models]
    if name == "oracle":
        return spec, lambda mem, src: bl.Oracle(matrix, arms, cost_weight)
    if name == "always":
        a = arm(arg)
        return f"always:{a.model}", lambda mem, src: bl.Always(a)
    if name == "random":
        return spec, lambda mem, src: bl.RandomChoice(ordered, seed)
    if name == "acrouter":
        chain = [arm(m) for m in bl.ACROUTER_CHAIN]
        premium = arm(bl.ACROUTER_PREMIUM)
        return spec, lambda mem, src: bl.ACRouter(chain, premium, k)
    if name == "cascade":
        names = [m.strip() for m in arg.split(",")]
        if "" in names:
            raise AcrError(f"--policy {spec}: a model name is empty", hint="cascade:MODEL1,MODEL2,... "
                           "with no empty entries")
        chain = [arm(m) for m in names]
        repeated = sorted({a.model for a in chain if chain.count(a) > 1})
        if repeated:
            raise AcrError(f"--policy {spec}: {', '.join(repeated)} appears twice (a benchmark cell cannot "
                           "change on a second try)", hint="name each model once")
        label = "cascade:" + ",".join(a.model for a in chain)
        return label, lambda mem, src: _named(FixedOrder(chain, why="cascade"), label)
    if name == "map":
        path = _file(arg, data_dir)
        pol = bl.GroupMap(path, arms, norm)
        return f"map:{path.name}", lambda mem, src: pol
    if name == "decisions":
        path = _file(arg, data_dir)
        read = bl.Decisions(path, arms, norm)
        if matrix.tasks and not read.by_task.keys() & {t.ref for t in matrix.tasks}:
            raise AcrError(f"decisions:{path}: none of its task ids is a task of {matrix.name}",
                           hint=f"is it the file for the other benchmark? {matrix.name}'s ids look like "
                                f"{matrix.tasks[0].ref!r}")
        return f"decisions:{path.name}", lambda mem, src: read.fresh()
    if name == "dimension-best":
        pol = _fit_dimension_best(matrix, arms, data_dir, profile)
        return spec, lambda mem, src: pol
    if name == "linucb":
        return spec, lambda mem, src: bl.LinUCB(ordered, cost_weight)
    if name == "lints":
        return spec, lambda mem, src: bl.LinTS(ordered, cost_weight, seed)
    if name == "knn":
        return spec, lambda mem, src: bl.KNN(ordered, cost_weight)
    # learned: the policy `acr run` uses, reading its statistics from this run's memory
    from acr_cli.routing.learned import LearnedPolicy

    pw = profile.settings.prior_weight if profile else 2.0
    tokens = profile.settings.typical_tokens if profile else None
    return spec, lambda mem, src: LearnedPolicy(ordered, GroupCache(mem, src), cost_weight=cost_weight,
                                                prior_weight=pw, typical_tokens=tokens)


PAPER_ONLY = ("acrouter", "map", "decisions")  # the paper's models, chain or files


def _named(policy: Policy, label: str) -> Policy:
    policy.name = label
    return policy
