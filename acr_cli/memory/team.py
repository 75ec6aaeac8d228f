"""A team's shared memory: one PostgreSQL database every acr of a team records into and routes from.

With ``memory = "postgresql://..."`` an ``acr run`` uses two memories:

* the **local** one, the SQLite file ``<data>/memory.sqlite``: the run records its task and attempts
  there first, as without a server, and marks the task for upload (table ``uploads``); arm health
  (whose logins work on *this* machine) stays there too;
* the **shared** one on the server: routing reads it, so every member's history counts.

After the run, :func:`sync` uploads every pending task of this server (this run's and any an earlier
run could not send) and copies the server's newest tasks into the local file (the read cache:
``downloads`` says how far it goes). Routing reads only the newest ``WINDOW`` tasks
(acr_cli.memory.aggregates), so with that many copied, a run whose server is away routes from
the local file as it would have from the server, at the time of the last sync.

Uploads are idempotent: a task is inserted with its attempts and groups in one server transaction,
and a task already there (a retry, a crash after the server committed, two machines or processes
syncing at once) is skipped whole (``ON CONFLICT DO NOTHING`` on its id). Only tasks recorded while
this server was the memory are uploaded: pointing acr at a server does not send the history you
had before (``acr memory export`` / ``acr memory import --memory URL`` does, on purpose).

``share_prompts = false`` (config.toml or .acr.toml): the request text and the agents' answers stay in
the local file; the server gets the request's SHA-256 and everything else (kind, project, groups,
attempts, verdicts, costs, how the request was read, without the classifier's reasons, which quote
the request), with every quote of the request taken out of each text it sends (an agent's error
that echoes it, a verifier's output: :func:`keep_private`). Similar-task evidence then comes only from
the tasks that were shared with their text.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from acr_cli.errors import MemoryFileError
from acr_cli.memory import shapes
from acr_cli.memory.aggregates import WINDOW, max_task_rowid
from acr_cli.memory.base import now_iso
from acr_cli.memory.postgres import ServerUnreachable, masked
from acr_cli.memory.store import Memory

P = TypeVar("P")
BATCH = 200  # tasks per server transaction when uploading or copying
# a target's finished tasks not uploaded yet (a task still running is sent once it has finished)
_PENDING = ("FROM uploads u JOIN tasks t ON t.id = u.task_id"
            " WHERE u.target = ? AND u.uploaded_at IS NULL AND t.finished_at IS NOT NULL")


@dataclass
class SyncResult:
    uploaded: int = 0  # tasks the server did not have
    already: int = 0  # tasks it had (a retry, another process)
    downloaded: int = 0  # the server's tasks copied into the local file
    pending: int = 0  # left to upload
    error: str | None = None  # why the sync stopped early
    refused: list[dict[str, str]] = field(default_factory=list)  # {"task_id", "reason"}: tasks the server refused

    def to_json(self) -> dict[str, Any]:
        return {"uploaded": self.uploaded, "already_there": self.already, "downloaded": self.downloaded,
                "pending": self.pending, "error": self.error, "refused": self.refused}


@dataclass
class TeamMemory:
    """A team's shared memory as a run sees it (a :class:`acr_cli.memory.interface.MemoryStore`): the local
    memory, which records first and queues uploads (its spool), and the server's (None while it is away),
    which routing reads; a server that goes away mid-run leaves routing to the local copy."""

    url: str
    local: Memory
    server: Memory | None
    share_prompts: bool = True
    offline: str | None = None  # why the server could not be used
    synced: SyncResult = field(default_factory=SyncResult)
    _note: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return masked(self.url)

    @property
    def records(self) -> Memory:
        """Where runs record, and arm health (this machine's logins and quota) is kept: the local memory."""
        return self.local

    @property
    def reads(self) -> Memory:
        """What routing reads: the server's memory, else the local copy."""
        return self.server or self.local

    def policy(self, make: Callable[[Memory], P]) -> P:
        """The policy ``make`` builds on the server's memory, rebuilt on the local copy if the server goes away."""
        return _FailoverPolicy(self, make)  # type: ignore[return-value]  # (the policy's own methods, forwarded)

    def finish(self) -> dict[str, Any]:
        """After a run: where routing read, and what the sync did (uploads, the refreshed local copy)."""
        return {"server": self.label, "routed_from": "server" if self.server else "local copy", **self.sync().to_json()}

    @property
    def note(self) -> str | None:
        """What a command says when the server is away (None when it is there); read once."""
        if self.server is not None:
            return None
        if self._note is None:
            self._note = self._offline_note()
        return self._note

    def pending(self) -> int:
        """Finished tasks recorded here for this server and not uploaded yet (the spool)."""
        return pending(self.local, self.label)

    def copied_at(self) -> str | None:
        """When the local copy of the server's newest tasks was last refreshed (None: never)."""
        return copied_at(self.local, self.label)

    def _offline_note(self) -> str:
        at = self.copied_at()
        since = f"as of {at}" if at else "never copied: only this machine's own runs"
        return (f"shared memory {self.label} is unreachable ({_short(self.offline)}): routing from the local copy "
                f"({since}); this run is recorded locally and uploaded by the next run or `acr memory sync`")

    def lost(self, why: str) -> None:
        """The server went away while the command used it: what is left reads and records locally, and the
        next run or ``acr memory sync`` uploads it."""
        server, self.server, self.offline = self.server, None, why
        if server is not None:
            try:
                server.close()
            except Exception:  # a connection the server already dropped
                pass

    def recorded(self, task_id: str) -> None:
        """A task this command recorded into the local memory: it goes to the server (now or later)."""
        self.local._write("INSERT INTO uploads (task_id, target, with_text) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                          (task_id, self.label, int(self.share_prompts)))

    def sync(self) -> SyncResult:
        """Upload what is pending and refresh the local copy; a server gone mid-way leaves the rest pending."""
        result = SyncResult()
        if self.server is not None:
            try:
                result.uploaded, result.already, result.refused = upload(self.local, self.server, self.label)
                result.downloaded = download(self.server, self.local, self.label)
            except MemoryFileError as e:  # the server away, or a local file that cannot be written
                result.error = e.message
        elif self.offline:
            result.error = self.offline
        result.pending = self.pending()
        self.synced = result
        return result

    def close(self) -> None:
        try:
            if self.server is not None:
                self.server.close()
        finally:
            self.local.close()


class _FailoverPolicy:
    """A run's policy reading a team's server; if the server goes away mid-run, the same policy reading
    the local copy takes over (the run is recorded locally as always and uploaded later). It answers as the
    policy it wraps (acr_cli.routing.base.Policy); only choosing the next arm reads memory mid-run."""

    def __init__(self, team: TeamMemory, make: Callable[[Memory], Any]):
        self._team, self._make = team, make
        self._inner = make(team.reads)

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def exhausted(self) -> str:
        return self._inner.exhausted

    def rank(self, ctx: Any, state: Any = None) -> Any:
        return self._inner.rank(ctx, state)

    def similar_effect(self, ctx: Any, state: Any = None) -> Any:
        return self._inner.similar_effect(ctx, state)

    def task_done(self, ctx: Any, state: Any) -> None:
        self._inner.task_done(ctx, state)

    def next(self, ctx: Any, state: Any) -> Any:
        try:
            return self._inner.next(ctx, state)
        except ServerUnreachable as e:
            if self._team.server is None:
                raise
            self._team.lost(e.message)
            self._inner = self._make(self._team.local)
            return self._inner.next(ctx, state)


def open_team(url: str, local_path: Path, share_prompts: bool = True, required: bool = False) -> TeamMemory:
    """The local memory and the server's. ``required``: a server that cannot be reached is an error
    (``acr memory sync``); otherwise the team works offline (``acr run``, ``acr route``) while the server is
    away, and a server that refuses the URL (no such database or role, a wrong password) is an error."""
    local = Memory.open(local_path)
    try:
        server = Memory.open(url)
    except ServerUnreachable as e:
        if required or not e.away:  # a wrong URL, role or password is for the user to fix, not to work around
            local.close()
            raise
        return TeamMemory(url, local, None, share_prompts, offline=e.message)
    except MemoryFileError:
        local.close()
        raise
    return TeamMemory(url, local, server, share_prompts)


def recorded_for(local: Memory, target: str) -> set[str]:
    """The tasks this machine recorded for ``target``, uploaded or not."""
    return {r[0] for r in local.db.execute("SELECT task_id FROM uploads WHERE target = ?", (target,))}


def copied_at(local: Memory, target: str) -> str | None:
    """When the local copy of ``target``'s newest tasks was last refreshed (None: never)."""
    row = local.db.execute("SELECT at FROM downloads WHERE target = ?", (target,)).fetchone()
    return row[0] if row else None


def server_version(server: Memory) -> str:
    """The PostgreSQL server's version (``acr doctor`` shows it)."""
    return server.db.execute("SHOW server_version").fetchone()[0]


def pending(local: Memory, target: str) -> int:
    """Finished tasks recorded for ``target`` and not uploaded yet."""
    return local.db.execute(f"SELECT COUNT(*) {_PENDING}", (target,)).fetchone()[0]


def upload(local: Memory, server: Memory, target: str) -> tuple[int, int, list[dict[str, str]]]:
    """Send the pending finished tasks of ``target`` to the server, oldest first, each with or without its texts
    as ``share_prompts`` was when it was recorded; returns (added, already there, refused).

    A task the server refuses (a value it cannot store) must not hold back everyone's others: its chunk is
    sent again a task at a time, and the refused task is returned with the server's reason
    (``{"task_id", "reason"}``). It stays pending in the local file, tried again at every sync, until it is forgotten
    (``acr memory forget ID``) or a newer acr can send it. A server that goes away stops the upload."""
    rows = local.db.execute(f"SELECT u.task_id, u.with_text {_PENDING} ORDER BY t.rowid", (target,)).fetchall()
    ids, private = [r[0] for r in rows], {r[0] for r in rows if not r[1]}
    added = already = 0
    refused: list[dict[str, str]] = []
    for i in range(0, len(ids), BATCH):
        chunk = ids[i:i + BATCH]
        records = local.tasks(source=None, ids=chunk, oldest_first=True)
        for r in records:
            if r["id"] in private:  # the request and the answers stay here; the hash and the rest travel
                keep_private(r)
        try:
            a, s = server.add_tasks(records)  # one server transaction: all of the chunk or none
            sent = chunk
        except ServerUnreachable:
            raise
        except MemoryFileError:  # a record the server refuses: find it, and send the others
            a = s = 0
            sent = []
            for r in records:
                try:
                    one = server.add_tasks([r])
                except ServerUnreachable:
                    raise
                except MemoryFileError as e:
                    refused.append({"task_id": r["id"], "reason": e.message})
                    continue
                a, s = a + one[0], s + one[1]
                sent.append(r["id"])
        added, already = added + a, already + s
        if sent:
            marks = ",".join("?" * len(sent))
            local._write(f"UPDATE uploads SET uploaded_at = ? WHERE task_id IN ({marks})", [now_iso(), *sent])
    return added, already, refused


# Columns a private task's record keeps as they are: identities, times and names from acr's own vocabulary,
# never text that could quote the request. Every other text column is scrubbed (keep_private).
_STRUCTURAL = frozenset({"id", "task_id", "created_at", "finished_at", "started_at", "source", "project",
                         "prompt_sha256", "kind", "language", "size", "policy", "final_arm", "oracle_arm", "agent",
                         "model", "verdict", "cost_source"})
QUOTE_RUN = 16  # characters in a row a text shares with the request that count as quoting it
QUOTE_MIN = 4  # a shorter request, or line of it, is not looked for (it would be every "test" or "fix")
NOT_SHARED = "[request not shared]"


def keep_private(r: dict[str, Any]) -> None:
    """A task recorded with ``share_prompts = false`` as the server gets it: no request, no answers, no classifier
    reasons, and nothing that quotes the request in any other text column of the task or its attempts (an agent's
    error that echoes it, a verifier's output, a path): every run of :data:`QUOTE_RUN` characters shared with the
    request (as kept, whitespace collapsed, or JSON-escaped), and the request or any line of it whole, become
    :data:`NOT_SHARED`. JSON columns are scrubbed value by value, so they stay JSON."""
    scrub = _scrubber(r.get("prompt"))
    r["prompt"] = None
    r["context"] = _unquoted(r.get("context"))
    for a in r.get("attempts") or []:
        a["text"] = None
    for row in [r, *(r.get("attempts") or [])]:
        for key, value in row.items():
            if isinstance(value, str) and key not in _STRUCTURAL:
                row[key] = _scrub_column(value, scrub)


def _scrub_column(value: str, scrub) -> str:
    if value[:1] in ("{", "["):
        try:
            data = json.loads(value)
        except ValueError:
            return scrub(value)
        return json.dumps(_scrub_values(data, scrub))
    return scrub(value)


def _scrub_values(value: Any, scrub) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_values(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_values(v, scrub) for k, v in value.items()}
    return value


def _scrubber(prompt: str | None):
    """A function that takes every quote of ``prompt`` out of a text (see :func:`keep_private`)."""
    import re

    if not prompt or not prompt.strip():
        return lambda text: text
    forms = {prompt, " ".join(prompt.split()), json.dumps(prompt)[1:-1], json.dumps(prompt, ensure_ascii=False)[1:-1]}
    grams = {f[i:i + QUOTE_RUN] for f in forms for i in range(len(f) - QUOTE_RUN + 1)}
    pieces = {p for f in forms for p in [f.strip(), *(line.strip() for line in f.splitlines())]
              if QUOTE_MIN <= len(p) < QUOTE_RUN}  # (longer ones are runs)
    whole = re.compile("|".join(rf"(?<!\w){re.escape(p)}(?!\w)" for p in sorted(pieces, key=len, reverse=True))) \
        if pieces else None

    def scrub(text: str) -> str:
        spans: list[list[int]] = []
        for i in range(len(text) - QUOTE_RUN + 1):
            if text[i:i + QUOTE_RUN] in grams:
                if spans and i <= spans[-1][1]:
                    spans[-1][1] = i + QUOTE_RUN
                else:
                    spans.append([i, i + QUOTE_RUN])
        if spans:
            out, pos = [], 0
            for start, end in spans:
                out += [text[pos:start], NOT_SHARED]
                pos = end
            text = "".join(out) + text[pos:]
        return whole.sub(NOT_SHARED, text) if whole is not None else text

    return scrub


def _unquoted(context: str | None) -> str | None:
    """How a request was read, without the reasons: they quote the request ("bug_fix +3 for 'the parser
    crashes'"), which ``share_prompts = false`` keeps on this machine."""
    if not context:
        return context
    read = shapes.load("context", context)
    if isinstance(read, dict):
        read.pop("reasons", None)
        return json.dumps(read)
    return None


def download(server: Memory, local: Memory, target: str, window: int = WINDOW) -> int:
    """Copy the server's newest finished tasks (at most ``window``, the ones routing reads) that the local
    memory does not have; returns how many were added."""
    row = local.db.execute("SELECT mark FROM downloads WHERE target = ?", (target,)).fetchone()
    mark = row[0] if row else 0
    top = max_task_rowid(server, "live")
    added = 0
    if top > mark:
        ids = [r[0] for r in server.db.execute(
            "SELECT id FROM tasks WHERE source = 'live' AND finished_at IS NOT NULL AND rowid > ? AND rowid <= ?"
            " ORDER BY rowid DESC LIMIT ?", (mark, top, window))][::-1]
        for i in range(0, len(ids), BATCH):
            added += local.add_tasks(server.tasks(source=None, ids=ids[i:i + BATCH], oldest_first=True))[0]
    local._write("INSERT INTO downloads (target, mark, at) VALUES (?, ?, ?) ON CONFLICT (target) DO UPDATE"
                 " SET mark = excluded.mark, at = excluded.at", (target, max(top, mark), now_iso()))
    return added


def latency_ms(server: Memory, tries: int = 3) -> float:
    """The best of a few round trips to the server (``SELECT 1``), in milliseconds."""
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        server.db.execute("SELECT 1").fetchone()
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= 160 else text[:157] + "..."
