"""``acr bench replay DIR``: anyone's results matrix, read strictly and replayed through the same loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, acr


def write(folder: Path, results: list[dict], tasks: list[dict] | None = None, csv: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if csv:
        cols = sorted({k for r in results for k in r})
        lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in results]
        (folder / "results.csv").write_text("\n".join(lines) + "\n")
    else:
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    if tasks is not None:
        (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return folder


def replay(folder: Path, *args: str) -> dict:
    r = acr("bench", "replay", str(folder), "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def rows(doc: dict) -> dict[str, dict]:
    return {r["policy"]: r for r in doc["results"]}


# four tasks, three arms: "late" has no result on t1 and t2 (it was not there yet)
CELLS = [
    {"task_id": "t1", "model": "cheap", "resolved": 0, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t1", "model": "strong", "resolved": 1, "cost_usd": 1.0, "duration_s": 600},
    {"task_id": "t2", "model": "cheap", "resolved": 1, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t2", "model": "strong", "resolved": 1, "cost_usd": 1.0, "duration_s": 600},
    {"task_id": "t3", "model": "cheap", "resolved": 0, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t3", "model": "strong", "resolved": 0, "cost_usd": 1.0, "duration_s": 600},
    {"task_id": "t3", "model": "late", "resolved": 1, "cost_usd": 0.1, "duration_s": 30},
    {"task_id": "t4", "model": "cheap", "resolved": 1, "cost_usd": 0.01, "duration_s": 60},
    {"task_id": "t4", "model": "strong", "resolved": 1, "cost_usd": 1.0, "duration_s": 600},
    {"task_id": "t4", "model": "late", "resolved": 0, "cost_usd": 0.1, "duration_s": 30},
]


def test_a_missing_result_means_the_arm_could_not_be_chosen(tmp_path):
    doc = replay(write(tmp_path / "r", CELLS), "-P", "always:late", "-P", "oracle", "-P", "cascade:cheap,strong")
    got = rows(doc)
    late = got["always:late"]
    # no attempt on t1 and t2 (nothing to score), t3 passed for $0.1, t4 failed for $0.1
    assert late["n"] == 4 and late["avg_steps"] == pytest.approx(0.5) and late["cost_usd"] == pytest.approx(0.2)
    # the oracle: per task the best arm there (t1 strong, t2 cheap, t3 late, t4 cheap)
    assert got["oracle"]["cum_regret"] == 0 and got["oracle"]["cost_usd"] == pytest.approx(1.12)
    assert got["oracle"]["avg_perf"] == 100
    assert late["cum_regret"] == pytest.approx((1 - 0.1) + (1 - 0.001) + 0 + (1 - 0.001) + 0.01)
    assert got["cascade:cheap,strong"]["avg_steps"] == pytest.approx(1.5)
    assert doc["missing_cells"] == 2 and got["oracle"]["hours"] == pytest.approx((600 + 60 + 30 + 60) / 3600)


def test_baselines_fit_any_matrix(tmp_path):
    doc = replay(write(tmp_path / "r", CELLS), "--baselines")
    names = [r["policy"] for r in doc["results"]]
    # by hand: strong alone 2.6, cheap alone 1.996; late then strong 3.68 (late, absent on t1 and t2, hands them
    # to strong), cheap then strong 2.796
    assert doc["hindsight"] == {"arm": "always:strong", "cascade": "cascade:late,strong"}
    assert names == ["oracle", "always:strong", "cascade:late,strong", "random", "linucb", "lints", "knn", "learned"]
    every = [r["policy"] for r in replay(write(tmp_path / "r", CELLS), "--all-arms")["results"]]
    assert {"always:cheap", "always:strong", "always:late"} <= set(every)
    r = acr("bench", "replay", str(tmp_path / "r"), "--baselines")
    assert r.returncode == 0
    assert "the best single arm and two-arm cascade in hindsight" in r.stdout and "Hours" in r.stdout
    assert "2 task x arm result(s) missing" in r.stdout


def test_csv_and_jsonl_replay_alike_and_tasks_set_the_order(tmp_path):
    tasks = [{"task_id": t, "kind": "bug_fix", "project": "acme/api"} for t in ("t4", "t3", "t2", "t1")]
    a = replay(write(tmp_path / "a", CELLS, tasks), "-P", "learned", "-P", "always:strong")
    b = replay(write(tmp_path / "b", CELLS, tasks, csv=True), "-P", "learned", "-P", "always:strong")
    for x, y in zip(a["results"], b["results"]):
        assert x["cum_regret"] == pytest.approx(y["cum_regret"]) and x["cost_usd"] == pytest.approx(y["cost_usd"])
    curve = replay(write(tmp_path / "c", CELLS, tasks), "-P", "always:strong")["results"][0]
    assert curve["n"] == 4


@pytest.mark.parametrize("results, tasks, message", [
    ([{"task_id": "t1", "model": "a", "resolved": 2}], None, "results.jsonl:1: field resolved: expected 0 or 1"),
    ([{"task_id": "t1", "model": "a", "score": 1.5}], None, "results.jsonl:1: field score: expected between 0 and 1"),
    ([{"task_id": "t1", "model": "a", "resolved": 1, "cost_usd": "cheap"}], None,
     "results.jsonl:1: field cost_usd: expected a number"),
    ([{"task_id": "t1", "model": "a", "resolved": 1, "cost_usd": -1}], None, "field cost_usd: expected a finite"),
    ([{"task_id": "t1", "model": "a"}], None, "results.jsonl:1: no resolved or score field"),
    ([{"task_id": "t1", "arm": "codex", "resolved": 1}], None, "field arm: 'codex' is not AGENT:MODEL"),
    ([{"model": "a", "resolved": 1}], None, "results.jsonl:1: field task_id"),
    ([{"task_id": "t1", "model": "a", "resolved": 1}, {"task_id": "t1", "model": "a", "resolved": 0}], None,
     "results.jsonl:2: a second record for task 't1' and arm 'a' (the first: results.jsonl:1)"),
    ([{"task_id": "t9", "model": "a", "resolved": 1}], [{"task_id": "t1"}], "results.jsonl:1: task_id 't9' is not in"),
    ([{"task_id": "t1", "model": "a", "resolved": 1}], [{"task_id": "t1", "kind": 3}], "tasks.jsonl:1: field kind"),
])
def test_a_bad_file_is_refused_naming_file_line_and_field(tmp_path, results, tasks, message):
    folder = write(tmp_path / "r", results, tasks)
    r = acr("bench", "replay", str(folder), "-P", "oracle")
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_folder_without_results_and_a_line_that_is_not_json(tmp_path):
    (tmp_path / "empty").mkdir()
    r = acr("bench", "replay", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no results.jsonl or results.csv" in r.stderr
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "results.jsonl").write_text('{"task_id": "t1", "model": "a", "resolved": 1}\n{oops\n')
    r = acr("bench", "replay", str(folder), "--json")
    assert r.returncode == 2 and "results.jsonl:2: not JSON" in r.stderr
    assert json.loads(r.stdout)["error"]["exit_code"] == 2
    r = acr("bench", "replay", "no-such-benchmark")
    assert r.returncode == 2 and "a folder holding results.jsonl" in r.stderr


def test_prompt_context_needs_prompts_and_reads_them_as_live(tmp_path):
    tasks = [{"task_id": t, "prompt": "fix the crash in the parser when the input is empty"} for t in ("t1", "t2")]
    results = [c for c in CELLS if c["task_id"] in ("t1", "t2")]
    doc = replay(write(tmp_path / "p", results, tasks), "--context", "prompt", "-P", "learned")
    assert doc["context"] == "prompt"
    r = acr("bench", "replay", str(write(tmp_path / "q", results)), "--context", "prompt", "-P", "learned")
    assert r.returncode == 2 and "has no prompt" in r.stderr


def test_time_weight_trades_minutes_for_dollars(tmp_path):
    """Two arms alike in skill and price; one takes ten times as long. Weighing a minute moves learned to the
    quick one (the replay reports the hours)."""
    results = []
    for i in range(60):
        ok = int(i % 3 != 0)
        results.append({"task_id": f"t{i}", "model": "slow", "resolved": ok, "cost_usd": 0.05, "duration_s": 1200})
        results.append({"task_id": f"t{i}", "model": "quick", "resolved": ok, "cost_usd": 0.05, "duration_s": 120})
    folder = write(tmp_path / "t", results)
    plain = rows(replay(folder, "-P", "learned"))["learned"]["hours"]
    timed = rows(replay(folder, "-P", "learned", "--time-weight", "0.5"))["learned"]["hours"]
    assert timed < 0.75 * plain


def test_the_example_folder_replays(tmp_path):
    doc = replay(REPO / "bench" / "examples" / "tiny", "--baselines", "--orders", "3")
    assert doc["n_tasks"] == 12 and rows(doc)["learned"]["orders"] == 3
