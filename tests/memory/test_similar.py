"""Similar past tasks: the request index in memory, and the router reading what happened on them."""

from __future__ import annotations

import json
import sqlite3

from conftest import acr
from shared import ROUTE_SIMILAR, old_schema
from shared import TWO_EQUAL_ARMS as PROFILE

from acr_cli.context import classify
from acr_cli.domain import Arm, Decision, Feedback, TaskState
from acr_cli.memory import Memory, similar
from acr_cli.memory import db as dbmod

A, B = Arm("codex", "m-a"), Arm("claude", "m-b")
WEBSOCKET = "rework the websocket reconnect backoff in the streaming client so it stops hammering the gateway"
OTHER = ["add a CSV export button to the invoices page", "rename the settings panel to preferences",
         "add pagination to the audit log endpoint", "add a dark mode toggle to the navigation bar",
         "support uploading avatars as PNG files", "add a retry count column to the jobs table"]


def record(mem: Memory, project, prompt: str, steps: list[tuple[Arm, str]]) -> str:
    ctx = classify(prompt, project, kind="feature")
    tid = mem.begin_task(source="live", kind=ctx.kind, groups=ctx.groups, prompt=prompt, project=ctx.project)
    for seq, (arm, verdict) in enumerate(steps, 1):
        mem.add_attempt(tid, seq, Decision(arm, "test"), Feedback(arm, verdict, score=float(verdict == "passed"),
                                                                   cost_usd=0.05))
    mem.finish_task(tid, passed=steps[-1][1] == "passed", score=1.0, cost_usd=0.1, final_arm=steps[-1][0].id)
    return tid


def route(profile, project, prompt: str, *extra: str):
    r = acr("route", prompt, "--profile", str(profile), "--project", str(project), "--kind", "feature", *extra)
    assert r.returncode == 0, r.stderr
    return r


def test_an_arm_that_won_on_similar_requests_goes_first_for_them_only(tmp_path, acr_home, fakes_on_path):
    """Over the project, arm a wins; on the requests that read like this one, only arm b did. The
    router tries b first for such a request and keeps a first for any other; `route --explain`
    names the similar tasks and their outcomes; forgetting them takes their evidence away."""
    profile = tmp_path / "two.yaml"
    profile.write_text(PROFILE)
    project = tmp_path / "proj"
    project.mkdir()
    mem = Memory.open(acr_home / "data" / "memory.sqlite")
    for i in range(30):
        record(mem, project, OTHER[i % len(OTHER)] + f" (ticket {i})", [(A, "passed")])
    for i in range(8):
        record(mem, project, OTHER[i % len(OTHER)] + f" again (ticket {i})", [(B, "failed"), (A, "passed")])
    near = [record(mem, project, WEBSOCKET + (" please" if i % 2 else ""), [(A, "failed"), (B, "passed")])
            for i in range(8)]
    mem.close()

    first = lambda prompt: json.loads(route(profile, project, prompt, "--json").stdout)["order"][0]["model"]  # noqa: E731
    assert first(OTHER[3] + " on mobile") == "m-a"
    assert first(WEBSOCKET) == "m-b"

    out = json.loads(route(profile, project, WEBSOCKET, "--json").stdout)
    assert {s["task"] for s in out["similar"]} >= set(near)
    assert all(set(s) == ROUTE_SIMILAR for s in out["similar"])
    top = out["similar"][0]
    assert top["similarity"] > 0.9 and top["same_project"]
    assert top["outcome"] == {"codex:m-a": "failed", "claude:m-b": "passed"}
    moved = out["moved_by_similar"]
    assert moved["claude:m-b"]["with"] > moved["claude:m-b"]["without"]
    assert moved["codex:m-a"]["with"] < moved["codex:m-a"]["without"]

    text = route(profile, project, WEBSOCKET, "--explain").stdout
    assert "similar earlier tasks" in text
    assert "codex:m-a failed; claude:m-b passed" in text
    assert "they moved: " in text and "claude:m-b" in text.split("they moved: ")[1]

    r = acr("memory", "forget", *near, "--yes")
    assert r.returncode == 0, r.stderr
    assert first(WEBSOCKET) == "m-a"
    left = json.loads(route(profile, project, WEBSOCKET, "--json").stdout)["similar"]
    assert not {s["task"] for s in left} & set(near)


