"""The SQLite memory: migrations, safety, aggregates, export/import."""

from __future__ import annotations

import io
import json
import math
import sqlite3
import stat
from dataclasses import astuple

import pytest
from shared import old_schema

from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.errors import MemoryFileError
from acr_cli.memory import db as dbmod
from acr_cli.memory.aggregates import GroupCache, group_stats
from acr_cli.memory.dialect import SQLITE
from acr_cli.memory.store import Memory

A = Arm("codex", "gpt-5.4", 2.5, 15.0)
B = Arm("claude", "claude-opus-4-6", 5.0, 25.0)


def record(mem: Memory, groups, outcomes, source="live", prompt="p"):
    tid = mem.begin_task(source=source, kind=groups[1].split("=")[1] if len(groups) > 1 else None,
                         groups=groups, prompt=prompt)
    for seq, (arm, verdict, cost) in enumerate(outcomes, 1):
        fb = Feedback(arm, verdict, score=1.0 if verdict == "passed" else 0.0, cost_usd=cost, duration_s=2.0,
                      tokens_in=100, tokens_out=10, cost_source="reported")
        mem.add_attempt(tid, seq, Decision(arm, "test"), fb, policy="fixed")
    mem.finish_task(tid, passed=any(v == "passed" for _, v, _ in outcomes), score=None, cost_usd=0, final_arm=None)
    return tid


def test_new_file_is_migrated_private_and_wal(tmp_path):
    path = tmp_path / "m.sqlite"
    mem = Memory.open(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert mem.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in mem.db.execute("SELECT name FROM migrations")]
    # (a step that mends only some files, as 001b mends the first builds', is recorded only where applied)
    assert names == [name for name, _ in dbmod.MIGRATIONS if name not in dbmod.NEEDED]
    mem.close()
    # opening again applies nothing new
    assert dbmod.migrate(sqlite3.connect(path)) == []


def test_oldest_schema_is_brought_up_to_date(tmp_path):
    path = tmp_path / "old.sqlite"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    first_name, first = dbmod.MIGRATIONS[0]
    first(raw, SQLITE)
    raw.execute("INSERT INTO migrations VALUES (?, 'then')", (first_name,))
    raw.close()
    mem = Memory.open(path)
    assert [r[0] for r in mem.db.execute("SELECT name FROM migrations")] == [
        n for n, _ in dbmod.MIGRATIONS if n not in dbmod.NEEDED]


def test_a_memory_from_acrs_first_builds_opens_and_keeps_every_record(tmp_path):
    # 001_initial was changed in place on acr's first day: files written before lacked task_groups.source,
    # and every command stopped at "no such column: g.source"
    from conftest import DATA, acr

    path = tmp_path / "first.sqlite"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(DATA.joinpath("memory_first_builds.sql").read_text())
    raw.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    raw.execute("INSERT INTO migrations VALUES ('001_initial', 'then')")
    raw.execute("INSERT INTO tasks (id, created_at, source, kind, prompt, passed, finished_at)"
                " VALUES ('t1', '2026-11-21T09:40:00Z', 'live', 'bug_fix', 'fix the parser', 1, '2026-11-21T09:41:00Z')")
    raw.execute("INSERT INTO tasks (id, created_at, source, kind, passed, finished_at)"
                " VALUES ('b1', '2026-11-21T09:42:00Z', 'bench:ood176:r1', 'bug_fixing', 0, '2026-11-21T09:42:00Z')")
    raw.executemany("INSERT INTO task_groups VALUES (?, ?, ?)", [
        ("t1", 0, "kind=bug_fix"), ("t1", 1, "kind=bug_fix/lang=python"),
        ("t1", 2, "kind=bug_fix/lang=python/project=app@123abc"), ("b1", 0, "dimension=bug_fixing"),
        ("gone", 0, "kind=docs")])  # its task deleted by hand with foreign keys off
    raw.executemany("INSERT INTO attempts (task_id, seq, agent, model, started_at, verdict, score, cost_usd)"
                    " VALUES (?, 1, 'codex', 'gpt-5.4', 't', ?, ?, 0.25)", [("t1", "passed", 1.0), ("b1", "failed", 0.0)])
    raw.close()

    mem = Memory.open(path)
    rows = mem.db.execute("SELECT task_id, key, source FROM task_groups WHERE task_id <> 'gone' ORDER BY rowid").fetchall()
    assert [tuple(r) for r in rows] == [
        ("t1", "all", "live"), ("t1", "kind=bug_fix", "live"), ("t1", "kind=bug_fix/project=app@123abc", "live"),
        ("b1", "dimension=bug_fixing", "bench:ood176:r1")]
    assert group_stats(mem, "live", ["kind=bug_fix"])["kind=bug_fix"].arm(A.id).n == 1
    fresh = Memory.open(tmp_path / "new.sqlite")
    for (name,) in fresh.db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"):
        assert ([r[2] for r in mem.db.execute(f"PRAGMA index_info({name})")]
                == [r[2] for r in fresh.db.execute(f"PRAGMA index_info({name})")]), name
    mem.close()
    out = acr("memory", "export", "--memory", str(path))
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in records if r["type"] == "task"] == ["t1", "b1"]
    shown = acr("memory", "show", "--memory", str(path))
    assert shown.returncode == 0 and "codex:gpt-5.4" in shown.stdout, shown.stderr


