"""Open the memory database: one SQLite file (WAL, busy timeout, mode 0600), or a PostgreSQL
server named by a URL (:mod:`acr_cli.memory.postgres`); then the migrations.

Migrations are named functions applied in order and recorded in the ``migrations`` table; every
open applies the ones missing, so an old file is brought up to date and a new one (or a new
server database) is created from scratch by the same code. Each gets the dialect
(:mod:`acr_cli.memory.dialect`) for the few statements the two databases say differently.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from pathlib import Path
from typing import Any, Callable

from acr_cli.errors import MemoryFileError
from acr_cli.memory import similar
from acr_cli.memory.dialect import PG_TEXT, PG_TEXT_006, PG_TEXT_010, SQLITE

BUSY_TIMEOUT_S = 30.0


def _script(db: Any, dialect: Any, sql: str) -> None:
    """Run statements one by one (executescript would commit the migration's transaction), in the
    dialect's types."""
    for statement in dialect.ddl(sql).split(";"):
        if statement.strip():
            db.execute(statement)


def _m001_initial(db: Any, dialect: Any) -> None:
    _script(
        db, dialect,
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'live',   -- 'live' or 'bench:<benchmark>:<run id>'
            project TEXT,
            prompt TEXT,                           -- redacted
            prompt_sha256 TEXT,
            kind TEXT,
            language TEXT,
            size TEXT,
            ref TEXT,                              -- the benchmark's own task id
            policy TEXT,
            passed INTEGER,                        -- NULL while the task runs
            score REAL,
            cost_usd REAL,
            final_arm TEXT,
            oracle_reward REAL,                    -- replays: best single-arm reward in hindsight
            oracle_arm TEXT,
            finished_at TEXT
        );
        CREATE INDEX tasks_source_created ON tasks(source, created_at);
        CREATE INDEX tasks_source ON tasks(source{order});     -- (source, rowid) range scans
        CREATE TABLE task_groups (                 -- the context groups a task belongs to, coarse to fine
            task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
            level INTEGER NOT NULL,
            key TEXT NOT NULL,
            source TEXT NOT NULL,                  -- the task's source again: lets routing stats skip a join
            PRIMARY KEY (task_id, level)
        );
        CREATE INDEX task_groups_key ON task_groups(source, key{order});   -- rowid order within a group = task order
        CREATE TABLE attempts (
            id INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            agent TEXT NOT NULL,
            model TEXT NOT NULL,
            policy TEXT,
            reason TEXT,                           -- why the policy chose this arm
            started_at TEXT NOT NULL,
            duration_s REAL,
            exit_code INTEGER,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost_usd REAL,
            cost_source TEXT,
            verdict TEXT NOT NULL,
            score REAL,
            apply_ok INTEGER,
            detail TEXT,                           -- how the attempt ended (error, verifier summary)
            verifier TEXT,
            verifier_tail TEXT,
            session_id TEXT,
            log_path TEXT,
            UNIQUE (task_id, seq)
        );
        -- covers the routing aggregates: they never read the attempts table itself
        CREATE INDEX attempts_task ON attempts(task_id, agent, model, verdict, score, cost_usd, duration_s, started_at);
        CREATE TABLE runs (                        -- benchmark replays
            id TEXT PRIMARY KEY,
            benchmark TEXT NOT NULL,
            policy TEXT NOT NULL,
            params TEXT,                           -- JSON
            started_at TEXT NOT NULL,
            finished_at TEXT,
            n_tasks INTEGER,
            report TEXT                            -- JSON: the rendered figures of the run's group
        )
        """
    )


def _m001b_first_builds(db: Any, dialect: Any) -> None:
    """acr's first builds wrote ``001_initial`` as it was on its first day, and 001 was then changed in place
    instead of by a new migration: their memories have ``task_groups`` without ``source`` (which routing and
    migration 005 read, so such a memory could not be opened at all) and narrower indexes. This brings
    such a file to what ``001_initial`` makes now, comparing with a scratch database it makes; on any other
    memory it changes nothing. (SQLite only: a PostgreSQL memory was always made by today's 001.)"""
    if "source" not in {r[1] for r in db.execute("PRAGMA table_info(task_groups)")}:
        db.execute("ALTER TABLE task_groups ADD COLUMN source TEXT NOT NULL DEFAULT 'live'")
        # (a row whose task was deleted by hand, foreign keys off, keeps 'live': no query reaches it)
        db.execute("UPDATE task_groups SET source = COALESCE((SELECT t.source FROM tasks t"
                   " WHERE t.id = task_groups.task_id), 'live')")
    now = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _m001_initial(now, dialect)
        for name, sql in now.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"):
            want = [r[2] for r in now.execute(f"PRAGMA index_info({name})")]
            if [r[2] for r in db.execute(f"PRAGMA index_info({name})")] != want:
                db.execute(f"DROP INDEX IF EXISTS {name}")
                db.execute(sql)
    finally:
        now.close()


def _m002_arm_health(db: Any, dialect: Any) -> None:
    """Arm health beside skill: arms set aside after a set-up error and arms cooling down after
    transient ones (see acr_cli/health/). Never read as evidence about a model's skill."""
    _script(
        db, dialect,
        """
        CREATE TABLE arm_health (
            key TEXT PRIMARY KEY,                  -- 'scope:<credential scope>' or 'arm:<agent>:<model>'
            state TEXT NOT NULL,                   -- 'set_aside' | 'cooling'
            agent TEXT NOT NULL,
            model TEXT,                            -- the arm whose error it was
            reason TEXT,                           -- what went wrong (redacted)
            fix TEXT,                              -- what to do about it
            fingerprint TEXT,                      -- set aside: what readiness depended on then
            errors INTEGER NOT NULL DEFAULT 1,     -- cooling: transient errors in a row
            until TEXT,                            -- cooling: when it ends (UTC ISO)
            updated_at TEXT NOT NULL
        )
        """,
    )


def _m003_unverified(db: Any, dialect: Any) -> None:
    """Attempts accepted with no verifier were recorded as ``passed`` (with no score and no verifier):
    they become ``unverified``, weak evidence (memory.sql.UNVERIFIED_WEIGHT), and their
    tasks' ``passed`` becomes NULL (nobody knows). Benchmark rows always have a score: untouched."""
    _script(
        db, dialect,
        """
        UPDATE attempts SET verdict = 'unverified'
         WHERE verdict = 'passed' AND verifier IS NULL AND score IS NULL
           AND task_id IN (SELECT id FROM tasks WHERE source = 'live');
        UPDATE tasks SET passed = NULL, score = NULL
         WHERE source = 'live' AND finished_at IS NOT NULL
           AND EXISTS (SELECT 1 FROM attempts a WHERE a.task_id = tasks.id AND a.verdict = 'unverified');
        """,
    )


def _m004_run_record(db: Any, dialect: Any) -> None:
    """What `acr show` tells about a task: the agent's answer, where a rolled-back attempt's work is
    kept, whether a failed check printed what it printed before the attempt, the kept change, how
    the request was read, and the verifier on the untouched tree."""
    _script(
        db, dialect,
        """
        ALTER TABLE attempts ADD COLUMN text TEXT;                  -- the agent's final answer (redacted)
        ALTER TABLE attempts ADD COLUMN attempt_ref TEXT;           -- refs/acr/attempts/...: a rolled-back attempt's work
        ALTER TABLE attempts ADD COLUMN base_tree TEXT;             -- ... and the tree it started from
        ALTER TABLE attempts ADD COLUMN verifier_unchanged INTEGER; -- a failed check printed what the baseline did
        ALTER TABLE attempts ADD COLUMN changes TEXT;               -- JSON [[path, added, deleted]]: a kept change
        ALTER TABLE tasks ADD COLUMN context TEXT;                  -- JSON: why the request was read as it was
        ALTER TABLE tasks ADD COLUMN baseline TEXT;                 -- JSON: the verifier on the untouched tree
        """,
    )


def _m005_context_root(db: Any, dialect: Any) -> None:
    """Live tasks get the context groups acr routes in now (acr_cli.context.context_groups): ``all`` ->
    ``kind=K`` -> ``kind=K/project=P``, instead of ``kind=K`` -> ``kind=K/lang=L`` -> ``.../project=P``, so
    the history recorded before keeps counting at every level."""
    rows = db.execute("SELECT g.task_id, t.kind, g.key FROM task_groups g JOIN tasks t ON t.id = g.task_id"
                      " WHERE g.source = 'live' ORDER BY g.task_id, g.level").fetchall()
    by_task: dict[str, tuple[str | None, list[str]]] = {}
    for task_id, kind, key in rows:
        by_task.setdefault(task_id, (kind, []))[1].append(key)
    for task_id, (kind, keys) in by_task.items():
        kind = kind or keys[0].removeprefix("kind=")
        project = next((k.split("/project=", 1)[1] for k in keys if "/project=" in k), None)
        new = ["all", f"kind={kind}"] + ([f"kind={kind}/project={project}"] if project else [])
        db.execute("DELETE FROM task_groups WHERE task_id = ?", (task_id,))
        db.executemany("INSERT INTO task_groups (task_id, level, key, source) VALUES (?, ?, ?, 'live')",
                       [(task_id, level, key) for level, key in enumerate(new)])


def _m006_similar_tasks(db: Any, dialect: Any) -> None:
    """Similar past tasks (acr_cli.memory.similar): an FTS5 index of the request texts, kept by triggers
    (a forgotten task leaves it in the same statement), and each scope's word counts. An SQLite built
    without FTS5 gets the word counts only; routing then does without similar tasks."""
    _script(
        db, dialect,
        """
        CREATE TABLE prompt_terms (                -- per scope: in how many requests each word occurs
            source TEXT NOT NULL,
            term TEXT NOT NULL,                    -- '' counts the scope's requests
            df INTEGER NOT NULL,
            PRIMARY KEY (source, term)
        ) WITHOUT ROWID
        """,
    )
    if dialect.name == "postgresql":  # the words of the text, as similar splits them, kept beside it, and a GIN index
        db.execute(f"ALTER TABLE tasks ADD COLUMN prompt_words tsvector GENERATED ALWAYS AS"
                   f" ({PG_TEXT_006.format(col='prompt')}) STORED")
        db.execute("CREATE INDEX task_text ON tasks USING gin (prompt_words)")
        similar.count(db, db.execute("SELECT source, prompt FROM tasks WHERE prompt IS NOT NULL").fetchall())
        return
    try:
        db.execute("CREATE VIRTUAL TABLE task_text USING fts5(prompt, content='tasks', content_rowid='rowid',"
                   " tokenize='unicode61 remove_diacritics 0')")
    except sqlite3.OperationalError as e:
        if "no such module" not in str(e):
            raise
    else:  # one statement each: a trigger's body has semicolons of its own
        db.execute("CREATE TRIGGER task_text_insert AFTER INSERT ON tasks WHEN new.prompt IS NOT NULL BEGIN"
                   " INSERT INTO task_text (rowid, prompt) VALUES (new.rowid, new.prompt); END")
        db.execute("CREATE TRIGGER task_text_delete AFTER DELETE ON tasks WHEN old.prompt IS NOT NULL BEGIN"
                   " INSERT INTO task_text (task_text, rowid, prompt) VALUES ('delete', old.rowid, old.prompt); END")
        db.execute("CREATE TRIGGER task_text_update AFTER UPDATE OF prompt ON tasks BEGIN"
                   " INSERT INTO task_text (task_text, rowid, prompt) SELECT 'delete', old.rowid, old.prompt"
                   "  WHERE old.prompt IS NOT NULL;"
                   " INSERT INTO task_text (rowid, prompt) SELECT new.rowid, new.prompt WHERE new.prompt IS NOT NULL;"
                   " END")
        db.execute("INSERT INTO task_text (rowid, prompt) SELECT rowid, prompt FROM tasks WHERE prompt IS NOT NULL")
    similar.count(db, db.execute("SELECT source, prompt FROM tasks WHERE prompt IS NOT NULL"))


def _m007_group_rows_in_task_order(db: Any, dialect: Any) -> None:
    """``task_groups`` rows numbered in task order, coarse to fine, as acr writes them: migration 005
    rewrote the live tasks' rows in task-id order. Routing bounds its walk of a group's index by this
    order (acr_cli.memory.aggregates._window_start). (A PostgreSQL memory was never written out of order.)"""
    if dialect.name != "sqlite":
        return
    db.execute("CREATE TEMP TABLE ordered_groups AS SELECT g.task_id, g.level, g.key, g.source"
               " FROM task_groups g JOIN tasks t ON t.id = g.task_id ORDER BY t.rowid, g.level")
    db.execute("DELETE FROM task_groups")
    db.execute("INSERT INTO task_groups (task_id, level, key, source)"
               " SELECT task_id, level, key, source FROM ordered_groups ORDER BY rowid")
    db.execute("DROP TABLE temp.ordered_groups")


def _m008_shared_memory(db: Any, dialect: Any) -> None:
    """What a local memory keeps about a team's shared one (acr_cli.memory.team): the tasks recorded while
    it was in use and whether each has been uploaded, and how far the local copy of its newest tasks goes.
    (A shared memory has the tables too, empty: one schema.)"""
    _script(
        db, dialect,
        """
        CREATE TABLE uploads (
            task_id TEXT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
            target TEXT NOT NULL,                  -- the shared memory's URL, password masked
            with_text INTEGER NOT NULL,            -- share_prompts when it was recorded: 0 keeps the texts here
            uploaded_at TEXT                       -- NULL: pending
        );
        CREATE INDEX uploads_pending ON uploads(target, uploaded_at);
        CREATE TABLE downloads (
            target TEXT PRIMARY KEY,
            mark INTEGER NOT NULL,                 -- the newest of its tasks copied here (its rowid there)
            at TEXT NOT NULL
        )
        """,
    )


def _m009_project_identity(db: Any, dialect: Any) -> None:
    """Live tasks named their project by the work tree's path; now by its identity (acr_cli.project: the
    root commit, else the origin remote), the same on every clone. Each path still on disk gets its
    identity now, in ``tasks.project`` and in the project level of its groups; a path that is gone keeps
    the name acr gave it (``name@hash``), so its history still counts as one project."""
    from acr_cli.project import identity, path_key

    for (path,) in db.execute("SELECT DISTINCT project FROM tasks WHERE source = 'live' AND project IS NOT NULL"
                              ).fetchall():
        root = Path(path)
        if not root.is_absolute():
            continue  # already an identity
        old = path_key(root)
        # a shared memory's paths are its members' machines': this machine's disk cannot say what they were
        new = identity(root) if dialect.name != "postgresql" and root.is_dir() else old
        rows = db.execute("SELECT g.task_id, g.level, g.key FROM task_groups g JOIN tasks t ON t.id = g.task_id"
                          " WHERE t.source = 'live' AND t.project = ?", (path,)).fetchall()
        for task_id, level, key in rows:
            if key.endswith("/project=" + old) and new != old:
                db.execute("UPDATE task_groups SET key = ? WHERE task_id = ? AND level = ?",
                           (key[: -len(old)] + new, task_id, level))
        db.execute("UPDATE tasks SET project = ? WHERE source = 'live' AND project = ?", (new, path))


def _m010_text_index_in_any_locale(db: Any, dialect: Any) -> None:
    """PostgreSQL's request-text index split words with [^[:alnum:]], which follows the database's
    locale: under C it dropped every letter beyond ASCII. The words are kept again with an expression
    that does not depend on the locale (dialect.PG_TEXT). (SQLite's FTS5 index never did.)"""
    if dialect.name != "postgresql":
        return
    db.execute("DROP INDEX IF EXISTS task_text")
    db.execute("ALTER TABLE tasks DROP COLUMN IF EXISTS prompt_words")
    db.execute(f"ALTER TABLE tasks ADD COLUMN prompt_words tsvector GENERATED ALWAYS AS"
               f" ({PG_TEXT_010.format(col='prompt')}) STORED")
    db.execute("CREATE INDEX task_text ON tasks USING gin (prompt_words)")


def _m011_text_index_within_its_limit(db: Any, dialect: Any) -> None:
    """A tsvector holds at most 1 MB: a request of 1 MB of distinct words (a pasted log) made PostgreSQL
    refuse its task. The index now reads a request's first dialect.PG_TEXT_CHARS characters."""
    if dialect.name != "postgresql":
        return
    db.execute("DROP INDEX IF EXISTS task_text")
    db.execute("ALTER TABLE tasks DROP COLUMN IF EXISTS prompt_words")
    db.execute(f"ALTER TABLE tasks ADD COLUMN prompt_words tsvector GENERATED ALWAYS AS"
               f" ({PG_TEXT.format(col='prompt')}) STORED")
    db.execute("CREATE INDEX task_text ON tasks USING gin (prompt_words)")


MIGRATIONS: list[tuple[str, Callable[[Any, Any], None]]] = [
    ("001_initial", _m001_initial),
    ("001b_first_builds", _m001b_first_builds),
    ("002_arm_health", _m002_arm_health),
    ("003_unverified", _m003_unverified),
    ("004_run_record", _m004_run_record),
    ("005_context_root", _m005_context_root),
    ("006_similar_tasks", _m006_similar_tasks),
    ("007_group_rows_in_task_order", _m007_group_rows_in_task_order),
    ("008_shared_memory", _m008_shared_memory),
    ("009_project_identity", _m009_project_identity),
    ("010_text_index_in_any_locale", _m010_text_index_in_any_locale),
    ("011_text_index_within_its_limit", _m011_text_index_within_its_limit),
]
# The memory schema's version: the number of the last migration. It changes exactly when the schema does, so
# `acr --version` and `acr doctor --json` show it beside the package version (an acr that writes a newer schema
# than another reads is told apart by it).
SCHEMA_VERSION = int(re.match(r"\d+", MIGRATIONS[-1][0]).group())
# steps for files SQLite wrote only: a server's memory is never asked for them (a member who may not change its
# schema would otherwise be told of an upgrade due that has nothing to do there)
SQLITE_ONLY = {"001b_first_builds"}


def _first_builds_schema(db: Any) -> bool:
    """Whether this file has a first build's schema (what 001b mends): checked with three PRAGMAs. A step with
    such a check is applied, and recorded, only where it has something to do; elsewhere opening writes nothing
    (a memory acr may only read stays readable)."""
    if "source" not in {r[1] for r in db.execute("PRAGMA table_info(task_groups)")}:
        return True
    if not db.execute("PRAGMA index_info(tasks_source)").fetchall():
        return True
    return [r[2] for r in db.execute("PRAGMA index_info(task_groups_key)")] != ["source", "key"]


NEEDED: dict[str, Callable[[Any], bool]] = {"001b_first_builds": _first_builds_schema}


def migrations(dialect: Any = SQLITE) -> list[tuple[str, Callable[[Any, Any], None]]]:
    """The migrations a memory of this dialect goes through, in order."""
    return [m for m in MIGRATIONS if dialect.name == "sqlite" or m[0] not in SQLITE_ONLY]


def connect(path: Path | str, create: bool = True, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) the memory at ``path``; ``":memory:"`` for a throw-away one.

    ``read_only`` (commands that only read): a memory acr may not write to (a read-only mount, a
    file owned by someone else) is still read, as an immutable snapshot."""
    in_memory = str(path) == ":memory:"
    if not in_memory:
        path = Path(path)
        if not path.exists():
            if not create:
                raise MemoryFileError(f"no memory at {path}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
            except OSError as e:
                raise MemoryFileError(f"cannot create the memory file {path}: {e.strerror}",
                                      hint="check the directory's permissions, or pass --memory PATH / set ACR_HOME") from None
        elif path.is_dir():
            raise MemoryFileError(f"{path} is a directory, not a memory file")
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "migrations" not in tables:  # someone else's database: change nothing in it
            db.close()
            raise MemoryFileError(f"{path} is an SQLite database but not an acr memory",
                                  hint="pass --memory with a new file name, or an acr memory")
        if not in_memory:
            _enable_wal(db)
        db.execute("PRAGMA foreign_keys = ON")
        _math_functions(db)
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
    except sqlite3.DatabaseError as e:
        err = _explain(e, path)
        if not (read_only and err.message.startswith("cannot write")):
            raise err from None
        if db is not None:
            db.close()
        return _connect_immutable(Path(path), err)
    if not in_memory:
        for p in sqlite_files(path):  # yours alone; never more than you gave (a chmod 444 stays read-only)
            try:
                mode = p.stat().st_mode & 0o777 if p.exists() else 0o600
                if mode & 0o600 != mode:
                    os.chmod(p, mode & 0o600)
            except OSError:
                pass
    return db


def _math_functions(db: sqlite3.Connection) -> None:
    """``ln()``, which the aggregates use, also where SQLite was built without its math functions."""
    try:
        db.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        db.create_function("ln", 1, math.log, deterministic=True)


def sqlite_files(path: str | os.PathLike) -> tuple[Path, Path, Path]:
    """The files a memory at ``path`` is made of: the database, its write-ahead log and shared memory."""
    return Path(path), Path(f"{path}-wal"), Path(f"{path}-shm")


def _connect_immutable(path: Path, why: MemoryFileError) -> sqlite3.Connection:
    from urllib.parse import quote

    if not os.access(path, os.R_OK):  # not even readable: "cannot write" would send the user the wrong way
        raise MemoryFileError(f"cannot read the memory {path} (permission denied)",
                              hint="check the file's permissions (`ls -l`), or pass --memory PATH")

    try:
        db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?immutable=1", uri=True, isolation_level=None,
                             check_same_thread=False)
        db.row_factory = sqlite3.Row
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'").fetchone():
            raise why
        _math_functions(db)
    except sqlite3.DatabaseError:
        raise why from None
    return db


def _enable_wal(db: sqlite3.Connection) -> None:
    """Switch to WAL once. Several processes opening a brand-new file at the same moment can
    find it locked while another one switches; the busy handler does not cover this, so retry."""
    import time

    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _explain(e: sqlite3.DatabaseError, path: Path | str) -> MemoryFileError:
    text = str(e)
    # "table ... already exists": the record of applied migrations no longer matches the schema
    if "not a database" in text or "malformed" in text or "corrupt" in text or "already exists" in text:
        return damaged(path, text)
    if "readonly" in text or "unable to open" in text or "disk I/O" in text:
        return MemoryFileError(f"cannot write the memory {path} ({text})",
                               hint="check the file's and directory's permissions, or pass --memory PATH")
    step = getattr(e, "acr_step", None)
    if step:  # an upgrade this acr cannot make: the step was rolled back, the records are all there
        return MemoryFileError(
            f"cannot bring the memory {path} up to date for this version of acr: step {step} failed ({text})",
            hint="nothing of that step was written and every record is still in the file. This is a bug in acr: "
                 "please report it with this error. Meanwhile the acr version that wrote the memory can "
                 "`acr memory export` it, and `acr memory import EXPORT --memory NEW` brings its records into a new memory")
    return MemoryFileError(f"memory {path}: {text}")


def damaged(path: Path | str, detail: str, what: str = "is not a readable acr memory") -> MemoryFileError:
    """The error for a memory file SQLite cannot read, with the way out."""
    return MemoryFileError(f"{path} {what} ({' '.join(detail.split())})",
                           hint=f"move it aside (`mv {path} {path}.broken`) and acr starts a new memory; "
                                "`acr memory import` can bring back an export, `sqlite3 FILE .recover` may save "
                                "its records")


# PostgreSQL: the advisory lock that lets one acr at a time migrate a server's memory
MIGRATION_LOCK = 0x616372  # "acr"


def migrate(db: Any, dialect: Any = SQLITE, tables: set[str] | None = None) -> list[str]:
    """Apply the missing migrations, each in its own transaction; returns their names. ``tables``: the
    tables the database has, when the caller knows (a server up to date then costs one query)."""
    steps = migrations(dialect)
    if tables is not None and "migrations" in tables:
        if {r[0] for r in db.execute("SELECT name FROM migrations")} >= {name for name, _ in steps}:
            return []
    if tables is None or "migrations" not in tables:  # (a member who may not create tables never needs to)
        _create_migrations_table(db, dialect)
    done = {r[0] for r in db.execute("SELECT name FROM migrations")}
    return [name for name, fn in steps
            if name not in done and (name not in NEEDED or NEEDED[name](db)) and _apply(db, dialect, name, fn)]


def _create_migrations_table(db: Any, dialect: Any) -> None:
    """The table of applied migrations. On PostgreSQL under the migration lock, as the owner: two acr opening a
    new server database at once would race on CREATE TABLE IF NOT EXISTS."""
    postgres = dialect.name == "postgresql"
    if postgres:
        db.execute("BEGIN")
        db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        _as_owner(db)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    except BaseException as e:
        if postgres:
            db.execute("ROLLBACK")
            raise _not_owner(db, e, "001_initial") from None
        raise
    if postgres:
        db.execute("COMMIT")


def _apply(db: Any, dialect: Any, name: str, fn: Any) -> bool:
    """Apply one migration in its own transaction; False when another process applied it first."""
    import time

    postgres = dialect.name == "postgresql"
    db.execute(dialect.begin)
    try:
        if postgres:
            db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            _as_owner(db)
        applied = name not in {r[0] for r in db.execute("SELECT name FROM migrations")}  # another process raced us
        if applied:
            fn(db, dialect)
            db.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        db.execute("COMMIT")
    except BaseException as e:
        db.execute("ROLLBACK")
        if postgres:
            raise _not_owner(db, e, name) from None
        if isinstance(e, sqlite3.DatabaseError):
            e.acr_step = name  # type: ignore[attr-defined]  # (_explain names it)
        raise
    return applied


def _as_owner(db: Any) -> None:
    """PostgreSQL: make and change the schema as the database's owner when this role is a member of it (the
    transaction's ``SET LOCAL ROLE``), so the tables belong to the team's role and any member can upgrade them
    later; changing a table takes its owner. A role that is not a member changes the schema as itself."""
    db.execute("SELECT set_config('role', pg_get_userbyid(d.datdba), true) FROM pg_database d"
               " WHERE d.datname = current_database() AND d.datdba <> (SELECT oid FROM pg_roles"
               " WHERE rolname = current_user) AND pg_has_role(current_user, d.datdba, 'MEMBER')")


def _not_owner(db: Any, e: BaseException, name: str) -> BaseException:
    """A schema change the server refused for want of privilege, said as what to do; other errors as they are."""
    text = getattr(e, "message", None) or str(e)
    if not re.search(r"must be owner|permission denied", text):
        return e
    try:
        owner, me = db.execute("SELECT pg_get_userbyid(datdba), current_user FROM pg_database"
                               " WHERE datname = current_database()").fetchone()
    except Exception:
        owner, me = "the database's owner", "your role"
    return MemoryFileError(
        f"{db.label} needs a schema upgrade ({name}) that the role {me} may not make ({_first_line(text)})",
        hint=f"have {owner} run any acr command on it once, or make {me} a member of the owner's role "
             f"(GRANT {owner} TO {me}): acr then upgrades the schema as {owner}")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def connect_url(url: str) -> Any:
    """Connect to the memory on the PostgreSQL server at ``url`` and bring its schema up to date."""
    from acr_cli.memory import postgres

    db = postgres.connect(url)
    try:
        tables = postgres.POSTGRES.tables(db)
        if tables and "migrations" not in tables:  # someone else's database: change nothing in it
            raise MemoryFileError(f"{db.label} has tables but is not an acr memory",
                                  hint="give acr a database of its own (createdb acr), or a schema of its own "
                                       "(options=-csearch_path=acr in the URL)")
        migrate(db, postgres.POSTGRES, tables)
    except BaseException:
        db.close()
        raise
    return db