def test_weak_or_few_neighbours_move_the_estimate_less(tmp_path):
    """The evidence of similar tasks shrinks toward the group: one similar task moves an arm's chance
    less than eight, and a weakly similar one less than the same request again."""
    from acr_cli.memory.aggregates import GroupCache
    from acr_cli.routing.learned import LearnedPolicy

    def shift(n_near: int, prompt: str, single: bool = False) -> float:
        mem = Memory.open(tmp_path / f"m-{n_near}-{len(prompt)}-{single}.sqlite")
        project = tmp_path / "p"
        project.mkdir(exist_ok=True)
        for i in range(12):
            record(mem, project, OTHER[i % len(OTHER)] + f" #{i}", [(A, "passed")])
        for _ in range(n_near):
            record(mem, project, prompt, [(A, "failed"), (B, "passed")])
        pol = LearnedPolicy([A, B], GroupCache(mem, "live"))
        ctx = classify(WEBSOCKET, project, kind="feature")
        found, moved = pol.similar_effect(ctx, TaskState(max_attempts=1) if single else None)
        mem.close()
        assert found
        return moved[A.id][0] - moved[A.id][1]

    many, one = shift(8, WEBSOCKET), shift(1, WEBSOCKET)
    weak = shift(1, "rework the retry backoff of the upload client")
    assert many > one > weak > 0
    # a single action (no verdict to escalate on) reads them through the group-effects model alike
    assert shift(8, WEBSOCKET, single=True) > shift(1, WEBSOCKET, single=True) > 0


def test_forgotten_tasks_leave_the_index_and_the_word_counts(new_memory, tmp_path):
    mem = new_memory()
    keep = record(mem, None, "fix the parser crash on empty input", [(A, "passed")])
    gone = record(mem, None, "parser crashes when the input file is empty", [(A, "passed")])
    record(mem, None, "add a dark mode toggle", [(A, "passed")])
    found = [s.task_id for s in similar.find(mem, "live", "the parser crashes on empty input")]
    assert found[:2] in ([keep, gone], [gone, keep])
    docs = lambda: dict(mem.db.execute("SELECT term, df FROM prompt_terms WHERE source = 'live'").fetchall())  # noqa: E731
    assert docs()[""] == 3 and docs()["parser"] == 2

    mem.forget([gone])
    assert [s.task_id for s in similar.find(mem, "live", "the parser crashes on empty input")][:1] == [keep]
    assert docs()[""] == 2 and docs()["parser"] == 1 and "crashes" not in docs()
    if mem.dialect.name == "sqlite":  # (PostgreSQL's index is on the tasks table itself)
        assert gone not in [r[0] for r in mem.db.execute("SELECT t.id FROM task_text JOIN tasks t ON t.rowid = "
                                                         "task_text.rowid WHERE task_text MATCH 'crashes'")]
        # the index agrees with the tasks table, word for word (FTS5 raises if it does not)
        mem.db.execute("INSERT INTO task_text (task_text, rank) VALUES ('integrity-check', 1)")
        # and the forgotten request's words are gone from the index's own data, not only from its answers
        assert not any(b"crashes" in bytes(row[0]) for row in mem.db.execute("SELECT block FROM task_text_data"))

    mem.forget_all()
    assert similar.find(mem, "live", "the parser crashes on empty input") == []
    assert docs() == {}
    mem.close()


def test_the_same_request_again_is_found_even_when_it_is_all_memory_holds(new_memory, tmp_path):
    # every word is in every request: word weights cannot tell, the request itself can
    mem = new_memory()
    tids = [record(mem, None, "bump the lockfile", [(A, "passed")]) for _ in range(3)]
    found = similar.find(mem, "live", "bump the lockfile")
    assert sorted(s.task_id for s in found) == sorted(tids) and {s.similarity for s in found} == {1.0}
    other = record(mem, None, "add a dark mode toggle", [(A, "passed")])  # now the words tell apart
    found = similar.find(mem, "live", "bump the lockfile")
    assert other not in [s.task_id for s in found] and sorted(s.task_id for s in found) == sorted(tids)
    mem.close()


