"""The command line through Typer's CliRunner: help, JSON shapes, errors and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from acr_cli import __version__
from acr_cli.cli.app import app
from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.memory import Memory
from acr_cli.project import identity

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_help_and_version():
    r = invoke("--help")
    assert r.exit_code == 0
    for cmd in ("run", "route", "memory", "bench", "profiles", "doctor", "config"):
        assert cmd in r.output
    assert invoke("--version").output.strip().startswith(f"acr {__version__} (memory schema ")
    assert "Exit codes" in invoke("run", "--help").output
    for args in (["--help"], ["run", "--help"], ["bench", "replay", "--help"], ["memory", "forget", "--help"]):
        out = invoke(*args).output  # options name their value; a flag shows no Python type after it
        assert not re.search(r"<(bool|str|path|list|float|int)", out), args
    assert "ORDERS" in invoke("bench", "replay", "--help").output


def test_the_version_names_the_schema_a_new_memory_is_written_in(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("ACR_MEMORY", str(tmp_path / "m.sqlite"))
    Memory.open(tmp_path / "m.sqlite").close()  # a memory as this acr writes it
    with sqlite3.connect(tmp_path / "m.sqlite") as db:
        newest = max(int(re.match(r"\d+", name).group()) for (name,) in db.execute("SELECT name FROM migrations"))
    shown = re.fullmatch(r"acr (\S+) \(memory schema (\d+)\)", invoke("--version").output.strip())
    assert shown and shown.group(1) == __version__ and int(shown.group(2)) == newest
    doctor = json.loads(invoke("doctor", "--json").output)
    assert doctor["acr"] == {"version": __version__, "memory_schema": newest}


@pytest.mark.parametrize("args, message", [
    (["route", "x", "--kind", "nonsense"], "--kind 'nonsense'"),
    (["run", "", "--no-rollback"], "the request is empty"),
    (["run", "x", "--arms", "justamodel", "--no-rollback"], "is not AGENT:MODEL"),
    (["memory", "log", "--since", "yesterday"], "--since 'yesterday'"),
    (["memory", "log", "--since", "2026-02-30"], "--since '2026-02-30': not a real date"),
    (["config", "set", "max_cost", "-1"], "max_cost: expected 0 or more"),  # a value, not an unknown option
    (["memory", "forget"], "say what to forget"),
    (["route", "x", "--profile", "nosuch"], "no profile named 'nosuch'"),
    (["config", "set", "colour", "red"], "unknown setting 'colour'"),
    (["config", "set", "timeout", "soon"], "timeout needs a number"),
    (["config", "set", "timeout", "0"], "timeout: expected at least 1"),
    (["config", "set", "max_attempts", "0"], "max_attempts: expected at least 1"),
    (["config", "set", "permissions", "bogus"], "expected one of read-only, workspace-write, full"),
    (["config", "set", "profile", "nosuch"], "no profile named 'nosuch'"),
    (["route", ""], "the request is empty"),
    (["route", "x", "--policy", "nosuch"], "--policy 'nosuch': expected one of learned, fixed"),
    (["route", "x", "--arms", "nosuchagent:m"], "unknown agent 'nosuchagent'"),
    (["route", "x", "--arms", ","], "--arms: no arm given"),
    (["memory", "show", "--kind", "nonsense"], "--kind 'nonsense'"),
    (["memory", "log", "--kind", "bugfix"], "--kind 'bugfix': expected one of bug_fix"),
    (["run", "x", "--prompt-file", "README.md", "--no-rollback"], "not both"),
    (["run", "x", "--interactive", "--no-rollback"], "--interactive needs a terminal"),
    (["doctor", "--agent", "codex"], "--agent chooses which agents --check runs"),
    (["route", "-fix the flag"], "a request that starts with '-' goes after `--`"),
    (["bench", "replay", "ood176", "--json", "--csv"], "choose one output format"),
    (["run", "x", "--verify", "pytst -q", "--no-rollback"], "--verify: `pytst` is not installed or not on PATH"),
    (["run", "x", "--verify", "FOO=1 ./no_such_check.sh", "--no-rollback"], "`./no_such_check.sh` does not exist"),
])
def test_bad_input_is_explained_with_exit_2(args, message):
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert "Traceback" not in r.output


def test_route_explain_and_json(tmp_path, fakes_on_path):
    r = invoke("route", "fix the failing parser test", "--explain", "--project", str(tmp_path))
    assert r.exit_code == 0
    assert "bug_fix" in r.output and "'fix'" in r.output and "groups" in r.output
    r = invoke("route", "fix the failing parser test", "--json", "--project", str(tmp_path))
    out = json.loads(r.output)
    assert out["context"]["kind"] == "bug_fix" and out["policy"] == "learned"
    assert len(out["order"]) == 8 and {"agent", "model", "mean", "expected_cost", "why"} <= set(out["order"][0])
    assert sorted(o["agent"] + ":" + o["model"] for o in out["order"]) == sorted(
        a["agent"] + ":" + a["model"] for a in json.loads(invoke("profiles", "show", "balanced", "--json").output)["arms"])
    assert out["order"][0]["why"].startswith("planned")
    r = invoke("route", "fix it", "--json", "--arms", "codex:gpt-5.4,claude:claude-opus-4-6")
    assert [o["agent"] for o in json.loads(r.output)["order"]] == ["codex", "claude"]


def _seed(acr_home):
    mem = Memory.open(acr_home / "data" / "memory.sqlite")
    arm = Arm("codex", "gpt-5.4")
    tid = mem.begin_task(source="live", kind="bug_fix", groups=["all", "kind=bug_fix"], prompt="fix it")
    mem.add_attempt(tid, 1, Decision(arm, "because"), Feedback(arm, "passed", score=1.0, cost_usd=0.2,
                                                               cost_source="priced", duration_s=3))
    mem.finish_task(tid, passed=True, score=1.0, cost_usd=0.2, final_arm=arm.id)
    mem.close()
    return tid


def test_show_reads_json_columns_of_another_shape_as_not_kept(acr_home):
    """A memory written by something else than acr (import refuses these shapes): `acr show` still shows the
    task, with what it cannot read left out, and the task's own columns over what its context says."""
    import sqlite3

    tid = _seed(acr_home)
    with sqlite3.connect(acr_home / "data" / "memory.sqlite") as db:
        db.execute("UPDATE tasks SET context = ?, baseline = ?", ('{"kind": "docs", "reasons": 5, "id": "x"}',
                                                                  '{"passed": "no"}'))
        db.execute("UPDATE attempts SET changes = ?", ('[["calc.py", 1]]',))
    r = invoke("show", tid, "--json")
    assert r.exit_code == 0, r.output
    shown = json.loads(r.output)
    assert shown["context"]["kind"] == "bug_fix" and "reasons" not in shown["context"] and "id" not in shown["context"]
    assert shown["baseline"] is None and shown["changes"] == [] and shown["attempts"][0]["changes"] == []
    r = invoke("show", tid)
    assert r.exit_code == 0 and "read as: bug_fix" in r.output, r.output


