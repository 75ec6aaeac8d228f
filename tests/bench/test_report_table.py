"""The replay table people read: every number whole in any terminal, and notes that say what the rows are."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from acr_cli.bench.report import notes, rich_table
from acr_cli.bench.runner import ReplayRequest, run_replays

# three tasks, two arms; "late" has no result on t1 (it was not there yet)
CELLS = [
    {"task_id": "t1", "model": "cheap", "resolved": 0, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t2", "model": "cheap", "resolved": 1, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t2", "model": "late", "resolved": 1, "cost_usd": 0.5, "duration_s": 600},
    {"task_id": "t3", "model": "cheap", "resolved": 0, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t3", "model": "late", "resolved": 1, "cost_usd": 0.5, "duration_s": 600},
]


def replayed(tmp_path: Path) -> dict:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CELLS))
    return run_replays(ReplayRequest(benchmark=str(folder), policies=[], baselines=True))


def shown(doc: dict, width: int) -> str:
    con = Console(file=io.StringIO(), width=width, record=True)
    con.print(rich_table(doc, width))
    return con.export_text()


def test_a_narrow_terminal_leaves_out_the_least_read_columns_first_and_cuts_no_number(tmp_path):
    doc = replayed(tmp_path)
    wide = shown(doc, 200)
    assert "narrow terminal" not in wide and "rAcc" in wide and "Perf/$" in wide
    narrow = shown(doc, 60)
    assert "(narrow terminal: rAcc, Esc., n, Perf/$ left out; --json has every column)" in " ".join(narrow.split())
    head = next(line for line in narrow.splitlines() if line.startswith("policy"))
    assert head.split() == ["policy", "AvgPerf", "CumReg", "$Total", "Steps", "Hours"]
    for r in doc["results"]:  # each kept figure whole, on its policy's line
        line = next(line for line in narrow.splitlines() if line.startswith(r["policy"]))
        assert line.split()[1:3] == [f"{r['avg_perf']:.2f}", f"{r['cum_regret']:.1f}"]


def test_notes_name_the_hindsight_rows_and_the_missing_results(tmp_path):
    said = notes(replayed(tmp_path))
    assert any("the best single arm and two-arm cascade in hindsight" in line for line in said)
    assert any(line.startswith("1 task x arm result(s) missing") for line in said)
    # a results folder has no paper to compare with: no line about the paper's baselines
    assert not any("acr's implementations of the paper's baselines" in line for line in said)