def test_requests_beyond_ascii_find_each_other_whatever_the_locale(new_memory, tmp_path):
    # (the test server's database runs in the C locale, where a [:alnum:] class knows no letter beyond ASCII)
    mem = new_memory()
    texts = ["修复 解析器 崩溃", "إصلاح المحلل عند الإدخال الفارغ", "ayrıştırıcı boş girdide çöküyor"]
    tids = [record(mem, None, t, [(A, "passed")]) for t in texts]
    record(mem, None, "add a dark mode toggle", [(A, "passed")])
    for text, tid in zip(texts, tids):
        found = similar.find(mem, "live", text)
        assert found and found[0].task_id == tid and found[0].similarity > 0.99, text
    mem.close()


def test_scopes_do_not_see_each_other(new_memory, tmp_path):
    """A replay's tasks are never a live request's neighbours, nor weigh its words."""
    mem = new_memory()
    record(mem, None, "fix the parser crash on empty input", [(A, "passed")])
    for prompt in ("add a dark mode toggle", "fix the parser crash on empty input"):
        tid = mem.begin_task(source="bench:x:run1", kind="bug_fix", groups=["all"], prompt=prompt)
        mem.finish_task(tid, passed=True, score=1.0, cost_usd=0.0, final_arm=None)
    live = similar.find(mem, "live", "parser crash on empty input")
    bench = similar.find(mem, "bench:x:run1", "parser crash on empty input")
    assert [s.task_id for s in bench] == [tid] and tid not in [s.task_id for s in live]
    assert mem.db.execute("SELECT df FROM prompt_terms WHERE source = 'live' AND term = ''").fetchone()[0] == 1
    mem.forget_source_prefix("bench:")
    assert mem.db.execute("SELECT df FROM prompt_terms WHERE source = 'live' AND term = ''").fetchone()[0] == 1
    assert mem.db.execute("SELECT COUNT(*) FROM prompt_terms WHERE source LIKE 'bench:%'").fetchone()[0] == 0
    mem.close()


def test_an_older_memory_gets_its_requests_indexed(tmp_path):
    path = tmp_path / "old.sqlite"
    raw = old_schema(path, "006_similar_tasks")
    raw.execute("INSERT INTO tasks (id, created_at, source, prompt, finished_at) VALUES "
                "('t1', 'then', 'live', 'fix the parser crash on empty input', 'then'),"
                "('t2', 'then', 'live', 'add a dark mode toggle', 'then')")
    raw.close()
    mem = Memory.open(path)
    assert [s.task_id for s in similar.find(mem, "live", "parser crash")] == ["t1"]
    assert "006_similar_tasks" in [r[0] for r in mem.db.execute("SELECT name FROM migrations")]
    mem.close()
    assert dbmod.migrate(sqlite3.connect(path)) == []


def test_import_indexes_what_it_adds(new_memory, tmp_path):
    src = new_memory()
    record(src, None, "fix the parser crash on empty input", [(A, "passed")])
    record(src, None, "add a dark mode toggle", [(A, "passed")])
    export = tmp_path / "export.jsonl"
    with export.open("w") as f:
        src.export(f)
    src.close()
    dst = new_memory()
    with export.open() as f:
        assert dst.import_(f) == (2, 0)
    assert len(similar.find(dst, "live", "parser crash")) == 1
    with export.open() as f:  # importing again adds nothing, and counts nothing twice
        assert dst.import_(f) == (0, 2)
    assert dst.db.execute("SELECT df FROM prompt_terms WHERE term = ''").fetchone()[0] == 2
    dst.close()


def test_what_a_word_is():
    assert similar.words("Fix parse_date() in utils.py: 2 errors, see #1234 -- é") == {
        "fix": 1, "parse": 1, "date": 1, "in": 1, "utils": 1, "py": 1, "errors": 1, "see": 1}
