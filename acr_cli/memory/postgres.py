"""The memory on a PostgreSQL server (a team's shared memory), through psycopg 3.

psycopg is imported here only, and this module only when a ``postgresql://`` URL names the memory:
``acr --help`` and SQLite memories never load it. Why psycopg and not an ORM: acr's memory is a
handful of hand-written aggregate queries that must read the same on SQLite and PostgreSQL
(:mod:`acr_cli.memory.dialect`); an ORM would add a query language to translate from and hide the
SQL whose plans we check, while psycopg is libpq itself: ``.pgpass``, ``PGPASSWORD``, ``PGSSLMODE``,
``sslmode=`` and the service file work as for every libpq program.

:class:`Connection` gives the memory's code what it uses of an ``sqlite3.Connection``: ``execute`` and
``executemany`` with ``?`` parameters, rows read by position or by name, ``rowcount``. The
connection is in autocommit mode; the memory's ``transaction()`` sends ``BEGIN``/``COMMIT`` itself.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterator, Sequence
from urllib.parse import unquote

from acr_cli.errors import MemoryFileError
from acr_cli.memory.dialect import POSTGRES
from acr_cli.paths import ProjectURL, is_url

__all__ = ["Connection", "ServerUnreachable", "connect", "is_url", "masked"]

IDLE_IN_TRANSACTION_S = 30  # acr's transactions take milliseconds between their statements
CONNECT_TIMEOUT_S = 5  # unless the URL says otherwise (connect_timeout=): how long a server that is away may cost a run
# A network gone mid-query: TCP keepalives notice a silent peer in 30 + 3 x 10 s, and data the server does not
# acknowledge within 60 s ends the connection (tcp_user_timeout), so a run waits at most about a minute and then
# records locally. (A server whose host still answers TCP but whose process hangs is not noticed: libpq has no
# client-side query timeout.)
KEEPALIVE = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
             "tcp_user_timeout": 60_000}


def masked(url: str) -> str:
    """The URL with its password (in the user part or a ``password=`` parameter) shown as ``***``:
    how acr names a shared memory anywhere it is seen (output, errors, logs, ``--json``).

    Read as libpq reads a URL, not as a web URL: a password may hold ``#``, ``?`` or ``/``, and libpq
    has no fragment, so ``...?application_name=x#&password=...`` still sets a password. So the user
    part is everything before the first ``@`` after ``scheme://``, and every ``password=`` parameter
    after any ``?`` or ``&`` is masked to the next ``&`` (its name percent-decoded, as libpq decodes
    it). More may be masked than needed (an ``@`` or ``&password=`` inside another value), never less."""
    head = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)([^@]*)@", url)
    if head and ":" in head.group(2):
        url = f"{head.group(1)}{head.group(2).split(':', 1)[0]}:***@{url[head.end():]}"

    def param(m: re.Match) -> str:
        if unquote(m.group(2)).strip().lower() == "password":
            return f"{m.group(1)}{m.group(2)}=***"
        return m.group(0)

    return re.sub(r"([?&])([^=&?]*)=([^&]*)", param, url)


class Row:
    """One result row: ``row[0]``, ``row["name"]``, ``dict(row)``, unpacking (as ``sqlite3.Row``)."""

    __slots__ = ("_values", "_index")

    def __init__(self, values: Sequence[Any], index: dict[str, int]):
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[key if not isinstance(key, str) else self._index[key]]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any):
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


@lru_cache(maxsize=512)
def _translate(sql: str) -> str:
    """``?`` parameters become psycopg's ``%s`` (a literal ``%`` is doubled). acr's SQL has no ``?`` or
    ``%`` inside string literals but for ``LIKE ? || '%'``, which stays a literal ``%``."""
    return sql.replace("%", "%%").replace("?", "%s")


def _storable(params: Sequence[Any]) -> list[Any]:
    """Parameters as PostgreSQL stores them: its text cannot hold NUL, which a verifier's output or an
    agent's answer may (SQLite keeps it), so a NUL is written as U+FFFD, the character for one that
    cannot be shown. Without it the server refuses the whole upload."""
    return [p.replace("\0", "\ufffd") if isinstance(p, str) and "\0" in p else p for p in params]


class Connection:
    dialect = POSTGRES

    def __init__(self, conn: Any, label: str):
        self._conn = conn
        self.label = label  # the masked URL

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        import psycopg

        try:
            return self._conn.execute(_translate(sql), _storable(params))
        except psycopg.Error as e:
            raise error(e, self.label) from None

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        import psycopg

        try:
            cur = self._conn.cursor()
            cur.executemany(_translate(sql), [_storable(r) for r in rows])
            return cur
        except psycopg.Error as e:
            raise error(e, self.label) from None

    def close(self) -> None:
        self._conn.close()


class ServerUnreachable(MemoryFileError):
    """The shared memory's server cannot be reached (or refused us): acr run falls back to the local memory.
    ``away``: the server is not there (down, no network) rather than refusing what the URL or credentials
    say, which a person must fix (views such as `memory show` show the local copy only while it is away)."""

    away = True


# libpq settings that choose where a connection really goes, or which secrets it offers, apart from the URL's
# host: a URL a project file names may not use them (the ~/.pgpass line for the host it names would go to
# the address in hostaddr=; a service file or passfile swaps in other hosts and passwords)
REDIRECTS = ("hostaddr", "host", "service", "servicefile", "passfile", "sslkey", "sslcert", "sslpassword")


def foreign_problem(url: str) -> str | None:
    """What makes a URL a project file named unsafe to connect to (None: nothing): a setting of
    :data:`REDIRECTS` in its query, or more than one host (libpq tries each, offering each the password)."""
    from urllib.parse import parse_qsl

    rest = url.split("://", 1)[1]
    netloc, _, query = rest.partition("?")
    hosts = netloc.rsplit("@", 1)[-1].split("/", 1)[0]
    if "," in hosts:
        return "it lists more than one host"
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.strip().lower() == "host" and not hosts.rsplit(":", 1)[0] and value.startswith("/") \
                and "," not in value:
            continue  # a Unix socket's directory on this machine, the URL naming no host of its own
        if key.strip().lower() in REDIRECTS:
            return f"it sets {key.strip()}="
    return None


def connect(url: str) -> Connection:
    """Connect to the memory at ``url`` (migrations are :mod:`acr_cli.memory.db`'s). A :class:`ProjectURL` (named
    by a project file, not the user) may not redirect the connection, and is never offered ``PGPASSWORD``: the
    password it gets is its own, or the ``~/.pgpass`` line for the host it names."""
    label = masked(url)
    if isinstance(url, ProjectURL):
        problem = foreign_problem(url)
        if problem:
            raise MemoryFileError(f"the memory server {label}, named by a project file, is refused: {problem}, "
                                  "which could send your credentials to another machine",
                                  hint="a team's URL names its host plainly (postgresql://user@host:5432/db); set "
                                       "what else you need in your own config.toml or ACR_MEMORY")
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency; a broken install
        raise MemoryFileError(f"the memory {label} is on PostgreSQL, and psycopg is not installed",
                              hint="pip install 'psycopg[binary]' in acr's environment") from None
    kwargs: dict[str, Any] = {"autocommit": True, "row_factory": _row_factory, "application_name": "acr"}
    if "connect_timeout" not in url:
        kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
    for key, value in KEEPALIVE.items():  # unless the URL says otherwise
        if key not in url:
            kwargs[key] = value
    if isinstance(url, ProjectURL):
        kwargs["passfile"] = _own_passfile()
    try:
        conn = _connect_without_env_password(psycopg, url, kwargs) if isinstance(url, ProjectURL) else \
            psycopg.connect(url, **kwargs)
        # a session of ours left inside a transaction this long (a laptop shut mid-upload, a network
        # gone) is ended by the server, and the write turn it held with it
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'")
    except psycopg.Error as e:
        raise error(e, label) from None
    # NUMERIC (what PostgreSQL makes of SUM(bigint) and decimal literals) as float, as SQLite gives it
    from psycopg.types.numeric import FloatLoader

    conn.adapters.register_loader("numeric", FloatLoader)
    return Connection(conn, label)


def _own_passfile() -> str:
    """The user's password file (``PGPASSFILE``, else ``~/.pgpass``), named explicitly: libpq reads only the line
    for the host the URL names from it."""
    import os

    return os.environ.get("PGPASSFILE") or os.path.join(os.path.expanduser("~"), ".pgpass")


def _connect_without_env_password(psycopg: Any, url: str, kwargs: dict[str, Any]) -> Any:
    """Connect with ``PGPASSWORD`` (and the environment's redirects) out of libpq's sight: they are for the
    servers the user names, not for one a repository names."""
    import os

    hidden = {k: os.environ.pop(k) for k in ("PGPASSWORD", "PGHOSTADDR", "PGSERVICE", "PGSERVICEFILE")
              if k in os.environ}
    try:
        return psycopg.connect(url, **kwargs)
    finally:
        os.environ.update(hidden)


def error(e: Exception, label: str) -> MemoryFileError:
    """A psycopg error as acr says it: the masked URL, the server's own words (no password), what to do."""
    import psycopg

    from acr_cli.redact import redact

    text = " ".join(redact(str(e)).split()) or type(e).__name__
    state = getattr(e, "sqlstate", None)
    # no SQLSTATE: libpq could not connect; 08 connection, 28 authorisation, 57 the server going away,
    # 3D000 no such database. (A deadlock is an OperationalError too, but not one a fallback helps.)
    if state == "55P03":  # lock_timeout: another member's write held the turn (acr_cli.memory.base.LOCK_WAIT_S)
        return ServerUnreachable(f"shared memory {label}: another writer held it too long ({text})",
                                 hint="what was not written waits locally; the next run or `acr memory sync` sends it")
    if isinstance(e, psycopg.OperationalError) and (state is None or state[:2] in ("08", "28", "57")
                                                    or state == "3D000"):
        hint = ("check that the server is up and the URL is right (`psql URL` tries it by hand); a password goes in "
                "~/.pgpass or PGPASSWORD rather than in the URL")
        if "password" in text or "authentication" in text:
            hint = "check the user and password (~/.pgpass, PGPASSWORD or the URL)"
        found = ServerUnreachable(f"shared memory {label}: {text}", hint=hint)
        # a database or role that does not exist, or one we may not use, is the URL's to fix, not a server away
        found.away = (state is not None and state[:2] in ("08", "57")) or (state is None and not re.search(
            r"password|authenticat|invalid|sslmode|could not translate host|missing|does not exist|permission denied",
            text, re.I))
        return found
    return MemoryFileError(f"shared memory {label}: {text}")
