"""What every part of the memory shares: the connection, its path, guarded writes and transactions."""

from __future__ import annotations

import secrets
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from acr_cli.memory import db as dbmod


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t if t is not None else time.time()))


def new_id(prefix: str = "") -> str:
    """The one id format of tasks, replay runs and replay groups: ``[PREFIX-]20261124-101500-a1b2c3`` (UTC
    time, then 3 random bytes: ids sort by time and do not collide between processes)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    return f"{prefix}-{stamp}" if prefix else stamp


class Base:
    def __init__(self, conn: sqlite3.Connection, path: Path | str):
        self.db = conn
        self.path = path
        self._in_batch = False

    def _write(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, params)
        except sqlite3.OperationalError as e:
            raise dbmod._explain(e, self.path) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes (a benchmark replay writes thousands of rows); nests as a no-op."""
        if self._in_batch:
            yield
            return
        self._write("BEGIN IMMEDIATE")
        self._in_batch = True
        try:
            yield
        except BaseException:
            self._in_batch = False
            self.db.execute("ROLLBACK")
            raise
        self._in_batch = False
        self._write("COMMIT")
