"""Memory on both backends through the commands, and a team's shared memory on a real PostgreSQL server
(tests marked ``postgres`` start one: tests/pgserver.py; `pytest -m postgres` runs them)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BENCH_DATA, acr, git, init_repo, needs_bench_data

from acr_cli.memory.store import Memory

FIXED = "def add(a, b):\n    return a + b\n"
VERIFY = "grep -q 'a + b' calc.py"  # a cheap check: no interpreter started per run
REQUEST = "fix the add function in calc.py"


def _project(path: Path) -> Path:
    return init_repo(path, {"calc.py": "def add(a, b):\n    return a * b\n"})


def _env(home: Path, memory: str, **more: str) -> dict:
    return {"ACR_HOME": str(home), "ACR_MEMORY": memory, **more}


def _run(project: Path, env: dict, *extra: str) -> dict:
    r = acr("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", *extra, cwd=project, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def fixer(scenario):
    """The fake codex fixes calc.py."""
    return scenario({"match": {"agent": "codex"}, "write": {"calc.py": FIXED}, "tokens": [1000, 50]})


def test_every_memory_command_works_the_same_on_both_backends(backend, memory_target, tmp_path, fakes_on_path, fixer):
    target = memory_target()
    env = _env(tmp_path / "home", target)
    project = _project(tmp_path / "proj")
    out = _run(project, env)
    task = out["task_id"]
    assert out["passed"] is True

    def ok(*args: str) -> subprocess.CompletedProcess:
        r = acr(*args, cwd=project, env=env)
        assert r.returncode == 0, (args, r.stderr)
        return r

    shown = json.loads(ok("memory", "show", "--json").stdout)
    assert [(r["agent"], r["attempts"]) for r in shown["kinds"] if r["attempts"]] == [("codex", 1)]
    log = json.loads(ok("memory", "log", "--json").stdout)["tasks"]
    assert [t["id"] for t in log] == [task] and log[0]["attempts"][0]["verdict"] == "passed"
    assert json.loads(ok("show", "--json").stdout)["id"] == task  # the newest task of this project
    route = json.loads(ok("route", REQUEST, "--json").stdout)
    codex = next(a for a in route["order"] if a["agent"] == "codex")
    assert "1 attempt in its finest group" in codex["why"]
    export = tmp_path / "export.jsonl"
    ok("memory", "export", str(export))
    ok("memory", "forget", task)
    assert json.loads(ok("memory", "log", "--json").stdout)["tasks"] == []
    if backend == "postgresql":  # the local file's record goes too: its copy would bring it back offline
        local = Memory.open(tmp_path / "home" / "data" / "memory.sqlite")
        assert local.tasks(ids=[task]) == []
        local.close()
    assert "imported 1 records" in ok("memory", "import", str(export)).stdout
    assert [t["id"] for t in json.loads(ok("memory", "log", "--json").stdout)["tasks"]] == [task]
    again = acr("memory", "import", "-", cwd=project, env=env, input=export.read_text())  # from a pipe
    assert again.returncode == 0 and "imported 0 records, skipped 1" in again.stdout
    replay = json.loads(ok("bench", "replay", "memory", "--json").stdout)
    assert replay["n_tasks"] == 1
    doctor = json.loads(acr("doctor", "--json", cwd=project, env=env).stdout)
    assert doctor["memory"]["tasks"] == 1 and doctor["memory"]["attempts"] == 1 and "problem" not in doctor["memory"]


@pytest.mark.postgres
def test_two_clones_on_two_machines_learn_as_one_project(pg_server, tmp_path, fakes_on_path, fixer):
    url = pg_server.url(pg_server.new_database())
    origin = _project(tmp_path / "origin")
    one, two = tmp_path / "alice" / "work" / "calc", tmp_path / "bob" / "src" / "calculator"
    for clone in (one, two):
        clone.parent.mkdir(parents=True)
        git(tmp_path, "clone", "-q", str(origin), str(clone))
    first = _run(one, _env(tmp_path / "home-alice", url))
    bob = _env(tmp_path / "home-bob", url)
    route = json.loads(acr("route", REQUEST, "--json", cwd=two, env=bob).stdout)
    assert route["context"]["groups"] == first["context"]["groups"]  # one project, though paths differ
    assert route["context"]["groups"][-1].endswith("project=git:" + git(origin, "rev-parse", "HEAD").strip()[:12])
    codex = next(a for a in route["order"] if a["agent"] == "codex")
    assert "1 attempt in its finest group" in codex["why"]  # alice's attempt counts for bob
    assert route["context"]["project"] == first["context"]["project"]


@pytest.mark.postgres
def test_a_run_without_its_server_routes_from_the_local_copy_and_the_next_sync_uploads(tmp_path, fakes_on_path,
                                                                                      fixer, monkeypatch):
    import pgserver

    if pgserver.why_not():
        pytest.skip(pgserver.why_not())
    server = pgserver.Server().start()  # its own: this test stops it
    try:
        url = server.url(server.new_database())
        env = _env(tmp_path / "home", url)
        project = _project(tmp_path / "proj")
        first = _run(project, env)
        assert first["shared_memory"]["uploaded"] == 1 and first["shared_memory"]["pending"] == 0
        git(project, "checkout", "-q", "--", "calc.py")

        server.pause()
        r = acr("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project, env=env)
        assert r.returncode == 0, r.stderr
        assert "unreachable" in r.stderr and "routing from the local copy" in r.stderr
        offline = json.loads(r.stdout)
        assert offline["passed"] is True
        assert offline["shared_memory"]["routed_from"] == "local copy" and offline["shared_memory"]["pending"] == 1
        route = json.loads(acr("route", REQUEST, "--json", cwd=project, env=env).stdout)  # routes from the copy
        assert "2 attempts in its finest group" in next(a for a in route["order"] if a["agent"] == "codex")["why"]
        assert acr("memory", "sync", cwd=project, env=env).returncode == 2  # says the server is away
        shown = acr("memory", "log", "--json", cwd=project, env=env)  # the views show the local copy, and say so
        assert shown.returncode == 0 and "showing the local copy" in shown.stderr
        assert offline["task_id"] in [t["id"] for t in json.loads(shown.stdout)["tasks"]]
        assert acr("memory", "show", cwd=project, env=env).returncode == 0
        away = acr("memory", "sync", "--json", cwd=project, env=env)  # and so does its JSON, with what waits
        assert away.returncode == 2 and json.loads(away.stdout)["pending"] == 1 and json.loads(away.stdout)["error"]
        away = json.loads(acr("doctor", "--json", cwd=project, env=env).stdout)["memory"]
        assert away["pending"] == 1 and "problem" in away and away["local_copy_at"]

        server.start()
        synced = json.loads(acr("memory", "sync", "--json", cwd=project, env=env).stdout)
        assert (synced["uploaded"], synced["pending"]) == (1, 0)
        again = json.loads(acr("memory", "sync", "--json", cwd=project, env=env).stdout)
        assert (again["uploaded"], again["pending"]) == (0, 0)
        back = json.loads(acr("doctor", "--json", cwd=project, env=env).stdout)["memory"]
        assert back["pending"] == 0 and back["latency_ms"] > 0 and back["server_version"].startswith("15")
        assert back["tasks"] == 2 and "problem" not in back
        shared = Memory.open(url)
        ids = [r[0] for r in shared.db.execute("SELECT id FROM tasks ORDER BY rowid")]
        assert ids == [first["task_id"], offline["task_id"]]
        assert shared.db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 2
        shared.close()
    finally:
        server.stop()


@pytest.mark.postgres
def test_a_server_that_goes_away_mid_run_leaves_the_run_to_the_local_copy(tmp_path, fakes_on_path, scenario):
    import pgserver
    from shared import TWO_EQUAL_ARMS

    if pgserver.why_not():
        pytest.skip(pgserver.why_not())
    server = pgserver.Server().start()  # its own: the first agent stops it
    try:
        url = server.url(server.new_database())
        profile = tmp_path / "two.yaml"
        profile.write_text(TWO_EQUAL_ARMS)
        # whichever arm the learned policy tries first (two equal arms: its draw decides) stops the server
        scenario({"match": {"call": 1}, "commands": [["kill", "-INT", str(server.proc.pid)]],
                  "write": {"calc.py": "def add(a, b):\n    return a - b\n"}},
                 {"match": {"call": 2}, "write": {"calc.py": FIXED}})
        env = _env(tmp_path / "home", url)
        project = _project(tmp_path / "proj")
        r = acr("run", REQUEST, "--verify", VERIFY, "--profile", str(profile), "--json", cwd=project, env=env)
        assert r.returncode == 0, r.stderr  # the learned policy read the server, lost it, went on locally
        out = json.loads(r.stdout)
        assert [a["verdict"] for a in out["attempts"]] == ["failed", "passed"]
        assert {a["agent"] for a in out["attempts"]} == {"codex", "claude"}  # the failed arm not tried again
        assert out["shared_memory"]["routed_from"] == "local copy" and out["shared_memory"]["pending"] == 1
        server.pause()
        server.start()
        synced = json.loads(acr("memory", "sync", "--json", cwd=project, env=env).stdout)
        assert (synced["uploaded"], synced["pending"]) == (1, 0)
        shared = Memory.open(url)
        assert shared.db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 2
        assert shared.db.execute("SELECT finished_at IS NOT NULL FROM tasks").fetchone()[0]
        shared.close()
    finally:
        server.stop()


@pytest.mark.postgres
def test_forgetting_on_a_shared_memory_reaches_runs_not_uploaded_and_keeps_history_from_before(
        tmp_path, fakes_on_path, fixer):
    import pgserver

    if pgserver.why_not():
        pytest.skip(pgserver.why_not())
    home, project = tmp_path / "home", _project(tmp_path / "proj")
    before = _run(project, {"ACR_HOME": str(home)})["task_id"]  # history from before the team: local only
    git(project, "checkout", "-q", "--", "calc.py")
    server = pgserver.Server().start()
    try:
        env = _env(home, server.url(server.new_database()))
        shared = _run(project, env)["task_id"]
        git(project, "checkout", "-q", "--", "calc.py")
        server.pause()
        offline = _run(project, env)["task_id"]  # recorded here, waiting to be uploaded
        git(project, "checkout", "-q", "--", "calc.py")
        server.start()
        logs = home / "data" / "logs"
        assert (logs / offline).is_dir()
        r = acr("memory", "forget", offline, cwd=project, env=env)
        assert r.returncode == 0 and r.stdout.strip() == "forgot 1 task(s)", r.stdout + r.stderr
        assert not (logs / offline).exists()
        r = acr("memory", "forget", "--all", "--yes", cwd=project, env=env)
        assert r.returncode == 0 and r.stdout.startswith("forgot 1 task(s)"), r.stdout + r.stderr
        local = Memory.open(home / "data" / "memory.sqlite")
        assert local.live_task_ids() == [before]  # the team's tasks went, this machine's older ones stay
        local.close()
        assert not (logs / shared).exists() and (logs / before).is_dir()
        assert json.loads(acr("memory", "sync", "--json", cwd=project, env=env).stdout)["pending"] == 0
    finally:
        server.stop()


@pytest.mark.postgres
def test_a_teammate_stalled_mid_upload_does_not_stop_anyone_elses_run(pg_server, tmp_path, fakes_on_path, fixer):
    import psycopg

    from acr_cli.memory.base import LOCK_WAIT_S, WRITE_LOCK

    url = pg_server.url(pg_server.new_database())
    env = _env(tmp_path / "home", url)
    project = _project(tmp_path / "proj")
    _run(project, env)  # the memory exists (its tables made)
    git(project, "checkout", "-q", "--", "calc.py")
    stalled = psycopg.connect(url, autocommit=True)  # a member whose upload took the write turn, then went silent
    stalled.execute("BEGIN")
    stalled.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
    try:
        start = time.monotonic()
        r = acr("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project, env=env,
                timeout=LOCK_WAIT_S + 60)
        assert r.returncode == 0, r.stderr
        assert time.monotonic() - start < LOCK_WAIT_S + 30
        out = json.loads(r.stdout)
        assert out["passed"] is True and out["shared_memory"]["pending"] == 1
        assert "another writer held it too long" in out["shared_memory"]["error"]
    finally:
        stalled.close()  # its session ends, and the turn with it
    synced = json.loads(acr("memory", "sync", "--json", cwd=project, env=env).stdout)
    assert (synced["uploaded"], synced["pending"]) == (1, 0)


@pytest.mark.postgres
def test_uploads_are_idempotent_after_a_crash_and_when_two_processes_sync_at_once(pg_server, tmp_path):
    from acr_cli.domain import Arm, Decision, Feedback
    from acr_cli.memory.team import open_team, pending

    url = pg_server.url(pg_server.new_database())
    home = tmp_path / "home"
    team = open_team(url, home / "data" / "memory.sqlite")
    arm = Arm("codex", "gpt-5.4")
    ids = []
    for i in range(30):
        tid = team.local.begin_task(source="live", kind="bug_fix", groups=["all", "kind=bug_fix"], prompt=f"task {i}")
        team.local.add_attempt(tid, 1, Decision(arm, "x"), Feedback(arm, "passed", cost_usd=0.01))
        team.local.add_attempt(tid, 2, Decision(arm, "x"), Feedback(arm, "failed", cost_usd=0.02))
        team.local.finish_task(tid, passed=True, score=1.0, cost_usd=0.03, final_arm=arm.id)
        team.recorded(tid)
        ids.append(tid)
    # a crash after the server committed the first ten, before the local file marked them uploaded
    team.server.add_tasks(team.local.tasks(source=None, ids=ids[:10], oldest_first=True))
    team.close()
    procs = [subprocess.Popen([sys.executable, "-m", "acr_cli", "memory", "sync", "--json"],
                              env={**os.environ, "ACR_HOME": str(home), "ACR_MEMORY": url},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(r["uploaded"] for r in results) == 20  # each task once, whoever sent it
    shared = Memory.open(url)
    assert shared.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 30
    assert shared.db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 60
    assert shared.db.execute("SELECT df FROM prompt_terms WHERE term = ''").fetchone()[0] == 30  # counted once each
    shared.close()
    local = Memory.open(home / "data" / "memory.sqlite")
    assert pending(local, open_team(url, home / "data" / "memory.sqlite").label) == 0
    local.close()


@pytest.mark.postgres
def test_share_prompts_false_keeps_the_texts_in_the_local_file(pg_server, tmp_path, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": FIXED}, "text": "I fixed add() in calc.py"})
    url = pg_server.url(pg_server.new_database())
    project = _project(tmp_path / "proj")
    (project / ".acr.toml").write_text("share_prompts = false\n")
    out = _run(project, _env(tmp_path / "home", url))
    shared = Memory.open(url)
    row = shared.db.execute("SELECT prompt, prompt_sha256, kind FROM tasks WHERE id = ?", (out["task_id"],)).fetchone()
    assert row[0] is None and row[1] == hashlib.sha256(REQUEST.encode()).hexdigest() and row[2] == "bug_fix"
    read = shared.db.execute("SELECT context FROM tasks WHERE id = ?", (out["task_id"],)).fetchone()[0]
    assert json.loads(read)["kind"] == "bug_fix" and "reasons" not in read and "'fix" not in read  # none quoted
    assert shared.db.execute("SELECT text FROM attempts").fetchone()[0] is None
    assert shared.db.execute("SELECT COUNT(*) FROM prompt_terms").fetchone()[0] == 0
    shared.close()
    local = Memory.open(tmp_path / "home" / "data" / "memory.sqlite")
    assert local.tasks(ids=[out["task_id"]])[0]["prompt"] == REQUEST
    local.close()


@pytest.mark.postgres
def test_share_prompts_false_keeps_the_request_out_of_every_column_even_an_error_that_quotes_it(
        pg_server, tmp_path, fakes_on_path, scenario):
    """The agent's error echoes the request (as an API error quoting its input would): with share_prompts = false in
    the user's config.toml, no text the server holds, in any table, quotes the request, whole or by the line."""
    from acr_cli.memory.team import NOT_SHARED

    request = "fix the add function in calc.py\nthe project codename is BLUEBIRD-SEVEN-ALPHA, keep it quiet"
    scenario({"match": {"agent": "codex"}, "error": "500", "error_message": "stream error: the model refused: {prompt}"})
    url = pg_server.url(pg_server.new_database())
    project = _project(tmp_path / "proj")
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("share_prompts = false\n")
    r = acr("run", request, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project, env=_env(home, url))
    assert r.returncode != 0 and r.stdout, r.stderr
    out = json.loads(r.stdout)
    assert "BLUEBIRD" in out["attempts"][0]["detail"] and out["shared_memory"]["uploaded"] == 1  # here, and sent
    shared = Memory.open(url)
    columns = shared.db.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND data_type IN ('text', 'character varying', 'json', 'jsonb')").fetchall()
    assert {("tasks", "prompt"), ("attempts", "detail"), ("attempts", "verifier_tail")} <= {tuple(c) for c in columns}
    texts = [v for table, column in columns
             for (v,) in shared.db.execute(f'SELECT CAST("{column}" AS TEXT) FROM "{table}"') if v]
    for piece in (request, *request.splitlines(), "BLUEBIRD", "fix the add function"):
        assert not [t for t in texts if piece in t], piece
    detail = shared.db.execute("SELECT detail FROM attempts").fetchone()[0]
    assert detail.startswith("stream error: the model refused: ") and NOT_SHARED in detail  # the rest is shared
    shared.close()
    local = Memory.open(home / "data" / "memory.sqlite")
    assert "BLUEBIRD" in local.tasks(ids=[out["task_id"]])[0]["attempts"][0]["detail"]  # kept on this machine
    local.close()


