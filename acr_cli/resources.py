"""Files shipped with acr: built-in profiles and benchmark descriptions.

In a wheel they live in ``acr_cli/_data/``; in a source checkout (editable
install) they are the repository's top-level ``profiles/`` and ``bench/``.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _first_existing(*candidates: Path) -> Path:
    for c in candidates:
        if c.is_dir():
            return c
    return candidates[-1]


def profiles_dir() -> Path:
    return _first_existing(_PKG / "_data" / "profiles", _PKG.parent / "profiles")


def bench_dir() -> Path:
    return _first_existing(_PKG / "_data" / "bench", _PKG.parent / "bench")
