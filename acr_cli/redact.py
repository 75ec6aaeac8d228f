"""Remove secrets from anything acr stores or logs.

Three mechanisms: well-known token shapes (``sk-...``, ``ghp_...``, ``xai-...``,
JWTs, ``Bearer ...``, private-key blocks); the value of anything written as a
secret-named assignment (``OPENAI_API_KEY = ...``, ``password: ...``,
``"access_token": "..."``, ``"key": "..."``) and the password in a URL
(``postgres://user:...@host``); and the literal values of environment variables
whose names say they are secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``...).
"""

from __future__ import annotations

import os
import re

MASK = "[REDACTED]"

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.I)
_PATTERNS = re.compile(
    "|".join(
        [
            # well-known token shapes
            r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
            r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
            r"xai-[A-Za-z0-9]{20,}",
            r"gh[pousr]_[A-Za-z0-9]{20,}",
            r"github_pat_[A-Za-z0-9_]{20,}",
            r"xox[abpors]-[A-Za-z0-9\-]{10,}",
            r"AKIA[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_\-]{30,}",
            r"hf_[A-Za-z0-9]{20,}",
            r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # a JWT (OAuth access tokens)
            r"(?<=Bearer )[A-Za-z0-9._~+/=\-]{12,}",
            # a private key: the whole block, or (logs go line by line) each line of its base64 body
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
            r"^(?=[^\n]*[A-Z])(?=[^\n]*[a-z])(?=[^\n]*[0-9])[A-Za-z0-9+/]{64}$",
        ]
    ),
    re.M,
)
# NAME=value, NAME: value, "name": "value" where the name says secret (api_key, token, password...);
# the name stays readable, the value goes. Numbers and true/false/null are not secrets.
_ASSIGNED = re.compile(
    r"(\b[\w.-]*(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|passwd|credentials?|access[_-]?key|"
    r"private[_-]?key)[\w.-]*[\"']?\s*[:=]\s*[\"']?|\"key\"\s*:\s*\")"
    r"(?!(?:true|false|null|none)\b)(?![0-9.]+\b)([^\s\"',;]{6,})",
    re.I,
)
_URL_CREDENTIALS = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)")  # postgres://user:PASSWORD@host


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
    text = _PATTERNS.sub(MASK, text)
    text = _ASSIGNED.sub(lambda m: m.group(1) + MASK, text)
    return _URL_CREDENTIALS.sub(lambda m: m.group(1) + MASK, text)
