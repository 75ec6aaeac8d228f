"""Similar past tasks: which earlier requests read most like this one, and how alike they are.

Two structures in the memory file, both kept by :mod:`acr_cli.memory.store` and ``db``:

* ``task_text``, an SQLite FTS5 index over the (redacted) request texts of ``tasks``, kept by
  triggers: a task inserted is indexed, a task forgotten leaves the index in the same statement.
  It finds candidates fast (BM25 over the rarest words of the request) however large memory is.
* ``prompt_terms``: per scope (``live``, or one replay run), in how many requests each word
  occurs (the row with the empty word counts the requests). It gives the words their weight
  (inverse document frequency) from what the router itself has seen in its scope, never from
  other scopes: a replay must not weigh words by tasks it has not met yet.

A candidate's **similarity** is the cosine of the two requests' word vectors, each word weighted
``(1 + ln tf) * ln((N + 1) / (df + 1))``: a word every request has weighs nothing, so two long
texts that share only their English score near 0, and a request sent again scores 1. The
similarity is what a neighbour's outcomes count for in routing (acr_cli.routing.learned).

Words are runs of letters and digits (``[^\\W_]+``, lower-cased, as FTS5's ``unicode61``
tokenizer splits them); one-letter words and pure numbers (issue numbers, line numbers,
addresses) are left out; only the first ``MAX_CHARS`` of a request count.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

NEIGHBOURS = 10  # the most similar earlier tasks routing reads
CANDIDATES = 50  # candidates taken from the index (by BM25) before the similarity decides
QUERY_WORDS = 24  # the request's most telling (rarest) words the index is asked for ...
# ... while the requests holding them number at most this: a bound on the work (the index ranks each
# such request, about 1.2 us apiece: 5,000 cost ~6 ms, bench/perf.py), not on quality, since the
# rarest words are the ones that find a request's near copies; a memory of a few thousand tasks
# (every benchmark replay) never reaches it
POSTINGS = 5_000
MAX_CHARS = 20_000
_WORD = re.compile(r"[^\W_]+")
DOCS = ""  # the prompt_terms row that counts a scope's requests


def words(text: str | None) -> Counter:
    """Term frequencies of a request (see the module docstring for what a word is)."""
    if not text:
        return Counter()
    return Counter(w for w in _WORD.findall(text[:MAX_CHARS].lower()) if len(w) > 1 and not w.isdigit())


def count(db: Any, items: Iterable[tuple[str, str | None]], sign: int = 1) -> None:
    """Add (``sign`` 1) or remove (-1) requests, given as (scope, text), to their scope's word counts."""
    rows: Counter = Counter()
    for scope, text in items:
        w = words(text)
        if not w:
            continue
        rows[(scope, DOCS)] += sign
        for term in w:
            rows[(scope, term)] += sign
    if not rows:
        return
    keys = sorted(rows)  # one order for every writer: two sharing a server cannot deadlock on these rows
    db.executemany("INSERT INTO prompt_terms (source, term, df) VALUES (?, ?, ?)"
                   " ON CONFLICT (source, term) DO UPDATE SET df = prompt_terms.df + excluded.df",
                   [(s, t, rows[(s, t)]) for s, t in keys])
    if sign < 0:
        db.executemany("DELETE FROM prompt_terms WHERE source = ? AND term = ? AND df <= 0", keys)


@dataclass
class Similar:
    """One earlier task and how much it reads like the request."""

    task_id: str
    similarity: float
    project: str | None
    prompt: str
    created_at: str
    same_project: bool = False
    outcome: dict[str, str] = field(default_factory=dict)  # arm id -> verdict, in the order tried


def find(memory: Any, scope: str, text: str, *, project: str | None = None, upto: int | None = None,
         k: int = NEIGHBOURS) -> list[Similar]:
    """The ``k`` finished tasks of ``scope`` (rowid <= ``upto``) whose requests read most like ``text``,
    most similar first; tasks of the same ``project`` are looked for first and come first."""
    db, dialect = memory.db, memory.dialect
    query = words(text)
    # (an SQLite without FTS5, or a read-only memory from before the index, has none: no similar tasks)
    if not query or not dialect.has_text_index(db):
        return []
    docs = _docs(db, scope)
    df = _df(db, scope, query)
    qvec = _vector(query, df, docs)
    qnorm = math.sqrt(sum(v * v for v in qvec.values()))
    where = "t.source = ? AND t.finished_at IS NOT NULL" + (" AND t.rowid <= ?" if upto is not None else "")
    bounds = [scope, *([upto] if upto is not None else [])]
    if qnorm <= 0 and docs > 0:  # every word of it is in every request counted: only its copies tell
        return _copies(db, where, bounds, text, project, k)
    telling = _telling(df)
    if not telling:  # no request has any of its words
        return []
    rows = _candidates(db, dialect, where, [dialect.text_query(telling), *bounds], project)
    texts = {r[0]: words(r[1]) for r in rows}
    df.update(_df(db, scope, {t for w in texts.values() for t in w if t not in query}))
    out = _scored(rows, texts, qvec, qnorm, df, docs, project)
    out.sort(key=lambda s: (not s.same_project, -s.similarity))
    return [s for s in out[:k] if s.similarity > 0]


