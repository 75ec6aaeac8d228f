"""Small CodeRouterBench-shaped data sets that tests build themselves."""

from __future__ import annotations

import csv
import json
from pathlib import Path

MODELS = {"cheap": (0.1, 0.5), "mid": (1.0, 4.0), "premium": (5.0, 25.0)}


def write_models(d: Path, models=MODELS) -> None:
    (d / "models.json").write_text(json.dumps({"models": [
        {"model": m, "input_per_1m": p[0], "output_per_1m": p[1]} for m, p in models.items()]}))


def write_ood(d: Path, cells: dict[str, dict[str, tuple[int, int, float]]], dims: dict[str, str] | None = None) -> Path:
    """cells: task -> model -> (resolved, apply_ok, cost_usd)."""
    d.mkdir(parents=True, exist_ok=True)
    write_models(d)
    with open(d / "ood176_tasks.jsonl", "w") as f:
        for t in cells:
            f.write(json.dumps({"task_id": t, "dimension": (dims or {}).get(t, "bug_fixing"), "bench": "old112",
                                "prompt": "p"}) + "\n")
    with open(d / "ood176_results_long.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task_id", "dimension", "model", "resolved", "apply_ok", "in_tok", "out_tok", "cost_usd"])
        for t, row in cells.items():
            for m, (res, ok, cost) in row.items():
                w.writerow([t, "bug_fixing", m, res, ok, 1000, 100, cost])
    return d


def write_id(d: Path, cells: dict[str, dict[str, tuple[float, float]]], dims: dict[str, str]) -> Path:
    """cells: task -> model -> (score, cost_usd)."""
    d.mkdir(parents=True, exist_ok=True)
    write_models(d)
    with open(d / "id_test_tasks.jsonl", "w") as f:
        for t in cells:
            f.write(json.dumps({"task_id": t, "dimension": dims[t], "split": "id_test"}) + "\n")
    with open(d / "id_test_results_long.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task_id", "split", "dimension", "model", "score", "cost_usd", "input_tokens", "output_tokens"])
        for t, row in cells.items():
            for m, (score, cost) in row.items():
                w.writerow([t, "id_test", dims[t], m, score, cost, 100, 10])
    return d