def test_memory_log_and_show_json_shapes(acr_home):
    tid = _seed(acr_home)
    out = json.loads(invoke("memory", "log", "--json").output)
    task = out["tasks"][0]
    assert {"id", "created_at", "kind", "prompt", "passed", "cost_usd", "attempts"} <= set(task)
    assert task["id"] == tid and task["passed"] is True and task["attempts"][0]["verdict"] == "passed"
    assert json.loads(invoke("memory", "log", "--json", "--kind", "docs").output) == {"tasks": []}
    assert len(json.loads(invoke("memory", "log", "--json", "--since", "99999999999999d").output)["tasks"]) == 1
    assert json.loads(invoke("memory", "log", "--json", "--agent", "codex", "--since", "1h").output)["tasks"]
    show = json.loads(invoke("memory", "show", "--json").output)
    row = next(k for k in show["kinds"] if k["agent"] == "codex" and k["model"] == "gpt-5.4")
    assert (row["kind"], row["attempts"], row["pass_rate"], row["mean_cost_usd"]) == ("bug_fix", 1, 1.0, 0.2)
    assert row["order"] >= 1 and row["interval90"][0] <= row["posterior_mean"] <= row["interval90"][1]
    assert "bug_fix" in invoke("memory", "show").output


def test_export_import_forget_cli(acr_home, tmp_path):
    tid = _seed(acr_home)
    dump = tmp_path / "dump.jsonl"
    assert invoke("memory", "export", str(dump)).exit_code == 0
    assert dump.stat().st_mode & 0o777 == 0o600  # the memory holds prompts: as private as the memory itself
    assert invoke("memory", "export", "-").output == dump.read_text()  # '-' is stdout
    piped = subprocess.run(f"{sys.executable} -m acr_cli memory export /dev/stdout | cat", shell=True,
                           capture_output=True, text=True)  # the shell is the test's, to make a pipe
    assert piped.returncode == 0 and piped.stdout == dump.read_text(), piped.stderr
    (tmp_path / "backups").mkdir()
    (tmp_path / "latest.jsonl").symlink_to(tmp_path / "backups" / "old.jsonl")
    (tmp_path / "backups" / "old.jsonl").write_text("old\n")
    assert invoke("memory", "export", str(tmp_path / "latest.jsonl")).exit_code == 0
    assert (tmp_path / "latest.jsonl").is_symlink()  # written through the link, which stays
    assert (tmp_path / "backups" / "old.jsonl").read_text() == dump.read_text()
    assert sorted(p.name for p in (tmp_path / "backups").iterdir()) == ["old.jsonl"]
    logs = acr_home / "data" / "logs" / tid
    logs.mkdir(parents=True)
    (logs / "1-codex.log").write_text("an attempt's output\n")
    (acr_home / "data" / "logs" / "keep").mkdir()
    assert invoke("memory", "forget", tid, "../keep").output.splitlines()[0] == "forgot 1 task(s)"
    assert not logs.exists() and (acr_home / "data" / "logs" / "keep").exists()  # only a forgotten task's logs
    orphan = acr_home / "data" / "logs" / "20261124-000000-abcdef"  # a task gone from memory, its logs left
    orphan.mkdir()
    r = runner.invoke(app, ["memory", "forget", orphan.name])
    assert r.exit_code == 0 and "removed the logs of 1 task(s) no longer in memory" in r.output and not orphan.exists()
    assert "imported 1 records" in invoke("memory", "import", str(dump)).output
    r = runner.invoke(app, ["memory", "forget", tid, tid])  # an id given twice is one task, not a missing one
    assert r.exit_code == 0 and r.output.strip() == "forgot 1 task(s)", r.output
    assert "imported 1 records" in invoke("memory", "import", str(dump)).output
    (tmp_path / "bad.jsonl").write_text("not json\n")
    fresh = tmp_path / "fresh.sqlite"
    r = runner.invoke(app, ["memory", "import", str(tmp_path / "bad.jsonl"), "--memory", str(fresh)])
    assert r.exit_code == 2 and "line 1" in r.output
    assert not list(tmp_path.glob("fresh.sqlite*"))  # a failed import leaves no empty memory behind
    record = json.loads(dump.read_text().splitlines()[0])
    record["prompt"] = "fix \ud800 the parser"  # valid JSON (an escape), not valid Unicode
    (tmp_path / "surrogate.jsonl").write_text(json.dumps(record) + "\n")
    r = runner.invoke(app, ["memory", "import", str(tmp_path / "surrogate.jsonl"), "--memory", str(fresh)])
    assert r.exit_code == 2 and "line 1: text that is not valid Unicode" in r.output, r.output
    assert not list(tmp_path.glob("fresh.sqlite*"))
    r = runner.invoke(app, ["memory", "forget", "--all"], input="n\n")
    assert r.exit_code != 0
    assert invoke("memory", "forget", "--all", "--yes").output.strip() == "forgot 1 task(s) and 0 stored replay run(s)"


