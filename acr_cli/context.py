"""The Context of a request, and the rules that classify a prompt into one.

Classification is deterministic and cheap (no model call):

* **kind**: every kind has weighted keyword patterns (below, ``KIND_RULES``);
  the kind with the highest total wins, ties go to the earlier kind in
  ``KIND_RULES``. No match: ``explain`` for a question, else ``feature``.
  Large multi-file cues (``across the codebase``, 4+ file paths) make a
  ``feature`` or ``refactor`` request ``multi_file``.
* **language**: the language named in the prompt (word or file extension);
  else the project's marker files (``pyproject.toml``, ``package.json``,
  ``Cargo.toml``...); else the most common source extension among the first
  2,000 files of the project.
* **size**: ``large`` for multi-file work or prompts over 1,500 characters,
  ``small`` for prompts naming at most one file and under 200 characters,
  else ``medium``.
* **groups**: the context's place in the hierarchy the router learns over,
  coarse to fine: ``kind=K`` -> ``kind=K/lang=L`` -> ``kind=K/lang=L/project=P``.
  Sparse groups borrow strength from their parents; the coarsest level
  borrows from the profile's prior for the kind. (There is no all-kinds level:
  a model's record on docs says little about bug fixes, and aggregating every
  attempt on every decision would make routing slow on a large memory.)
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("bug_fix", "feature", "test_generation", "refactor", "explain", "data_science", "algorithm", "docs",
         "multi_file")

# kind -> [(regex, weight)]; order = tie-break priority.
KIND_RULES: dict[str, list[tuple[str, float]]] = {
    "test_generation": [(r"\b(write|add|create|generate|increase|improve)\b.{0,30}\b(unit |integration )?tests?\b", 3),
                        (r"\btest (cases|coverage|suite)\b", 2), (r"\bcoverage\b", 1),
                        (r"\bproperty[- ]based\b|\bfuzz", 1)],
    "bug_fix": [(r"\bfix(es|ed|ing)?\b", 2), (r"\bbugs?\b", 2), (r"\bfail(s|ing|ed|ure)?\b", 1.5),
                (r"\b(crash(es|ing)?|broken|regression|traceback|exception|segfault|panic)\b", 1.5),
                (r"\b(error|wrong|incorrect)\b", 1), (r"(doesn't|does not|won't|isn't) work", 2)],
    "docs": [(r"\b(docstrings?|readme|documentation|changelog|docs)\b", 3), (r"\bdocument(ing)?\b", 2),
             (r"\bcomments?\b", 1)],
    "refactor": [(r"\brefactor", 3), (r"\b(clean ?up|simplify|restructure|reorganize|deduplicate|extract)\b", 2),
                 (r"\brename\b", 2), (r"\btype (hints|annotations)\b", 2), (r"\b(readab|maintainab)", 1)],
    "data_science": [(r"\b(pandas|numpy|dataframes?|sklearn|scikit|matplotlib|seaborn|jupyter|notebook)\b", 3),
                     (r"\b(dataset|csv|statistic(s|al)?|regression model|train(ing)? a model|plot|histogram)\b", 1.5),
                     (r"\b(feature engineering|clustering|classifier)\b", 2)],
    "algorithm": [(r"\balgorithms?\b", 3), (r"\b(time|space) complexity\b|\bO\([^)]*\)", 3),
                  (r"\b(dynamic programming|binary search|shortest path|graph traversal|leetcode|memoi[sz])", 3),
                  (r"\b(optimi[sz]e|faster|performance)\b", 1)],
    "explain": [(r"^\s*(explain|describe|what|why|how|where|which|walk me through)\b", 2),
                (r"\b(explain|understand|what does|how does|why does)\b", 2)],
    "multi_file": [(r"\b(across|throughout) (the )?(codebase|project|repo(sitory)?|modules|files)\b", 3),
                   (r"\b(every|all) (module|file|package)s?\b", 2), (r"\b(migrate|port)\b.{0,40}\bto\b", 2)],
    "feature": [(r"\b(add|implement|create|build|support|introduce|new)\b", 1)],
}
_COMPILED = {k: [(re.compile(p, re.I), w) for p, w in rules] for k, rules in KIND_RULES.items()}

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
_FILE_PATH = re.compile(r"[\w./-]+\.(py|ts|tsx|js|jsx|rs|go|java|c|cc|cpp|h|hpp|rb|php|cs|kt|md|toml|ya?ml|json)\b")


@dataclass(frozen=True)
class Context:
    prompt: str
    kind: str
    language: str | None = None
    size: str = "medium"
    project: str | None = None  # absolute path of the project (live runs)
    groups: tuple[str, ...] = ()  # coarse -> fine
    reasons: tuple[str, ...] = field(default=(), compare=False)
    ref: str | None = None  # the benchmark's task id (replays)


def classify_kind(prompt: str) -> tuple[str, list[str]]:
    scores: dict[str, float] = {}
    reasons: list[str] = []
    for kind, rules in _COMPILED.items():
        for rx, w in rules:
            m = rx.search(prompt)
            if m:
                scores[kind] = scores.get(kind, 0.0) + w
                reasons.append(f"{kind} +{w:g} for {m.group(0).strip()!r}")
    paths = len(set(m.group(0) for m in _FILE_PATH.finditer(prompt)))
    if not scores:
        kind = "explain" if prompt.strip().endswith("?") else "feature"
        return kind, [f"no keyword matched: {'a question' if kind == 'explain' else 'a request to change code'}"]
    order = list(KIND_RULES)
    kind = max(scores, key=lambda k: (scores[k], -order.index(k)))
    if kind in ("feature", "refactor") and (scores.get("multi_file", 0) >= 2 or paths >= 4):
        reasons.append(f"{kind} spans many files ({paths} paths named) -> multi_file")
        kind = "multi_file"
    return kind, reasons


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


def project_key(project: Path) -> str:
    digest = hashlib.sha256(str(project).encode()).hexdigest()[:6]
    return f"{project.name or 'root'}@{digest}"


def context_groups(kind: str, project: str | None) -> tuple[str, ...]:
    """The context groups of a request, coarse to fine: what ``acr run`` routes in, and what a
    ``--context prompt`` replay gives the router (acr_cli.bench), so that a replay measures this code.

    ``all`` (every task) -> ``kind=K`` (the classifier's guess) -> ``kind=K/project=P``. The root holds
    all of a user's history, so a wrong kind costs little: a kind level starts from the root's
    estimate, not from nothing. The project (``project_key``: the same for every task in a work
    tree) is exact and is the finest level; the language is left out (a project implies it)."""
    groups = ["all", f"kind={kind}"]
    if project is not None:
        groups.append(f"kind={kind}/project={project}")
    return tuple(groups)


def live_groups(kind: str, language: str | None, project: Path | None) -> tuple[str, ...]:
    return context_groups(kind, project_key(project) if project is not None else None)


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
    if kind is not None:
        reasons = [f"kind {kind}: given with --kind"]
    else:
        kind, reasons = classify_kind(prompt)
    language, why = detect_language(prompt, project)
    reasons.append(why)
    size = estimate_size(prompt, kind)
    return Context(prompt=prompt, kind=kind, language=language, size=size,
                   project=str(project) if project else None,
                   groups=live_groups(kind, language, project), reasons=tuple(reasons))