def test_a_private_tasks_record_quotes_its_request_nowhere_and_stays_readable():
    from acr_cli.memory.team import NOT_SHARED, keep_private

    request = "rename parse_rows to read_rows everywhere\nkeep tests"
    record = {"id": "t1", "prompt": request, "project": "p", "kind": "refactor", "prompt_sha256": "abc",
              "context": json.dumps({"kind": "refactor", "reasons": ["refactor +2 for 'rename parse_rows'"]}),
              "baseline": json.dumps({"command": "pytest", "tail": "E   rename parse_rows to read_rows everywhere"}),
              "attempts": [{"agent": "codex", "model": "gpt-5.4", "verdict": "error", "text": "done",
                            "detail": 'API error 400: {"input": "rename parse_rows to read_rows everywhere\\nkeep tests"}',
                            "verifier_tail": "3 tests passed; keep tests green", "log_path": "/logs/t1/1-codex.log",
                            "changes": json.dumps([["src/rows.py", 3, 3]])}]}
    keep_private(record)
    a = record["attempts"][0]
    assert record["prompt"] is None and a["text"] is None and "reasons" not in json.loads(record["context"])
    assert json.loads(record["baseline"]) == {"command": "pytest", "tail": f"E   {NOT_SHARED}"}  # still JSON
    assert a["detail"] == f'API error 400: {{"input": "{NOT_SHARED}"}}'  # the request as JSON quotes it
    assert a["verifier_tail"] == f"3 tests passed; {NOT_SHARED} green"  # a short line, whole words only
    assert json.loads(a["changes"]) == [["src/rows.py", 3, 3]] and a["log_path"] == "/logs/t1/1-codex.log"
    assert (record["id"], record["project"], a["agent"], a["model"]) == ("t1", "p", "codex", "gpt-5.4")


