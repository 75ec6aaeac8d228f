"""Every command pays for what `acr` imports before it runs: the slow libraries wait for the command
that needs them (bench/perf.py measures the time; this guards what is imported)."""

from __future__ import annotations

import json
import subprocess
import sys

SLOW = ("yaml", "sqlite3", "pexpect", "rich.table", "rich.progress", "genai_prices", "platformdirs", "psycopg")
PROBE = """
import contextlib, io, json, sys
sys.argv = ["acr", *ARGS]
from acr_cli.__main__ import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in SLOW if m in sys.modules)))
"""


def imported(*args: str) -> list[str]:
    code = f"ARGS = {list(args)!r}; SLOW = {SLOW!r}" + PROBE
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_acr_version_and_the_app_itself_import_no_slow_library():
    # the version names the memory schema, read from the migrations' table (acr_cli.memory.db): sqlite3 comes along
    assert imported("--version") == ["sqlite3"]
    assert imported("--help") == ["rich.table"]


def test_help_imports_only_what_renders_it():
    # Typer draws help with rich's tables; nothing else slow comes with it
    for args in (["--help"], ["run", "--help"], ["bench", "replay", "--help"], ["memory", "show", "--help"]):
        assert [m for m in imported(*args) if m != "rich.table"] == [], args


def test_a_sqlite_memory_never_loads_the_postgresql_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("ACR_MEMORY", str(tmp_path / "m.sqlite"))
    for args in (["route", "fix the parser"], ["memory", "show"], ["memory", "log"]):
        assert "psycopg" not in imported(*args), args
