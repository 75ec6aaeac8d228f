"""Arm health rows (table ``arm_health``): the storage behind :class:`acr_cli.health.state.HealthBook`,
which keeps the logic (what sets an arm aside, how long it cools). Each row is an arm's, a model's or a
credential scope's, keyed ``arm:ID``, ``model:ID`` or ``scope:NAME``; a row is replaced whole."""

from __future__ import annotations

import sqlite3
from typing import Any

from acr_cli.memory.base import Base

_COLUMNS = ("key", "state", "agent", "model", "reason", "fix", "fingerprint", "errors", "until", "updated_at")
# an arm's row replaced whole (the SQL of an upsert both SQLite and PostgreSQL speak)
_PUT = (f"INSERT INTO arm_health ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        " ON CONFLICT (key) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:]))


class ArmHealthRows(Base):
    def arm_health_rows(self) -> list[Any]:
        """Every row (readable by column name); none from a read-only memory made before arm health."""
        try:
            return list(self.db.execute("SELECT * FROM arm_health"))
        except sqlite3.OperationalError:
            return []

    def arm_health_errors(self, key: str) -> int:
        """Errors in a row counted for ``key`` (0: none)."""
        row = self.db.execute("SELECT errors FROM arm_health WHERE key = ?", (key,)).fetchone()
        return row["errors"] if row else 0

    def put_arm_health(self, key: str, *, state: str, agent: str, model: str, reason: str, fix: str | None = None,
                       fingerprint: str | None = None, errors: int = 1, until: str | None = None,
                       updated_at: str) -> None:
        """Write ``key``'s row whole (an earlier one is replaced)."""
        self._write(_PUT, (key, state, agent, model, reason, fix, fingerprint, errors, until, updated_at))

    def forget_arm_health(self, key: str | None = None) -> int:
        """Delete ``key``'s row, or every row (None); how many went."""
        if key is None:
            return self._write("DELETE FROM arm_health").rowcount
        return self._write("DELETE FROM arm_health WHERE key = ?", (key,)).rowcount
