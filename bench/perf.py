#!/usr/bin/env python3
"""Performance figures for acr, printed (never asserted): python bench/perf.py [--quick] [--postgres].

Wall times are medians of interleaved runs, and each acr figure is also given as a
ratio to a bare Typer hello-world measured in the same run, so a noisy machine
moves both sides together. Targets (issue #2): ``acr --help`` <= 1.3x the bare
app; ``acr route`` with 100,000 tasks (200,000 attempts) in memory <= 2x the bare app (issue #20:
also when the request reads like many of them, so the similar-task index has work to do);
``acr route`` against a shared memory on a local PostgreSQL server with 500,000 tasks (1,000,000
attempts) <= 2x the bare app, with the plans of routing's queries (--postgres; in a full run whenever
tests/pgserver.py can start a server here).
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELLO = """
import typer
app = typer.Typer()
@app.command()
def hello(name: str = "world"):
    print(f"hello {name}")
if __name__ == "__main__":
    app()
"""


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def measure(cases: dict[str, list[str]], env: dict, repeat: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for argv in cases.values():  # warm the file cache
        timed(argv, env)
    for _ in range(repeat):
        for name, argv in cases.items():  # interleaved: noise hits every case alike
            samples[name].append(timed(argv, env))
    return {k: statistics.median(v) for k, v in samples.items()}


TASK_COLUMNS = ("id", "created_at", "source", "kind", "language", "prompt", "finished_at")
GROUP_COLUMNS = ("task_id", "level", "key", "source")
ATTEMPT_COLUMNS = ("task_id", "seq", "agent", "model", "started_at", "duration_s", "cost_usd", "cost_source", "verdict",
                   "score", "tokens_in", "tokens_out")


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({','.join('?' * len(columns))})"


def seed_memory(target: Path | str, n_attempts: int) -> None:
    """n_attempts synthetic live attempts (two per task) across kinds, languages and projects, in the memory
    at ``target`` (an SQLite file or a ``postgresql://`` URL; the same rows on both)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acr_cli.context import live_groups
    from acr_cli.memory import Memory, similar

    mem = Memory.open(target)
    rng = random.Random(7)
    # requests of 8-60 words from a 20,000-word vocabulary with Zipf-like frequencies (as text has),
    # so the similar-task index and its word counts are as large as real requests make them
    vocab = [f"w{i}" for i in range(20_000)]
    cum, total = [], 0.0
    for i in range(len(vocab)):
        total += 1.0 / (i + 1)
        cum.append(total)
    prompts = []
    kinds = ["bug_fix", "feature", "refactor", "test_generation", "docs", "explain"]
    langs = ["python", "typescript", "go", "rust"]
    arms = [("codex", "gpt-5.4"), ("claude", "claude-opus-4-6"), ("claude", "claude-sonnet-4-6"),
            ("opencode", "moonshotai/kimi-k2.5"), ("opencode", "zhipuai/glm-5")]

    def tasks():  # per task: its row, its group rows and its two attempts (the rng drawn in one order)
        for t in range(n_attempts // 2):
            kind, lang = rng.choice(kinds), rng.choice(langs)
            groups = live_groups(kind, lang, Path(f"/work/project{rng.randrange(20)}"))
            tid = f"t{t:07d}"
            prompt = " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randrange(8, 60)))
            prompts.append(("live", prompt))
            attempts = []
            for seq in (1, 2):
                agent, model = rng.choice(arms)
                verdict = rng.choice(["passed", "failed", "failed", "error"])
                attempts.append((tid, seq, agent, model, "2026-11-01T00:00:00Z", rng.uniform(10, 300),
                                 rng.uniform(0, 2), "priced", verdict, 1.0 if verdict == "passed" else 0.0, 50000, 2000))
            yield ((tid, "2026-11-01T00:00:00Z", "live", kind, lang, prompt, "2026-11-01T00:05:00Z"),
                   [(tid, i, g, "live") for i, g in enumerate(groups)], attempts)

    db = mem.db
    db.execute("BEGIN")
    if mem.dialect.name == "postgresql":  # COPY: row-by-row INSERTs of a million rows take many minutes there
        copy_rows(db._conn, tasks())
    else:
        for task, groups, attempts in tasks():
            db.execute(_insert("tasks", TASK_COLUMNS), task)
            db.executemany(_insert("task_groups", GROUP_COLUMNS), groups)
            for attempt in attempts:
                db.execute(_insert("attempts", ATTEMPT_COLUMNS), attempt)
    similar.count(db, prompts)
    db.execute("COMMIT")
    if mem.dialect.name == "postgresql":
        # the statistics the planner needs (autovacuum would gather them later), and the visibility map
        # index-only scans need (autovacuum sets it after inserts too): a memory in use, not one just written;
        # then the written pages flushed, so the server's writing does not slow the runs measured next
        db.execute("VACUUM (ANALYZE)")
        db.execute("CHECKPOINT")
    mem.close()


def copy_rows(conn, tasks, chunk: int = 20_000) -> None:
    """The rows of ``tasks`` (as seed_memory makes them) through COPY, ``chunk`` tasks at a time: tasks, then
    their groups (so ``task_groups`` rowids follow task order, as acr writes them), then their attempts."""
    import itertools

    it = iter(tasks)
    cur = conn.cursor()
    while batch := list(itertools.islice(it, chunk)):
        for table, columns, rows in (("tasks", TASK_COLUMNS, (b[0] for b in batch)),
                                     ("task_groups", GROUP_COLUMNS, (g for b in batch for g in b[1])),
                                     ("attempts", ATTEMPT_COLUMNS, (a for b in batch for a in b[2]))):
            with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)


def bench_figures(data_dir: Path) -> None:
    """Replay speed, in-process (the data is loaded once, as one `acr bench replay` command does)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acr_cli import profiles
    from acr_cli.bench import matrix as matrix_mod
    from acr_cli.bench import policies
    from acr_cli.bench import replay as rp
    from acr_cli.bench import spec as spec_mod
    from acr_cli.memory import Memory
    from acr_cli.routing import registry

    prof = profiles.load("coderouterbench", Path("/nonexistent"))
    print(f"\nreplay speed (data from {data_dir}; loading excluded, shown apart)")
    for name in ("ood176", "id2919"):
        spec = spec_mod.load(name)
        t0 = time.perf_counter()
        m = matrix_mod.load(spec, data_dir)
        load_s = time.perf_counter() - t0
        arms = rp.bench_arms(m, prof)

        setup = policies.replay_setup(m, arms, data_dir=data_dir, profile=prof, cost_weight=0.1, seed=1, k=2)

        def run(pols, orders=(None,), protocol=spec.default_protocol):
            start = time.perf_counter()
            for p in pols:
                label, make = registry.build(p, setup)
                for o in orders:
                    mem = Memory.open(":memory:")
                    rp.replay(m, make, mem, label=label, protocol=protocol, cost_weight=0.1, order_seed=o)
                    mem.close()
            return time.perf_counter() - start

        base = [p for p in policies.baseline_set(name, data_dir) if p != "learned"]
        print(f"  {name}: load {load_s:.2f}s; the {len(base)} baselines of --baselines (learned apart) {run(base):.2f}s")
        for p in ("always:claude-opus-4-6", "learned"):
            one = run([p])
            sweep = run([p], orders=range(20))
            print(f"  {name}: {p:24} single pass {one:.2f}s, 20 shuffled orders {sweep:.2f}s")
        if name == "id2919":
            print(f"  {name}: learned, verify protocol, single pass {run(['learned'], protocol='verify'):.2f}s")
            rand, learned = run(["random"], orders=range(20)), run(["learned"], orders=range(20))
            print(f"  {name}: 20 shuffled orders: random {rand:.1f}s, learned {learned:.1f}s: "
                  f"{learned / rand:.2f}x (target <= 3x)")
    print("targets: all OOD176 baselines < 1 s; ID2919 single pass < 2 s; 20-order sweep of one policy < 10 s")


PLAN_INDEX = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
LIKE_MANY = "w3 w17 w120 w2 w999 w45 w7 w300 w12 w5000 w1 w64"  # a request that reads like many seeded tasks


def _pgserver():
    """tests/pgserver.py: the throw-away PostgreSQL server the tests use."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import pgserver

    return pgserver


def postgres_figures(n_attempts: int, repeat: int, hello: Path, env: dict) -> None:
    """``acr route`` against a shared memory on a local PostgreSQL server, and the plans of routing's queries."""
    pgserver = _pgserver()
    print(f"\nacr route against a shared memory on PostgreSQL ({n_attempts:,} attempts)")
    server = pgserver.Server()
    try:
        server.start()
        url = server.url(server.new_database())
        t0 = time.perf_counter()
        seed_memory(url, n_attempts)
        seeded = time.perf_counter() - t0
        py = sys.executable
        cases = {
            "bare typer app --help": [py, str(hello), "--help"],
            "bare typer app (run)": [py, str(hello)],
            f"acr route ({n_attempts:,} attempts, PostgreSQL)": [py, "-m", "acr_cli", "route",
                                                               "fix the failing parser test", "--memory", url],
            "acr route, a request like many (PostgreSQL)": [py, "-m", "acr_cli", "route", LIKE_MANY, "--memory", url],
        }
        res = measure(cases, env, repeat)
        help_base, run_base = res["bare typer app --help"], res["bare typer app (run)"]
        print(f"seeded {n_attempts:,} synthetic attempts (COPY, VACUUM ANALYZE, CHECKPOINT) in {seeded:.1f}s;"
              f" medians of {repeat} interleaved runs\n")
        print(f"{'case':42} {'wall':>9} {'x bare --help':>14} {'x bare run':>11}")
        for name, t in res.items():
            print(f"{name:42} {t * 1000:7.0f}ms {t / help_base:13.2f}x {t / run_base:10.2f}x")
        print(f"\ntarget: acr route with {n_attempts // 2:,} tasks on PostgreSQL <= 2.00x the bare app")
        explain_routing(url)
    finally:
        server.stop()


def explain_routing(url: str) -> None:
    """The plans of the queries routing runs on a big memory: the newest finished task (max_task_rowid),
    the window's start and the per-group aggregates, as GroupCache.get asks for them, and the similar-task
    search of a request that reads like many tasks (similar.find)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acr_cli.memory import Memory, aggregates, similar

    mem = Memory.open(url)
    recorded: list[tuple[str, str, list]] = []
    execute = mem.db.execute
    what = ["max_task_rowid"]

    def record(sql, params=()):
        recorded.append((what[0], sql, list(params)))
        return execute(sql, params)

    mem.db.execute = record
    try:
        mark = aggregates.max_task_rowid(mem, "live")
        what[0] = "group_stats"
        keys = ["all", "kind=bug_fix"]
        aggregates.group_stats(mem, "live", keys, 0, mark, window=aggregates.WINDOW, pairs=keys[:1])
        what[0] = "similar.find"
        similar.find(mem, "live", LIKE_MANY, upto=mark)
    finally:
        del mem.db.execute
    recorded = [r for r in recorded if r[0] != "similar.find" or "to_tsquery" in r[1]]  # not its word counts
    print(f"\nEXPLAIN ANALYZE of routing's queries: max_task_rowid; group_stats(live, {keys}, upto={mark},"
          f" window={aggregates.WINDOW}, pairs={keys[:1]}) as GroupCache.get issues it; similar.find of {LIKE_MANY!r}")
    verdicts = []
    for i, (caller, sql, params) in enumerate(recorded, 1):
        plan = [r[0] for r in mem.db.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)]
        name = _query_name(caller, sql)
        used = any(k in line for line in plan for k in PLAN_INDEX)
        took = next((line.split(":", 1)[1].strip() for line in plan if line.startswith("Execution Time")), "?")
        flat = " ".join(sql.split())
        print(f"\n[{i}] {name}; params {params}")
        print(f"    {flat[:160]}{'...' if len(flat) > 160 else ''}")
        for line in plan:
            print(f"      {line}")
        verdicts.append(f"[{i}] {name:26} index: {'yes' if used else 'NO (sequential scan)':22} {took}")
        print(f"    {verdicts[-1]}")
    print("\nverdicts:\n  " + "\n  ".join(verdicts))
    mem.close()


def _query_name(caller: str, sql: str) -> str:
    if caller != "group_stats":
        return caller
    if "OFFSET" in sql:
        return "_window_start"
    if "JOIN attempts b" in sql:
        return "_sums: cost pairs"
    if "pattern" in sql:
        return "_sums: verdict patterns"
    return "_sums: per-arm aggregate"


def _repo(where: Path, n_files: int, ignored: bool) -> Path:
    """A committed project of ``n_files`` Python files (100 per directory), optionally with ignored entries."""
    where.mkdir()

    def run(*a: str) -> None:
        subprocess.run(["git", "-C", str(where), *a], check=True, capture_output=True)

    run("init", "-q")
    for i in range(n_files):
        d = where / "src" / f"m{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"x = {i}\n" * 40)
    (where / ".gitignore").write_text(".env\ndata/\nnode_modules/\n")
    run("add", "-A")
    run("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init")
    (where / "notes.md").write_text("the user's untracked notes\n")
    if ignored:
        (where / ".env").write_text("TOKEN=x\n")
        (where / "data").mkdir()
        (where / "data" / "big.csv").write_bytes(os.urandom(20 * 2**20))  # kept: within the budget
        for i in range(20000):  # over the file budget: measured, not kept
            d = where / "node_modules" / f"p{i // 200}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.js").write_text("module.exports = 1\n")
    return where


def _old_workspace(rev: str):
    """The single-module workspace of ``rev`` (before it became a package), loaded beside today's."""
    import importlib.util

    src = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "show", f"{rev}:acr_cli/workspace.py"],
                         capture_output=True, text=True)
    if src.returncode != 0:
        return None
    path = Path(tempfile.mkdtemp()) / "old_workspace.py"
    path.write_text(src.stdout)
    spec = importlib.util.spec_from_file_location("old_workspace", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_workspace"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod.Workspace


def _one_attempt(ws, new: bool, i: int, ignored: bool) -> float:
    """What a failed attempt costs acr: checkpoint (kept for recover), the change check, rollback, drop."""
    name = f"bench-{i}"
    t0 = time.perf_counter()
    cp = ws.checkpoint(name) if new else ws.checkpoint(keep_as=name)
    (ws.root / "src" / "m0" / "f0.py").write_text(f"changed {i}\n")
    if ignored:
        (ws.root / ".env").write_text("TOKEN=agent\n")
    ws.changes(cp)
    ws.restore(cp, keep_as=name)
    if not new:  # what acr's rollback did after restore() then (today's restore() does both itself)
        ws.prune_attempts()
        ws.nested_changes(cp)
    ws.drop(cp)
    return time.perf_counter() - t0


def checkpoint_figures(tmp: Path, repeat: int, baseline: str) -> None:
    """Checkpoint + rollback of a failed attempt: today's workspace against ``baseline``'s, interleaved."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acr_cli.workspace import Workspace

    old = _old_workspace(baseline)
    print(f"\ncheckpoint + change check + rollback + drop of one failed attempt (medians of {repeat}, interleaved"
          f"{'' if old else '; baseline ' + baseline + ' not found: today only'})")
    print(f"  {'project':58} {'today':>8} {baseline[:10]:>10} {'ratio':>6}")
    cases = (("2,000 files", 2000, False), ("2,000 files + .env, 20 MB data/, 20,000-file node_modules/", 2000, True),
             ("50,000 files", 50000, False))
    for label, n, ignored in cases:
        root = _repo(tmp / f"r{n}{ignored}", n, ignored)
        pair = [("today", Workspace.open(root), True)] + ([("old", old.open(root), False)] if old else [])
        samples: dict[str, list[float]] = {k: [] for k, _, _ in pair}
        for i in range(repeat + 1):
            for key, ws, new in pair:
                t = _one_attempt(ws, new, i, ignored)
                if i:  # the first round warms the caches (and writes the first objects)
                    samples[key].append(t)
        today = statistics.median(samples["today"])
        if old:
            was = statistics.median(samples["old"])
            print(f"  {label:58} {today * 1000:6.0f}ms {was * 1000:8.0f}ms {today / was:5.2f}x")
        else:
            print(f"  {label:58} {today * 1000:6.0f}ms")
    print("  target: today <= 1.10x the baseline (issue 17)")


def _race_overhead(ws, i: int, lanes: str, size: int = 3) -> float:
    """What a race of ``size`` adds to one attempt: its lanes made from the checkpoint (``lanes``: overlay or
    worktree), the winner's change read and applied to the user's work tree, the lanes removed (the checkpoint
    itself is the one a single attempt takes too, and each arm's own attempt is an attempt's)."""
    from acr_cli.workspace import race

    cp = ws.checkpoint(f"race-{i}")
    t0 = time.perf_counter()
    trees, _ = race.create_all(ws, cp, list(range(size)), lanes=lanes)
    (trees[0].root / "src" / "m0" / "f0.py").write_text(f"winner {i}\n")
    race.apply(ws, cp.tree, race.final_tree(trees[0], ws.common_dir)[0], trees[0].alternates)
    race.remove_all(ws, trees)
    took = time.perf_counter() - t0
    ws.restore(cp)
    ws.drop(cp)
    return took


def race_figures(tmp: Path, repeat: int) -> None:
    """The overhead of a race of 3 over a single attempt, as a ratio to a sequential attempt's checkpoint +
    rollback measured in the same run, interleaved; overlay lanes where this machine can mount them, and
    worktree lanes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acr_cli.workspace import Workspace, overlay

    why = overlay.probe()
    kinds = ["worktree"] if why else ["overlay", "worktree"]
    print(f"\nrace of 3: lanes made, winner applied, lanes removed, against one attempt's checkpoint + "
          f"rollback (medians of {repeat}, interleaved)")
    if why:
        print(f"  (no overlay lanes here: {why})")
    print(f"  {'project':14} {'lanes':9} {'race overhead':>14} {'attempt':>9} {'ratio':>6}")
    for label, n in (("2,000 files", 2000), ("50,000 files", 50000)):
        ws = Workspace.open(_repo(tmp / f"race{n}", n, False))
        races: dict[str, list[float]] = {k: [] for k in kinds}
        attempts = []
        for i in range(repeat + 1):
            took = {k: _race_overhead(ws, i, k) for k in kinds}
            a = _one_attempt(ws, True, i, False)
            if i:  # the first round warms the caches
                for k in kinds:
                    races[k].append(took[k])
                attempts.append(a)
        one = statistics.median(attempts)
        for k in kinds:
            race = statistics.median(races[k])
            print(f"  {label:14} {k:9} {race * 1000:12.0f}ms {one * 1000:7.0f}ms {race / one:5.2f}x")
    print("  target: <= 1.5x (issue 43)")


def postgres_section(args: argparse.Namespace, repeat: int) -> None:
    """The PostgreSQL figures: with --postgres, or in a full run when a server can be started here."""
    if not args.postgres and args.quick:
        return
    reason = _pgserver().why_not()
    if reason:
        print(f"\n(no PostgreSQL figures: {reason})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hello = tmp / "hello.py"
        hello.write_text(HELLO)
        postgres_figures(args.pg_attempts, repeat, hello, dict(os.environ, ACR_HOME=str(tmp / "home")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--attempts", type=int, default=200_000, help="attempts in the big memory, two per task")
    ap.add_argument("--baseline", default="6f35da7",
                    help="git revision whose workspace the checkpoint figures compare with (default: before the "
                         "package split of issue 17)")
    ap.add_argument("--postgres", action="store_true",
                    help="also acr route against a shared memory on a local PostgreSQL server (in a full run: "
                         "whenever a server can be started here)")
    ap.add_argument("--pg-attempts", type=int, default=1_000_000,
                    help="attempts in the PostgreSQL memory, two per task")
    ap.add_argument("--only", choices=["checkpoint", "race", "postgres"], help="print only these figures")
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ACR_BENCH_DATA", "../shared/coderouterbench")),
                    help="CodeRouterBench files for the replay figures (skipped when absent)")
    args = ap.parse_args()
    repeat = 5 if args.quick else 15
    if args.only == "checkpoint":
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint_figures(Path(tmp), 3 if args.quick else 7, args.baseline)
        return
    if args.only == "race":
        with tempfile.TemporaryDirectory() as tmp:
            race_figures(Path(tmp), 3 if args.quick else 7)
        return
    if args.only == "postgres":
        args.postgres = True
        postgres_section(args, repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hello = tmp / "hello.py"
        hello.write_text(HELLO)
        env = dict(os.environ, ACR_HOME=str(tmp / "home"))
        blob = tmp / "long-request.txt"  # a pasted log or data: words, then one long base64 run (classifying it
        blob.write_text("the import fails with this payload: "  # was quadratic in the run's length)
                        + base64.urlsafe_b64encode(random.Random(1).randbytes(786_432)).decode())
        big = tmp / "big.sqlite"
        t0 = time.perf_counter()
        seed_memory(big, args.attempts)
        seeded = time.perf_counter() - t0
        py = sys.executable
        cases = {
            "bare typer app --help": [py, str(hello), "--help"],
            "bare typer app (run)": [py, str(hello)],
            "acr --help": [py, "-m", "acr_cli", "--help"],
            "acr route (empty memory)": [py, "-m", "acr_cli", "route", "fix the failing parser test"],
            f"acr route ({args.attempts:,} attempts)": [py, "-m", "acr_cli", "route", "fix the failing parser test",
                                                        "--memory", str(big)],
            "acr route, a request like many tasks": [
                py, "-m", "acr_cli", "route", LIKE_MANY, "--memory", str(big)],
            "acr route, a 1 MiB request": [py, "-m", "acr_cli", "route", "--prompt-file", str(blob)],
            f"acr memory show ({args.attempts:,} attempts)": [py, "-m", "acr_cli", "memory", "show", "--memory",
                                                              str(big)],
        }
        for n in (4, 50):  # the plan's cost in the number of arms (issue 39: 50 arms within 1.5x of 4)
            lines = ["arms:"] + [f"  - {{agent: {('codex', 'claude', 'opencode')[i % 3]}, model: m{i:02d}, "
                                 f"price: {{input: {0.1 + i / 10:.2f}, output: {1 + i}}}}}" for i in range(n)]
            (tmp / f"arms{n}.yaml").write_text("\n".join(lines) + "\n")
            cases[f"acr route, {n} arms (empty memory)"] = [py, "-m", "acr_cli", "route", "fix the failing parser test",
                                                           "--profile", str(tmp / f"arms{n}.yaml")]
        env["PATH"] = f"{Path(__file__).resolve().parents[1] / 'tests' / 'fakes'}{os.pathsep}{env.get('PATH', '')}"
        res = measure(cases, env, repeat)
    help_base, run_base = res["bare typer app --help"], res["bare typer app (run)"]
    print(f"seeded {args.attempts:,} synthetic attempts in {seeded:.1f}s; medians of {repeat} interleaved runs\n")
    print(f"{'case':42} {'wall':>9} {'x bare --help':>14} {'x bare run':>11}")
    for name, t in res.items():
        print(f"{name:42} {t * 1000:7.0f}ms {t / help_base:13.2f}x {t / run_base:10.2f}x")
    print(f"\ntargets: acr --help <= 1.30x bare --help; acr route with {args.attempts // 2:,} tasks <= 2.00x the bare app")
    four, fifty = res["acr route, 4 arms (empty memory)"], res["acr route, 50 arms (empty memory)"]
    print(f"acr route with 50 arms / with 4 arms: {fifty / four:.2f}x (target <= 1.5x)")
    postgres_section(args, repeat)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint_figures(Path(tmp), 3 if args.quick else 7, args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        race_figures(Path(tmp), 3 if args.quick else 7)
    if (args.data_dir / "ood176_results_long.csv").is_file():
        bench_figures(args.data_dir)
    else:
        print(f"\n(no CodeRouterBench files in {args.data_dir}: replay figures skipped)")


if __name__ == "__main__":
    main()