def test_a_forget_memory_refuses_keeps_the_tasks_logs(acr_home, tmp_path):
    """The logs go only once memory has let the task go: a read-only (or locked) memory keeps both."""
    from shared import acr_on_read_only

    folder = tmp_path / "ro"
    folder.mkdir()
    mem = Memory.open(folder / "memory.sqlite")
    tid = mem.begin_task(source="live", kind="bug_fix", groups=["kind=bug_fix"], prompt="fix add")
    mem.add_attempt(tid, 1, Decision(Arm("codex", "gpt-5.4"), "x"), Feedback(Arm("codex", "gpt-5.4"), "failed"))
    mem.finish_task(tid, passed=False, score=0.0, cost_usd=0.0, final_arm=None)
    mem.close()
    logs = acr_home / "data" / "logs" / tid
    logs.mkdir(parents=True)
    (logs / "1-codex.log").write_text("an attempt's output\n")
    # the file alone read-only: memory opens (and reads), the forget cannot write
    r = acr_on_read_only(folder / "memory.sqlite", "memory", "forget", tid, "--memory", str(folder / "memory.sqlite"))
    assert r.returncode == 2 and "cannot write the memory" in r.stderr and "move" not in r.stderr, r.stderr
    assert (logs / "1-codex.log").exists()
    r = runner.invoke(app, ["memory", "forget", tid, "--memory", str(folder / "memory.sqlite")])
    assert r.exit_code == 0 and not logs.exists()


