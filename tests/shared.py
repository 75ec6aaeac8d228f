"""Data and helpers more than one test module uses."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import acr

from acr_cli.memory import db as dbmod
from acr_cli.memory.dialect import SQLITE

# the keys of one similar task in `acr route --json`
ROUTE_SIMILAR = {"task", "similarity", "same_project", "created_at", "request", "outcome"}

# a profile of two equal arms, codex:m-a and claude:m-b, the profile's order breaking ties
TWO_EQUAL_ARMS = """\
description: two equal arms
settings: {policy: learned}
arms:
  - {agent: codex, model: m-a, price: {input: 1, output: 4}}
  - {agent: claude, model: m-b, price: {input: 1, output: 4}}
order:
  default: [codex:m-a, claude:m-b]
"""


def old_schema(path, before: str) -> sqlite3.Connection:
    """A memory file as an acr without migration ``before`` (and later ones) left it."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, step in dbmod.MIGRATIONS:
        if name == before:
            break
        step(raw, SQLITE)
        raw.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    return raw


def acr_on_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``acr *args`` while ``folder`` (or a file) cannot be written: its permissions taken away, or (root
    writes through those) a read-only bind mount in a mount namespace of the command's own. Skips where
    neither works."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in ([folder, *folder.iterdir()] if folder.is_dir() else [folder])}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            return acr(*args)
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("root, and no mount namespace to make a folder read-only in")
    return subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh",
                           str(folder), sys.executable, "-m", "acr_cli", *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