@pytest.mark.parametrize("url, shown", [
    ("postgresql://bob:Tr0ub4dor#3x?q@/acr?host=/run/pg", "postgresql://bob:***@/acr?host=/run/pg"),
    ("postgresql://alice:Hunter2/Secret@db.example.com/acr", "postgresql://alice:***@db.example.com/acr"),
    ("postgresql://alice:s3cret@db.example.com/acr?sslmode=verify-full",
     "postgresql://alice:***@db.example.com/acr?sslmode=verify-full"),
    ("postgresql://db.example.com:5432/acr?password=s3cret&sslmode=require",
     "postgresql://db.example.com:5432/acr?password=***&sslmode=require"),
    ("postgresql://db.example.com:5432/acr", "postgresql://db.example.com:5432/acr"),
    # libpq has no fragment: a # in the parameters does not hide the password parameter after it
    ("postgresql://alice@db/acr?application_name=x#&password=s3cret", "postgresql://alice@db/acr?application_name=x#&password=***"),
    ("postgresql://db/acr?password=ab#cd&sslmode=require", "postgresql://db/acr?password=***&sslmode=require"),
    ("postgresql://db/acr?pass%77ord=s3cret", "postgresql://db/acr?pass%77ord=***"),  # libpq decodes names
    ("postgresql://db/acr?sslmode=require&PASSWORD=s3cret", "postgresql://db/acr?sslmode=require&PASSWORD=***"),
])
def test_a_password_with_any_characters_is_masked(url, shown):
    from acr_cli.memory.postgres import masked

    assert masked(url) == shown


