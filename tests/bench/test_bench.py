"""Benchmark replays on small matrices the tests build (the published numbers are in test_bench_published.py)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest
from benchdata import write_id, write_ood
from conftest import acr, needs_bench_data
from shared import acr_on_read_only

from acr_cli.bench import data
from acr_cli.errors import AcrError

LAMBDA = 0.1
# task -> model -> (resolved, apply_ok, cost)
OOD = {
    "t1": {"cheap": (1, 1, 0.01), "mid": (1, 1, 0.20), "premium": (1, 1, 1.00)},
    "t2": {"cheap": (0, 1, 0.02), "mid": (1, 1, 0.30), "premium": (1, 1, 2.00)},
    "t3": {"cheap": (0, 1, 0.03), "mid": (0, 1, 0.40), "premium": (1, 1, 3.00)},
    "t4": {"cheap": (0, 0, 0.04), "mid": (0, 0, 0.50), "premium": (0, 1, 4.00)},
}


def replay(data_dir: Path, bench: str, *policies: str, extra=()) -> dict:
    args = ["bench", "replay", bench, "--data-dir", str(data_dir), "--json"]
    for p in policies:
        args += ["--policy", p]
    r = acr(*args, *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def reward(cells: list[tuple[int, int, float]]) -> float:
    return max(c[0] for c in cells) - LAMBDA * sum(c[2] for c in cells)


def oracle(task: dict) -> float:
    return max(reward([c]) for c in task.values())


def test_metrics_of_single_models_and_oracle(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    doc = replay(d, "ood176", "oracle", "always:premium", "always:cheap")
    assert [r["policy"] for r in doc["results"]] == ["oracle", "always:premium", "always:cheap"]
    assert doc["n_tasks"] == 4 and doc["benchmark"] == "ood176"
    orc, prem, cheap = doc["results"]
    assert orc["cum_regret"] == pytest.approx(0.0) and orc["racc"] == 1.0
    assert orc["avg_perf"] == pytest.approx(75.0)  # t4 is resolved only by premium, at a loss
    want = sum(oracle(t) - reward([t["premium"]]) for t in OOD.values())
    assert prem["cum_regret"] == pytest.approx(want)
    assert prem["cost_usd"] == pytest.approx(10.0) and prem["avg_perf"] == pytest.approx(75.0)
    assert prem["perf_per_dollar"] == pytest.approx(7.5)
    assert cheap["avg_perf"] == pytest.approx(25.0) and cheap["apply_ok"] == pytest.approx(75.0)
    assert set(orc) >= {"policy", "n", "avg_perf", "cum_regret", "cost_usd", "perf_per_dollar", "racc", "apply_ok",
                        "avg_steps", "escalations"}
    assert any("sha256 differs" in w for w in doc["warnings"])  # our files are not the published ones


def test_cascade_pays_for_every_model_tried_and_scores_the_best(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    doc = replay(d, "ood176", "cascade:cheap,mid,premium")
    r = doc["results"][0]
    tried = {"t1": ["cheap"], "t2": ["cheap", "mid"], "t3": ["cheap", "mid", "premium"],
             "t4": ["cheap", "mid", "premium"]}
    cost = sum(OOD[t][m][2] for t, ms in tried.items() for m in ms)
    assert r["cost_usd"] == pytest.approx(cost)
    assert r["avg_perf"] == pytest.approx(75.0)
    assert r["avg_steps"] == pytest.approx(9 / 4)
    regret = sum(oracle(OOD[t]) - reward([OOD[t][m] for m in ms]) for t, ms in tried.items())
    assert r["cum_regret"] == pytest.approx(regret)
    assert r["escalations"] == 2  # premium reached after a failure on t3 and t4


def test_acrouter_escalates_only_after_k_applied_cheap_attempts(tmp_path):
    models = ["MiniMax-M2.7", "kimi-k2.5", "gpt-5.4", "glm-5", "claude-opus-4-6"]
    cells = {"applied": {m: (0, 1, 0.1) for m in models}, "not-applied": {m: (0, 0, 0.1) for m in models}}
    cells["applied"]["claude-opus-4-6"] = (1, 1, 1.0)
    cells["not-applied"]["claude-opus-4-6"] = (1, 1, 1.0)
    cells["not-applied"]["kimi-k2.5"] = (0, 1, 0.1)
    d = tmp_path / "data"
    write_ood(d, cells)
    from benchdata import write_models

    write_models(d, {m: (1.0, 1.0) for m in models[:-1]} | {"claude-opus-4-6": (5.0, 25.0)})
    for k, escalations in ((2, 1), (1, 2), (0, 2)):
        r = replay(d, "ood176", "acrouter", extra=["--k", str(k)])["results"][0]
        assert r["escalations"] == escalations, k
        assert r["avg_steps"] == pytest.approx((4 + 4 + escalations) / 2)


def test_shuffled_orders_report_mean_and_sd(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    doc = replay(d, "ood176", "learned", "always:mid", extra=["--orders", "3", "--seed", "5"])
    assert doc["order"] == "3 shuffled orders (seed 5)"
    learned, mid = doc["results"]
    assert learned["orders"] == 3 and len(learned["run_ids"]) == 3
    assert mid["sd"]["cum_regret"] == pytest.approx(0.0)  # order cannot change a fixed choice
    assert set(learned["sd"]) >= {"avg_perf", "cum_regret", "cost_usd"}


def test_decisions_file_with_aliases_and_missing_tasks(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    dec = tmp_path / "dec.jsonl"
    dec.write_text("\n".join(json.dumps(x) for x in [
        {"task_id": "t1", "chosen_model": "CHEAP"},
        {"task_id": "t2", "chosen_model": "mid", "chain_run": ["cheap", "mid"]},
        {"task_id": "t3", "chosen_model": "premium"}]) + "\n")
    r = replay(d, "ood176", f"decisions:{dec}")["results"][0]
    assert r["missing_decisions"] == 1
    assert r["cost_usd"] == pytest.approx(0.01 + 0.02 + 0.30 + 3.00)
    assert r["avg_perf"] == pytest.approx(75.0)


def test_a_decisions_file_for_other_tasks_is_refused_and_a_repeated_policy_replays_once(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    dec = tmp_path / "dec.jsonl"
    dec.write_text(json.dumps({"task_id": "dim1_mbpp_1", "chosen_model": "cheap"}) + "\n")
    r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", f"decisions:{dec}")
    assert r.returncode == 2 and "none of its task ids" in r.stderr and "'t1'" in r.stderr
    doc = replay(d, "ood176", "always:cheap", "oracle", "always:CHEAP")
    assert [x["policy"] for x in doc["results"]] == ["always:cheap", "oracle"]
    assert "always:cheap was asked for as always:cheap and always:CHEAP: replayed once" in doc["warnings"]


def test_group_map_levels_and_fallback(tmp_path):
    cells = {"dim1_mbpp_1": {"cheap": (1.0, 0.01), "mid": (0.0, 0.1), "premium": (0.5, 1.0)},
             "dim1_bcb_BigCodeBench/2": {"cheap": (0.0, 0.01), "mid": (1.0, 0.1), "premium": (0.5, 1.0)},
             "dim3_swebench_django_3": {"cheap": (0.0, 0.01), "mid": (0.0, 0.1), "premium": (1.0, 1.0)}}
    dims = {"dim1_mbpp_1": "code_generation", "dim1_bcb_BigCodeBench/2": "code_generation",
            "dim3_swebench_django_3": "bug_fixing"}
    d = write_id(tmp_path / "data", cells, dims)
    gmap = tmp_path / "map.json"
    gmap.write_text(json.dumps({"fallback_model": "premium", "levels": [
        {"mode": "first3", "mapping": {"dim1_mbpp_1": "cheap"}},
        {"mode": "source", "mapping": {"bcb": "mid"}},
        {"mode": "dimension", "mapping": {"algorithm": "cheap"}}]}))
    r = replay(d, "id2919", f"map:{gmap}")["results"][0]
    assert r["avg_perf"] == pytest.approx(100.0) and r["cost_usd"] == pytest.approx(1.11)


def test_verify_protocol_retries_only_where_execution_verified(tmp_path):
    cells = {"a": {"cheap": (0.5, 0.01), "mid": (1.0, 0.1), "premium": (1.0, 1.0)},
             "b": {"cheap": (0.5, 0.01), "mid": (1.0, 0.1), "premium": (1.0, 1.0)}}
    d = write_id(tmp_path / "data", cells, {"a": "algorithm", "b": "code_understanding"})
    single = replay(d, "id2919", "cascade:cheap,mid", extra=["--protocol", "single"])["results"][0]
    verify = replay(d, "id2919", "cascade:cheap,mid", extra=["--protocol", "verify"])["results"][0]
    assert single["avg_steps"] == 1.0 and single["avg_perf"] == pytest.approx(50.0)
    assert single["apply_ok"] is None  # the ID files do not say whether a patch applied: unknown, not 0%
    assert verify["avg_steps"] == 1.5 and verify["avg_perf"] == pytest.approx(75.0)
    r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--protocol", "single")
    assert r.returncode == 2 and "does not apply" in r.stderr


def test_report_rerenders_a_stored_replay(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    doc = replay(d, "ood176", "oracle", "always:mid")
    listed = json.loads(acr("bench", "report", "--list", "--json").stdout)
    assert listed[-1]["group"] == doc["group"] and listed[-1]["policies"] == ["oracle", "always:mid"]
    again = json.loads(acr("bench", "report", doc["group"], "--json").stdout)
    for a, b in zip(doc["results"], again["results"]):
        assert a["policy"] == b["policy"] and a["cum_regret"] == pytest.approx(b["cum_regret"])
    md = acr("bench", "report", "--markdown").stdout
    assert md.startswith("| policy | n |") and "always:mid" in md
    csv_text = acr("bench", "report", "--csv").stdout
    assert csv_text.splitlines()[0].startswith("policy,n,avg_perf,cum_regret")


def test_replay_with_a_memory_file_recomputes_from_attempts(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    mem = tmp_path / "replay.sqlite"
    doc = replay(d, "ood176", "cascade:cheap,premium", extra=["--memory", str(mem)])
    import sqlite3

    db = sqlite3.connect(mem)
    assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 1 + 2 + 2 + 2
    again = json.loads(acr("bench", "report", "--memory", str(mem), "--json").stdout)
    assert again["results"][0]["cost_usd"] == pytest.approx(doc["results"][0]["cost_usd"])


# a signal whose KeyboardInterrupt Python swallows: raised inside a garbage-collector callback (as inside a
# finalizer, e.g. a generator the collector closes), half a second into the command; prints "fired" when it is
SWALLOWED_SIGNAL = """
import gc, signal, sys, time
start, fired = time.monotonic(), []
def swallow(phase, info):
    # once acr's handlers are installed (the replay has begun), and it has run a while: no earlier, where a
    # signal before them is Python's own KeyboardInterrupt, lost in a callback on a slow start
    handlers = getattr(sys.modules.get("acr_cli.interrupts"), "_previous", None)
    if not fired and phase == "start" and handlers and time.monotonic() - start > 0.5:
        fired.append(1)
        print("fired", file=sys.stderr)
        signal.raise_signal(signal.SIGINT)
        sum(range(10))