def test_a_memory_acr_may_only_read_is_read_with_no_upgrade_step_it_does_not_need(tmp_path):
    from benchdata import write_ood
    from conftest import acr
    from shared import acr_on_read_only

    folder = tmp_path / "ro"
    folder.mkdir()
    mem = folder / "memory.sqlite"
    data = write_ood(tmp_path / "data", {"t1": {"cheap": (1, 1, 0.01), "mid": (1, 1, 0.2), "premium": (1, 1, 1.0)}})
    stored = acr("bench", "replay", "ood176", "-P", "oracle", "--data-dir", str(data), "--memory", str(mem), "--json")
    assert stored.returncode == 0, stored.stderr
    with sqlite3.connect(mem) as raw:  # a step only first builds' files need is not due on this one
        assert "001b_first_builds" not in [r[0] for r in raw.execute("SELECT name FROM migrations")]
    r = acr_on_read_only(mem, "bench", "report", "--list", "--json", "--memory", str(mem))
    assert r.returncode == 0, r.stderr
    assert [g["group"] for g in json.loads(r.stdout)] == [json.loads(stored.stdout)["group"]]


def test_a_memory_this_acr_cannot_upgrade_says_so_and_what_to_do(tmp_path):
    from conftest import acr

    path = tmp_path / "odd.sqlite"
    raw = old_schema(path, "005_context_root")
    raw.execute("INSERT INTO tasks (id, created_at, source, kind) VALUES ('t1', 't', 'live', 'bug_fix')")
    raw.execute("ALTER TABLE task_groups RENAME COLUMN key TO label")  # a shape no acr wrote
    raw.close()
    out = acr("memory", "show", "--memory", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "cannot bring the memory" in out.stderr and "step 005_context_root failed" in out.stderr
    assert "acr memory export" in out.stderr and "report" in out.stderr
    raw = sqlite3.connect(path)
    assert "005_context_root" not in [r[0] for r in raw.execute("SELECT name FROM migrations")]
    assert raw.execute("SELECT id, kind FROM tasks").fetchall() == [("t1", "bug_fix")]


def test_attempts_accepted_without_a_verifier_become_unverified_when_an_old_memory_is_opened(tmp_path):
    path = tmp_path / "old.sqlite"
    raw = old_schema(path, "003_unverified")
    for i, (verifier, source) in enumerate(((None, "live"), ("pytest -q", "live"), (None, "bench:ood176:r1"))):
        raw.execute("INSERT INTO tasks (id, created_at, source, passed, finished_at) VALUES (?, 't', ?, 1, 't')",
                    (f"t{i}", source))
        raw.execute("INSERT INTO attempts (task_id, seq, agent, model, started_at, verdict, score, verifier)"
                    " VALUES (?, 1, 'codex', 'gpt-5.4', 't', 'passed', ?, ?)",
                    (f"t{i}", None if source == "live" else 1.0, verifier))
    raw.close()
    mem = Memory.open(path)
    rows = mem.db.execute("SELECT t.source, a.verifier, a.verdict, t.passed FROM tasks t JOIN attempts a"
                          " ON a.task_id = t.id ORDER BY t.rowid").fetchall()
    assert [tuple(r) for r in rows] == [("live", None, "unverified", None), ("live", "pytest -q", "passed", 1),
                                        ("bench:ood176:r1", None, "passed", 1)]


def test_four_unverified_tasks_count_as_one_verified_pass(new_memory, tmp_path):
    from acr_cli.context import Context
    from acr_cli.domain import TaskState
    from acr_cli.routing.learned import LearnedPolicy

    def posterior(outcomes: list[str], state: TaskState) -> float:
        mem = new_memory()
        for verdict in outcomes:
            tid = mem.begin_task(source="live", kind="docs", groups=["kind=docs"], prompt="p")
            mem.add_attempt(tid, 1, Decision(A, "x"), Feedback(A, verdict, score=None))
            mem.finish_task(tid, passed=None if verdict == "unverified" else True, score=None, cost_usd=0,
                            final_arm=A.id)
        st = group_stats(mem, "live", ["kind=docs"])["kind=docs"]
        assert st.n_tasks == pytest.approx(sum(0.25 if v == "unverified" else 1 for v in outcomes))
        ctx = Context(prompt="p", kind="docs", groups=("kind=docs",))
        policy = LearnedPolicy([Arm("codex", "gpt-5.4", 1, 4, prior=(("default", 0.5),)),
                                Arm("claude", "m", 1, 4, prior=(("default", 0.5),))], GroupCache(mem, "live"))
        return next(r.mean for r in policy.rank(ctx, state) if r.arm.id == A.id)

    for state in (TaskState(max_attempts=3), TaskState(max_attempts=3, verified=False)):
        weak, one = posterior(["unverified"] * 4, state), posterior(["passed"], state)
        assert weak == pytest.approx(one, abs=1e-6) and weak > posterior(["unverified"] * 2, state) > 0.5


def test_a_guessed_kind_starts_from_its_prior_only_as_far_as_the_guess_is_trusted(new_memory, tmp_path):
    from acr_cli.context import Context
    from acr_cli.domain import TaskState
    from acr_cli.routing.learned import LearnedPolicy

    # on an empty memory a task starts from the profile: the kind's prior when the kind is known, and
    # when the rules only guessed it, P(pass | read as the kind) = sure x the kind's + (1 - sure) x any kind's
    strong = Arm("codex", "gpt-5.4", 1, 4, prior=(("bug_fix", 0.9), ("feature", 0.1)), prior_weight=1000)
    policy = LearnedPolicy([strong, Arm("claude", "m", 1, 4, prior=(("default", 0.5),))],
                           GroupCache(new_memory(), "live"))

    def start(sure: float) -> float:
        ctx = Context(prompt="p", kind="bug_fix", groups=("all", "kind=bug_fix"), kind_sure=sure)
        return next(r.mean for r in policy.rank(ctx, TaskState(max_attempts=3)) if r.arm.id == strong.id)

    assert start(1.0) == pytest.approx(0.9, abs=0.01)
    assert start(0.6) == pytest.approx(0.6 * 0.9 + 0.4 * 0.5, abs=0.01)


def test_live_history_recorded_before_the_all_tasks_root_is_moved_under_it(tmp_path):
    path = tmp_path / "old.sqlite"
    raw = old_schema(path, "005_context_root")
    raw.execute("INSERT INTO tasks (id, created_at, source, kind) VALUES ('t1', 't', 'live', 'bug_fix')")
    raw.execute("INSERT INTO tasks (id, created_at, source, kind) VALUES ('b1', 't', 'bench:x:1', 'bug_fixing')")
    raw.executemany("INSERT INTO task_groups VALUES (?, ?, ?, ?)", [
        ("t1", 0, "kind=bug_fix", "live"), ("t1", 1, "kind=bug_fix/lang=python", "live"),
        ("t1", 2, "kind=bug_fix/lang=python/project=app@123abc", "live"),
        ("b1", 0, "dimension=bug_fixing", "bench:x:1")])
    raw.close()
    mem = Memory.open(path)
    groups = {t: [r[0] for r in mem.db.execute("SELECT key FROM task_groups WHERE task_id = ? ORDER BY level", (t,))]
              for t in ("t1", "b1")}
    assert groups == {"t1": ["all", "kind=bug_fix", "kind=bug_fix/project=app@123abc"],
                      "b1": ["dimension=bug_fixing"]}


def test_secrets_are_redacted_before_storage(new_memory, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-SECRETSECRETSECRET123")
    mem = new_memory()
    tid = mem.begin_task(source="live", kind="bug_fix", groups=["all"],
                         prompt="use key sk-proj-SECRETSECRETSECRET123 please")
    tail = "\n".join(["token ghp_" + "a" * 36,
                      '{"openai": {"type": "api", "key": "gsk_KEYKEYKEYKEYKEYKEYKEY"}}',  # opencode's auth.json
                      '"access_token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJKV1RKV1RKV1QifQ.c2lnbmF0dXJlc2ln"',
                      "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/AWSAWSAWS", "password: hunter2hunter",
                      "DATABASE_URL=postgres://bob:PGPASSPGPASS@db:5432/app", "XAI_API_KEY = xai-" + "x" * 30,
                      "-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdz",
                      "-----END OPENSSH PRIVATE KEY-----", "max_tokens=4096 and 12 passed"])
    fb = Feedback(A, "error", reason="401 for Bearer abcdefghijklmnopqrstu", verifier_tail=tail)
    mem.add_attempt(tid, 1, Decision(A, "x"), fb, verifier="API_TOKEN=tok_VERIFYVERIFY ./check.sh")
    dump = "\n".join(str(tuple(r)) for t in ("tasks", "attempts") for r in mem.db.execute(f"SELECT * FROM {t}"))
    for secret in ("SECRETSECRET", "abcdefghijklmnopqrstu", "ghp_aaa", "KEYKEYKEY", "c2lnbmF0dXJl", "AWSAWS", "hunter2",
                   "PGPASS", "xxxxxxxxxx", "b3BlbnNzaC1rZXkt", "VERIFYVERIFY"):
        assert secret not in dump, secret
    assert "max_tokens=4096 and 12 passed" in dump and "./check.sh" in dump  # the rest stays readable


def test_group_aggregates_are_computed_from_attempts(new_memory, tmp_path):
    mem = new_memory()
    g1 = ["kind=bug_fix", "kind=bug_fix/lang=py"]
    record(mem, g1, [(A, "failed", 0.1), (B, "passed", 0.5)])
    record(mem, g1, [(A, "passed", 0.3)])
    record(mem, ["kind=docs"], [(A, "error", None)])
    record(mem, g1, [(A, "passed", 1.0)], source="bench:x:1")  # another scope
    st = group_stats(mem, "live", ["kind=bug_fix", "kind=docs"])
    bug, docs = st["kind=bug_fix"], st["kind=docs"]
    a = bug.arm(A.id)
    assert (a.n, a.n_fail, a.n_pos) == (2, 1, 2)
    chains = GroupCache(mem, "live").chains("kind=bug_fix")  # the single-action model's data
    assert chains.sums[()][A.id] == [2, 1.0] and chains.sums[("kind=bug_fix/lang=py",)][B.id] == [1, 1.0]
    assert chains.tasks == {(): 2, ("kind=bug_fix/lang=py",): 2}
    assert a.s_lc == pytest.approx(math.log(0.1) + math.log(0.3))
    assert bug.n_tasks == 2
    assert bug.patterns == {(frozenset({A.id, B.id}), frozenset({B.id})): 1, (frozenset({A.id}), frozenset({A.id})): 1}
    assert bug.pairs[(A.id, B.id)][0] == 1 and bug.pairs[(A.id, B.id)][3] == pytest.approx(math.log(0.1) * math.log(0.5))
    assert docs.arm(A.id).n == 0 and docs.n_tasks == 0  # errors say nothing about ability


def test_group_cache_stays_equal_to_a_full_query(new_memory, tmp_path):
    mem = new_memory()
    cache = GroupCache(mem, "live")
    keys = ["kind=bug_fix", "kind=docs"]
    for i in range(30):
        g = ["kind=bug_fix" if i % 3 else "kind=docs"] + [f"lang={'py' if i % 4 else 'go'}"]
        record(mem, g, [(A, "failed" if i % 2 else "passed", 0.01 * (i + 1)), (B, "passed", 0.2)][: 1 + i % 2])
        got = cache.get(keys)
        full = group_stats(mem, "live", keys)
        for k, st in zip(keys, got):
            assert st.n_tasks == full[k].n_tasks and st.patterns == full[k].patterns
            for arm in (A.id, B.id):
                assert astuple(st.arm(arm)) == pytest.approx(astuple(full[k].arm(arm)))
        chains, fresh = cache.chains("kind=bug_fix"), GroupCache(mem, "live").chains("kind=bug_fix")
        assert (chains.tasks, chains.sums) == (fresh.tasks, fresh.sums)


def test_export_import_round_trips_exactly(new_memory, tmp_path):
    src = new_memory()
    record(src, ["all", "kind=bug_fix"], [(A, "failed", 0.1), (B, "passed", 0.5)], prompt="ünï \"q\"\nline")
    record(src, ["all", "kind=docs"], [(A, "timeout", None)])
    src.add_run("r1", "ood176", "acrouter", {"k": 2})
    src.finish_run("r1", 176, {"cum_regret": 15.9})
    first = io.StringIO()
    src.export(first)
    dst = new_memory()
    added, skipped = dst.import_(io.StringIO(first.getvalue()))
    assert (added, skipped) == (3, 0)
    second = io.StringIO()
    dst.export(second)
    assert second.getvalue() == first.getvalue()
    assert dst.import_(io.StringIO(first.getvalue())) == (0, 3)  # idempotent
    assert group_stats(dst, "live", ["all"])["all"] == group_stats(src, "live", ["all"])["all"]


def test_a_secret_quoted_in_how_a_request_was_read_is_masked_and_the_export_imports(new_memory, tmp_path):
    src = new_memory()
    tid = record(src, ["all", "kind=bug_fix"], [(A, "failed", 0.1)])
    quoted = "bug_fix +3 for 'the tls test with -----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC fails'"
    src.describe_task(tid, context={"kind": "bug_fix", "reasons": [quoted, "language: python"]},
                      baseline={"command": "pytest", "passed": False, "exit_code": 1, "duration_s": 0.5})
    kept = json.loads(src.db.execute("SELECT context FROM tasks").fetchone()[0])  # still JSON: masked value by value
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in json.dumps(kept) and kept["reasons"][1] == "language: python"
    # a row an older acr wrote, its JSON redacted as text and cut: exported as not kept, so the backup imports
    src.db.execute("UPDATE tasks SET baseline = ?", ('{"command": "pytest", "tail": "-----BEGIN [REDACTED]',))
    out = io.StringIO()
    src.export(out)
    dst = new_memory()
    assert dst.import_(io.StringIO(out.getvalue())) == (1, 0)
    context, baseline = dst.db.execute("SELECT context, baseline FROM tasks").fetchone()
    assert json.loads(context) == kept and baseline is None


def test_show_says_a_baseline_it_cannot_read_was_not_kept_not_that_it_never_ran(tmp_path):
    from conftest import acr

    path = tmp_path / "m.sqlite"
    mem = Memory.open(path)
    tid = record(mem, ["all", "kind=bug_fix"], [(A, "failed", 0.1)])
    mem.describe_task(tid, context={"kind": "bug_fix"}, baseline={"command": "pytest", "passed": False,
                                                                   "exit_code": 1, "duration_s": 0.5})
    mem.db.execute("UPDATE tasks SET baseline = ?", ('{"command": "pytest", "tail": "-----BEGIN [REDACTED]',))
    mem.close()
    shown = acr("show", tid, "--memory", str(path))
    assert shown.returncode == 0 and "baseline: not kept" in shown.stdout and "not run" not in shown.stdout


def test_import_rejects_garbage_with_the_line(new_memory, tmp_path):
    mem = new_memory()
    with pytest.raises(MemoryFileError, match="line 2"):
        mem.import_(io.StringIO(json.dumps({"type": "run", "id": "x", "benchmark": "b", "policy": "p",
                                            "started_at": "t"}) + "\nnot json\n"))
    assert mem.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0  # all or nothing
    for line, problem in (("[1, 2]", "not an acr memory export record"),
                          ('{"type": "task", "id": "x"}', "task record without created_at"),
                          ('{"type": "task", "id": "x", "created_at": "t", "attempts": [{"seq": 1}]}',
                           "attempt without agent, model, started_at, verdict"),
                          ('{"type": "note"}', "unknown record type 'note'")):
        with pytest.raises(MemoryFileError, match=problem):  # not "skipped, already present"
            mem.import_(io.StringIO(line + "\n"))


def _task(**fields) -> str:
    attempt = {"seq": 1, "agent": "codex", "model": "m", "started_at": "t", "verdict": "failed"}
    attempt.update(fields.pop("attempt", {}))
    return json.dumps({"type": "task", "id": "t1", "created_at": "t", "attempts": [attempt], **fields})


def _run(**fields) -> str:
    return json.dumps({"type": "run", "id": "r1", "benchmark": "ood176", "policy": "oracle", "started_at": "t",
                       **fields})


@pytest.mark.parametrize("line, problem", [
    (_task(attempt={"cost_usd": "cheap"}), "cost_usd is \"cheap\", should be a number >= 0"),
    (_task(attempt={"verdict": "weird"}), "verdict is \"weird\", should be passed or unverified or failed"),
    (_task(attempt={"score": 5}), "score is 5, should be a number from 0 to 1"),
    (_task(attempt={"tokens_in": -3}), "tokens_in is -3, should be a whole number >= 0"),
    (_task(passed="yes"), "passed is \"yes\", should be true, false, 0 or 1"),
    (_task(id=""), "id is \"\", should be a non-empty string"),
    (_task(id=5), "id is 5, should be a non-empty string"),
    (json.dumps({"type": "task", "id": "t1", "created_at": "t", "attempts": [
        {"seq": 1, "agent": "a", "model": "m", "started_at": "t", "verdict": "failed"}] * 2}), "two attempts numbered 1"),
    ("[" * 100_000, "not an acr memory export record"),
    (_task(attempt={"tokens_in": 2**63}), "tokens_in is 9223372036854775808, should be a whole number >= 0"),
    # what PostgreSQL's INTEGER holds, so that an import into a local file can always be uploaded to a team's
    (_task(attempt={"tokens_out": 2**31}), "tokens_out is 2147483648, should be a whole number >= 0"),
    (_task(cost_usd=2**70), "cost_usd is 1180591620717411303424, should be a number >= 0"),
    (_run(report="{bad"), "report is not JSON"),
    (_run(report="[]"), "report should be a JSON object"),
    (_run(report='{"result": {"policy": "oracle"}}'), "report.result has no n"),
    (_run(params="{bad"), "params is not JSON"),
    # JSON inside a field, in another shape than acr writes: `acr show` and `acr bench report` would choke later
    (_task(context="[1]"), "context should be a JSON object"),
    (_task(context='{"reasons": 5}'), "context.reasons should be a list"),
    (_task(context='{"groups": ["all", null]}'), "context.groups[1] is null"),
    (_task(context='{"kind_sure": "high"}'), "context.kind_sure is \"high\""),
    (_task(context="[" * 100_000 + "]" * 100_000), "context is nested too deep"),
    (_task(baseline="{}"), "baseline has no passed"),
    (_task(baseline='{"passed": false, "duration_s": "fast"}'), "baseline.duration_s is \"fast\""),
    (_task(attempt={"changes": '[["calc.py", 1]]'}), "changes[0] should be a list of 3"),
    (_task(attempt={"changes": '[["calc.py", "x", 1]]'}), "changes[0][1] is \"x\""),
    (_task(attempt={"changes": '"calc.py"'}), "changes should be a JSON list"),
    (_run(params='{"group": [1]}'), "params.group is [1]"),
    (_run(params="[" * 100_000 + "]" * 100_000), "params is nested too deep"),
    (_run(report='{"result": {"policy": "p", "n": 1, "sd": {"avg_perf": "x"}}}'), "report.result.sd.avg_perf is \"x\""),
    (_run(report='{"cost_weight": null}'), "report.cost_weight is null"),
    (_run(report='{"warnings": 5}'), "report.warnings should be a list"),
    (_run(report='{"curve": [0.1, null]}'), "report.curve[1] is null"),
])
def test_import_refuses_records_the_commands_reading_memory_would_choke_on(new_memory, tmp_path, line, problem):
    mem = new_memory()
    with pytest.raises(MemoryFileError) as e:
        mem.import_(io.StringIO(line + "\n"))
    assert e.value.message.startswith("line 1: ") and problem in e.value.message
    assert mem.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0
    assert mem.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_forget(new_memory, tmp_path):
    mem = new_memory()
    t1 = record(mem, ["all"], [(A, "passed", 0.1)])
    record(mem, ["all"], [(A, "failed", 0.1)])
    assert mem.forget([t1, "nope"]) == 1
    assert mem.db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 1  # cascade
    assert mem.forget_all() == (1, 0)
    assert mem.db.execute("SELECT COUNT(*) FROM task_groups").fetchone()[0] == 0


def test_corrupt_file_is_explained(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(MemoryFileError) as e:
        Memory.open(bad)
    assert "not a readable acr memory" in e.value.message and "mv" in e.value.hint


def test_routing_reads_only_the_newest_tasks_of_a_group(new_memory, tmp_path):
    mem = new_memory()
    for _ in range(5):
        record(mem, ["kind=docs"], [(A, "failed", 0.1)])
    for _ in range(3):
        record(mem, ["kind=docs"], [(A, "passed", 0.1)])
    newest = group_stats(mem, "live", ["kind=docs"], window=3)["kind=docs"]
    assert newest.n_tasks == 3 and newest.patterns == {(frozenset({A.id}), frozenset({A.id})): 3}
    assert group_stats(mem, "live", ["kind=docs"])["kind=docs"].n_tasks == 8


def test_newest_tasks_are_read_right_after_groups_were_rewritten_out_of_task_order(tmp_path):
    # migration 005 rewrote live group rows in task-id order; routing's window must still be the newest tasks
    path = tmp_path / "old.sqlite"
    raw = old_schema(path, "007_group_rows_in_task_order")
    for tid, verdict in (("t_c", "failed"), ("t_a", "passed"), ("t_b", "passed")):  # task order c, a, b
        raw.execute("INSERT INTO tasks (id, created_at, source, kind, finished_at) VALUES (?, 't', 'live', 'docs', 't')",
                    (tid,))
        raw.execute("INSERT INTO attempts (task_id, seq, agent, model, started_at, verdict) VALUES (?, 1, ?, ?, 't', ?)",
                    (tid, A.agent, A.model, verdict))
    for tid in ("t_a", "t_b", "t_c"):  # group rows in id order
        raw.executemany("INSERT INTO task_groups VALUES (?, ?, ?, 'live')", [(tid, 0, "all"), (tid, 1, "kind=docs")])
    raw.close()
    mem = Memory.open(path)
    newest = group_stats(mem, "live", ["all", "kind=docs"], window=2)
    for key in ("all", "kind=docs"):  # t_a and t_b, both passed
        assert newest[key].n_tasks == 2 and newest[key].patterns == {(frozenset({A.id}), frozenset({A.id})): 2}


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory on a read-only bind mount (root only; skipped where mounting is not allowed)."""
    import subprocess

    src, mnt = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()
    ok = subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True).returncode == 0
    if not ok:
        pytest.skip("needs permission to bind-mount a directory read-only")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield src, mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_memory_on_a_read_only_mount_is_still_read_by_commands_that_only_read(read_only_dir):
    from conftest import acr

    src, mnt = read_only_dir
    mem = Memory.open(src / "m.sqlite")
    record(mem, ["all", "kind=bug_fix"], [(A, "failed", 0.1), (B, "passed", 0.5)])
    mem.close()
    for cmd in (["memory", "show", "--json"], ["memory", "log", "--json"], ["memory", "export"]):
        r = acr(*cmd, "--memory", str(mnt / "m.sqlite"))
        assert r.returncode == 0 and r.stdout, (cmd, r.stderr)
    assert json.loads(acr("memory", "log", "--json", "--memory", str(mnt / "m.sqlite")).stdout)["tasks"]
    r = acr("memory", "forget", "--all", "--yes", "--memory", str(mnt / "m.sqlite"))  # a write still says why not
    assert r.returncode == 2 and "cannot write the memory" in r.stderr