@pytest.mark.postgres
def test_a_password_is_never_shown_and_libpq_finds_it_as_usual(pg_server, tmp_path, fakes_on_path, fixer):
    import pgserver

    db = pg_server.new_database(owner=pgserver.PASSWORD_USER)
    with_password = pg_server.url(db, pgserver.PASSWORD_USER, pgserver.PASSWORD)
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f'memory = "{with_password}"\n')
    env = {"ACR_HOME": str(home)}
    project = _project(tmp_path / "proj")
    seen = []
    for args in (("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4"),
                 ("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json"), ("config", "show"),
                 ("config", "show", "--json"), ("doctor",), ("doctor", "--json"), ("memory", "sync"),
                 ("memory", "show"), ("route", REQUEST, "--explain"),
                 ("bench", "replay", "memory", "--memory", with_password)):
        r = acr(*args, cwd=project, env=env)
        assert r.returncode in (0, 1), (args, r.stderr)
        seen.append(r.stdout + r.stderr)
        git(project, "checkout", "-q", "--", "calc.py")
    wrong = acr("memory", "show", cwd=project, env={**env, "ACR_MEMORY": with_password.replace("s3cret-pw", "wrong-pw")})
    assert wrong.returncode == 2 and "password" in wrong.stderr  # not shown past: the user has a password to fix
    seen.append(wrong.stderr)
    for text in seen:
        assert pgserver.PASSWORD not in text and "wrong-pw" not in text
    assert any("alice:***@" in text for text in seen)
    files = [p for p in home.rglob("*") if p.is_file()]
    assert files and not any(pgserver.PASSWORD.encode() in p.read_bytes() for p in files
                             if p.name != "config.toml")  # logs, memory, crash log: nowhere but where the user put it
    shared = Memory.open(with_password)
    dump = "\n".join(str(tuple(r)) for t in ("tasks", "attempts", "runs") for r in shared.db.execute(f"SELECT * FROM {t}"))
    assert dump and pgserver.PASSWORD not in dump
    shared.close()

    no_password = pg_server.url(db, pgserver.PASSWORD_USER)
    assert acr("memory", "show", cwd=project, env={**env, "ACR_MEMORY": no_password}).returncode == 2
    assert acr("memory", "show", cwd=project,
               env={**env, "ACR_MEMORY": no_password, "PGPASSWORD": pgserver.PASSWORD}).returncode == 0
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"*:*:{db}:{pgserver.PASSWORD_USER}:{pgserver.PASSWORD}\n")
    pgpass.chmod(0o600)
    assert acr("memory", "show", cwd=project, env={**env, "ACR_MEMORY": no_password,
                                                   "PGPASSFILE": str(pgpass)}).returncode == 0
    # sslmode reaches libpq as written (over a Unix socket libpq uses no SSL, so a wrong value shows it)
    refused = acr("memory", "show", cwd=project, env={**env, "ACR_MEMORY": no_password + "&sslmode=sometimes"})
    assert refused.returncode == 2 and 'invalid sslmode value: "sometimes"' in refused.stderr


