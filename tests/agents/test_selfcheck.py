"""`acr doctor --check` as a library call: a CLI run against the mock model API, and what acr could not
read or see happen, in order."""

from __future__ import annotations

import os
import shutil
import sys

from acr_cli.agents.selfcheck import check_agent


def test_a_cli_that_never_calls_the_mock_is_reported_field_by_field(fakes_on_path):
    """The fake codex answers from its scenario, not from the mock: no tool call ran, no model request was
    made, the tokens and text acr read are not the mock's."""
    r = check_agent("codex", timeout=60)
    assert not r.ok and r.version == "codex-cli 0.169.0" and r.seen["exit_code"] == 0
    assert r.problems[:2] == [
        "the tool call did not run in the project (permissions or working directory changed?)",
        "the CLI made 0 model request(s), expected the tool call and the final turn"]
    assert [p.split(":")[0] for p in r.problems[2:]] == ["tokens_in", "tokens_out", "final text"]


def test_a_project_that_cannot_be_made_is_a_problem_not_a_crash(fakes_on_path, tmp_path, monkeypatch):
    """Without git the check's throw-away project cannot be made: the check says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))  # the fake's wrapper script needs it
    assert shutil.which("git", path=f"{fakes_on_path}{os.pathsep}{bin_dir}") is None
    monkeypatch.setenv("PATH", f"{fakes_on_path}{os.pathsep}{bin_dir}")
    r = check_agent("codex", timeout=60)
    assert not r.ok and r.version == "codex-cli 0.169.0"
    assert r.problems == ["`git init` failed in a temporary directory: git: could not start: No such file or directory"]
