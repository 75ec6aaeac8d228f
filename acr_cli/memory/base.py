"""What every part of the memory shares: the connection, where it is, its dialect, guarded writes and
transactions."""

from __future__ import annotations

import secrets
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from acr_cli.memory import db as dbmod
from acr_cli.memory.dialect import SQLITE


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t if t is not None else time.time()))


def new_id(prefix: str = "") -> str:
    """The one id format of tasks, replay runs and replay groups: ``[PREFIX-]20261124-101500-a1b2c3`` (UTC
    time, then 3 random bytes: ids sort by time and do not collide between processes)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    return f"{prefix}-{stamp}" if prefix else stamp


WRITE_LOCK = 0x61637277  # "acrw": the advisory lock a shared memory's write transactions take in turn
LOCK_WAIT_S = 10  # how long a write to a shared memory waits for its turn (a write takes milliseconds)


class Base:
    def __init__(self, conn: Any, path: Path | str):
        self.db = conn  # an sqlite3.Connection, or acr_cli.memory.postgres.Connection
        self.path = path  # the file, or the shared memory's URL with its password masked
        self.dialect = getattr(conn, "dialect", SQLITE)
        self._in_batch = False

    @property
    def shared(self) -> bool:
        """A team's memory on a PostgreSQL server (not a local SQLite file)."""
        return self.dialect.name == "postgresql"

    def _write(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self.db.execute(sql, params)
        except sqlite3.OperationalError as e:
            raise dbmod._explain(e, self.path) from None

    def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        try:
            return self.db.executemany(sql, rows)
        except sqlite3.OperationalError as e:
            raise dbmod._explain(e, self.path) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes (a benchmark replay writes thousands of rows); nests as a no-op."""
        if self._in_batch:
            yield
            return
        self._write(self.dialect.begin)
        try:
            if self.shared:
                # Writers to a shared memory take turns, a transaction at a time (milliseconds each): two
                # uploads of overlapping tasks, or of requests sharing words, would otherwise lock the same
                # rows in different orders and deadlock. (SQLite's BEGIN IMMEDIATE does the same for a file.)
                # A turn is waited for at most LOCK_WAIT_S: a teammate whose upload stalled must not stop
                # everyone's runs (the server ends such a session, acr_cli.memory.postgres.connect).
                self._write(f"SET LOCAL lock_timeout = '{LOCK_WAIT_S}s'")
                self._write("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._in_batch = True
        try:
            yield
        except BaseException:
            self._in_batch = False
            self.db.execute("ROLLBACK")
            raise
        self._in_batch = False
        self._write("COMMIT")
