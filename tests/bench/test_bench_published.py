"""The paper's published numbers, reproduced from the public CodeRouterBench files.

Reads ../shared/coderouterbench (or $ACR_TEST_BENCH_DATA); skipped when absent.
"""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from functools import partial

import pytest
from conftest import BENCH_DATA as DATA
from conftest import acr, needs_bench_data

pytestmark = needs_bench_data
REF = "reference/ood176_decisions"


def run(bench: str, *args: str) -> dict:
    r = acr("bench", "replay", bench, "--data-dir", str(DATA), "--json", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["warnings"] == []  # the files match the published checksums
    return {x["policy"]: x for x in doc["results"]}


def close(row: dict, **want: float) -> None:
    for metric, value in want.items():
        digits = {"cum_regret": 1, "escalations": 0}.get(metric, 2)
        assert round(row[metric], digits) == pytest.approx(value), (row["policy"], metric, row[metric])


def test_ood176_baselines():
    rows = run("ood176", "--baselines")
    close(rows["acrouter"], n=176, avg_perf=73.30, cum_regret=15.9, cost_usd=86.72, perf_per_dollar=0.85,
          avg_steps=2.66, escalations=29)
    close(rows["oracle"], avg_perf=78.98, cum_regret=0.0, cost_usd=27.62)
    close(rows["always:claude-opus-4-6"], avg_perf=63.64, cum_regret=43.7, cost_usd=194.91)
    close(rows["always:kimi-k2.5"], avg_perf=19.89, cum_regret=101.4, cost_usd=1.46)
    assert rows["acrouter"]["published"]["cum_regret"] == 15.9  # shown beside ours


def test_ood176_reference_decision_files():
    args = ["--policy", f"decisions:{REF}/LinTS.jsonl"]
    for seed in range(42, 52):
        args += ["--policy", f"decisions:{REF}/Random_seed{seed}.jsonl"]
    rows = run("ood176", *args)
    close(rows["decisions:LinTS.jsonl"], avg_perf=53.98, cum_regret=46.4, cost_usd=51.37)
    randoms = [r for name, r in rows.items() if name.startswith("decisions:Random")]
    assert len(randoms) == 10
    assert round(sum(r["avg_perf"] for r in randoms) / 10, 2) == 40.34
    assert round(sum(r["cum_regret"] for r in randoms) / 10, 2) == 70.89


def test_id2919_group_map_and_oracle():
    rows = run("id2919", "--policy", "map:reference/acrouter_id_group_map.json", "--policy", "oracle")
    close(rows["map:acrouter_id_group_map.json"], n=2919, avg_perf=50.14, cost_usd=22.31, cum_regret=290.1)
    close(rows["oracle"], avg_perf=60.02, cum_regret=0.0)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def test_download_of_the_published_files_from_a_local_mirror(tmp_path):
    folder = tmp_path / "www" / "datasets" / "Lance1573" / "CodeRouterBench" / "resolve" / "main"
    folder.mkdir(parents=True)
    for name in ("ood176_results_long.csv", "ood176_tasks.jsonl", "id_test_results_long.csv",
                 "id_test_tasks.jsonl", "models.json"):
        shutil.copy(DATA / name, folder / name)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(tmp_path / "www")))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        env = {"ACR_HF_ENDPOINT": f"http://127.0.0.1:{srv.server_address[1]}"}
        r = acr("bench", "replay", "ood176", "--policy", "always:kimi-k2.5", "--json", env=env)  # first use
        assert r.returncode == 0, r.stderr
        assert "downloading CodeRouterBench" in r.stderr
        assert round(json.loads(r.stdout)["results"][0]["cum_regret"], 1) == 101.4
        r = acr("bench", "download", env=env)
        assert r.returncode == 0, r.stderr
        assert "5 files" in r.stdout
    finally:
        srv.shutdown()


def test_a_prompt_context_replay_routes_on_what_acr_run_would_see(tmp_path):
    """--context prompt: the router gets the prompt's kind and the task's repository, never the labels."""
    import sqlite3

    stored = tmp_path / "replay.sqlite"
    r = acr("bench", "replay", "ood176", "--data-dir", str(DATA), "-P", "learned", "--context", "prompt",
            "--memory", str(stored), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["context"] == "prompt" and doc["results"][0]["n"] == 176
    keys = [k for (k,) in sqlite3.connect(stored).execute("SELECT DISTINCT key FROM task_groups")]
    assert "all" in keys and "kind=bug_fix/project=repo=django/django" in keys
    assert not any("dimension=" in k or "bench=" in k or "old112" in k for k in keys)  # no label reaches it
    default = acr("bench", "replay", "ood176", "--data-dir", str(DATA), "-P", "learned", "--json")
    assert default.returncode == 0, default.stderr
    labels = json.loads(default.stdout)
    assert labels["context"] == "labels"  # the default stays the paper's setting
    assert labels["results"][0]["cum_regret"] != doc["results"][0]["cum_regret"]  # and the context is used
    refused = acr("bench", "replay", "id2919", "--data-dir", str(DATA), "-P", "learned", "--context", "prompt")
    assert refused.returncode == 2 and "no prompt" in refused.stderr


def test_a_task_is_placed_in_the_repository_its_id_names():
    """--context prompt's project: the owner__repo part of a benchmark id, whatever follows it."""
    from acr_cli.bench.contexts import repository

    assert repository("old112::django__django-11133") == "django/django"
    assert repository("new64::featurebench::astropy__astropy.b0db0daa.test_table.48eef659.lv1") == "astropy/astropy"
    # swe_ci: the repository, then two commits (it was read as a repository named "...__91315e__22fa9f")
    assert repository("new64::swe_ci::anthropics__claude-agent-sdk-python__91315e__22fa9f") == \
        "anthropics/claude-agent-sdk-python"
    assert repository("new64::longcli::61810_cow") is None  # a course's lab: no repository named
