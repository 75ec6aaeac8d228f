"""The benchmark's task x model result matrix, read from the published files.

OOD176 rows carry ``resolved``/``apply_ok`` (score = resolved); ID rows carry a
``score`` in [0, 1]. Costs are the files' ``cost_usd`` (computed by the
publishers from token counts and ``models.json``); a blank cost counts as 0,
as in the paper. Model names are normalised (case, and the aliases in the
benchmark's YAML, e.g. ``通义千问Max`` -> ``Qwen3-Max``).
"""

from __future__ import annotations

import csv
import io
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
    duration: float | None = None  # seconds (results files that record it)


@dataclass(frozen=True)
class Task:
    ref: str
    dimension: str
    groups: tuple[str, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    kind: str | None = None  # the kind the router is told (None: the dimension; see bench/contexts.py)
    prompt: str = ""  # the request the router is shown ("" under --context labels)
    project: str | None = None  # ... and the project it is made in
    kind_sure: float = 1.0  # how likely ``kind`` is right (acr_cli.context.KIND_PRECISION)


@dataclass
class Matrix:
    name: str
    tasks: list[Task]
    models: list[str]
    cells: dict[str, dict[str, Cell]]  # task ref -> model -> cell
    prices: dict[str, tuple[float, float] | None]  # model -> (USD per 1M in, out); None: no price known
    spec: BenchSpec | None = None
    missing: int = 0  # task x model cells that were not observed (memory replays)
    # a missing cell: the arm could not be chosen for that task (a results folder), rather than an
    # outcome never observed that leaves the task unscorable (a memory replay)
    unavailable_when_missing: bool = False
    binary: bool = True  # every score is 0 or 1 (a pass or not)
    skipped: int = 0  # tasks listed with no result at all (a results folder)

    @property
    def has_duration(self) -> bool:
        return any(c.duration for row in self.cells.values() for c in row.values())

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
    try:
        data = json.loads(read_text(path))
        return {m["model"]: (_finite(m["input_per_1m"]), _finite(m["output_per_1m"])) for m in data["models"]}
    except (ValueError, KeyError, TypeError) as e:
        raise AcrError(f"{path.name}: not a price table ({{\"models\": [{{model, input_per_1m, output_per_1m}}]}}): "
                       f"{_why(e)}", hint=DAMAGED) from None


DAMAGED = "the file looks damaged: fetch it again (`acr bench download`) or point --data-dir at a good copy"


def read_text(path: Path) -> str:
    """A data file's text; not UTF-8 is an error naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AcrError(f"{path.name}: not UTF-8 text", hint=DAMAGED) from None


def _why(e: Exception) -> str:
    return f"missing field {e}" if isinstance(e, KeyError) else str(e)


def _finite(x: object) -> float:
    v = float(x)  # type: ignore[arg-type]
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"{x!r} is not a finite number")
    return v


def _number(row: list[str], i: int, what: str, where: str, integer: bool = False) -> float | None:
    """The cell as a number; a blank cell is None (the files leave unknown costs blank)."""
    raw = row[i].strip()
    if not raw:
        return None
    try:
        v = _finite(raw)
    except ValueError:
        raise AcrError(f"{where}: column {what}: {raw!r} is not a number", hint=DAMAGED) from None
    return float(int(v)) if integer else v


def _read_tasks(tasks_file: Path) -> list[dict]:
    """The task records, one JSON object a line (blank lines skipped); a line without a task_id is an error."""
    tasks_meta: list[dict] = []
    for lineno, line in enumerate(read_text(tasks_file).splitlines(), 1):
        if line.strip():
            try:
                meta = json.loads(line)
                if not isinstance(meta.get("task_id"), str):
                    raise ValueError("no task_id")
            except (ValueError, AttributeError) as e:
                raise AcrError(f"{tasks_file.name}:{lineno}: not a task record ({e})", hint=DAMAGED) from None
            tasks_meta.append(meta)
    return tasks_meta


def _columns(header: list[str] | None, results: Path, ood: bool) -> dict[str, int]:
    """Each column's index in the results header; the columns the format needs must all be there."""
    if not header:
        raise AcrError(f"{results.name}: empty", hint=DAMAGED)
    col = {name: i for i, name in enumerate(header)}
    missing_cols = [c for c in _needed(ood) if c not in col]
    if missing_cols:
        raise AcrError(f"{results.name}: missing column(s) {', '.join(missing_cols)}")
    return col


def _needed(ood: bool) -> tuple[str, ...]:
    """The results columns a format needs (OOD176 records resolution and apply; ID2919 a score)."""
    return ("task_id", "model", "cost_usd") + (("resolved", "apply_ok", "in_tok", "out_tok") if ood else
                                               ("score", "input_tokens", "output_tokens"))


def _cell(row: list[str], col: dict[str, int], where: str, ood: bool) -> Cell:
    """One results row as a cell: score, cost (blank = 0), tokens (blank = unknown) and, for OOD, apply."""
    num = lambda name, integer=False: _number(row, col[name], name, where, integer)  # noqa: E731
    cost = num("cost_usd") or 0.0
    if ood:
        tin, tout = num("in_tok", True), num("out_tok", True)
        return Cell(num("resolved", True) or 0.0, cost, None if tin is None else int(tin),
                    None if tout is None else int(tout), bool(num("apply_ok", True)))
    tin, tout = num("input_tokens", True), num("output_tokens", True)
    return Cell(num("score") or 0.0, cost, None if tin is None else int(tin), None if tout is None else int(tout))


def _read_cells(spec: BenchSpec, results: Path, cells: dict[str, dict[str, Cell]], models: list[str]) -> None:
    """Fill ``cells`` (task -> model -> cell) from the results CSV; rows of tasks not listed are skipped and
    model names are normalised to the price list's (each raw name once)."""
    reader = csv.reader(io.StringIO(read_text(results), newline=""))
    header = next(reader, None)
    ood = spec.format == "ood"
    col = _columns(header, results, ood)
    width = max(col[c] for c in _needed(ood)) + 1
    i_task, i_model = col["task_id"], col["model"]
    names: dict[str, str] = {}
    for row in reader:
        if not row:
            continue
        where = f"{results.name}:{reader.line_num}"
        if len(row) < width:
            raise AcrError(f"{where}: {len(row)} field(s), expected {len(header or ())}", hint=DAMAGED)
        ref = row[i_task]
        if ref not in cells:
            continue
        raw = row[i_model]
        model = names.get(raw) or names.setdefault(raw, normalize_model(raw, models, spec.aliases))
        cells[ref][model] = _cell(row, col, where, ood)


def _tasks(spec: BenchSpec, tasks_meta: list[dict]) -> list[Task]:
    """The tasks with their dimension (``?`` when not recorded), groups and the metadata acr keeps."""
    tasks = []
    for t in tasks_meta:
        ref, dim = t["task_id"], t.get("dimension") or "?"
        meta = {k: t[k] for k in ("bench", "source_split", "language", "difficulty", "prompt", "original_task_id")
                if k in t}
        tasks.append(Task(ref, dim, groups_for(spec.groups, ref, dim, meta), meta))
    return tasks


def load(spec: BenchSpec, data_dir: Path) -> Matrix:
    """The benchmark's task x model matrix from its three files in ``data_dir``; every task must have a
    result for every priced model (a damaged file is an error naming its line)."""
    prices = read_prices(data_dir / spec.files["models"].name)
    models = list(prices)
    tasks_meta = _read_tasks(data_dir / spec.files["tasks"].name)
    cells: dict[str, dict[str, Cell]] = {t["task_id"]: {} for t in tasks_meta}
    _read_cells(spec, data_dir / spec.files["results"].name, cells, models)
    tasks = _tasks(spec, tasks_meta)
    incomplete = [t.ref for t in tasks if len(cells[t.ref]) != len(models)]
    if incomplete:
        raise AcrError(f"{spec.files['results'].name}: {len(incomplete)} task(s) lack a result for some model "
                       f"(first: {incomplete[0]})")
    return Matrix(spec.name, tasks, models, cells, prices, spec)