def test_forgetting_from_a_copy_keeps_the_logs_of_tasks_still_in_this_machines_memory(acr_home, tmp_path):
    """The attempt logs serve this machine's own memory: forgetting a task from a copy (or from a memory
    that never held it) must not delete the logs of a task the own memory still holds."""
    tid = _seed(acr_home)
    logs = acr_home / "data" / "logs" / tid
    logs.mkdir(parents=True)
    (logs / "1-codex.log").write_text("an attempt's output\n")
    dump, copy, empty = tmp_path / "dump.jsonl", tmp_path / "copy.sqlite", tmp_path / "empty.sqlite"
    assert invoke("memory", "export", str(dump)).exit_code == 0
    assert invoke("memory", "import", str(dump), "--memory", str(copy)).exit_code == 0
    r = runner.invoke(app, ["memory", "forget", tid, "--memory", str(copy)])
    assert r.exit_code == 0 and r.output.strip() == "forgot 1 task(s)", r.output
    assert (logs / "1-codex.log").exists()
    Memory.open(empty).close()
    r = runner.invoke(app, ["memory", "forget", tid, "--memory", str(empty)])
    assert r.exit_code == 1 and "not in memory" in r.output and "removed the logs" not in r.output, r.output
    assert (logs / "1-codex.log").exists()
    assert invoke("memory", "import", str(dump), "--memory", str(copy)).exit_code == 0
    assert invoke("memory", "forget", "--all", "--yes", "--memory", str(copy)).exit_code == 0
    assert (logs / "1-codex.log").exists()
    assert invoke("memory", "forget", tid).output.strip() == "forgot 1 task(s)"  # the own memory: its logs go
    assert not logs.exists()


def test_doctor_json(acr_home, fakes_on_path):
    out = json.loads(invoke("doctor", "--json").output)
    assert out["agents"]["codex"]["found"] and out["agents"]["codex"]["version"] == "codex-cli 0.169.0"
    assert out["paths"]["resolved_from"] == "ACR_HOME"
    assert all(a["usable"] for a in out["profile"]["arms"])
    (acr_home / "data").mkdir(parents=True, exist_ok=True)
    (acr_home / "data" / "memory.sqlite").write_bytes(b"garbage" * 500)
    r = runner.invoke(app, ["doctor", "--json"])  # a broken memory is reported beside everything else
    out = json.loads(r.output)
    assert r.exit_code == 1 and out["agents"]["codex"]["found"]
    assert "not a readable acr memory" in out["memory"]["problem"] and "mv " in out["memory"]["problem"]


