"""Anyone's results as a benchmark: ``acr bench replay DIR`` reads a task x arm results matrix.

``DIR/results.jsonl`` (or ``DIR/results.csv``, with a header line) has one record per (task, arm):

* ``task_id`` (text);
* ``arm`` (``AGENT:MODEL``, e.g. ``codex:gpt-5.4``) or ``model`` (a bare model name, e.g. ``gpt-5.4``);
* ``resolved`` (0/1, true/false) or ``score`` (a number in [0, 1]; 1 is a pass);
* optional: ``cost_usd``, ``in_tok``, ``out_tok`` (numbers >= 0), ``duration_s`` (seconds >= 0).

``DIR/tasks.jsonl`` (optional) lists the tasks in stream order, one JSON object a line: ``task_id``
and any of ``prompt``, ``kind``, ``project`` (or ``repo``), ``language``; other fields are kept and
not read. Without it, tasks stream in the order they first appear in the results.

A task with no record for an arm could not be given to that arm (the arm was not there yet, or
failed to run): no policy can choose it for that task, and the task's regret is measured against
the best arm that is there. Each arm's price comes from ``--profile`` (when it names the arm),
else from the price catalog acr uses for live runs (:mod:`acr_cli.pricing`), else it has none and
the router learns its cost from the records' ``cost_usd`` as it goes.

What the router sees of a task (``--context``): ``labels`` (default) groups tasks as a live run
does, ``all`` > ``kind=K`` > ``kind=K/project=P``, by the file's ``kind`` and ``project``;
``prompt`` classifies each task's ``prompt`` with the classifier ``acr run`` uses.

A file acr cannot use is refused whole with its name, line and field (exit 2), never half-read.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from acr_cli.bench.matrix import Cell, Matrix, Task, read_text
from acr_cli.domain import parse_arm_id
from acr_cli.errors import AcrError

RESULTS = ("results.jsonl", "results.csv")
TASKS = "tasks.jsonl"
FORMAT_HINT = ("one record per (task, arm): task_id; arm (AGENT:MODEL) or model; resolved (0/1) or score (0..1); "
               "optional cost_usd, in_tok, out_tok, duration_s (see bench/README.md, 'Your own results')")
PROTOCOLS = ("cascade", "single")


def is_results_dir(text: str) -> bool:
    """``acr bench replay TEXT`` names a folder of results (not ood176, id2919 or memory)."""
    return Path(text).expanduser().is_dir()


def load(folder: Path, context: str = "labels") -> Matrix:
    """The matrix in ``folder``; ``context`` is ``labels`` or ``prompt`` (see the module's docstring)."""
    folder = folder.expanduser()
    found = [folder / name for name in RESULTS if (folder / name).is_file()]
    if not found:
        raise AcrError(f"{folder}: no results.jsonl or results.csv in this folder", hint=FORMAT_HINT)
    if len(found) > 1:
        raise AcrError(f"{folder}: both results.jsonl and results.csv: which one is meant?",
                       hint="keep one of them in the folder")
    order, meta = _tasks(folder / TASKS)
    cells, arms, first_seen = _cells(_records(found[0]), meta)
    if not cells:
        raise AcrError(f"{found[0]}: no records", hint=FORMAT_HINT)
    order = order if meta is not None else first_seen
    kept = [ref for ref in order if ref in cells]  # a task listed with no result at all cannot be replayed
    tasks = [_task(ref, (meta or {}).get(ref, {}), context, folder) for ref in kept]
    scores = {c.score for row in cells.values() for c in row.values()}
    return Matrix(folder.resolve().name or str(folder), tasks, arms, cells, {a: None for a in arms}, None,
                  missing=sum(len(arms) - len(cells[t.ref]) for t in tasks), unavailable_when_missing=True,
                  binary=scores <= {0.0, 1.0}, skipped=len(order) - len(kept))


def _cells(records: list[tuple[str, dict[str, Any]]], meta: dict[str, dict[str, Any]] | None
           ) -> tuple[dict[str, dict[str, Cell]], list[str], list[str]]:
    """The cells by task and arm, the arms and the tasks in the order they first appear; a record for a task
    ``meta`` (tasks.jsonl) does not list, or a second one for the same task and arm, is refused."""
    cells: dict[str, dict[str, Cell]] = {}
    seen_at: dict[tuple[str, str], str] = {}
    arms: dict[str, None] = {}  # (ordered, as a set)
    for where, rec in records:
        ref, arm, cell = _cell(where, rec)
        if meta is not None and ref not in meta:
            raise AcrError(f"{where}: task_id {ref!r} is not in {TASKS}",
                           hint=f"list every task of the results in {TASKS}, or leave {TASKS} out")
        if (ref, arm) in seen_at:
            raise AcrError(f"{where}: a second record for task {ref!r} and arm {arm!r} (the first: {seen_at[ref, arm]})",
                           hint="one record per task and arm")
        seen_at[ref, arm] = where
        cells.setdefault(ref, {})[arm] = cell
        arms.setdefault(arm)
    return cells, list(arms), list(cells)


def _json_lines(path: Path, what: str, hint: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Each non-blank line of a JSON-lines file as (``file:line``, its object); ``what`` names an object."""
    out: list[tuple[str, dict[str, Any]]] = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{lineno}"
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise AcrError(f"{where}: not JSON ({e})", hint=hint) from None
        if not isinstance(rec, dict):
            raise AcrError(f"{where}: {what} is a JSON object, got {type(rec).__name__}", hint=hint)
        out.append((where, rec))
    return out


def _records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix == ".jsonl":
        return _json_lines(path, "a record", FORMAT_HINT)
    out: list[tuple[str, dict[str, Any]]] = []
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        raise AcrError(f"{path.name}: empty (a CSV file needs a header line)", hint=FORMAT_HINT)
    for rec in reader:
        where = f"{path.name}:{reader.line_num}"
        if None in rec:
            raise AcrError(f"{where}: more fields than the header has", hint=FORMAT_HINT)
        out.append((where, {k: v for k, v in rec.items() if v not in (None, "")}))
    return out


def _tasks(path: Path) -> tuple[list[str], dict[str, dict[str, Any]] | None]:
    """The stream order and each task's fields from ``tasks.jsonl`` (None when the folder has none)."""
    if not path.is_file():
        return [], None
    order: list[str] = []
    meta: dict[str, dict[str, Any]] = {}
    for where, rec in _json_lines(path, "a task (with its task_id)"):
        ref = rec.get("task_id")
        if not isinstance(ref, str) or not ref:
            raise AcrError(f"{where}: field task_id: expected text, got {ref!r}")
        for field_ in ("prompt", "kind", "project", "repo", "language"):
            if field_ in rec and rec[field_] is not None and not isinstance(rec[field_], str):
                raise AcrError(f"{where}: field {field_}: expected text, got {rec[field_]!r}")
        if ref in meta:
            raise AcrError(f"{where}: task {ref!r} is listed twice")
        meta[ref] = rec
        order.append(ref)
    return order, meta


def _cell(where: str, rec: dict[str, Any]) -> tuple[str, str, Cell]:
    ref = rec.get("task_id")
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        ref = str(ref)
    if not isinstance(ref, str) or not ref.strip():
        raise AcrError(f"{where}: field task_id: expected text, got {ref!r}", hint=FORMAT_HINT)
    arm = rec.get("arm", rec.get("model"))
    if "arm" in rec and "model" in rec:
        raise AcrError(f"{where}: both arm and model: give one", hint=FORMAT_HINT)
    if not isinstance(arm, str) or not arm.strip():
        raise AcrError(f"{where}: field {'arm' if 'arm' in rec else 'model'}: expected text, got {arm!r}",
                       hint=FORMAT_HINT)
    if "arm" in rec:
        try:
            parse_arm_id(arm)
        except ValueError:
            raise AcrError(f"{where}: field arm: {arm!r} is not AGENT:MODEL",
                           hint="or give a bare model name as model") from None
    if "score" in rec:
        score = _number(where, rec, "score", high=1.0)
    elif "resolved" in rec:
        raw = rec["resolved"]
        text = str(raw).strip().lower() if isinstance(raw, (bool, int, float, str)) else None
        flags = {"1": 1.0, "0": 0.0, "1.0": 1.0, "0.0": 0.0, "true": 1.0, "false": 0.0}
        if text not in flags:
            raise AcrError(f"{where}: field resolved: expected 0 or 1, got {raw!r}", hint=FORMAT_HINT)
        score = flags[text]
    else:
        raise AcrError(f"{where}: no resolved or score field", hint=FORMAT_HINT)
    cost = _number(where, rec, "cost_usd")
    tin, tout = _number(where, rec, "in_tok"), _number(where, rec, "out_tok")
    duration = _number(where, rec, "duration_s")
    cell = Cell(score, cost or 0.0, None if tin is None else int(tin), None if tout is None else int(tout),
                duration=duration)
    return ref.strip(), arm.strip(), cell


def _number(where: str, rec: dict[str, Any], name: str, high: float | None = None) -> float | None:
    if name not in rec or rec[name] is None:
        return None
    raw = rec[name]
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw)
    except (TypeError, ValueError):
        raise AcrError(f"{where}: field {name}: expected a number, got {raw!r}", hint=FORMAT_HINT) from None
    if math.isnan(value) or math.isinf(value) or value < 0 or (high is not None and value > high):
        span = f"between 0 and {high:g}" if high is not None else "a finite number >= 0"
        raise AcrError(f"{where}: field {name}: expected {span}, got {raw!r}", hint=FORMAT_HINT)
    return value


def _task(ref: str, info: dict[str, Any], context: str, folder: Path) -> Task:
    from acr_cli.context import classify_kind, kind_sure

    project = info.get("project") or info.get("repo")
    project = f"project={project}" if project else None
    prompt = info.get("prompt") or ""
    if context == "prompt":
        if not prompt:
            raise AcrError(f"--context prompt: task {ref!r} has no prompt in {folder / TASKS}",
                           hint="--context prompt needs every task's request text; --context labels reads kind "
                                "and project")
        kind, _ = classify_kind(prompt)
        return Task(ref, kind, _groups(kind, project), dict(info), kind=kind, prompt=prompt, project=project,
                    kind_sure=kind_sure(kind, given=False))
    kind = info.get("kind") or None
    return Task(ref, kind or "any", _groups(kind, project), dict(info), kind=kind or "any", prompt="",
                project=project)


def _groups(kind: str | None, project: str | None) -> tuple[str, ...]:
    """As a live run groups requests (acr_cli.context.context_groups); without a kind, the project
    sits right under the root."""
    if kind:
        from acr_cli.context import context_groups

        return context_groups(kind, project)
    return ("all",) + ((project,) if project else ())


def price_of(arm: str) -> tuple[float, float] | None:
    """The catalog's price of an arm named in a results file (``AGENT:MODEL`` or a model name)."""
    from acr_cli.pricing import catalog_price

    agent, _, model = arm.partition(":") if ":" in arm else ("", "", arm)
    pin, pout = catalog_price(agent, model, 1_000_000, 0), catalog_price(agent, model, 0, 1_000_000)
    return (pin, pout) if pin is not None and pout is not None else None