def _telling(df: dict[str, int]) -> list[str]:
    """The query's rarest words first, while the index has at most POSTINGS entries to read for them: the
    words that tell requests apart, at a bounded cost."""
    telling: list[str] = []
    postings = 0
    for t in sorted(df, key=df.__getitem__)[:QUERY_WORDS]:
        postings += df[t]
        if telling and postings > POSTINGS:
            break
        telling.append(t)
    return telling


def _candidates(db: Any, dialect: Any, where: str, params: list, project: str | None) -> list:
    """Rows (id, prompt, project, created_at) the text index offers: the project's own first, then any."""
    select = "SELECT t.id, t.prompt, t.project, t.created_at "
    rows = []
    if project is not None:
        rows = db.execute(select + dialect.text_candidates(where + " AND t.project = ?", CANDIDATES),
                          [*params, project]).fetchall()
    seen = {r[0] for r in rows}
    return rows + [r for r in db.execute(select + dialect.text_candidates(where, CANDIDATES), params).fetchall()
                   if r[0] not in seen]


def _scored(rows: list, texts: dict[str, Counter], qvec: dict[str, float], qnorm: float, df: dict[str, int],
            docs: int, project: str | None) -> list[Similar]:
    """Each candidate with its cosine similarity to the query (candidates with no weighted word left out)."""
    out = []
    for task_id, prompt, proj, created in rows:
        vec = _vector(texts[task_id], df, docs)
        norm = math.sqrt(sum(v * v for v in vec.values()))
        if norm <= 0:
            continue
        sim = sum(qvec[t] * vec[t] for t in qvec.keys() & vec.keys()) / (qnorm * norm)
        same = project is not None and proj == project
        out.append(Similar(task_id, min(sim, 1.0), proj, _first_line(prompt), created, same))
    return out


def _copies(db: Any, where: str, params: list, text: str, project: str | None, k: int) -> list[Similar]:
    """The newest ``k`` tasks (``where``) whose request is ``text`` itself (same project first): each
    similarity 1. Found by the request's hash, since word weights cannot tell them apart then."""
    sha = hashlib.sha256(text.encode()).hexdigest()
    rows = db.execute(f"SELECT t.id, t.prompt, t.project, t.created_at FROM tasks t WHERE {where}"
                      f" AND t.prompt_sha256 = ? ORDER BY t.rowid DESC LIMIT {CANDIDATES}", [*params, sha]).fetchall()
    out = [Similar(i, 1.0, proj, _first_line(prompt), created, project is not None and proj == project)
           for i, prompt, proj, created in rows]
    out.sort(key=lambda s: not s.same_project)  # stable: newest first within each
    return out[:k]


def outcomes(db: Any, found: Sequence[Similar]) -> None:
    """Fill each task's ``outcome``: arm -> verdict of its attempts, in the order they were made."""
    by_id = {s.task_id: s for s in found}
    if not by_id:
        return
    for task_id, arm, verdict in db.execute(
            "SELECT task_id, agent || ':' || model, verdict FROM attempts"
            f" WHERE task_id IN ({','.join('?' * len(by_id))}) ORDER BY task_id, seq", list(by_id)):
        by_id[task_id].outcome[arm] = verdict


def _docs(db: Any, scope: str) -> int:
    """How many requests the scope has counted."""
    row = db.execute("SELECT df FROM prompt_terms WHERE source = ? AND term = ?", (scope, DOCS)).fetchone()
    return row[0] if row else 0


def _df(db: Any, scope: str, terms: Iterable[str]) -> dict[str, int]:
    """In how many of the scope's requests each term occurs (terms no request has are left out)."""
    terms = [t for t in terms if t != DOCS]
    df: dict[str, int] = {}
    for i in range(0, len(terms), 500):
        chunk = terms[i:i + 500]
        df.update(db.execute(f"SELECT term, df FROM prompt_terms WHERE source = ? AND term IN "
                             f"({','.join('?' * len(chunk))})", [scope, *chunk]).fetchall())
    return df


def _vector(tf: Counter, df: dict[str, int], docs: int) -> dict[str, float]:
    """The request's word weights, (1 + ln tf) x ln((N + 1) / (df + 1)); words of weight 0 left out."""
    out = {}
    for t, n in tf.items():
        w = (1.0 + math.log(n)) * math.log((docs + 1) / (df.get(t, 0) + 1))
        if w > 0:
            out[t] = w
    return out


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""