@pytest.mark.postgres
@pytest.mark.slow
def test_32_runs_at_once_on_one_server_lose_no_task_and_no_attempt(pg_server, tmp_path, fakes_on_path, fixer):
    url = pg_server.url(pg_server.new_database())
    env = {**os.environ, "ACR_HOME": str(tmp_path / "home"), "ACR_MEMORY": url}
    origin = _project(tmp_path / "origin")
    projects = []
    for i in range(32):
        projects.append(tmp_path / f"clone{i}")
        git(tmp_path, "clone", "-q", str(origin), str(projects[-1]))
    procs = [subprocess.Popen([sys.executable, "-m", "acr_cli", "run", REQUEST, "--verify", VERIFY, "--arms",
                               "codex:gpt-5.4", "--json"], cwd=p, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True) for p in projects]
    outs = [p.communicate(timeout=600) for p in procs]
    failed = [(p.returncode, e[-3000:]) for p, (_, e) in zip(procs, outs) if p.returncode != 0]
    assert not failed, failed[:2]
    tasks = {json.loads(o)["task_id"] for o, _ in outs}
    assert len(tasks) == 32
    acr("memory", "sync", env=env, cwd=projects[0])  # whatever a run's own sync left (none should be left)
    shared = Memory.open(url)
    assert {r[0] for r in shared.db.execute("SELECT id FROM tasks")} == tasks
    assert shared.db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 32
    assert shared.db.execute("SELECT COUNT(*) FROM task_groups").fetchone()[0] == 32 * 3
    shared.close()
    local = Memory.open(tmp_path / "home" / "data" / "memory.sqlite")
    assert local.db.execute("SELECT COUNT(*) FROM uploads WHERE uploaded_at IS NULL").fetchone()[0] == 0
    local.close()


