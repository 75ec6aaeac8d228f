"""The classifier: deterministic rules for kind, language and size."""

from __future__ import annotations

import pytest

from acr_cli.context import KINDS, classify, classify_kind, live_groups


@pytest.mark.parametrize("prompt, kind", [
    ("fix the failing parser test", "bug_fix"),
    ("the export crashes with a KeyError traceback", "bug_fix"),
    ("add a --json flag to the export command", "feature"),
    ("write unit tests for utils.py", "test_generation"),
    ("refactor the config loader to simplify it", "refactor"),
    ("add type hints to utils.py", "refactor"),
    ("explain how the cache invalidation works", "explain"),
    ("why does this return None?", "explain"),
    ("plot a histogram of the sales dataframe with pandas", "data_science"),
    ("implement dijkstra shortest path in O(n log n)", "algorithm"),
    ("update the README with install steps", "docs"),
    ("rename Foo to Bar across the codebase", "multi_file"),
    ("make it nicer", "feature"),
])
def test_kinds(prompt, kind):
    assert classify_kind(prompt)[0] == kind
    assert kind in KINDS


def test_language_from_prompt_beats_project_files(tmp_path):
    (tmp_path / "package.json").write_text("{}")
    assert classify("fix the bug in parser.py", tmp_path).language == "python"
    assert classify("fix the bug in the parser", tmp_path).language == "javascript"


def test_language_from_file_extensions(tmp_path):
    for i in range(3):
        (tmp_path / f"m{i}.go").write_text("package main\n")
    (tmp_path / "x.py").write_text("")
    ctx = classify("fix the bug", tmp_path)
    assert ctx.language == "go" and any("source files" in r for r in ctx.reasons)


def test_groups_go_from_all_tasks_to_kind_to_the_project(tmp_path):
    ctx = classify("fix the failing test", tmp_path)
    assert ctx.groups[:2] == ("all", "kind=bug_fix")  # a wrong kind still starts from all of the history
    assert ctx.groups[2].startswith("kind=bug_fix/project=")
    (tmp_path / ".git").mkdir()
    (tmp_path / "docs").mkdir()
    assert classify("fix it", tmp_path / "docs").groups == classify("fix it", tmp_path).groups  # one project
    assert live_groups("docs", "python", None) == ("all", "kind=docs")


def test_kind_override_and_size(tmp_path):
    ctx = classify("x" * 2000, tmp_path, kind="docs")
    assert ctx.kind == "docs" and ctx.size == "large"
    assert classify("fix a.py", tmp_path).size == "small"
