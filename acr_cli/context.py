"""The Context of a request, and the rules that classify a prompt into one.

Classification is deterministic and cheap (no model call):

* **kind**: words and phrases that name a kind of work (``KIND_WORDS``, ``KIND_RULES``)
  and the shape of the request (the verb it opens with, pasted error output, a
  question, a description of what goes wrong that asks for nothing, many files or
  layers named) add up per kind; the highest total wins, ties go to the earlier kind
  in ``KIND_WORDS``. Nothing at all: ``explain`` for a question, else ``feature``. A long
  request (more than ``BACKGROUND_WORDS`` words besides its ask) is read by its ask: see
  :func:`_ask`. ``python bench/classifier.py`` measures it on hand-written requests.
* **language**: the language named in the prompt (word or file extension);
  else the project's marker files (``pyproject.toml``, ``package.json``,
  ``Cargo.toml``...); else the most common source extension among the first
  2,000 files of the project.
* **size**: ``large`` for multi-file work or prompts over 1,500 characters,
  ``small`` for prompts naming at most one file and under 200 characters,
  else ``medium``.
* **groups**: the context's place in the hierarchy the router learns over,
  coarse to fine: ``all`` -> ``kind=K`` -> ``kind=K/project=P`` (:func:`context_groups`).
  Each level starts from its parent's estimate, so a misread kind costs little; the
  coarsest level starts from the profile's prior for the kind. The routing
  aggregates read at most the newest 1,000 tasks of a group, so the root stays cheap.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acr_cli.context_words import (
    DESIRE,
    FINITE,
    HEAD_WORDS,
    IMPERATIVES,
    KIND_RULES,
    KIND_WORDS,
    LAYERS,
    TRACE,
)
from acr_cli.project import identity

KINDS = ("bug_fix", "feature", "test_generation", "refactor", "explain", "data_science", "algorithm", "docs",
         "multi_file")

# How often a request the rules read as a kind is of that kind: their precision on the held-out requests,
# short and long (tests/data/requests_heldout.jsonl and requests_long_heldout.jsonl, 126 requests never used
# to tune them; `python bench/classifier.py` prints it, and a test fails when the rules change and this table
# does not). A profile's prior for a kind the rules only guessed is worth this share of the kind's prior, the
# rest the arm's prior for any kind (acr_cli.routing.learned): a guess right half the time should not start
# a task from that kind's figures alone. A kind given with --kind, or a benchmark's label, is sure (1).
KIND_PRECISION = {"bug_fix": 0.5, "feature": 0.5, "test_generation": 0.706, "refactor": 0.778, "explain": 0.9,
                  "data_science": 0.917, "algorithm": 0.909, "docs": 0.857, "multi_file": 0.667}


def kind_sure(kind: str, given: bool) -> float:
    """How likely ``kind`` is the request's real kind: 1 when given, else the rules' measured precision."""
    return 1.0 if given else KIND_PRECISION.get(kind, 1.0)


MULTI_AT = 2.5  # a multi_file score from which a feature or refactor request is read as multi_file
_POLITE = re.compile(r"^(hey|hi|hello|ok(ay)?|so|pls|please|can you|could you|would you|will you|can we|could we|"
                     r"would you mind|i'd like (you )?to|i want (you )?to|i need (you )?to|we need to|let's|lets)"
                     r"\b[\s,:!-]*", re.I)
_ASK_TO_EXPLAIN = {"explain", "describe", "tell", "walk", "clarify", "summarise", "summarize", "help me understand"}
_QUESTION_START = {"why", "how", "what", "what's", "whats", "where", "which", "who", "does", "do", "did", "should",
                   "is it", "is there", "are there", "is this", "are these", "is that"}
_SENTENCE = re.compile(r"[.!?:;\n]")
_CLAUSE = re.compile(r"[.!?:;,\n]")
_TOKEN = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?[*+#]*")
_DIR = re.compile(r"(?<![\w./-])[a-z][\w-]*/(?=[\s,.)]|$)", re.M)
# A test that fails is a bug report ("the checkout test fails since..."), unless the request asks for the test.
_FAILING_TEST = re.compile(r"\b(tests?|specs|test_\w+|test suite)\b[^.\n]{0,40}?\b(fails?|failing|failed|broke|"
                           r"breaks|times out|timed out|flaky|flakes|errors out|is red|hangs)\b", re.I)
_LONG = 20_000  # a longer request is read by its first 16,000 and last 4,000 characters

# A long request (a pasted issue, a spec, a lab handout) is read as a person reads it: by what it asks for.
# Its title, its opening sentence and the sentences that ask (an imperative, a polite request, "you will",
# "we need", "your task"...) are the ask, and their evidence counts in full; the rest is background (what
# the project is, logs, hints, design notes), whose every kind's words turn up by the page. Background
# evidence counts in full up to BACKGROUND_WORDS words of it and is scaled down beyond: a rule found only in
# 1,500 background words counts 150/1,500 of its weight. A request with no more background than that is read
# whole, as every request was before.
BACKGROUND_WORDS = 150
_ASKS = ("you will | you'll | you should | you need to | you must | you have to | you are to | you're to | "
         "your task | your job | your goal | your assignment | the task is | we need | we'd like | we want | "
         "i need | i want | i'd like | i would like | we would like | help me | asking for | asking you | "
         "i'm asking | i am asking | what i need | what we need | please | pls | todo")
_ASK_SPLIT = re.compile(r"(?<=[.!?])\s+|\n")
# Sections a reader skims past for the ask: their sentences are background even when they say "run ...".
_ASIDES = ("background | context | overview | motivation | hint | hints | tip | tips | testing | grading | "
           "rubric | submission | submitting | hand in | handing in | handin | write up | writeup | resources | "
           "references | faq | notes | appendix | alternatives | open questions | non goals | risks | rollout | "
           "timeline | environment | setup | getting started | debugging | collaboration | academic integrity | "
           "policy | what we tried | what i tried | already tried | logs | output")
_ITEM = re.compile(r"^\s*([-*+>]|\d+[.)]|[a-z][.)]|\([a-z0-9]+\))\s")
# A heading: markdown's, a line in bold, a label of at most four words ending in ":" ("Steps to reproduce:"),
# or a numbered section ("2.1 Background", "3. Testing": a number with a dot and at most three words, no
# sentence); at most eight words (_units). A list item ("1. Write tests for ...") is not one.
_HEADING = re.compile(r"^(#{1,6}\s.*|\*\*[^*]+\*\*:?|__[^_]+__:?|(\S+\s+){0,3}\S+:|"
                      r"\d+(\.\d+)*\.?\s+(\S+\s+){0,2}[^\s.!?]+)$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _phrases(spec: str) -> list[str]:
    """``"a {b,c} | d"`` -> ``["a b", "a c", "d"]``, each as its tokens joined by one space."""
    out = []
    for alt in spec.split("|"):
        todo = [alt]
        while todo:
            s = todo.pop()
            i = s.find("{")
            if i < 0:
                out.append(" ".join(s.lower().replace("-", " ").replace("/", " ").split()))
                continue
            j = s.index("}", i)
            todo.extend(s[:i] + choice + s[j + 1:] for choice in s[i + 1:j].split(","))
    return [p for p in out if p]


class _Lexicon:
    """Which of many phrases occur in a text, in one pass over its words."""

    def __init__(self) -> None:
        self.ids: dict[str, list[int]] = {}
        self.lengths: dict[str, set[int]] = {}  # first word -> lengths of the phrases it starts

    def add(self, spec: str, rule: int) -> None:
        for p in _phrases(spec):
            words = p.split(" ")
            self.ids.setdefault(p, []).append(rule)
            self.lengths.setdefault(words[0], set()).add(len(words))

    def find(self, words: list[str]) -> dict[int, str]:
        """rule -> the first phrase of it found in ``words``."""
        found: dict[int, str] = {}
        for i, w in enumerate(words):
            for n in self.lengths.get(w, ()):
                p = w if n == 1 else " ".join(words[i:i + n])
                for rule in self.ids.get(p, ()):
                    found.setdefault(rule, p)
        return found


_WORD_RULES: list[tuple[str, float]] = []  # rule id -> (kind, weight)
_LEX = _Lexicon()
for _kind, _lines in KIND_WORDS.items():
    for _w, _spec in _lines:
        _LEX.add(_spec, len(_WORD_RULES))
        _WORD_RULES.append((_kind, _w))
_RULES = {k: [(re.compile(p, re.I | re.M), w) for p, w in rules] for k, rules in KIND_RULES.items()}
_HEAD = [(k, w, set(_phrases(verbs)), set(_phrases(words))) for k, lines in HEAD_WORDS.items()
         for w, verbs, words in lines]
_DESIRE = set(_phrases(DESIRE))
_ASK = set(_phrases(_ASKS))
_ASIDE = set(_phrases(_ASIDES))
_LAYERS = set(_phrases(LAYERS))


_CONTRACTED = {"what's", "there's", "it's", "that's", "let's", "here's", "who's", "where's", "how's", "he's", "she's"}


def _words(text: str) -> list[str]:
    """Lowercase words; a possessive counts as its noun ("the API's format": "api")."""
    return [w[:-2] if w.endswith("'s") and w not in _CONTRACTED else w
            for w in _TOKEN.findall(text.lower().replace("\u2019", "'"))]


def _starts(words: list[str], phrases: set[str]) -> bool:
    return bool(words) and (words[0] in phrases or " ".join(words[:2]) in phrases or " ".join(words[:3]) in phrases)


def _has(words: list[str], phrases: set[str], start: int = 0, stop: int | None = None) -> str | None:
    """The first of ``phrases`` (up to four words) in ``words[start:stop]``."""
    stop = len(words) if stop is None else min(stop, len(words))
    for i in range(start, stop):
        for n in (1, 2, 3, 4):
            p = " ".join(words[i:i + n])
            if p in phrases:
                return p
    return None


def _strip_polite(text: str) -> tuple[str, bool]:
    """``text`` without a polite opening ("hey,", "please", "can you"), and whether that opening asked
    for work ("can you add X?") rather than an explanation ("can you explain X?")."""
    polite = False
    for _ in range(3):
        m = _POLITE.match(text)
        if not m or not m.group(0):
            break
        polite = polite or m.group(1).lower().startswith(("can", "could", "would", "will", "i'", "i ", "we", "let"))
        text = text[m.end():]
    return text, polite and not _starts(_words(text[:40]), _ASK_TO_EXPLAIN)


def _clauses(text: str, split: re.Pattern) -> list[list[str]]:
    """The words of each sentence (or clause) of ``text``, without polite openings."""
    out = []
    for part in split.split(text):
        words = _words(_strip_polite(part.strip(" \t*-#>`'\"()[]"))[0])
        if words:
            out.append(words)
    return out


def _imperative(words: list[str]) -> bool:
    """Whether a clause opens with a verb telling someone to do something ("search the logs", not "search
    returns nothing")."""
    return words[0] in IMPERATIVES and not (len(words) > 1 and words[1] in FINITE)


def _layers(words: list[str]) -> set[str]:
    """The layers of a code base (models, views, api, frontend...) that ``words`` name."""
    layers, i = set(), 0
    while i < len(words):
        two = " ".join(words[i:i + 2])
        p = two if two in _LAYERS else words[i] if words[i] in _LAYERS else None
        if p:
            layers.add(p)
        i += 2 if p == two else 1
    return layers


def _units(text: str) -> list[tuple[str, str]]:
    """``text`` as a reader meets it: (what, text) pairs, ``what`` one of "heading", "code" (a fenced or
    indented block, a table row), "text" (a paragraph or list item, its wrapped lines joined)."""
    out: list[tuple[str, str]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(("text", " ".join(para)))
            para.clear()

    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if _FENCE.match(line)]
    if len(fences) % 2:  # a block never closed: its opening line is text (else it would swallow the rest)
        fences.pop()
    fences_at = set(fences)
    code = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i in fences_at:
            flush()
            code = not code
        elif code or stripped.startswith("|") or (line.startswith(("    ", "\t")) and not _ITEM.match(line)):
            flush()
            out.append(("code", stripped))
        elif not stripped:
            flush()
        elif _HEADING.match(stripped) and len(stripped.split()) <= 8 and not (
                _ITEM.match(line) and len(stripped.split()) > 4):
            flush()
            out.append(("heading", stripped))
        else:
            if _ITEM.match(line):
                flush()
            para.append(stripped)
    flush()
    return out


def _ask(text: str) -> tuple[str, list[list[str]], int]:
    """What ``text`` asks for: its opening and its asking sentences (not in code, nor under a heading such as
    Background, Hints or Grading), joined by newlines; the words each asking sentence asks with (after
    "you will", "we need"... or a polite opening); and how many words the rest, the background, has."""
    asks: list[str] = []
    heads: list[list[str]] = []
    background = 0
    aside = False  # under a heading of background
    for what, unit in _units(text):
        if what == "heading":
            named = [w for w in _words(unit) if not w.isdigit() and w not in ("part", "section", "step")]
            aside = bool(_has(named, _ASIDE, 0, 1)) and bool(asks)
            if not asks:
                asks.append(unit)  # a title
            continue
        if what == "code":
            background += len(_words(unit))
            continue
        for sentence in _ASK_SPLIT.split(unit):
            opening, polite = _strip_polite(sentence.strip(" \t*-+#>`'\"()[]|0123456789."))
            words = _words(opening)
            if not words:
                continue
            if not asks:  # the opening sentence
                asks.append(sentence)
                continue
            at = next((i + len(p.split()) for i in range(len(words)) if (p := _has(words, _ASK, i, i + 1))), None)
            if not aside and (polite or at is not None or _imperative(words)):
                asks.append(sentence)
                heads.append(words[at:] if at is not None else words)
            else:
                background += len(words)
    return "\n".join(asks), heads, background


LANG_WORDS = {
    "python": r"\bpython\b|\bpytest\b|\.py\b|\bdjango\b|\bflask\b|\bpandas\b",
    "typescript": r"\btypescript\b|\.tsx?\b",
    "javascript": r"\bjavascript\b|\bnode(\.js)?\b|\.jsx?\b|\breact\b",
    "rust": r"\brust\b|\bcargo\b|\.rs\b",
    "go": r"\bgolang\b|\bgo (module|test)\b|\.go\b",
    "java": r"\bjava\b|\.java\b|\bmaven\b|\bgradle\b",
    "cpp": r"\bc\+\+|\bcpp\b|\.(cc|cpp|hpp)\b",
    "c": r"\bC\b(?!\+)|\.c\b|\.h\b",
    "csharp": r"\bc#|\.cs\b|\bdotnet\b",
    "ruby": r"\bruby\b|\brails\b|\.rb\b",
    "php": r"\bphp\b",
    "shell": r"\bbash\b|\bshell script\b|\.sh\b",
    "sql": r"\bsql\b|\.sql\b",
}
_LANG_RE = {k: re.compile(v, re.I if k != "c" else 0) for k, v in LANG_WORDS.items()}
MARKERS = [("Cargo.toml", "rust"), ("go.mod", "go"), ("tsconfig.json", "typescript"), ("package.json", "javascript"),
           ("pyproject.toml", "python"), ("setup.py", "python"), ("requirements.txt", "python"),
           ("pom.xml", "java"), ("build.gradle", "java"), ("Gemfile", "ruby"), ("composer.json", "php"),
           ("CMakeLists.txt", "cpp")]
EXTENSIONS = {".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript", ".jsx": "javascript",
              ".rs": "rust", ".go": "go", ".java": "java", ".kt": "kotlin", ".cc": "cpp", ".cpp": "cpp",
              ".hpp": "cpp", ".c": "c", ".h": "c", ".cs": "csharp", ".rb": "ruby", ".php": "php", ".swift": "swift",
              ".scala": "scala", ".sh": "shell", ".sql": "sql", ".ipynb": "python"}
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", "target", "dist", "build", ".tox", ".mypy_cache"}
_FILE_PATH = re.compile(r"(?<![\w./-])[\w./-]+\.(py|ts|tsx|js|jsx|rs|go|java|c|cc|cpp|h|hpp|rb|php|cs|kt|md|toml|ya?ml|json)\b")


@dataclass(frozen=True)
class Context:
    prompt: str
    kind: str
    language: str | None = None
    size: str = "medium"
    project: str | None = None  # the project's identity (acr_cli.project; replays: the task's repository)
    groups: tuple[str, ...] = ()  # coarse -> fine
    reasons: tuple[str, ...] = field(default=(), compare=False)
    ref: str | None = None  # the benchmark's task id (replays)
    kind_sure: float = 1.0  # how likely ``kind`` is right (see KIND_PRECISION)


def _cut(prompt: str) -> str:
    """A very long prompt as read: its first 16,000 and last 4,000 characters (a code block cut open is closed)."""
    if len(prompt) <= _LONG:
        return prompt
    head, tail = prompt[:16_000], prompt[-4_000:]
    fenced = sum(1 for line in head.splitlines() if _FENCE.match(line)) % 2
    return head + ("\n```" if fenced else "") + "\n" + tail


@dataclass
class _Reading:
    """A request as the rules read it: whole when short; when long (more than BACKGROUND_WORDS words besides
    its ask, see :func:`_ask`), its ask apart from its background."""

    text: str
    words: list[str]
    ask: str
    ask_words: list[str]
    ask_heads: list[list[str]]  # the words each asking sentence asks with (long requests only)
    background: int  # words of background (long requests only; else 0)
    head: str  # the opening sentence, without a polite opening
    head_words: list[str]
    polite: bool  # the polite opening asked for work ("can you add X")

    @property
    def long(self) -> bool:
        return self.background > BACKGROUND_WORDS

    def search(self, rx: re.Pattern) -> tuple[re.Match | None, bool]:
        """The first match of ``rx`` in the ask, else (long requests) in the whole text; and whether in the ask."""
        m = rx.search(self.ask)
        return (m, True) if m or not self.long else (rx.search(self.text), False)

    def sources(self, ask, whole) -> tuple:
        """(what, in the ask) pairs to look in, the ask first: the ask alone when the request is short."""
        return ((ask, True), (whole, False))[:2 if self.long else 1]


def _read(prompt: str) -> _Reading:
    text = _cut(prompt)
    words = _words(text)
    ask, ask_heads, background = _ask(text) if len(words) > BACKGROUND_WORDS else (text, [], 0)
    if background <= BACKGROUND_WORDS:  # read whole, as a short request is
        ask, ask_heads, background = text, [], 0
    opening, polite = _strip_polite(text.strip())
    head = _SENTENCE.split(opening, 1)[0].strip()
    return _Reading(text, words, ask, _words(ask) if background else words, ask_heads, background, head,
                    _words(head), polite)


class _Tally:
    """Scores per kind and the reasons for them. Evidence found only in a long request's background counts
    as if the background were BACKGROUND_WORDS long, and one reason at the end says it all."""

    def __init__(self, background: int) -> None:
        self.background = background
        self.damp = BACKGROUND_WORDS / background if background else 1.0
        self.scores: dict[str, float] = {}
        self.reasons: list[str] = []
        self.behind: dict[str, list] = {}  # kind -> [weight, whats]
        self.opened: set[str] = set()  # the kinds the opening verb asked for

    def add(self, kind: str, w: float, why: str) -> None:
        self.scores[kind] = self.scores.get(kind, 0.0) + w
        self.reasons.append(f"{kind} +{w:g} for {why}")

    def found(self, kind: str, w: float, why: str, in_ask: bool) -> None:
        if in_ask:
            self.add(kind, w, why)
            return
        self.scores[kind] = self.scores.get(kind, 0.0) + w * self.damp
        self.behind.setdefault(kind, [0.0, []])[0] += w * self.damp
        self.behind[kind][1].append(why)

    def background_reason(self) -> str:
        ranked = sorted(self.behind.items(), key=lambda kv: -kv[1][0])
        return f"the background ({self.background:,} words, counted as {BACKGROUND_WORDS}) adds " + ", ".join(
            f"{kind} +{w:.2g}" + (f" ({', '.join(whats[:3])}{' and more' if len(whats) > 3 else ''})" if n < 2 else "")
            for n, (kind, (w, whats)) in enumerate(ranked))


def _named_words(r: _Reading, t: _Tally) -> None:
    """KIND_WORDS and KIND_RULES: words, phrases and patterns that name a kind of work."""
    everywhere = _LEX.find(r.words)
    asked = _LEX.find(r.ask_words) if r.long else everywhere
    for rule, phrase in sorted(everywhere.items()):
        kind, w = _WORD_RULES[rule]
        t.found(kind, w, repr(asked.get(rule, phrase)), rule in asked)
    for kind, rules in _RULES.items():
        for rx, w in rules:
            m, in_ask = r.search(rx)
            if m:
                t.found(kind, w, repr(m.group(0).strip()), in_ask)


def _head_hits(words: list[str]) -> list[tuple[str, float, str, str]]:
    """The HEAD_WORDS lines ``words`` open with, the first of each kind: (kind, weight, verb, object)."""
    hits: dict[str, tuple[str, float, str, str]] = {}
    for kind, w, verbs, objects in _HEAD:
        verb = _has(words, verbs, 0, 1)
        if kind in hits or verb is None:
            continue
        obj = _has(words, objects, 1, 9) if objects else ""
        if obj is not None:
            hits[kind] = (kind, w, verb, obj)
    return list(hits.values())


def _opening_verb(r: _Reading, t: _Tally) -> None:
    """The verb the request opens with (HEAD_WORDS); when none, for a long request (opened by a title, say)
    its first asking sentence's."""
    for kind, w, verb, obj in _head_hits(r.head_words):
        t.opened.add(kind)
        t.add(kind, w, f"opening with {verb!r}" + (f" ... {obj!r}" if obj else ""))
    for asking in () if t.opened else r.ask_heads:
        hits = _head_hits(asking)
        if hits:
            kind, w, verb, _ = hits[0]
            t.opened.add(kind)
            t.add(kind, w, f"first asking to {verb!r}")
            return


def _error_output(r: _Reading, t: _Tally) -> None:
    """A failing test named, or pasted error output: a bug."""
    m, in_ask = r.search(_FAILING_TEST)
    if m and "test_generation" not in t.opened:
        t.found("bug_fix", 3, f"a failing test ({m.group(0).strip()!r})", in_ask)
    m, in_ask = r.search(TRACE)
    if m:
        t.found("bug_fix", 4, f"pasted error output {m.group(0).strip()!r}", in_ask)


def _question(r: _Reading, t: _Tally) -> None:
    """A question that asks for nothing to be done, or a request ending with '?': an explanation."""
    question = _starts(r.head_words, _QUESTION_START) and not r.polite
    if question and not any(_imperative(c) for c in _clauses(r.text, _SENTENCE)[1:]):
        t.add("explain", 3, f"a question ({r.head.split()[0]!r} ...)")
    if r.text.rstrip().endswith("?"):
        last = re.split(r"[.!\n]", r.text.rstrip()[:-1])[-1].strip()
        if not _strip_polite(last)[1]:
            t.add("explain", 1.5, "ends with '?'")


def _description(r: _Reading, t: _Tally) -> None:
    """A request that describes what happens and asks for nothing: a bug report."""
    if (not r.polite and not _starts(r.head_words, _QUESTION_START) and not r.text.rstrip().endswith("?")
            and any(w in FINITE for w in r.words) and not _has(r.words, _DESIRE)
            and not any(_imperative(c) for c in _clauses(r.text, _CLAUSE))):
        t.add("bug_fix", 1.5, "describes what happens and asks for nothing")


def _breadth(r: _Reading, t: _Tally) -> None:
    """Three layers of a code base, or four file paths or three directories, named: work over many files."""
    for source, in_ask in r.sources(r.ask_words, r.words):
        layers = _layers(source)
        if len(layers) >= 3:
            t.found("multi_file", 2.5, f"names {len(layers)} layers ({', '.join(sorted(layers))})", in_ask)
            break
    for source, in_ask in r.sources(r.ask, r.text):
        paths = len(set(m.group(0) for m in _FILE_PATH.finditer(source)))
        dirs = len(set(m.group(0) for m in _DIR.finditer(source)))
        if paths >= 4 or dirs >= 3:
            t.found("multi_file", 3, f"{paths} file paths, {dirs} directories named", in_ask)
            break


# The evidence, in the order its reasons are given.
_EVIDENCE = (_named_words, _opening_verb, _error_output, _question, _description, _breadth)


def classify_kind(prompt: str) -> tuple[str, list[str]]:
    """The kind of work ``prompt`` asks for, and the evidence, each piece with its weight (see KIND_WORDS)."""
    reading = _read(prompt)
    tally = _Tally(reading.background)
    for look in _EVIDENCE:
        look(reading, tally)
    if tally.behind:
        tally.reasons.append(tally.background_reason())
    if not tally.scores:
        kind = "explain" if reading.text.strip().endswith("?") else "feature"
        return kind, [f"no keyword matched: {'a question' if kind == 'explain' else 'a request to change code'}"]
    order = list(KIND_WORDS)
    kind = max(tally.scores, key=lambda k: (tally.scores[k], -order.index(k)))
    if kind in ("feature", "refactor") and tally.scores.get("multi_file", 0) >= MULTI_AT:
        tally.reasons.append(f"{kind} spans many files -> multi_file")
        kind = "multi_file"
    return kind, tally.reasons


def detect_language(prompt: str, project: Path | None) -> tuple[str | None, str]:
    for lang, rx in _LANG_RE.items():
        m = rx.search(prompt)
        if m:
            return lang, f"language {lang}: the prompt says {m.group(0).strip()!r}"
    if project is None or not project.is_dir():
        return None, "language unknown: no project directory"
    for marker, lang in MARKERS:
        if (project / marker).exists():
            return lang, f"language {lang}: the project has {marker}"
    counts: dict[str, int] = {}
    seen = 0
    for dirpath, dirnames, filenames in os.walk(project):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for f in filenames:
            lang = EXTENSIONS.get(os.path.splitext(f)[1])
            if lang:
                counts[lang] = counts.get(lang, 0) + 1
            seen += 1
        if seen >= 2000:
            break
    if counts:
        lang = max(sorted(counts), key=counts.get)
        return lang, f"language {lang}: most source files in the project ({counts[lang]})"
    return None, "language unknown: no source files found"


def estimate_size(prompt: str, kind: str) -> str:
    paths = len(set(m.group(0) for m in _FILE_PATH.finditer(prompt)))
    if kind == "multi_file" or len(prompt) > 1500 or paths >= 4:
        return "large"
    if len(prompt) < 200 and paths <= 1:
        return "small"
    return "medium"


def context_groups(kind: str, project: str | None) -> tuple[str, ...]:
    """The context groups of a request, coarse to fine: what ``acr run`` routes in, and what a
    ``--context prompt`` replay gives the router (acr_cli.bench), so that a replay measures this code.

    ``all`` (every task) -> ``kind=K`` (the classifier's guess) -> ``kind=K/project=P``. The root holds
    all of a user's history, so a wrong kind costs little: a kind level starts from the root's
    estimate, not from nothing. The project (acr_cli.project.identity: the same for every task in a
    repository, on every clone) is exact and is the finest level; the language is left out (a project
    implies it)."""
    groups = ["all", f"kind={kind}"]
    if project is not None:
        groups.append(f"kind={kind}/project={project}")
    return tuple(groups)


def live_groups(kind: str, language: str | None, project: Path | None) -> tuple[str, ...]:
    return context_groups(kind, identity(project) if project is not None else None)


def project_root(path: Path) -> Path:
    """The project a directory belongs to: the nearest enclosing git work tree, else the directory itself.

    So a request made from ``repo/docs`` is learned about as ``repo``, like one made from ``repo``."""
    for d in (path, *path.parents):
        if (d / ".git").exists():
            return d
    return path


def classify(prompt: str, project: Path | None = None, kind: str | None = None) -> Context:
    """Build the Context of a live request; ``kind`` overrides the rules. ``project``: the directory the
    request is made in; the language and the project group come from its :func:`project_root`."""
    if project is not None:
        project = project_root(project)
    given = kind is not None
    if kind is not None:
        reasons = [f"kind {kind}: given with --kind"]
    else:
        kind, reasons = classify_kind(prompt)
    sure = kind_sure(kind, given)
    if sure < 1:
        reasons.append(f"kind {kind}: the rules are right on {sure:.0%} of such reads; the profile's priors"
                       " for it count that much (--kind sets the kind)")
    language, why = detect_language(prompt, project)
    reasons.append(why)
    size = estimate_size(prompt, kind)
    key = identity(project) if project is not None else None
    if key is not None:
        reasons.append(f"project {key}" + ("" if key.startswith(("git:", "url:")) else
                                           " (no git history or origin remote: named by its path)"))
    return Context(prompt=prompt, kind=kind, language=language, size=size, project=key,
                   groups=context_groups(kind, key), reasons=tuple(reasons), kind_sure=sure)


def context_json(ctx: Context) -> dict[str, Any]:
    """How a request was read, as ``--json`` output and memory keep it."""
    return {"kind": ctx.kind, "language": ctx.language, "size": ctx.size, "project": ctx.project,
            "groups": list(ctx.groups), "reasons": list(ctx.reasons), "kind_sure": ctx.kind_sure}
