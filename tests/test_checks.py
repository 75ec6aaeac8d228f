"""Checks that cannot be gamed (acr_cli.checks): through `acr run` with hostile fake agents, and the rules."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from conftest import GOOD, VERIFY, acr, git, init_repo

from acr_cli.checks import Changes, check_inputs, named_paths, protected

CHECK = "import sys\nfrom calc import add\nsys.exit(0 if add(2, 3) == 5 else 1)\n"
SKIP_ALL = ("import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n"
            "        item.add_marker(pytest.mark.skip(reason='not today'))\n")


def memory_rows(home: Path) -> tuple[list[dict], list[dict]]:
    db = sqlite3.connect(home / "data" / "memory.sqlite")
    db.row_factory = sqlite3.Row
    return ([dict(r) for r in db.execute("SELECT * FROM tasks")],
            [dict(r) for r in db.execute("SELECT * FROM attempts ORDER BY id")])


def run(project: Path, *args: str, verify: str = VERIFY):
    return acr("run", "fix the add function", "--verify", verify, "--arms", "codex:gpt-5.4", *args, cwd=project)


def test_an_agent_that_rewrites_the_check_script_gets_no_verified_pass(project, fakes_on_path, scenario, acr_home):
    (project / "check.py").write_text(CHECK)
    git(project, "add", "check.py")
    git(project, "commit", "-qm", "check")
    scenario({"write": {"check.py": "print('all good')\n"}})
    verify = f"{sys.executable} check.py"
    r = run(project, "--json", verify=verify)
    assert r.returncode == 3, r.stderr  # not 0: no check the user gave judged the work
    out = json.loads(r.stdout)
    assert out["passed"] is False and out["verdict"] == "unverified"
    (attempt,) = out["attempts"]
    assert attempt["verdict"] == "unverified" and attempt["score"] is None
    assert attempt["check_changed"] == [{"path": "check.py", "why": "the check command runs it"}]
    assert "changed what it reads: check.py" in attempt["detail"]
    # memory does not learn it as a pass: the task's outcome is unknown, the attempt weak evidence
    tasks, attempts = memory_rows(acr_home)
    assert tasks[0]["passed"] is None and tasks[0]["score"] is None
    assert attempts[0]["verdict"] == "unverified" and "check.py" in attempts[0]["detail"]
    # the people's output says it too, and names the file
    git(project, "checkout", "--", "check.py")
    r = run(project, verify=verify)
    assert r.returncode == 3
    assert "not verified with codex:gpt-5.4" in r.stdout
    assert "the check passed, but the attempt changed what it reads" in r.stdout
    assert "check.py (the check command runs it)" in r.stdout and "passed with" not in r.stdout


def test_a_conftest_that_skips_every_test_is_named_and_not_a_verified_pass(project, fakes_on_path, scenario):
    scenario({"write": {"conftest.py": SKIP_ALL}})
    r = run(project, "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "unverified" and not out["passed"]
    assert out["attempts"][0]["check_changed"] == [{"path": "conftest.py", "why": "pytest's conftest"}]
    assert "1 skipped" in out["attempts"][0]["verifier_tail"]


def test_changing_an_existing_test_is_not_a_verified_pass_but_adding_one_is(project, fakes_on_path, scenario):
    scenario({"write": {"test_calc.py": "def test_add():\n    pass\n"}})
    r = run(project, "--json")
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["attempts"][0]["check_changed"] == [{"path": "test_calc.py",
                                                                      "why": "a test file it changed"}]

    git(project, "checkout", "--", "test_calc.py")
    scenario({"write": {"calc.py": GOOD, "tests/test_more.py": "from calc import add\n\n\ndef test_zero():\n"
                                                                "    assert add(0, 0) == 0\n"}})
    r = run(project, "--json")
    assert r.returncode == 0, r.stderr
    (attempt,) = json.loads(r.stdout)["attempts"]
    assert attempt["verdict"] == "passed" and attempt["check_changed"] == []
    assert attempt["tests_added"] == ["tests/test_more.py"]
    assert "the attempt added test files: tests/test_more.py" in attempt["detail"]


def test_stale_bytecode_planted_for_an_untouched_broken_source_cannot_answer_for_it(project, fakes_on_path, scenario):
    """The agent compiles a fixed add() into calc's cache file (unchecked-hash bytecode, which Python uses
    without looking at the source) and leaves calc.py broken: the check must fail."""
    (project / ".gitignore").write_text("__pycache__/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore caches")
    cached = f"__pycache__/calc.{sys.implementation.cache_tag}.pyc"
    plant = ("import pathlib, py_compile, sys, tempfile\n"
             "src = pathlib.Path(tempfile.mkdtemp()) / 'calc.py'\n"
             f"src.write_text({GOOD!r})\n"
             f"py_compile.compile(str(src), cfile={cached!r}, doraise=True,\n"
             "                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n")
    scenario({"commands": [[sys.executable, "-c", plant]]})
    r = run(project, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    (attempt,) = json.loads(r.stdout)["attempts"]
    assert attempt["verdict"] == "failed" and "assert" in attempt["verifier_tail"]
    assert not (project / cached).exists()  # the rollback removed what it planted


def test_a_protected_path_fails_the_attempt_and_it_is_rolled_back(project, fakes_on_path, scenario, acr_home):
    (project / "tests").mkdir()
    git(project, "mv", "test_calc.py", "tests/test_calc.py")
    (project / ".acr.toml").write_text('protect = ["tests/**"]\n')
    git(project, "add", ".acr.toml")
    git(project, "commit", "-qm", "tests folder, protected")
    before = (project / "tests" / "test_calc.py").read_text()
    scenario({"write": {"calc.py": GOOD, "tests/test_calc.py": "def test_add():\n    pass\n"}})
    r = run(project, "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    (attempt,) = out["attempts"]
    assert attempt["verdict"] == "failed" and not out["passed"]
    assert "changed protected files: tests/test_calc.py" in attempt["detail"]
    assert attempt["verifier_tail"] is None  # failed before the check ran
    assert (project / "tests" / "test_calc.py").read_text() == before  # rolled back like any failure
    assert "return a * b" in (project / "calc.py").read_text()
    assert git(project, "status", "--porcelain") == ""
    _, attempts = memory_rows(acr_home)
    assert attempts[0]["verdict"] == "failed"


def test_an_agent_that_only_fixes_the_source_still_passes_verified(project, fakes_on_path, scenario, acr_home):
    """It may run the tests itself (bytecode in an ignored __pycache__): the pass is verified, exit 0, and
    the bytecode it wrote is removed (Python compiles it again), so none of it outlives the attempt."""
    (project / ".gitignore").write_text("__pycache__/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore caches")
    scenario({"commands": [[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]],
              "write": {"calc.py": GOOD}})
    r = run(project, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (attempt,) = out["attempts"]
    assert out["passed"] is True and attempt["verdict"] == "passed" and attempt["score"] == 1.0
    assert attempt["check_changed"] == [] and attempt["tests_added"] == []
    assert [c["path"] for c in out["changes"]] == ["calc.py"]
    assert not list(project.glob("__pycache__/*.pyc"))
    tasks, attempts = memory_rows(acr_home)
    assert tasks[0]["passed"] == 1 and attempts[0]["verdict"] == "passed"


# ------------------------------------------------------------------ the rules


def test_the_files_a_check_runs_relative_to_where_it_runs():
    assert named_paths("python check.py") == {"check.py"}
    assert named_paths("timeout 60 python3.12 -u check.py", "proj") == {"proj/check.py"}
    assert named_paths("bash -e ./scripts/test.sh --fast && ./lint.sh") == {"scripts/test.sh", "lint.sh"}
    assert named_paths("FOO=1 python -m pytest -q tests/test_x.py::test_a tests/unit") == {"tests/test_x.py",
                                                                                          "tests/unit"}
    assert named_paths("python ../outside.py") == set() and named_paths("python ../x.py", "proj") == {"x.py"}
    # what a check only reads is the work it checks, not the check
    assert named_paths("grep -q 'a + b' calc.py; ruff check calc.py; python -m py_compile calc.py") == set()
    assert named_paths("python -c 'import calc' && node -e 'require(1)'") == set()


def test_what_makes_a_pass_unverified_and_what_is_only_named():
    changes = Changes(tree=(("M", "src/calc.py"), ("A", "tests/test_new.py"), ("M", "tests/test_old.py"),
                            ("D", "test_gone.py"), ("M", "pyproject.toml"), ("A", "pkg/conftest.py"),
                            ("A", "src/mod.pyc"), ("A", "evil.pth"), ("M", "Makefile"), ("M", "package.json"),
                            ("M", "docs/test.md"), ("M", ".acr.toml")),
                      ignored=(("A", "src/__pycache__/calc.cpython-311.pyc"), ("A", "sitecustomize.py")))
    inputs = check_inputs(changes, "pytest -q")
    assert inputs.tests_added == ["tests/test_new.py"]
    assert [path for path, _ in inputs.changed] == [
        ".acr.toml", "evil.pth", "pkg/conftest.py", "pyproject.toml", "sitecustomize.py", "src/mod.pyc", "test_gone.py",
        "tests/test_old.py"]
    # a Makefile counts when the check runs make, package.json when it runs npm
    assert ("Makefile", "the check runs make") in check_inputs(changes, "make test").changed
    assert ("package.json", "the check runs its package's scripts") in check_inputs(changes, "npm test").changed
    # only the source changed: a verified pass
    assert check_inputs(Changes(tree=(("M", "src/calc.py"),)), "pytest -q").changed == []


def test_protect_globs():
    changes = Changes(tree=(("M", "app/tests/unit/test_a.py"), ("M", "app/src/x.py"), ("A", "app/conftest.py")),
                      ignored=(("M", "app/.env"),))
    assert protected(changes, ["tests/**"], "app") == ["app/tests/unit/test_a.py"]
    assert protected(changes, ["tests"], "app") == ["app/tests/unit/test_a.py"]
    assert protected(changes, ["conftest.py", ".env"], "app") == ["app/.env", "app/conftest.py"]
    assert protected(changes, ["app/src/*.py"]) == ["app/src/x.py"]
    assert protected(changes, []) == []


def test_protect_is_a_list_of_strings_in_settings(tmp_path, acr_home):
    project = init_repo(tmp_path / "p", {"a.txt": "a\n"})
    (project / ".acr.toml").write_text('protect = "tests/**"\n')
    r = acr("config", "show", cwd=project)
    assert r.returncode == 2 and "should be a list of strings" in r.stderr
    (project / ".acr.toml").unlink()
    r = acr("config", "set", "protect", "tests/**, check.py", cwd=project)
    assert r.returncode == 0, r.stderr
    r = acr("config", "show", "--json", cwd=project)
    assert json.loads(r.stdout)["settings"]["protect"]["value"] == ["tests/**", "check.py"]