def test_doctor_check_that_fails_exits_1_and_says_which_cli(acr_home, fakes_on_path):
    """The fake codex never calls the mock model API, so acr cannot have understood it: the check fails,
    exit 1, and both the last line and --json name the CLI (the reported case was the opposite: every check
    passed, exit 1 for a reason the check output never showed)."""
    r = runner.invoke(app, ["doctor", "--check", "--agent", "codex", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 1 and out["problems"] == ["--check: acr did not understand codex"]
    assert not out["checks"][0]["ok"] and any("model request" in p for p in out["checks"][0]["problems"])
    r = runner.invoke(app, ["doctor", "--check", "--agent", "codex"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines()[-1] == "check failed for codex of 1 CLI(s) (exit 1)"


def test_doctor_without_check_names_why_it_exits_1(acr_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no agent CLI anywhere
    out = json.loads(runner.invoke(app, ["doctor", "--json"]).output)
    assert out["problems"] == ["no arm of this profile is usable: no agent CLI of its arms is installed"]
    r = runner.invoke(app, ["doctor", "--check", "--json"])  # nothing to check is a failed check
    assert r.exit_code == 1 and json.loads(r.output)["problems"] == ["no agent CLI installed to check"]


@pytest.mark.parametrize("broken", ["dangling", "loop"])
def test_a_settings_file_acr_cannot_reach_is_an_error_not_no_settings(acr_home, tmp_path, monkeypatch, broken):
    """A project's .acr.toml that is a broken link holds settings (verify, profile, memory) the user wrote:
    routing without them, silently, would run unverified or record into the wrong memory."""
    project = tmp_path / "proj"
    project.mkdir()
    link = project / ".acr.toml"
    link.symlink_to(tmp_path / "moved.toml" if broken == "dangling" else link)
    monkeypatch.chdir(project)
    r = runner.invoke(app, ["route", "fix the parser"])
    assert r.exit_code == 2 and ".acr.toml is a symbolic link to nothing acr can read" in r.output, r.output


def test_config_set_show_and_project_file(acr_home, tmp_path, monkeypatch, fakes_on_path):
    assert invoke("config", "set", "profile", "cheap").exit_code == 0
    monkeypatch.chdir(tmp_path)
    out = json.loads(invoke("config", "show", "--json").output)
    assert out["settings"]["profile"] == {"value": "cheap", "source": str(acr_home / "config" / "config.toml")}
    assert invoke("config", "set", "memory", "team.sqlite").exit_code == 0  # relative: to the config directory
    shown = json.loads(invoke("config", "show", "--json").output)["settings"]["memory"]
    assert shown["value"] == str(acr_home / "config" / "team.sqlite")
    monkeypatch.setenv("ACR_MEMORY", str(tmp_path / "env.sqlite"))  # the file acr would open, and why
    shown = json.loads(invoke("config", "show", "--json").output)["settings"]["memory"]
    assert shown == {"value": str(tmp_path / "env.sqlite"), "source": "ACR_MEMORY"}
    monkeypatch.setenv("ACR_MEMORY", "rel.sqlite")
    shown = json.loads(invoke("config", "show", "--json").output)["settings"]["memory"]
    assert shown["value"] == str(tmp_path / "rel.sqlite")
    monkeypatch.delenv("ACR_MEMORY")
    assert invoke("config", "unset", "memory").exit_code == 0
    (tmp_path / ".acr.toml").write_text('profile = "quality"\nverify = "make test"\n')
    untrusted = invoke("config", "show", "--json")  # a cloned repository's file: below the user's own settings
    out = json.loads(untrusted.stdout)
    assert out["settings"]["profile"]["value"] == "cheap" and out["settings"]["verify"]["value"] == "make test"
    assert out["project_trusted"] is False and "your config.toml sets it" in out["ignored"]["profile"]
    assert "is not trusted" in untrusted.stderr and "acr trust" in untrusted.stderr
    assert json.loads(invoke("trust", "--json").stdout)["trusted"] is True
    out = json.loads(invoke("config", "show", "--json").output)
    assert out["settings"]["profile"]["value"] == "quality" and out["settings"]["verify"]["value"] == "make test"
    assert json.loads(invoke("route", "fix it", "--json").output)["profile"] == "quality"
    shown = json.loads(invoke("config", "show", "--json").output)["settings"]
    assert shown["timeout"]["source"] == "profile quality" and shown["timeout"]["value"] is not None
    (tmp_path / ".acr.toml").write_text("timeout = 'x'\n")
    r = runner.invoke(app, ["route", "x"])
    assert r.exit_code == 2 and "should be a number" in r.output
    (tmp_path / ".acr.toml").write_text("max_cost = -1.0\n")  # the same limits as the command-line flags
    r = runner.invoke(app, ["route", "x"])
    assert r.exit_code == 2 and "max_cost': expected 0 or more" in r.output
    (tmp_path / ".acr.toml").write_text("max_attempts = 2.7\n")  # a count is a whole number
    r = runner.invoke(app, ["route", "x"])
    assert r.exit_code == 2 and "'max_attempts' should be a whole number, got 2.7" in r.output
    (tmp_path / ".acr.toml").unlink()
    (tmp_path / ".acr.toml").mkdir()  # not a file: said, never silently read as no settings
    r = runner.invoke(app, ["route", "x"])
    assert r.exit_code == 2 and ".acr.toml is not a file" in r.output
    (tmp_path / ".acr.toml").rmdir()
    r = runner.invoke(app, ["config", "set", "memory", "mysql://x"])  # not a path relative to the config dir
    assert r.exit_code == 2 and "expected a file path or a postgresql:// URL" in r.output
    assert invoke("config", "set", "memory", "postgresql://").output.startswith("memory = 'postgresql://' in ")
    assert invoke("config", "unset", "memory").exit_code == 0
    (acr_home / "config" / "config.toml").write_text('profile = "gone"\n')  # e.g. a user profile deleted since
    r = runner.invoke(app, ["route", "x"])
    assert r.exit_code == 2 and "no profile named 'gone' (the profile is set in" in r.output


def test_config_set_and_unset_keep_the_users_comments_and_layout(acr_home):
    user = acr_home / "config" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('# my acr settings\ntimeout = 100  # seconds; see #4\n\nverify = """pytest\n  -q"""\n'
                    'max_cost = 2.0\n')
    assert invoke("config", "set", "timeout", "300").exit_code == 0
    assert invoke("config", "set", "verify", "make test").exit_code == 0
    assert invoke("config", "unset", "max_cost").exit_code == 0
    assert invoke("config", "set", "max_attempts", "3").exit_code == 0
    assert user.read_text() == ('# my acr settings\ntimeout = 300.0  # seconds; see #4\n\nverify = "make test"\n'
                                'max_attempts = 3\n')
    user.write_bytes(b'verify = """\r\nprofile="fast\r\n"""\r\nprofile = "cheap"  # mine\r\n')
    assert invoke("config", "set", "profile", "balanced").exit_code == 0  # the real key, not the string's line
    assert user.read_bytes() == b'verify = """\r\nprofile="fast\r\n"""\r\nprofile = "balanced"  # mine\r\n'
    r = runner.invoke(app, ["config", "unset", "max_atempts"])
    assert r.exit_code == 2 and "unknown setting 'max_atempts'" in r.output
    r = runner.invoke(app, ["config", "set", "timeout", "inf"])
    assert r.exit_code == 2 and "finite" in r.output


def test_a_subdirectory_is_learned_as_its_repository(tmp_path, fakes_on_path):
    from conftest import init_repo

    (tmp_path / "toy" / "docs").mkdir(parents=True)
    repo = init_repo(tmp_path / "toy", {"calc.py": "x = 1\n", "docs/index.md": "hi\n"})
    top = json.loads(invoke("route", "fix add", "--json", "-C", str(repo)).output)["context"]
    sub = json.loads(invoke("route", "fix add", "--json", "-C", str(repo / "docs")).output)["context"]
    assert sub["groups"] == top["groups"] and sub["language"] == "python" and sub["project"] == identity(repo)


def test_file_system_refusals_are_usage_errors_not_crashes(acr_home, tmp_path):
    r = runner.invoke(app, ["memory", "export", str(tmp_path / "no" / "such" / "dir" / "x.jsonl")])
    assert r.exit_code == 2 and "dir does not exist" in r.output and "internal error" not in r.output
    before = sorted(tmp_path.iterdir())
    r = runner.invoke(app, ["memory", "export", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.output
    assert sorted(tmp_path.iterdir()) == before  # no half-written file left beside it
    binary = tmp_path / "blob.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    r = runner.invoke(app, ["memory", "import", str(binary)])
    assert r.exit_code == 2 and "not a text file" in r.output


def test_verifier_preflight_checks_only_the_program_a_command_starts_with(tmp_path):
    from acr_cli.verify import preflight

    assert preflight("python3 -m pytest -q", tmp_path) is None
    assert preflight("cd sub && anything-goes", tmp_path) is None  # a shell construct: not second-guessed
    assert preflight("$RUNNER test", tmp_path) is None
    (tmp_path / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    assert "not an executable" in preflight("./check.sh", tmp_path)
    (tmp_path / "check.sh").chmod(0o755)
    assert preflight("./check.sh --fast", tmp_path) is None
    assert "cannot be parsed" in preflight("pytest -k 'unclosed", tmp_path)
    for builtin in ("exit 0", "ulimit -v 4000000 && pytest", "umask 077; make test", "type pytest"):
        assert preflight(builtin, tmp_path) is None, builtin  # the shell has them: not "not installed"
    assert "no-such-tool-xyz` is not installed" in preflight("no-such-tool-xyz --run", tmp_path)
    assert "not valid shell syntax" in preflight("pytest -q |", tmp_path)  # would fail every attempt
    assert "not valid shell syntax" in preflight("if true; then pytest", tmp_path)
    assert preflight("PATH=.venv/bin:$PATH only-in-the-venv -q", tmp_path) is None  # found on its own PATH


def test_profiles_show_text_has_what_json_has(tmp_path):
    prof = tmp_path / "mine.yaml"
    prof.write_text("description: mine\narms:\n  - agent: aider\n    model: m1\n    price: {input: 1, output: 2}\n"
                    "    prior: {bug_fix: 0.6}\n    prior_weight: 4\n"
                    "agents:\n  aider:\n    command: [aider, --model, '{model}', --message, '{prompt}']\n")
    out = invoke("profiles", "show", str(prof)).output
    assert "bug_fix 0.60 (worth 4 attempts)" in " ".join(out.split())  # the arm's own prior weight
    assert "agent aider: command=['aider'" in out  # the generic CLI the arm runs


@pytest.mark.parametrize("args", [["--help"], ["profiles", "list"], ["profiles", "show", "balanced", "--json"]])
def test_a_reader_that_stops_reading_ends_acr_quietly(args):
    """`acr ... | head`: no traceback, no "Exception ignored" from Python's exit flush, exit 1."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before acr writes a byte
    proc = subprocess.run([sys.executable, "-m", "acr_cli", *args], stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    assert proc.returncode == 1 and proc.stderr == ""


def test_an_export_never_overwrites_the_memory_itself(acr_home):
    _seed(acr_home)
    db = acr_home / "data" / "memory.sqlite"
    for target in (db, db.parent / "memory.sqlite-wal", db.parent / ".." / "data" / "memory.sqlite"):
        r = runner.invoke(app, ["memory", "export", str(target)])
        assert r.exit_code == 2 and "is the memory itself" in r.output
    assert "bug_fix" in invoke("memory", "show").output  # still readable, every record there


def test_a_memory_made_read_only_stays_read_only(acr_home):
    _seed(acr_home)
    db = acr_home / "data" / "memory.sqlite"
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    db.chmod(0o444)
    assert "bug_fix" in invoke("memory", "show").output
    assert db.stat().st_mode & 0o777 == 0o400  # others lose access; the owner gains no write access


def _damage(db, table: str) -> None:
    """Overwrite the first page of ``table``'s B-tree: opening the memory still works, reading it does not."""
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    with open(db, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xde\xad" * (size // 2))


def test_a_memory_damaged_past_its_first_pages_is_an_error_with_what_to_do(acr_home):
    _seed(acr_home)
    db = acr_home / "data" / "memory.sqlite"
    _damage(db, "attempts")
    for args in (["memory", "show"], ["memory", "log"], ["memory", "export", "-"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "could not be read (database disk image is malformed)" in r.output, args
        assert "move that file aside" in r.output
    r = runner.invoke(app, ["doctor", "--json"])
    assert r.exit_code == 1 and "is damaged" in json.loads(r.output)["memory"]["problem"]


@pytest.mark.parametrize("args", [[b"run", b"\xff\xfe"], [b"memory", b"log", b"--agent", b"caf\xe9"],
                                  [b"config", b"set", b"verify", b"echo \xff"]])
def test_an_argument_that_is_not_utf8_is_a_usage_error(acr_home, args):
    r = subprocess.run([sys.executable.encode(), b"-m", b"acr_cli", *args], capture_output=True)
    assert r.returncode == 2 and b"is not valid UTF-8" in r.stderr and b"Traceback" not in r.stderr


def test_memory_commands_refuse_what_they_cannot_honour(acr_home):
    tid = _seed(acr_home)
    r = runner.invoke(app, ["memory", "forget", tid, "--bench", "--yes"])
    assert r.exit_code == 2 and "not several" in r.output
    assert tid in invoke("memory", "log").output  # nothing was forgotten
    assert tid in invoke("memory", "log", "-n", "99999999999999999999999").output  # more than there are: all
    r = runner.invoke(app, ["memory", "log", "-n", "0"])
    assert r.exit_code == 2 and "--limit" in r.output
    assert "4611686018427387904" not in invoke("memory", "log", "--help").output


def test_an_arm_listed_twice_is_refused(acr_home):
    for command in ("run", "route"):
        r = runner.invoke(app, [command, "fix it", "--arms", "codex:gpt-5.4,opencode:x,codex:gpt-5.4"])
        assert r.exit_code == 2 and "codex:gpt-5.4 listed twice" in r.output, command


def test_doctor_fails_when_no_arm_of_the_profile_could_run(acr_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no agent CLI anywhere
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 1 and "no arm of this profile is usable" in " ".join(r.output.split())


def test_an_error_under_json_is_json_on_stdout_too(acr_home, tmp_path):
    """A script that reads --json output gets the error as one JSON line on stdout, with the exit code it also
    gets; the person reads it on stderr as before. Without --json stdout stays empty."""
    from conftest import acr

    r = acr("bench", "report", "--json", "--memory", str(tmp_path / "none.db"))
    assert r.returncode == 2
    error = json.loads(r.stdout)["error"]
    assert error["exit_code"] == 2 and "no memory at" in error["message"] and error["hint"]
    assert "acr: error: no memory at" in r.stderr
    r = acr("show", "no-such-task", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["exit_code"] == 1
    r = acr("show", "no-such-task")
    assert r.returncode == 1 and r.stdout == "" and "acr: error: no task" in r.stderr


def test_a_command_that_printed_its_json_adds_no_second_document(acr_home, tmp_path):
    """`memory sync --json` prints what waits, then fails for the server it could not reach: stdout stays one
    document (its "error" field says why), and the exit code says it failed."""
    from conftest import acr

    r = acr("memory", "sync", "--json", "--memory", "postgresql://u@127.0.0.1:1/db")
    assert r.returncode == 2 and "acr: error:" in r.stderr
    assert json.loads(r.stdout)["error"]  # one document, the status's own


def test_an_error_json_into_a_full_device_is_no_crash(acr_home):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "acr_cli", "show", "nosuch", "--json"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1 and "no task 'nosuch'" in r.stderr and "Traceback" not in r.stderr
