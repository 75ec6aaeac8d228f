"""Remove secrets from anything acr stores or logs.

Two mechanisms: well-known token shapes (``sk-...``, ``ghp_...``, ``Bearer ...``),
and the literal values of environment variables whose names say they are
secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...).
"""

from __future__ import annotations

import os
import re

MASK = "[REDACTED]"

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.I)
_PATTERNS = re.compile(
    "|".join(
        [
            r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
            r"gh[pousr]_[A-Za-z0-9]{20,}",
            r"github_pat_[A-Za-z0-9_]{20,}",
            r"xox[abpors]-[A-Za-z0-9\-]{10,}",
            r"AKIA[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_\-]{30,}",
            r"hf_[A-Za-z0-9]{20,}",
            r"(?<=Bearer )[A-Za-z0-9._~+/=\-]{12,}",
            r"(?i:(?<=api_key=)|(?<=api-key=)|(?<=apikey=)|(?<=api_key: )|(?<=\"api_key\": \"))[A-Za-z0-9._\-]{12,}",
        ]
    )
)


_cache: tuple[int, dict[str, str], list[str]] | None = None


def _secret_values() -> list[str]:
    """Values of secret-looking environment variables, longest first.

    Scanning the environment costs more than redacting, and a replay redacts
    thousands of strings, so the scan is reused while the environment keeps
    its size and the secret variables keep their values.
    """
    global _cache
    if _cache is not None:
        size, seen, values = _cache
        if size == len(os.environ) and all(os.environ.get(k) == v for k, v in seen.items()):
            return values
    seen = {k: v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    values = sorted(set(seen.values()), key=len, reverse=True)
    _cache = (len(os.environ), seen, values)
    return values


def redact(text: str | None) -> str | None:
    if not text:
        return text
    for value in _secret_values():
        if value in text:
            text = text.replace(value, MASK)
    return _PATTERNS.sub(MASK, text)