@pytest.mark.postgres
def test_the_routing_queries_read_a_large_shared_memory_through_its_indexes(pg_server):
    from acr_cli.memory.aggregates import group_stats, max_task_rowid

    url = pg_server.url(pg_server.new_database())
    mem = Memory.open(url)
    n = 50_000  # enough rows that the planner prefers an index where one serves
    mem.db.execute("INSERT INTO tasks (id, created_at, source, kind, finished_at) SELECT 't' || i, 't', 'live',"
                   " CASE WHEN i % 2 = 0 THEN 'bug_fix' ELSE 'docs' END, 't' FROM generate_series(1, ?) i", (n,))
    mem.db.execute("INSERT INTO task_groups (task_id, level, key, source) SELECT 't' || i, l, CASE WHEN l = 0 THEN"
                   " 'all' ELSE 'kind=' || CASE WHEN i % 2 = 0 THEN 'bug_fix' ELSE 'docs' END END, 'live'"
                   " FROM generate_series(1, ?) i, generate_series(0, 1) l ORDER BY i, l", (n,))
    mem.db.execute("INSERT INTO attempts (task_id, seq, agent, model, started_at, verdict, cost_usd)"
                   " SELECT 't' || i, 1, 'codex', 'gpt-5.4', 't', CASE WHEN i % 3 = 0 THEN 'passed' ELSE 'failed' END,"
                   " 0.01 FROM generate_series(1, ?) i", (n,))
    mem.db.execute("ANALYZE")
    issued = []
    real = mem.db.execute

    def recording(sql, params=()):
        issued.append((sql, list(params)))
        return real(sql, params)

    mem.db.execute = recording
    max_task_rowid(mem, "live")
    stats = group_stats(mem, "live", ["all", "kind=docs"], window=1000)
    mem.db.execute = real
    assert stats["all"].n_tasks == 1000 and stats["kind=docs"].n_tasks == 500  # the newest 1,000 tasks
    for sql, params in issued:
        plan = "\n".join(r[0] for r in mem.db.execute("EXPLAIN " + sql, params))
        assert "Index" in plan and "Seq Scan on attempts" not in plan, (sql, plan)
    mem.close()


