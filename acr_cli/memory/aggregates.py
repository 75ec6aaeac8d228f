"""What the learned router reads from memory: per context group, SQL aggregates of the attempts.

For one group (all tasks of a scope that belong to it), ``GroupStats`` holds:

* per arm: attempts with a verdict about the arm (n),
  failed attempts and the sum of their (partial) scores, attempts with a
  positive cost and the sum and sum of squares of ln(cost), and the token level
  (sum of ln(tokens), sum of USD per token) of attempts with tokens and cost;
* verdict patterns: how many tasks had each (tried set, passed set), the data
  the latent-ease model is fitted on;
* cost pairs: per ordered pair of arms tried on the same task (self-join), the
  sums that give the correlation of their ln(costs).

``Chains`` holds, for all tasks under one (coarsest) group, the number of tasks
and the judged attempts and score sums per arm in every finer group below it: the
data of the single-action model (:mod:`acr_cli.routing.effects`), which needs
every sub-group of the kind, not only the task's own.

An ``unverified`` attempt (accepted with no verifier, on the agent's own word) is a pass worth
``UNVERIFIED_WEIGHT`` of a verified one, in the verdict patterns and in the chains alike.

All of it comes from ``SELECT ... GROUP BY`` over ``attempts`` joined with the
task's groups; nothing learned is stored. ``GroupCache`` keeps these sums for a
long replay and adds only the tasks finished since its last look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from acr_cli.domain import JUDGED
from acr_cli.memory import similar
from acr_cli.memory.sql import (
    EVIDENCE_SQL,
    JUDGED_SQL,
    POS_COST,
    PRICED_COST,
    SCORE,
    UNVERIFIED_WEIGHT,
    WEIGHT,
    WEIGHTED_SCORE,
    WHOLE,
    count_if,
    flag,
    total,
)
from acr_cli.memory.store import Memory


@dataclass
class ArmAgg:
    n: int = 0
    n_fail: int = 0
    s_fscore: float = 0.0
    n_cost: int = 0  # attempts with a known cost
    n_pos: int = 0  # ... of which positive
    s_lc: float = 0.0
    ss_lc: float = 0.0
    n_tok: int = 0
    s_ltok: float = 0.0
    s_ptok: float = 0.0  # sum of USD per token
    n_dur: int = 0  # attempts with a duration
    s_dur: float = 0.0  # ... and the sum of their seconds

    def add(self, o: "ArmAgg", sign: float = 1) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + sign * getattr(o, k))


@dataclass
class GroupStats:
    n_tasks: int = 0
    arms: dict[str, ArmAgg] = field(default_factory=dict)
    patterns: dict[tuple[frozenset, frozenset], int] = field(default_factory=dict)
    pairs: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # [n, s, ss, sx]

    def arm(self, arm_id: str) -> ArmAgg:
        return self.arms.get(arm_id) or ArmAgg()

    def add(self, o: "GroupStats", sign: float = 1) -> None:
        """Add ``o`` counted ``sign`` times (-1 takes it away; a similar task counts its similarity)."""
        self.n_tasks += sign * o.n_tasks
        for a, agg in o.arms.items():
            self.arms.setdefault(a, ArmAgg()).add(agg, sign)
        for p, c in o.patterns.items():
            left = self.patterns.get(p, 0) + sign * c
            if left:
                self.patterns[p] = left
            else:
                self.patterns.pop(p, None)
        for k, v in o.pairs.items():
            mine = self.pairs.setdefault(k, [0.0, 0.0, 0.0, 0.0])
            for i in range(4):
                mine[i] += sign * v[i]

    def minus(self, o: "GroupStats") -> "GroupStats":
        """The tasks of this group that are not in ``o`` (a subgroup)."""
        out = GroupStats()
        out.add(self)
        out.add(o, -1)
        return out


@dataclass
class Near:
    """A similar earlier task: how alike it is, its aggregates, and its score sums per arm."""

    task: similar.Similar
    stats: GroupStats
    scores: dict[str, list]  # arm -> [judged attempts, score sum], as Chains keeps them


FAILED = "a.verdict IN ('failed','timeout')"
POS_TOKENS = f"{POS_COST} AND a.tokens_in + a.tokens_out > 0"  # an attempt that tells the arm's price per token
WINDOW = 1000  # the newest finished tasks of a group that routing reads (see group_stats)


def group_stats(memory: Memory, scope: str, keys: Sequence[str] | None, after: int = 0,
                upto: int | None = None, window: int | None = None,
                pairs: Sequence[str] | None = None) -> dict[str, GroupStats]:
    """Aggregates of the finished tasks of ``scope`` with after < rowid <= upto, per group key.

    ``keys=None`` aggregates every group those tasks belong to (how a cache adds new tasks).
    ``window`` keeps only the tasks newer than the ``window``-th newest task of the first
    (coarsest) key, for every key alike, so that a finer group stays a subset of a coarser
    one: estimates from 1,000 tasks are as precise as routing needs (about ±0.016 on a pass
    rate), they follow models as they change, and the cost of a decision stays bounded
    however large the memory grows. ``pairs`` limits the cost-pair self-join to those keys
    (the router only needs the coarsest group's).
    """
    if keys is not None:
        first_row = 0
        if window and keys:
            start, first_row = _window_start(memory, scope, keys[0], window)
            after = max(after, start - 1)
        out: dict[str, GroupStats] = {}
        for key in keys:
            out.update(_aggregate(memory, scope, [key], after, upto, with_pairs=pairs is None or key in pairs,
                                  first_row=first_row))
        return out
    return _aggregate(memory, scope, None, after, upto, with_pairs=True)


def _window_start(memory: Memory, scope: str, key: str, window: int) -> tuple[int, int]:
    """The rowids of a group's ``window``-th newest task and of its row in ``task_groups`` ((0, 0): fewer
    tasks); an index walk.

    A task's group rows are written with the task, coarse to fine, so ``task_groups`` rowids follow
    task order (migration 007 renumbered the rows an older memory had out of order): every row of
    this task or a later one at this group's level or finer has a rowid >= the second figure, and
    every row of an earlier task a smaller one. Bounding the group index by it reads only the window's
    rows instead of the whole group's."""
    row = memory.db.execute("SELECT t.rowid, g.rowid FROM task_groups g JOIN tasks t ON t.id = g.task_id"
                            " WHERE g.source = ? AND g.key = ? ORDER BY g.rowid DESC LIMIT 1 OFFSET ?",
                            (scope, key, window - 1)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def _finished(scope: str, after: int, upto: int | None) -> tuple[str, list]:
    """The SQL condition (on ``tasks t``) and parameters for the finished tasks of ``scope`` with
    after < rowid <= upto."""
    where = "t.source = ? AND t.finished_at IS NOT NULL AND t.rowid > ?"
    params: list = [scope, after]
    if upto is not None:
        where += " AND t.rowid <= ?"
        params.append(upto)
    return where, params


def _aggregate(memory: Memory, scope: str, keys: Sequence[str] | None, after: int, upto: int | None,
               with_pairs: bool, first_row: int = 0) -> dict[str, GroupStats]:
    where, params = _finished(scope, after, upto)
    if keys is not None:
        where += f" AND g.source = ? AND g.key IN ({','.join('?' * len(keys))}) AND g.rowid >= ?"
        params += [scope, *keys, first_row]
    out = _sums(memory, "FROM tasks t JOIN task_groups g ON g.task_id = t.id", "g.key", where, params, with_pairs)
    for k in keys or ():
        out.setdefault(k, GroupStats())
    return out


def task_stats(memory: Memory, task_ids: Sequence[str]) -> dict[str, GroupStats]:
    """The aggregates of each of these (finished) tasks alone, keyed by task id: what a similar
    earlier task tells about the arms (acr_cli.routing.learned)."""
    if not task_ids:
        return {}
    where = f"t.finished_at IS NOT NULL AND t.id IN ({','.join('?' * len(task_ids))})"
    return _sums(memory, "FROM tasks t", "t.id", where, list(task_ids), with_pairs=False)


def _sums(memory: Memory, tasks: str, key: str, where: str, params: list, with_pairs: bool) -> dict[str, GroupStats]:
    """The sums of :class:`GroupStats` per ``key`` (an SQL expression) over the tasks ``tasks`` (a FROM
    clause naming them ``t``) that meet ``where``."""
    out: dict[str, GroupStats] = {}
    one = f"{tasks} JOIN attempts a ON a.task_id = t.id"
    two = f"{one} JOIN attempts b ON b.task_id = t.id AND b.id <> a.id"
    db = memory.db

    def stats(group: str) -> GroupStats:
        st = out.get(group)
        if st is None:
            st = out[group] = GroupStats()
        return st

    for r in db.execute(
            f"SELECT {key}, a.agent || ':' || a.model AS arm,"
            f" {count_if(f'a.verdict IN {JUDGED_SQL}')},"
            f" {count_if(FAILED)},"
            f" {total(f'CASE WHEN {FAILED} THEN {SCORE} END')},"
            f" COUNT({PRICED_COST}), {count_if(POS_COST)},"
            f" {total(f'CASE WHEN {POS_COST} THEN ln(a.cost_usd) END')},"
            f" {total(f'CASE WHEN {POS_COST} THEN ln(a.cost_usd) * ln(a.cost_usd) END')},"
            f" {count_if(f'{POS_COST} AND COALESCE(a.tokens_in, 0) + COALESCE(a.tokens_out, 0) > 0')},"
            f" {total(f'CASE WHEN {POS_TOKENS} THEN ln(a.tokens_in + a.tokens_out) END')},"
            f" {total(f'CASE WHEN {POS_TOKENS} THEN a.cost_usd / (a.tokens_in + a.tokens_out) END')},"
            f" {count_if(f'a.duration_s > 0 AND {WHOLE}')},"
            f" {total(f'CASE WHEN a.duration_s > 0 AND {WHOLE} THEN a.duration_s END')}"
            f" {one} WHERE {where} GROUP BY {key}, a.agent, a.model", params):
        stats(r[0]).arms[r[1]] = ArmAgg(r[2] or 0, r[3] or 0, r[4] or 0.0, r[5] or 0, r[6] or 0,
                                        r[7] or 0.0, r[8] or 0.0, r[9] or 0, r[10] or 0.0, r[11] or 0.0,
                                        r[12] or 0, r[13] or 0.0)
    # verdict patterns: each task's judged attempts folded into one string, then counted per pattern
    # (a task that ended unverified counts UNVERIFIED_WEIGHT of a task)
    item = "a.agent || ':' || a.model || '=' || " + flag("a.verdict IN ('passed','unverified')")
    weak = flag("a.verdict = 'unverified'")
    for group, pattern, count in db.execute(
            f"SELECT key, pattern, {total(f'CASE WHEN weak = 1 THEN {UNVERIFIED_WEIGHT} ELSE 1 END')} FROM ("
            f" SELECT {key} AS key, MAX({weak}) AS weak, {memory.dialect.tab_joined(item)} AS pattern"
            f" {one} WHERE {where} AND a.verdict IN {EVIDENCE_SQL} GROUP BY {key}, t.id) p"
            " GROUP BY key, pattern", params):
        tried, passed = set(), set()
        for item in pattern.split("\t"):
            arm, _, ok = item.rpartition("=")
            tried.add(arm)
            if ok == "1":
                passed.add(arm)
        k = (frozenset(tried), frozenset(passed))
        st = stats(group)
        st.patterns[k] = st.patterns.get(k, 0) + count
        st.n_tasks += count
    for r in [] if not with_pairs else db.execute(
            f"SELECT {key}, a.agent || ':' || a.model, b.agent || ':' || b.model, COUNT(*), {total('ln(a.cost_usd)')},"
            f" {total('ln(a.cost_usd) * ln(a.cost_usd)')}, {total('ln(a.cost_usd) * ln(b.cost_usd)')}"
            f" {two} WHERE {where} AND {POS_COST} AND {POS_COST.replace('a.', 'b.')}"
            f" GROUP BY {key}, a.agent, a.model, b.agent, b.model", params):
        stats(r[0]).pairs[(r[1], r[2])] = [r[3], r[4], r[5], r[6]]
    return out


@dataclass
class Chains:
    """Finished tasks under one group, summed over every chain of finer groups below it.

    A task's chain is the tuple of its group keys below ``root``, coarse to fine; every
    prefix of it (``()`` is the root itself) is a group. Per group: ``tasks[prefix]``, the
    number of tasks in it, and ``sums[prefix] = {arm: [judged attempts, score sum]}``.
    """

    root: str
    tasks: dict[tuple[str, ...], int] = field(default_factory=dict)
    sums: dict[tuple[str, ...], dict[str, list]] = field(default_factory=dict)

    @property
    def version(self) -> int:
        """Changes with every task added: the number of tasks under the root."""
        return self.tasks.get((), 0)

    def add_task(self, groups: Sequence[str], arms: dict[str, list]) -> None:
        if self.root not in groups or not arms:
            return
        chain = tuple(groups[list(groups).index(self.root) + 1:])
        for depth in range(len(chain) + 1):
            key = chain[:depth]
            self.tasks[key] = self.tasks.get(key, 0) + 1
            sums = self.sums.setdefault(key, {})
            for arm, (n, s) in arms.items():
                mine = sums.get(arm)
                if mine is None:
                    sums[arm] = [n, s]
                else:
                    mine[0] += n
                    mine[1] += s


def task_outcomes(memory: Memory, scope: str, after: int = 0, upto: int | None = None,
                  root: str | None = None, first_row: int = 0) -> list[tuple[tuple[str, ...], dict[str, list]]]:
    """Per finished task of ``scope`` with after < rowid <= upto (and in group ``root``, if given, from
    its ``task_groups`` row ``first_row`` on): its group keys coarse to fine and {arm: [judged attempts,
    score sum]} (unverified ones weighted)."""
    where, params = _finished(scope, after, upto)
    if root is not None:
        tasks = "FROM task_groups r JOIN tasks t ON t.id = r.task_id"
        where = f"r.source = ? AND r.key = ? AND r.rowid >= ? AND {where}"
        params = [scope, root, first_row, *params]
    else:
        tasks = "FROM tasks t"
    groups: dict[str, dict[int, str]] = {}
    for task, level, key in memory.db.execute(
            f"SELECT t.id, g.level, g.key {tasks} JOIN task_groups g ON g.task_id = t.id WHERE {where}", params):
        groups.setdefault(task, {})[level] = key
    arms = _arm_scores(memory, tasks, where, params)
    return [(tuple(levels[k] for k in sorted(levels)), arms[task]) for task, levels in groups.items() if task in arms]


def task_scores(memory: Memory, task_ids: Sequence[str]) -> dict[str, dict[str, list]]:
    """Per (finished) task of ``task_ids``: {arm: [judged attempts, score sum]}, as in ``task_outcomes``."""
    if not task_ids:
        return {}
    return _arm_scores(memory, "FROM tasks t", f"t.finished_at IS NOT NULL AND t.id IN ({','.join('?' * len(task_ids))})",
                       list(task_ids))


def _arm_scores(memory: Memory, tasks: str, where: str, params: list) -> dict[str, dict[str, list]]:
    arms: dict[str, dict[str, list]] = {}
    for task, arm, n, s in memory.db.execute(
            f"SELECT t.id, a.agent || ':' || a.model, {total(WEIGHT)}, {total(WEIGHTED_SCORE)} {tasks}"
            f" JOIN attempts a ON a.task_id = t.id WHERE {where} AND a.verdict IN {EVIDENCE_SQL}"
            " GROUP BY t.id, a.agent, a.model", params):
        arms.setdefault(task, {})[arm] = [n, s]
    return arms


def scope_arms(memory: Memory, scope: str, after: int = 0, upto: int | None = None) -> GroupStats:
    """Token and cost sums per arm over every finished task of ``scope`` (the cost prior's fallback)."""
    where, params = _finished(scope, after, upto)
    out = GroupStats()
    for r in memory.db.execute(
            f"SELECT a.agent || ':' || a.model, {count_if(POS_TOKENS)},"
            f" {total(f'CASE WHEN {POS_TOKENS} THEN ln(a.tokens_in + a.tokens_out) END')},"
            f" {total(f'CASE WHEN {POS_TOKENS} THEN a.cost_usd / (a.tokens_in + a.tokens_out) END')}"
            f" FROM tasks t JOIN attempts a ON a.task_id = t.id WHERE {where} GROUP BY a.agent, a.model", params):
        out.arms[r[0]] = ArmAgg(n_tok=r[1] or 0, s_ltok=r[2] or 0.0, s_ptok=r[3] or 0.0)
    return out


@dataclass
class Bounds:
    """The largest cost and the most tokens of one attempt ever recorded in a scope (0: none yet): what
    bounds any cost estimate (acr_cli.routing.learned)."""

    cost: float = 0.0
    tokens: float = 0.0

    def widen(self, other: "Bounds") -> None:
        self.cost, self.tokens = max(self.cost, other.cost), max(self.tokens, other.tokens)


def scope_bounds(memory: Memory, scope: str, after: int = 0, upto: int | None = None) -> Bounds:
    """:class:`Bounds` over the finished tasks of ``scope`` with after < rowid <= upto."""
    where, params = _finished(scope, after, upto)
    row = memory.db.execute(
        "SELECT MAX(a.cost_usd), MAX(COALESCE(a.tokens_in, 0) + COALESCE(a.tokens_out, 0))"
        f" FROM tasks t JOIN attempts a ON a.task_id = t.id WHERE {where}", params).fetchone()
    return Bounds(float(row[0] or 0.0), float(row[1] or 0.0)) if row else Bounds()


def recent_failures(memory: Memory, scope: str, sha256: str, project: str | None, since: str) -> list[str]:
    """The arms (ids, newest first) whose attempts failed a finished task of ``scope`` made since ``since`` (ISO
    time) with this very request (its SHA-256) in this project (the task being routed is not finished)."""
    rows = memory.db.execute(
        "SELECT a.agent || ':' || a.model, MAX(a.id) FROM tasks t JOIN attempts a ON a.task_id = t.id"
        f" WHERE t.source = ? AND t.created_at >= ? AND t.prompt_sha256 = ? AND t.finished_at IS NOT NULL AND {FAILED}"
        f" AND {'t.project IS NULL' if project is None else 't.project = ?'}"
        " GROUP BY a.agent, a.model ORDER BY 2 DESC",
        [scope, since, sha256] + ([] if project is None else [project])).fetchall()
    return [r[0] for r in rows]


def first_attempts(memory: Memory, scope: str, window: int = WINDOW) -> list[tuple[tuple[str, ...], str, float, float]]:
    """The first attempt of each of the ``window`` newest finished tasks of ``scope``, oldest first, when its
    verdict judges the arm: (the task's groups coarse to fine, arm id, score, USD). What a one-action
    bandit would have learned from those tasks (:func:`acr_cli.routing.bandits.warm`)."""
    rows = memory.db.execute(
        f"SELECT t.id, a.agent || ':' || a.model, a.verdict, {SCORE}, COALESCE(a.cost_usd, 0)"
        f" FROM (SELECT id, rowid AS r FROM tasks {memory.dialect.index_hint('tasks_source')}"
        "       WHERE source = ? AND finished_at IS NOT NULL"
        "       ORDER BY rowid DESC LIMIT ?) t"
        " JOIN attempts a ON a.task_id = t.id AND a.seq = (SELECT MIN(seq) FROM attempts WHERE task_id = t.id)"
        " ORDER BY t.r", (scope, window)).fetchall()
    rows = [r for r in rows if r[2] in JUDGED]
    groups: dict[str, dict[int, str]] = {}
    ids = [r[0] for r in rows]
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for task, level, key in memory.db.execute(
                f"SELECT task_id, level, key FROM task_groups WHERE task_id IN ({','.join('?' * len(chunk))})", chunk):
            groups.setdefault(task, {})[level] = key
    return [(tuple(v for _, v in sorted(groups.get(t, {}).items())), arm, float(score or 0.0), float(cost))
            for t, arm, _, score, cost in rows]


def max_task_rowid(memory: Memory, scope: str) -> int:
    """The newest finished task of ``scope`` (walks the source index backwards: cheap on a big memory)."""
    row = memory.db.execute(f"SELECT rowid FROM tasks {memory.dialect.index_hint('tasks_source')}"
                            " WHERE source = ? AND finished_at IS NOT NULL ORDER BY rowid DESC LIMIT 1", (scope,)).fetchone()
    return row[0] if row else 0


def _before_first(memory: Memory, scope: str) -> int | None:
    """The rowid just before the scope's first task (an index walk), or None while it has none."""
    row = memory.db.execute(f"SELECT rowid FROM tasks {memory.dialect.index_hint('tasks_source')}"
                            " WHERE source = ? ORDER BY rowid LIMIT 1", (scope,)).fetchone()
    return row[0] - 1 if row else None


class GroupCache:
    """``group_stats`` for the keys a policy asks for, kept current by adding newly finished tasks.

    New tasks are found by rowid above the newest finished task seen so far; a task that
    another process started earlier but finishes later is read by the next process, not
    this one (a cache lives as long as one ``acr run`` or one replay).
    """

    def __init__(self, memory: Memory, scope: str):
        self.memory = memory
        self.scope = scope
        self.mark = max_task_rowid(memory, scope)
        self._first = _before_first(memory, scope)
        self.stats: dict[str, GroupStats] = {}
        self.version: dict[str, int] = {}  # bumps when a group's data changes
        self._overall: GroupStats | None = None
        self._bounds: Bounds | None = None
        self._chains: dict[str, Chains] = {}
        self._near: tuple[tuple, list[Near]] | None = None

    def overall(self, refresh: bool = True) -> GroupStats:
        """Per-arm token and cost sums over the whole scope."""
        if refresh:
            self.refresh()
        if self._overall is None:
            self._overall = scope_arms(self.memory, self.scope, 0, self.mark)
        return self._overall

    @property
    def position(self) -> int:
        """Where the scope's stream stands: the newest finished task's rowid counted from the scope's first
        task (in a replay, whose tasks are written one after another, the number of tasks so far), so that
        it does not depend on what else the memory holds."""
        if self._first is None:  # the scope had no task when the cache was made: its first one starts it
            self._first = _before_first(self.memory, self.scope)
            if self._first is None:
                return 0
        return max(self.mark - self._first, 0)

    def bounds(self, refresh: bool = True) -> Bounds:
        """The largest cost and the most tokens of one attempt among the scope's newest ``WINDOW`` tasks
        (what routing reads; a bound that follows prices as they change, and an index walk, not a scan)."""
        if refresh:
            self.refresh()
        if self._bounds is None:
            row = self.memory.db.execute(
                f"SELECT rowid FROM tasks {self.memory.dialect.index_hint('tasks_source')}"
                " WHERE source = ? AND finished_at IS NOT NULL ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                (self.scope, WINDOW - 1)).fetchone()
            self._bounds = scope_bounds(self.memory, self.scope, row[0] - 1 if row else 0, self.mark)
        return self._bounds

    def failures(self, prompt: str, project: str | None, hours: float) -> list[str]:
        """The arms that failed this very request in this project within ``hours`` (live runs only: a
        replay never meets a request twice)."""
        if self.scope != "live" or not prompt:
            return []
        import hashlib
        import time

        from acr_cli.memory.base import now_iso

        sha = hashlib.sha256(prompt.encode()).hexdigest()  # as the task's record has it (memory.writes)
        return recent_failures(self.memory, self.scope, sha, project, now_iso(time.time() - hours * 3600))

    def chains(self, root: str, refresh: bool = True) -> Chains:
        """Every finished task under group ``root`` by its chain of finer groups (windowed like ``get``)."""
        if refresh:
            self.refresh()
        ch = self._chains.get(root)
        if ch is None:
            ch = self._chains[root] = Chains(root)
            start, first_row = _window_start(self.memory, self.scope, root, WINDOW)
            for groups, arms in task_outcomes(self.memory, self.scope, max(start - 1, 0), self.mark, root=root,
                                              first_row=first_row):
                ch.add_task(groups, arms)
        return ch

    def similar(self, text: str, project: str | None) -> list[Near]:
        """The finished tasks of the scope whose requests read most like ``text`` (same project first),
        each with its aggregates (see :mod:`acr_cli.memory.similar`; ``similar.outcomes`` adds the
        verdicts to show)."""
        self.refresh()
        key = (text, project, self.mark)
        if self._near is not None and self._near[0] == key:
            return self._near[1]
        found = similar.find(self.memory, self.scope, text, project=project, upto=self.mark)
        ids = [f.task_id for f in found]
        stats, scores = task_stats(self.memory, ids), task_scores(self.memory, ids)
        near = [Near(f, stats[f.task_id], scores.get(f.task_id, {})) for f in found if f.task_id in stats]
        self._near = (key, near)
        return near

    def show_outcomes(self, near: Sequence[Near]) -> None:
        similar.outcomes(self.memory.db, [n.task for n in near])

    def get(self, keys: Sequence[str], refresh: bool = True) -> list[GroupStats]:
        """The stats of these groups; ``refresh=False``: as of the last refresh (groups not read yet are read
        up to that point)."""
        if refresh:
            self.refresh()
        missing = [k for k in keys if k not in self.stats]
        if missing:
            coarsest = keys[:1]
            for k, st in group_stats(self.memory, self.scope, missing, 0, self.mark, window=WINDOW,
                                     pairs=coarsest).items():
                self.stats[k] = st
                self.version[k] = 0
        return [self.stats[k] for k in keys]

    def refresh(self) -> None:
        top = max_task_rowid(self.memory, self.scope)
        if top == self.mark:
            return
        if self._overall is not None:
            self._overall.add(scope_arms(self.memory, self.scope, self.mark, top))
        if self._bounds is not None:
            self._bounds.widen(scope_bounds(self.memory, self.scope, self.mark, top))
        if self.stats:
            for k, delta in group_stats(self.memory, self.scope, None, self.mark, top).items():
                if k in self.stats:  # groups not loaded yet are read in full when first asked for
                    self.stats[k].add(delta)
                    self.version[k] += 1
        if self._chains:
            for groups, arms in task_outcomes(self.memory, self.scope, self.mark, top):
                for ch in self._chains.values():
                    ch.add_task(groups, arms)
        self.mark = top
