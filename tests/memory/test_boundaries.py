"""SQL stays in acr_cli/memory: every other module reads and writes memory through its methods, so the
schema can change (and a team's server speak another dialect) without touching commands or routing."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

SQL_CALLS = {"execute", "executemany", "executescript", "_write", "_write_many"}


def _sql_uses(path: Path) -> list[str]:
    """Where ``path`` runs SQL itself: a call of execute/_write on anything, or a reach into a memory's
    connection (``.db``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "db":
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: .db")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS
              and node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr, ast.BinOp))):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: .{node.func.attr}(...)")
    return found


def test_no_module_outside_memory_runs_sql():
    package = REPO / "acr_cli"
    outside = [p for p in sorted(package.rglob("*.py")) if (package / "memory") not in p.parents]
    assert len(outside) > 50  # the scan sees the package
    found = [use for p in outside for use in _sql_uses(p)]
    assert found == [], "SQL outside acr_cli/memory (add a memory method instead):\n" + "\n".join(found)


def test_the_scan_sees_sql_where_it_is():
    """The scan itself: the memory's own modules speak SQL, and it sees that."""
    assert _sql_uses(REPO / "acr_cli" / "memory" / "armhealth.py")
    assert _sql_uses(REPO / "acr_cli" / "memory" / "team.py")