def _pending_again(local_file: Path, url: str, ids: list[str]) -> None:
    """Make recorded tasks pending again: gone from the server, not marked uploaded here."""
    shared = Memory.open(url)
    shared.forget(ids)
    shared.close()
    import sqlite3

    db = sqlite3.connect(local_file)
    db.execute("UPDATE uploads SET uploaded_at = NULL")
    db.commit()
    db.close()


@pytest.mark.postgres
def test_a_task_the_server_refuses_waits_alone_and_holds_back_nothing_else(pg_server, tmp_path, fakes_on_path, fixer):
    url = pg_server.url(pg_server.new_database())
    env = _env(tmp_path / "home", url)
    project = _project(tmp_path / "proj")
    ids = []
    for _ in range(3):
        ids.append(_run(project, env)["task_id"])
        git(project, "checkout", "-q", "--", "calc.py")
    local = tmp_path / "home" / "data" / "memory.sqlite"
    _pending_again(local, url, ids)
    import sqlite3

    db = sqlite3.connect(local)  # a count an older acr kept, beyond what the server's INTEGER holds
    db.execute("UPDATE attempts SET tokens_in = ? WHERE task_id = ?", (2**40, ids[1]))
    db.commit()
    db.close()
    r = acr("memory", "sync", "--json", cwd=project, env=env)
    assert r.returncode == 1, r.stderr  # not everything went: said in the exit status...
    out = json.loads(r.stdout)
    assert (out["uploaded"], out["pending"]) == (2, 1) and out["error"] is None
    assert [x["task_id"] for x in out["refused"]] == [ids[1]] and "out of range" in out["refused"][0]["reason"]
    assert f"acr memory forget {ids[1]}" in r.stderr  # ...and what to do about it
    run = acr("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project, env=env)
    assert run.returncode == 0, run.stderr  # a passing run passes, whatever the upload of an older task met
    assert [x["task_id"] for x in json.loads(run.stdout)["shared_memory"]["refused"]] == [ids[1]]
    git(project, "checkout", "-q", "--", "calc.py")
    shared = Memory.open(url)
    assert {r[0] for r in shared.db.execute("SELECT id FROM tasks")} == {ids[0], ids[2], json.loads(run.stdout)["task_id"]}
    shared.close()
    assert acr("memory", "forget", ids[1], cwd=project, env=env).returncode == 0
    again = acr("memory", "sync", "--json", cwd=project, env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["pending"] == 0


@pytest.mark.postgres
def test_what_postgresql_cannot_hold_as_written_is_still_uploaded(pg_server, tmp_path, fakes_on_path, scenario):
    """A NUL in a check's output, and a request of 1.2 MB of distinct words (more than a tsvector holds)."""
    url = pg_server.url(pg_server.new_database())
    env = _env(tmp_path / "home", url)
    project = _project(tmp_path / "proj")
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": "def add(a, b):\n    return a - b\n"}})
    check = "python3 -c \"import sys; sys.stdout.write('bad\\x00value\\n'); sys.exit(1)\""
    request = tmp_path / "request.txt"
    request.write_text("fix the add function\n" + " ".join(f"w{i:07x}" for i in range(140_000)))
    r = acr("run", "--prompt-file", str(request), "--verify", check, "--arms", "codex:gpt-5.4", "--json",
            cwd=project, env=env)
    assert r.returncode == 1, r.stderr  # the attempt failed; the run is recorded and uploaded all the same
    out = json.loads(r.stdout)
    assert (out["shared_memory"]["uploaded"], out["shared_memory"]["pending"]) == (1, 0), out["shared_memory"]
    shared = Memory.open(url)
    tail = shared.db.execute("SELECT verifier_tail FROM attempts").fetchone()[0]
    assert "bad\ufffdvalue" in tail
    found = shared.db.execute("SELECT COUNT(*) FROM tasks WHERE prompt_words @@ to_tsquery('simple', 'w0000007')")
    assert found.fetchone()[0] == 1  # the words of its first 100,000 characters are found
    shared.close()


@pytest.mark.postgres
def test_a_run_killed_mid_way_is_uploaded_once_recovered(pg_server, tmp_path, fakes_on_path, scenario):
    url = pg_server.url(pg_server.new_database())
    env = {**os.environ, **_env(tmp_path / "home", url)}
    project = _project(tmp_path / "proj")
    scenario({"hang": True})
    pidfile = tmp_path / "agent.pids"
    proc = subprocess.Popen([sys.executable, "-m", "acr_cli", "run", REQUEST, "--verify", VERIFY, "--arms",
                             "codex:gpt-5.4"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env={**env, "FAKE_AGENT_PIDFILE": str(pidfile)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not pidfile.exists():
        time.sleep(0.1)
    proc.kill()
    proc.wait(timeout=10)
    recovered = acr("recover", "--kill", cwd=project, env=env)  # (the hanging agent left a process behind)
    assert recovered.returncode == 0, recovered.stderr
    synced = acr("memory", "sync", "--json", cwd=project, env=env)
    assert synced.returncode == 0, synced.stderr
    assert (json.loads(synced.stdout)["uploaded"], json.loads(synced.stdout)["pending"]) == (1, 0)
    shared = Memory.open(url)
    assert shared.db.execute("SELECT finished_at IS NOT NULL FROM tasks").fetchone()[0]
    shared.close()


@pytest.mark.postgres
def test_a_database_or_role_that_does_not_exist_is_an_error_not_a_server_away(pg_server, tmp_path, fakes_on_path,
                                                                             fixer):
    project = _project(tmp_path / "proj")
    for url in (pg_server.url("no_such_db"), pg_server.url(pg_server.new_database(), user="no_such_role")):
        env = _env(tmp_path / "home", url)
        shown = acr("memory", "show", cwd=project, env=env)
        assert shown.returncode == 2 and "does not exist" in shown.stderr and "local copy" not in shown.stderr
        run = acr("run", REQUEST, "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project, env=env)
        assert run.returncode == 2 and "does not exist" in run.stderr  # not a run queued for a URL with a typo
        assert (project / "calc.py").read_text() != FIXED  # nothing ran


@pytest.mark.postgres
def test_members_of_the_team_role_create_and_upgrade_the_schema_and_others_are_told_who_can(pg_server, tmp_path,
                                                                                         fakes_on_path, fixer):
    pg_server.sql("postgres", "CREATE ROLE team NOLOGIN")
    for name in ("bob", "carol", "dave"):
        pg_server.sql("postgres", f"CREATE ROLE {name} LOGIN" + (" IN ROLE team" if name != "dave" else ""))
    db = pg_server.new_database(owner="team")
    project = _project(tmp_path / "proj")
    _run(project, _env(tmp_path / "bob", pg_server.url(db, user="bob")))  # the first member makes the tables
    owners = pg_server.sql(db, "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'").split()
    assert owners == ["team"]
    pg_server.sql(db, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO dave")
    pg_server.sql(db, "DELETE FROM migrations WHERE name = '011_text_index_within_its_limit'")  # an upgrade due
    git(project, "checkout", "-q", "--", "calc.py")
    dave = acr("memory", "show", cwd=project, env=_env(tmp_path / "dave", pg_server.url(db, user="dave")))
    assert dave.returncode == 2 and "needs a schema upgrade (011_text_index_within_its_limit)" in dave.stderr
    assert "have team run any acr command" in dave.stderr and "GRANT team TO dave" in dave.stderr
    _run(project, _env(tmp_path / "carol", pg_server.url(db, user="carol")))  # another member upgrades it
    assert "011_text_index_within_its_limit" in pg_server.sql(db, "SELECT name FROM migrations")
    git(project, "checkout", "-q", "--", "calc.py")
    assert acr("memory", "show", cwd=project, env=_env(tmp_path / "dave", pg_server.url(db, user="dave"))
               ).returncode == 0  # and dave, granted the tables, works again


@pytest.mark.postgres
def test_upgrading_a_shared_memory_never_renames_projects_from_this_machines_disk(pg_server, tmp_path):
    from acr_cli.memory import db as dbmod
    from acr_cli.project import path_key

    url = pg_server.url(pg_server.new_database())
    here = _project(tmp_path / "somebodys" / "proj")  # on this machine, a repository at a path a member used
    shared = Memory.open(url)
    task = shared.begin_task(source="live", kind="bug_fix", groups=["all", "kind=bug_fix",
                                                                    f"kind=bug_fix/project={here}"],
                             prompt="x", project=str(here))
    shared.db.execute("DELETE FROM migrations WHERE name = '009_project_identity'")
    assert dbmod.migrate(shared.db, shared.dialect) == ["009_project_identity"]
    assert shared.db.execute("SELECT project FROM tasks WHERE id = ?", (task,)).fetchone()[0] == path_key(here)
    shared.close()


@pytest.mark.postgres
@needs_bench_data
def test_a_replay_kept_in_a_shared_memory_is_reported_from_it(pg_server, tmp_path):
    url = pg_server.url(pg_server.new_database())
    env = {"ACR_HOME": str(tmp_path / "home")}
    data = str(BENCH_DATA)
    r = acr("bench", "replay", "ood176", "-P", "learned", "--data-dir", data, "--memory", url, "--json", env=env)
    assert r.returncode == 0, r.stderr
    replayed = json.loads(r.stdout)["results"][0]
    shown = acr("bench", "report", "--memory", url, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["results"][0]["cum_regret"] == pytest.approx(replayed["cum_regret"])
    shared = Memory.open(url)
    assert shared.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 176
    shared.close()
