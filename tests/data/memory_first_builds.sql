-- The schema acr's first builds wrote (migration 001_initial as it was on 2026-11-21, before it was changed
-- in place): a memory file of theirs is made from this in tests/memory/test_memory.py.
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
CREATE TABLE task_groups (                 -- the context groups a task belongs to, coarse to fine
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    level INTEGER NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (task_id, level)
);
CREATE INDEX task_groups_key ON task_groups(key, task_id);
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
CREATE INDEX attempts_task ON attempts(task_id);
CREATE TABLE runs (                        -- benchmark replays
    id TEXT PRIMARY KEY,
    benchmark TEXT NOT NULL,
    policy TEXT NOT NULL,
    params TEXT,                           -- JSON
    started_at TEXT NOT NULL,
    finished_at TEXT,
    n_tasks INTEGER,
    report TEXT                            -- JSON: the rendered figures of the run's group
);