gc.callbacks.append(swallow)
sys.argv = ["acr", *sys.argv[1:]]
from acr_cli.__main__ import main
main()
"""


@needs_bench_data
@pytest.mark.parametrize("signum, code, policies, when", [
    (signal.SIGINT, 130, ["learned"], "started"),
    (signal.SIGTERM, 143, ["learned"], "started"),  # `timeout` or `kill`: cancelled like Ctrl-C
    (signal.SIGTERM, 143, ["oracle", "learned"], "first policy done"),  # one policy's run is finished, not the replay
    (None, 130, ["learned", "oracle"], "swallowed"),
], ids=["ctrl-c", "sigterm", "after-one-policy", "swallowed-by-python"])
def test_a_replay_cut_off_by_ctrl_c_leaves_the_stored_ones_readable(tmp_path, signum, code, policies, when):
    import sqlite3
    import time

    from conftest import BENCH_DATA

    d = write_ood(tmp_path / "data", OOD)
    mem = tmp_path / "replay.sqlite"
    kept = replay(d, "ood176", "oracle", extra=["--memory", str(mem)])
    args = ["bench", "replay", "id2919", *[a for p in policies for a in ("-P", p)], "--data-dir", str(BENCH_DATA),
            "--memory", str(mem)]
    head = [sys.executable, "-c", SWALLOWED_SIGNAL] if when == "swallowed" else [sys.executable, "-m", "acr_cli"]
    proc = subprocess.Popen([*head, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    seen = {"started": "SELECT COUNT(*) FROM runs WHERE benchmark = 'id2919'",
            "first policy done": "SELECT COUNT(*) FROM runs WHERE benchmark = 'id2919' AND finished_at IS NOT NULL"}
    if signum is not None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the replay got that far
            with sqlite3.connect(mem) as db:
                if db.execute(seen[when]).fetchone()[0]:
                    break
            time.sleep(0.05)
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    if when == "swallowed":
        assert err.startswith("fired")
    listed = acr("bench", "report", "--list", "--json", "--memory", str(mem))
    assert listed.returncode == 0 and [g["group"] for g in json.loads(listed.stdout)] == [kept["group"]]
    shown = acr("bench", "report", "--json", "--memory", str(mem))  # the newest stored replay, not the cut-off one
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["results"][0]["cum_regret"] == pytest.approx(kept["results"][0]["cum_regret"])


def test_bad_input(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    for args, msg in ((["nosuch"], "unknown benchmark"), (["ood176", "--policy", "always:gpt-9"], "unknown model"),
                      (["ood176", "--policy", "magic"], "unknown policy"),
                      (["ood176", "--policy", "map:nofile.json"], "not found"),
                      (["ood176", "--policy", "cascade:cheap,,mid"], "empty"),
                      (["ood176", "--policy", "cascade:cheap,mid,CHEAP"], "cheap appears twice"),
                      (["ood176", "--cost-weight", "inf"], "finite number"),  # its figures would be NaN
                      (["ood176", "--orders", "100000000"], "10000")):  # not a list of 10^8 seeds in memory
        r = acr("bench", "replay", *args, "--data-dir", str(d))
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, args
    r = acr("bench", "replay", "ood176", "--data-dir", str(tmp_path / "empty"))
    assert r.returncode == 2 and "missing" in r.stderr
    r = acr("bench", "replay", "ood176", env={"ACR_HF_ENDPOINT": "http://127.0.0.1:9"})  # nothing listens there
    assert r.returncode == 2 and "could not be downloaded" in r.stderr and "--data-dir" in r.stderr


def test_a_suffix_a_policy_does_not_take_is_refused(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    for policy, hint in (("random:5", "random's seed is --seed N"), ("oracle:x", "map:FILE and decisions:FILE"),
                         ("learned:zzz", "--profile"), ("knn:", "take one")):
        r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", policy)
        assert r.returncode == 2 and f"policy {policy.split(':')[0]} takes no argument" in r.stderr, policy
        assert hint in r.stderr and r.stdout == "", policy


def test_a_map_or_decisions_file_of_the_wrong_shape_is_named_not_a_crash(tmp_path):
    cells = {"dim1_mbpp_1": {"cheap": (1.0, 0.01), "mid": (0.0, 0.1), "premium": (1.0, 1.0)}}
    d = write_id(tmp_path / "data", cells, {"dim1_mbpp_1": "code_generation"})
    gmap = tmp_path / "m.json"
    for bad in ({"fallback_model": "mid", "levels": [{"mode": "first3", "mapping": None}]},
                {"fallback_model": "mid", "levels": [{"mode": "source", "mapping": {"mbpp": 5}}]},
                {"fallback_model": "mid", "levels": None}, {"levels": []}, []):
        gmap.write_text(json.dumps(bad))
        r = acr("bench", "replay", "id2919", "--data-dir", str(d), "--policy", f"map:{gmap}")
        assert r.returncode == 2 and f"map:{gmap}: not a group map" in r.stderr, (bad, r.stderr)
        assert "internal error" not in r.stderr
    dec = tmp_path / "dec.jsonl"
    dec.write_text(json.dumps({"task_id": "dim1_mbpp_1", "chosen_model": "cheap"}) + "\n"
                   + json.dumps({"task_id": "dim1_mbpp_1", "chosen_model": "mid", "chain_run": "mid"}) + "\n")
    r = acr("bench", "replay", "id2919", "--data-dir", str(d), "--policy", f"decisions:{dec}")
    assert r.returncode == 2 and f"decisions:{dec}: line 2: chain_run must be a list of models" in r.stderr
    assert "unknown model" not in r.stderr


def test_a_replay_that_cannot_be_stored_still_prints_its_figures_and_says_so(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    not_a_db = tmp_path / "memory.txt"
    not_a_db.write_text("not a database\n")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for env in ({"ACR_MEMORY": str(not_a_db)}, {"ACR_HOME": str(blocked / "home")}):  # cannot be opened / created
        r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle", env=env)
        assert r.returncode == 0 and "oracle" in r.stdout, env
        assert "stored as" not in r.stdout and "the replay was not stored" in r.stderr, env
        r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle", "--json", env=env)
        assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["policy"] == "oracle"
        assert "the replay was not stored" in r.stderr
    assert "not a readable acr memory" in acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle",
                                              env={"ACR_MEMORY": str(not_a_db)}).stderr  # and why
    assert not_a_db.read_text() == "not a database\n"


def test_report_and_download_refuse_arguments_they_cannot_use(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    doc = replay(d, "ood176", "oracle")
    r = acr("bench", "report", "--list", doc["group"])
    assert r.returncode == 2 and "takes no run id" in r.stderr and r.stdout == ""
    for args in (["--memory", str(tmp_path / "nosuch.sqlite")], ["--list", "--memory", str(tmp_path / "nosuch.sqlite")]):
        r = acr("bench", "report", *args)
        assert r.returncode == 2 and f"no memory at {tmp_path / 'nosuch.sqlite'}" in r.stderr, args
        assert not (tmp_path / "nosuch.sqlite").exists()
    r = acr("bench", "download", "--revision", "", "--dest", str(tmp_path / "dl"),
            env={"ACR_HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 2 and "--revision is empty" in r.stderr and "resolve//" not in r.stderr


def test_a_damaged_data_file_is_named_with_its_line_not_a_crash(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    good = {p.name: p.read_bytes() for p in d.iterdir()}
    results = good["ood176_results_long.csv"].decode()
    cut = results[:results.index("\n", results.index("\n") + 1) + 20]  # the header, a row, part of the next
    for name, damage, msg in (
            ("ood176_results_long.csv", cut.encode(), "ood176_results_long.csv:3: 4 field(s), expected 8"),
            ("ood176_results_long.csv", b"", "ood176_results_long.csv: empty"),
            ("ood176_results_long.csv", b"\xff\xfe\x00garbage", "ood176_results_long.csv: not UTF-8 text"),
            ("ood176_results_long.csv", results.replace(",0.01\r\n", ",lots\r\n", 1).encode(),
             "ood176_results_long.csv:2: column cost_usd: 'lots' is not a number"),
            ("ood176_tasks.jsonl", good["ood176_tasks.jsonl"][:30], "ood176_tasks.jsonl:1: not a task record"),
            ("models.json", b"{bad", "models.json: not a price table")):
        (d / name).write_bytes(damage)
        r = acr("bench", "replay", "ood176", "--policy", "oracle", "--data-dir", str(d))
        assert r.returncode == 2 and msg in r.stderr and "internal error" not in r.stderr, (name, r.stderr)
        assert "acr bench download" in r.stderr  # what to do about it
        (d / name).write_bytes(good[name])
    (d / "ood176_results_long.csv").write_text(results.replace(",0.01\r\n", ",\r\n", 1), newline="")
    cheap = replay(d, "ood176", "always:cheap")["results"][0]  # a blank cost is 0, as in the paper
    assert cheap["n"] == 4 and cheap["cost_usd"] == pytest.approx(0.02 + 0.03 + 0.04)


def test_plot_or_a_clear_message(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    out = tmp_path / "regret.png"
    r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle", "--plot", str(out))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert r.returncode == 2 and "-m pip install matplotlib" in r.stderr
    else:
        assert r.returncode == 0 and out.read_bytes().startswith(b"\x89PNG")
    r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "learned", "--plot", "/nonexistent/r.png")
    assert r.returncode == 2 and r.stdout == ""  # refused before the replay, not after it
    assert "/nonexistent does not exist" in r.stderr or "needs matplotlib" in r.stderr
    assert acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle").returncode == 0  # stored
    for plot in ("/nonexistent/r.png", str(tmp_path / "r.gif")):  # and by report, before it prints the report
        r = acr("bench", "report", "--plot", plot)
        assert r.returncode == 2 and r.stdout == "", plot


def test_csv_and_markdown_still_warn_about_files_that_differ_from_the_published_ones(tmp_path):
    d = write_ood(tmp_path / "data", OOD)
    for fmt in ("--csv", "--markdown"):
        r = acr("bench", "replay", "ood176", "--data-dir", str(d), "--policy", "oracle", fmt)
        assert r.returncode == 0 and "sha256 differs" in r.stderr and "sha256" not in r.stdout


def test_memory_replay_reports_actual_routing_and_unscorable_tasks(tmp_path, acr_home):
    from acr_cli.domain import Arm, Decision, Feedback
    from acr_cli.memory import Memory

    mem = Memory.open(acr_home / "data" / "memory.sqlite")
    a, b = Arm("codex", "gpt-5.4"), Arm("claude", "claude-opus-4-6")
    for i, outcomes in enumerate([[(a, "failed", 0.1), (b, "passed", 1.0)], [(a, "passed", 0.2)],
                                  [(b, "passed", 0.5)]]):
        tid = mem.begin_task(source="live", kind="bug_fix", groups=["kind=bug_fix"], prompt=f"t{i}")
        for seq, (arm, verdict, cost) in enumerate(outcomes, 1):
            mem.add_attempt(tid, seq, Decision(arm, "x"), Feedback(arm, verdict, cost_usd=cost))
        mem.finish_task(tid, passed=True, score=1.0, cost_usd=0, final_arm=None)
    mem.close()
    r = acr("bench", "replay", "memory", "--policy", "always:codex:gpt-5.4", "--policy", "oracle", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    actual, always, orc = doc["results"]
    assert actual["policy"] == "actual" and actual["n"] == 3
    # task 1: best observed arm is b alone (1 - 0.1) vs actual (1 - 0.11); others: no regret
    assert actual["cum_regret"] == pytest.approx(0.1 * 0.1)
    assert always["unscorable"] == 1 and always["n"] == 2
    assert always["apply_ok"] is None  # these attempts did not record whether they changed the tree
    assert orc["cum_regret"] == pytest.approx(0.0)
    assert doc["missing_cells"] == 2
    assert doc["context"] == "prompt"  # what acr run recorded: the memory has no benchmark labels
    r = acr("bench", "replay", "memory", "--policy", "oracle", "--context", "labels")
    assert r.returncode == 2 and "carry no benchmark labels" in r.stderr and r.stdout == ""
    r = acr("bench", "replay", "memory", "--policy", "linucb")
    assert r.returncode == 0 and "linucb" in r.stdout and "paper" not in r.stdout  # no paper figure for your memory
    r = acr("bench", "replay", "memory", "--policy", "acrouter")  # its chain names the paper's models
    assert r.returncode == 2 and "replays on ood176 and id2919, not on your memory" in r.stderr


def test_a_read_only_memory_replays_and_says_the_replay_was_not_stored(tmp_path, acr_home):
    from acr_cli.domain import Arm, Decision, Feedback
    from acr_cli.memory import Memory

    mem = Memory.open(acr_home / "data" / "memory.sqlite")
    a = Arm("codex", "gpt-5.4")
    for i, verdict in enumerate(["failed", "passed"]):
        tid = mem.begin_task(source="live", kind="bug_fix", groups=["kind=bug_fix"], prompt=f"t{i}")
        mem.add_attempt(tid, 1, Decision(a, "x"), Feedback(a, verdict, cost_usd=0.1))
        mem.finish_task(tid, passed=verdict == "passed", score=1.0, cost_usd=0.1, final_arm=a.id)
    mem.close()
    before = (acr_home / "data" / "memory.sqlite").read_bytes()
    r = acr_on_read_only(acr_home / "data", "bench", "replay", "memory", "--policy", "oracle")
    assert r.returncode == 0, r.stderr
    assert "oracle" in r.stdout and "the replay was not stored" in r.stderr
    assert (acr_home / "data" / "memory.sqlite").read_bytes() == before


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def file_server(tmp_path):
    root = tmp_path / "www"
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_download_from_a_mirror_checks_sha256_and_writes_atomically(tmp_path, file_server):
    root, url = file_server
    folder = root / "datasets" / "Lance1573" / "CodeRouterBench" / "resolve" / "v1"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_text("x,y\n1,2\n")
    (folder / "b.json").write_text("{}")
    sha = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in ("a.csv", "b.json")}
    seen = []
    dest = tmp_path / "cache"
    got = data.download(sha, dest, revision="v1", endpoint=url, progress=lambda n, g, t: seen.append((n, g, t)))
    assert [p.name for p in got] == ["a.csv", "b.json"] and (dest / "a.csv").read_text() == "x,y\n1,2\n"
    assert ("a.csv", 8, 8) in seen
    (folder / "b.json").write_text('{"tampered": true}')
    with pytest.raises(AcrError, match="does not match"):
        data.download(sha, dest, revision="v1", endpoint=url, force=True)
    assert (dest / "b.json").read_text() == "{}"  # the good copy stays, no partial file is left
    assert sorted(p.name for p in dest.iterdir()) == ["a.csv", "b.json"]
    with pytest.raises(AcrError, match="HTTP 404"):
        data.download({"missing.csv": None}, dest, revision="v1", endpoint=url)


def test_download_cli_uses_the_endpoint_variable(tmp_path, file_server):
    root, url = file_server
    r = acr("bench", "download", "--dest", str(tmp_path / "d"), env={"ACR_HF_ENDPOINT": url})
    assert r.returncode == 2 and "HTTP 404" in r.stderr and url in r.stderr


def test_a_memory_replay_shows_the_router_what_acr_run_showed_it(tmp_path):
    from acr_cli.bench import from_memory
    from acr_cli.context import KIND_PRECISION, classify, context_json
    from acr_cli.domain import Arm, Decision, Feedback
    from acr_cli.memory import Memory

    mem = Memory.open(tmp_path / "m.sqlite")
    from acr_cli.project import identity

    a = Arm("codex", "gpt-5.4")
    for prompt, kind in (("fix the failing parser test", None), ("tidy the parser module", "refactor")):
        ctx = classify(prompt, tmp_path, kind=kind)
        tid = mem.begin_task(source="live", kind=ctx.kind, groups=ctx.groups, prompt=prompt, project=ctx.project)
        mem.add_attempt(tid, 1, Decision(a, "x"), Feedback(a, "passed", cost_usd=0.1))
        mem.finish_task(tid, passed=True, score=1.0, cost_usd=0.1, final_arm=a.id)
        mem.describe_task(tid, context=context_json(ctx))
    matrix, _ = from_memory.load(mem, None)
    guessed, given = matrix.tasks
    assert (guessed.prompt, guessed.project, guessed.kind) == ("fix the failing parser test", identity(tmp_path),
                                                               "bug_fix")
    assert guessed.kind_sure == KIND_PRECISION["bug_fix"] and given.kind_sure == 1.0


def test_a_stored_replay_written_damaged_is_named_not_crashed_on(tmp_path):
    """A runs row acr did not write (edited, or from an acr before import checked them): --list still lists,
    and the report says which replay is damaged (it crashed with a JSONDecodeError, exit 70)."""
    from acr_cli.memory import Memory

    path = tmp_path / "m.sqlite"
    mem = Memory.open(path)
    run = "r1"
    mem.add_run(run, "ood176", "oracle", {})
    mem.finish_run(run, 1, {"result": {"policy": "oracle", "n": 1}})
    mem.db.execute("UPDATE runs SET report = '{bad', params = '[1]' WHERE id = ?", (run,))
    mem.close()
    r = acr("bench", "report", "--list", "--memory", str(path))
    assert r.returncode == 0 and run in r.stdout, r.stderr
    r = acr("bench", "report", run, "--memory", str(path))
    assert r.returncode == 2 and f"the stored replay {run} is damaged" in r.stderr and "Traceback" not in r.stderr


def test_progress_shows_on_a_terminal_even_when_the_output_goes_to_a_file_as_json(tmp_path):
    """A long replay with --json > file: the person at the terminal still sees progress, on stderr only, and
    stdout is the JSON alone."""
    import pty

    d = write_ood(tmp_path / "data", OOD)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "bench", "replay", "ood176", "--data-dir", str(d),
                             "--policy", "learned", "--orders", "3", "--json"], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out, _ = proc.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0
    assert json.loads(out)["results"][0]["policy"] == "learned" and out.startswith(b"{")
    assert b"learned" in seen and b"/" in seen  # the bar: the policy, and tasks done of all
