"""The replay-only policies' builders (see :mod:`acr_cli.routing.registry`) and ``--baselines``' rows."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Callable

from acr_cli.bench import baselines as bl
from acr_cli.bench.matrix import Matrix, read_text
from acr_cli.errors import AcrError
from acr_cli.profiles import Profile
from acr_cli.routing.builders import Factory, Setup


def replay_setup(matrix: Matrix, arms: dict, *, data_dir: Path, profile: Profile | None, cost_weight: float,
                 seed: int, k: int, time_weight: float = 0.0) -> Setup:
    """What the registry's builders get in a replay: the benchmark's arms, in its model order."""
    return Setup(arms=[arms[m] for m in matrix.models], resolve=lambda model: arms[matrix.normalize(model)],
                 cost_weight=cost_weight, prior_weight=profile.settings.prior_weight if profile else 2.0,
                 typical_tokens=profile.settings.typical_tokens if profile else None, seed=seed, k=k,
                 profile=profile, matrix=matrix, arm_of=arms, data_dir=data_dir,
                 on_memory=matrix.name == "memory" and matrix.spec is None and not matrix.unavailable_when_missing,
                 results=matrix.unavailable_when_missing, time_weight=time_weight)


def baseline_set(benchmark: str, data_dir: Path) -> list[str]:
    """The standard rows of ``--baselines``."""
    common = ["oracle", "always:claude-opus-4-6", "always:kimi-k2.5", "always:qwen3.5-plus", "random",
              "linucb", "lints", "knn"]
    if benchmark == "ood176":
        return ["oracle", "acrouter"] + common[1:] + ["learned"]
    extra = ["map:reference/acrouter_id_group_map.json"] if (data_dir / "reference" /
                                                             "acrouter_id_group_map.json").is_file() else []
    return ["oracle"] + extra + ["dimension-best"] + common[1:] + ["learned"]


def _file(arg: str, data_dir: Path | None) -> Path:
    for candidate in (Path(arg).expanduser(), (data_dir or Path(".")) / arg):
        if candidate.is_file():
            return candidate
    raise AcrError(f"file {arg!r} not found (looked in the current directory and in {data_dir})")


def _same(policy) -> Callable:
    """A factory for a policy that keeps no state between tasks: the one object serves every run."""
    return lambda memory, scope: policy


def oracle(setup: Setup, arg: str) -> tuple[str, Factory]:
    return "oracle", lambda memory, scope: bl.Oracle(setup.matrix, setup.arm_of, setup.cost_weight)


def acrouter(setup: Setup, arg: str) -> tuple[str, Factory]:
    chain = [setup.resolve(m) for m in bl.ACROUTER_CHAIN]
    premium = setup.resolve(bl.ACROUTER_PREMIUM)
    return "acrouter", lambda memory, scope: bl.ACRouter(chain, premium, setup.k)


def group_map(setup: Setup, arg: str) -> tuple[str, Factory]:
    path = _file(arg, setup.data_dir)
    return f"map:{path.name}", _same(bl.GroupMap(path, setup.arm_of, setup.matrix.normalize))


def decisions(setup: Setup, arg: str) -> tuple[str, Factory]:
    matrix = setup.matrix
    path = _file(arg, setup.data_dir)
    read = bl.Decisions(path, setup.arm_of, matrix.normalize)
    if matrix.tasks and not read.by_task.keys() & {t.ref for t in matrix.tasks}:
        raise AcrError(f"decisions:{path}: none of its task ids is a task of {matrix.name}",
                       hint=f"is it the file for the other benchmark? {matrix.name}'s ids look like "
                            f"{matrix.tasks[0].ref!r}")
    return f"decisions:{path.name}", lambda memory, scope: read.fresh()


def dimension_best(setup: Setup, arg: str) -> tuple[str, Factory]:
    matrix, arms = setup.matrix, setup.arm_of
    probing = (setup.data_dir or Path(".")) / "id_probing_results_long.csv"
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
    return "dimension-best", _same(bl.DimensionBest(best, arms[overall], fitted_on))


def hindsight(matrix: Matrix, cost_weight: float, cascade: bool) -> tuple[str, tuple[str, str] | None]:
    """The best single arm and, when attempts may follow a failure (``cascade``), the best two-arm cascade
    in hindsight: the ones whose total reward over the matrix is the highest. A task where an arm has no
    result scores nothing for it (it could not be chosen there); a cascade's second arm runs when the
    first fails or has no result. Ties: the first in the matrix's order."""
    models = matrix.models
    rows = [matrix.cells[t.ref] for t in matrix.tasks]
    alone = {m: 0.0 for m in models}
    for row in rows:
        for m, c in row.items():
            alone[m] += c.score - cost_weight * c.cost
    best = max(models, key=lambda m: alone[m])
    if not cascade or len(models) < 2:
        return best, None
    top, pair = None, None
    for a in models:
        for b in models:
            if a == b:
                continue
            total = 0.0
            for row in rows:
                ca, cb = row.get(a), row.get(b)
                if ca is not None and (ca.score >= 1.0 or cb is None):
                    total += ca.score - cost_weight * ca.cost
                elif ca is None:
                    total += 0.0 if cb is None else cb.score - cost_weight * cb.cost
                else:
                    total += max(ca.score, cb.score) - cost_weight * (ca.cost + cb.cost)
            if top is None or total > top:
                top, pair = total, (a, b)
    return best, pair


def results_baselines(matrix: Matrix, cost_weight: float, protocol: str, every_arm: bool) -> list[str]:
    """``--baselines`` on a results folder: the oracle, the best single arm and two-arm cascade in hindsight,
    every arm alone (``every_arm``), the bandits, and learned."""
    best, pair = hindsight(matrix, cost_weight, cascade=protocol == "cascade")
    names = ["oracle", f"always:{best}"] + ([f"cascade:{pair[0]},{pair[1]}"] if pair else [])
    if every_arm:
        names += [f"always:{m}" for m in matrix.models if m != best]
    return names + ["random", "linucb", "lints", "knn", "learned"]
