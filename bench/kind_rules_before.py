"""The kind rules as they were before they were measured (acr_cli/context.py at commit 029cb6f), kept
unchanged so that ``bench/classifier.py`` can print the before and after figures side by side."""

from __future__ import annotations

import re

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

_FILE_PATH = re.compile(r"[\w./-]+\.(py|ts|tsx|js|jsx|rs|go|java|c|cc|cpp|h|hpp|rb|php|cs|kt|md|toml|ya?ml|json)\b")


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
