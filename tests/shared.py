"""Data and helpers more than one test module uses."""

from __future__ import annotations

import sqlite3

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
