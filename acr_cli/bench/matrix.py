"""The benchmark's task x model result matrix, read from the published files.

OOD176 rows carry ``resolved``/``apply_ok`` (score = resolved); ID rows carry a
``score`` in [0, 1]. Costs are the files' ``cost_usd`` (computed by the
publishers from token counts and ``models.json``); a blank cost counts as 0,
as in the paper. Model names are normalised (case, and the aliases in the
benchmark's YAML, e.g. ``通义千问Max`` -> ``Qwen3-Max``).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli.bench.spec import BenchSpec
from acr_cli.errors import AcrError

DEFAULT_ALIASES = {"通义千问Max": "Qwen3-Max", "qwen-max": "Qwen3-Max", "qwen3-max": "Qwen3-Max"}


@dataclass(frozen=True)
class Cell:
    score: float
    cost: float
    tokens_in: int | None = None
    tokens_out: int | None = None
    apply_ok: bool | None = None


@dataclass(frozen=True)
class Task:
    ref: str
    dimension: str
    groups: tuple[str, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Matrix:
    name: str
    tasks: list[Task]
    models: list[str]
    cells: dict[str, dict[str, Cell]]  # task ref -> model -> cell
    prices: dict[str, tuple[float, float]]  # model -> (USD per 1M in, out)
    spec: BenchSpec | None = None
    missing: int = 0  # task x model cells that were not observed (memory replays)

    def oracle(self, ref: str, cost_weight: float) -> tuple[float, str]:
        """Best single-model reward on a task in hindsight, and that model."""
        best = None
        for model in self.models:
            cell = self.cells[ref].get(model)
            if cell is None:
                continue
            r = cell.score - cost_weight * cell.cost
            if best is None or r > best[0]:
                best = (r, model)
        if best is None:
            raise AcrError(f"task {ref} has no observed cell")
        return best

    def normalize(self, name: str) -> str:
        return normalize_model(name, self.models, self.spec.aliases if self.spec else {})


def normalize_model(name: str, models: list[str], aliases: dict[str, str] | None = None) -> str:
    table = {**DEFAULT_ALIASES, **(aliases or {})}
    name = table.get(name, name).strip()
    if name in models:
        return name
    lower = {m.lower(): m for m in models}
    if name.lower() in lower:
        return lower[name.lower()]
    tail = name.rsplit("/", 1)[-1].rsplit(":", 1)[-1]  # "opencode:zhipuai/glm-5" -> "glm-5"
    if tail.lower() in lower:
        return lower[tail.lower()]
    raise AcrError(f"unknown model {name!r}", hint=f"models in this benchmark: {', '.join(models)}")


def source_of(task_id: str) -> str | None:
    """``dim2_lcb_abc397_c`` -> ``lcb``; ``dim1_bcb_BigCodeBench/21`` -> ``bcb``."""
    m = re.match(r"dim\d+_([^_/]+)", task_id)
    return m.group(1) if m else None


def first3(task_id: str) -> str:
    return "_".join(task_id.split("_")[:3])


def groups_for(levels: tuple[str, ...], ref: str, dimension: str, meta: dict) -> tuple[str, ...]:
    out = []
    for level in levels:
        if level == "dimension":
            out.append(f"dimension={dimension}")
        elif level == "source":
            out.append(f"dimension={dimension}/source={source_of(ref) or '?'}")
        elif level == "first3":
            out.append(f"first3={first3(ref)}")
        elif level == "bench":
            out.append(f"dimension={dimension}/bench={meta.get('bench', '?')}")
        else:
            raise AcrError(f"unknown group level {level!r}")
    return tuple(out)


def read_prices(path: Path) -> dict[str, tuple[float, float]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {m["model"]: (float(m["input_per_1m"]), float(m["output_per_1m"])) for m in data["models"]}


def _int(x: str) -> int | None:
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return None


def _float(x: str, default: float = 0.0) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def load(spec: BenchSpec, data_dir: Path) -> Matrix:
    prices = read_prices(data_dir / spec.files["models"].name)
    models = list(prices)
    tasks_meta: list[dict] = []
    with open(data_dir / spec.files["tasks"].name, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                tasks_meta.append(json.loads(line))
    cells: dict[str, dict[str, Cell]] = {t["task_id"]: {} for t in tasks_meta}
    with open(data_dir / spec.files["results"].name, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        col = {name: i for i, name in enumerate(next(reader))}
        ood = spec.format == "ood"
        need = ("task_id", "model", "cost_usd") + (("resolved", "apply_ok", "in_tok", "out_tok") if ood else
                                                   ("score", "input_tokens", "output_tokens"))
        missing_cols = [c for c in need if c not in col]
        if missing_cols:
            raise AcrError(f"{spec.files['results'].name}: missing column(s) {', '.join(missing_cols)}")
        i_task, i_model, i_cost = col["task_id"], col["model"], col["cost_usd"]
        names: dict[str, str] = {}
        for row in reader:
            ref = row[i_task]
            if ref not in cells:
                continue
            raw = row[i_model]
            model = names.get(raw) or names.setdefault(raw, normalize_model(raw, models, spec.aliases))
            if ood:
                cell = Cell(float(_int(row[col["resolved"]]) or 0), _float(row[i_cost]), _int(row[col["in_tok"]]),
                            _int(row[col["out_tok"]]), bool(_int(row[col["apply_ok"]])))
            else:
                cell = Cell(_float(row[col["score"]]), _float(row[i_cost]), _int(row[col["input_tokens"]]),
                            _int(row[col["output_tokens"]]))
            cells[ref][model] = cell
    tasks = []
    for t in tasks_meta:
        ref, dim = t["task_id"], t.get("dimension") or "?"
        meta = {k: t[k] for k in ("bench", "source_split", "language", "difficulty") if k in t}
        tasks.append(Task(ref, dim, groups_for(spec.groups, ref, dim, meta), meta))
    incomplete = [t.ref for t in tasks if len(cells[t.ref]) != len(models)]
    if incomplete:
        raise AcrError(f"{spec.files['results'].name}: {len(incomplete)} task(s) lack a result for some model "
                       f"(first: {incomplete[0]})")
    return Matrix(spec.name, tasks, models, cells, prices, spec)
