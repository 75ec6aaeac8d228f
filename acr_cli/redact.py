"""Remove secrets from anything acr stores, logs or prints.

What is masked (replaced by ``[REDACTED]``):

* the literal values of the environment variables acr sees whose names say they
  are secret. A name is split into words at anything that is not a letter
  (``DB_PASS`` -> DB, PASS) and is secret when a word is or ends with KEY or
  KEYS (``API_KEY``, ``APIKEY``; not ``KEYBOARD``, ``KEYMAP``), is or ends with
  TOKEN, SECRET or CREDENTIAL, plural too (``GITHUB_TOKEN``, ``AUTHTOKEN``; not
  ``TOKENIZERS_PARALLELISM``), is a password word (PASS, PASSWD, PASSWORD, PASSPHRASE,
  PGPASSWORD, DBPASS; not BYPASS, COMPASS, ASKPASS), is PWD in a longer name
  (``MYSQL_PWD``; ``PWD`` alone is the working directory), is AUTH, starts with
  it or ends with it (``AUTH_TOKEN``, ``OAUTH``, ``AUTHORIZATION``; not AUTHOR:
  ``GIT_AUTHOR_NAME`` is not a secret), or is COOKIE, WEBHOOK or DSN. A name
  whose last word is PATH, FILE, DIR, SOCK or SOCKET names a location, not a
  secret (``SSH_AUTH_SOCK``, ``KEY_FILE``). SESSION and PRIVATE alone are not
  secret words (``XDG_SESSION_TYPE``, ``SESSION_MANAGER`` are ordinary; a
  ``PRIVATE_KEY`` has KEY). Values shorter than 8 characters are left alone:
  ``1``, ``true``, ``dev`` or ``admin`` occur in ordinary text everywhere, so
  masking every occurrence would garble logs, and a secret that short is
  guessable whatever a log shows. A multi-line value is also masked line by line (a key in an
  environment variable reaches a log one line at a time). A value is also masked
  encoded: in base64 (standard or URL-safe, padded or not, and inside a longer
  base64 string such as HTTP Basic's ``base64("user:" + value)`` or a docker
  config's ``auth``: there the characters made of the value's bits alone go, the
  one or two at each end that share bits with its neighbours stay), in hex (either
  case) and percent-encoded (``quote``, ``quote_plus``, ``encodeURIComponent``,
  upper or lower-case escapes). And split over lines: in a text given whole,
  the value with a line break anywhere in it (spaces around it, the next line
  indented, a JSON-escaped ``\\n`` too), found for sure when it is split once or
  wrapped with 32 characters of it or more to a line; in a stream redacted line
  by line (:class:`LineRedactor`), each line's part of it when that part is 8
  characters or more (a line that ends with the value's start, begins with its
  end, or lies inside it): a part shorter than 8 stays readable there;
* well-known token shapes: ``sk-...``, ``sk_live_...``, ``xai-...``,
  ``ghp_...``, ``github_pat_...``, GitLab ``glpat-...`` (and ``gldt-``, ``glrt-``,
  ``glptt-``... 20 characters or more), ``xox?-...``, Slack ``xapp-...``, ``AKIA...``,
  ``AIza...``, ``hf_...``, npm ``npm_`` + 36 letters and digits, PyPI
  ``pypi-Ag...`` (50 characters or more), webhook secrets ``whsec_...`` (24 or
  more), SendGrid ``SG.`` + 22 + ``.`` + 43, Google ``GOCSPX-...`` (24 or more),
  Vault ``hvs.``/``hvb.``/``hvr.`` (24 or more), JWTs, ``Bearer ...``. Each needs
  its token's length after the prefix, so ``npm_config_cache``, ``SG.`` in prose
  or a file ``hvs.yaml`` stay readable;
* bare AWS secret access keys: exactly 40 characters of ``[A-Za-z0-9/+]``
  standing alone, with upper case, lower case and digits (a git SHA or any
  other hex digest never has both cases) and not a path (``/Users/Alice/...``);
* webhook URLs: Slack (``hooks.slack.com/services/...``), Discord
  (``discord.com`` / ``discordapp.com`` ``/api/webhooks/...``), Microsoft Teams
  (``*.webhook.office.com``, ``outlook.office.com/webhook/...``), Zapier
  (``hooks.zapier.com/hooks/...``), Telegram bots (``api.telegram.org/bot<id>:<secret>/sendMessage``:
  the token goes, the method stays), and the value (6 characters or more) of a
  URL's query parameter named token, key, apikey, sig, signature, secret,
  password, passwd, credential or auth, alone or after ``_``, ``-`` or ``.``
  (``?token=``, ``&sig=``, ``access_token=``, ``X-Amz-Signature=``); the host
  and path up to the secret stay readable;
* Azure connection strings: the value of ``AccountKey=``, ``SharedAccessKey=``
  and ``SharedAccessSignature=`` (to the next ``;``), and the ``sr=...&sig=...``
  after ``SharedAccessSignature`` in an Authorization header;
* passwords on command lines: ``curl -u`` / ``--user`` / ``-U`` / ``--proxy-user``
  ``user:PASSWORD`` (the user stays; ``curl -u user`` prompts, nothing to mask),
  and ``mysql`` / ``mysqldump`` / ``mariadb``... ``-pPASSWORD`` and
  ``--password=PASSWORD`` (``mysql -p`` alone prompts);
* private keys in PEM form (``-----BEGIN ... PRIVATE KEY-----`` to its END line,
  PGP ``PRIVATE KEY BLOCK`` too), whole; a BEGIN with no END (the text was cut)
  is masked to the end of the text, an END with no BEGIN (the tail of an
  output) back over the key-body lines before it. Streams written line by line
  go through :class:`LineRedactor`, which masks every line of a block; a line
  of exactly 64 or 76 base64 characters mixing cases and digits (a key's body
  line, or any base64 wrapped at 64 or 76 columns: a PEM-less key from
  ``base64``) is masked wherever it appears, and so is the shorter line that
  ends such a block (padded to a multiple of 4 characters and not a word);
* the value of anything written as a secret-named assignment
  (``OPENAI_API_KEY = ...``, ``password: ...``, ``DB_PASS=...``,
  ``"access_token": "..."``, ``"key": "..."``, ``Authorization: Basic ...``), a quoted
  value whole, spaces and all (``PGPASSWORD='my pass phrase'``), its quotes escaped too
  (``password: \\"...\\"`` inside the JSON events every attempt log holds), and the
  password in a URL (``postgres://user:...@host``). A secret variable's value is also
  masked in its escaped forms (JSON, Python repr) when it holds a quote or a backslash.

Not masked: a secret shorter than 8 characters held in an environment variable,
and a secret with no known shape that is neither in a secret-named variable nor
written after a secret-looking name; a secret variable's value encoded otherwise
(base64 wrapped over lines, double-encoded, compressed, encrypted...).
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import re
import urllib.parse
from typing import Any, NamedTuple

MASK = "[REDACTED]"
MIN_ENV_VALUE = 8  # shorter values of secret variables are not masked (see above)

# ---------------------------------------------------------------- secret environment variable names

_NAME_WORDS = re.compile(r"[A-Z]+")
_SECRET_WORD = re.compile(
    r"(?!(?:BYPASS|COMPASS|ENCOMPASS|SURPASS|TRESPASS|ASKPASS)$)"
    r"(?:[A-Z]*KEYS?|[A-Z]*TOKENS?|[A-Z]*SECRETS?|[A-Z]*CREDENTIALS?"
    r"|[A-Z]*PASS(?:WD|WORDS?|PHRASE)?|PASS(?:WD|WORDS?|PHRASE)[A-Z]*"
    r"|AUTH|AUTHORIZATION|AUTH(?!OR)[A-Z]+|[A-Z]+AUTH"
    r"|[A-Z]*COOKIES?|[A-Z]*WEBHOOKS?|DSN)"
)
_LOCATION_WORDS = frozenset({"PATH", "FILE", "DIR", "SOCK", "SOCKET"})


def secret_name(name: str) -> bool:
    """Whether the environment variable ``name`` says its value is a secret (the rule is in the module doc)."""
    words = _NAME_WORDS.findall(name.upper())
    if not words or words[-1] in _LOCATION_WORDS:
        return False
    if "PWD" in words and len(words) > 1:  # MYSQL_PWD; PWD alone is the working directory
        return True
    return any(_SECRET_WORD.fullmatch(w) for w in words)


# ---------------------------------------------------------------- patterns

# Token shapes. Each alternative starts with a literal character (not a class such as [sr]): then the engine
# skips at once over every position whose character starts none of them; a single class among them turns that
# off, and the scan takes twice as long.
_TOKENS = re.compile(
    "|".join(
        [
            r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
            r"sk_(?:live|test)_[A-Za-z0-9]{16,}",
            r"rk_(?:live|test)_[A-Za-z0-9]{16,}",
            r"xai-[A-Za-z0-9]{20,}",
            r"gh[pousr]_[A-Za-z0-9]{20,}",
            r"github_pat_[A-Za-z0-9_]{20,}",
            # GitLab: personal, deploy, runner, trigger, CI job, OAuth app, feed... tokens; newer ones add .01.<crc>
            r"gl(?:pat|dt|rt|ptt|cbt|oas|ft|soat|ffct|imt|agent)-[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]+){0,2}",
            r"xox[abeoprs]-[A-Za-z0-9\-]{10,}",
            r"xapp-[0-9]+-[A-Za-z0-9\-]{20,}",  # Slack app-level token
            r"AKIA[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_\-]{30,}",
            r"hf_[A-Za-z0-9]{20,}",
            r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])",  # 30 random + 6 checksum: never npm_config_cache
            r"pypi-Ag[A-Za-z0-9_\-]{50,}",  # a macaroon: pypi-AgEIcHlwaS5vcmc... (test.pypi.org: pypi-AgENdGVzd...)
            r"whsec_[A-Za-z0-9+/=]{24,}",  # Stripe and Svix webhook signing secrets
            r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}",  # SendGrid
            r"GOCSPX-[A-Za-z0-9_\-]{24,}",  # Google OAuth client secret
            r"hv[sbr]\.[A-Za-z0-9_\-]{24,}",  # HashiCorp Vault service, batch and recovery tokens
            r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # a JWT (OAuth access tokens)
            r"Bearer [A-Za-z0-9._~+/=\-]{12,}",
        ]
    )
)
_B64 = "A-Za-z0-9/+"
# A run of 40 or more base64 characters standing alone (the lookbehind comes first: inside a word it fails
# at once). Exactly 40: an AWS secret access key if it mixes cases and digits; exactly 64 or 76 making up a
# whole line: a line of a private key's body, logged line by line, or of any base64 wrapped (see _b64_run);
# the shorter line that ends such a block goes too (_KEY_TAIL).
_B64_RUN = re.compile(rf"(?<![{_B64}_\-])[{_B64}]{{40,}}(?![{_B64}=_\-])")
_KEY_LINE_WIDTHS = (64, 76)  # PEM and OpenSSH wrap base64 at 64 columns, MIME and GNU base64 at 76
_KEY_LINE = re.compile(rf"[{_B64}]{{64}}(?:[{_B64}]{{12}})?")
_KEY_LAST_LINE = rf"[{_B64}]{{2,75}}={{0,2}}"
_KEY_TAIL = re.compile(rf"(\[REDACTED\]\r?\n)({_KEY_LAST_LINE})(?=\r?\n|\Z)")  # the line after a masked body line
_KEY_LAST_LINE_RE = re.compile(_KEY_LAST_LINE)
_WORDLIKE_SEGMENT = re.compile(r"[A-Z]?[a-z]{2,}[0-9]*|[a-z0-9]+")

# NAME=value, NAME: value, "name": "value" where the name says secret (api_key, token, password, DB_PASS...);
# the name stays readable, the value (group 2) goes. Numbers, true/false/null and an already masked value are
# left. Matched against the lower-cased text: every alternative then starts with a literal character, which
# the engine skips to quickly (case-insensitive matching made this 4x slower); the match starts at the
# secret word, not at the name's start, for the same reason (what precedes it is kept anyway).
# A quote may come escaped (\" in a JSON event an agent printed, which is how every attempt log holds it); a
# value in quotes runs to its closing quote, spaces and all (PGPASSWORD='my pass phrase'); a bare value to the
# first space, quote, comma, semicolon or backslash.
_ASSIGNED_SOURCE = (
    r"((?:api[_-]?key|apikey|secret|token(?!iz)|passw(?:or)?d|passwd|passphrase|p(?<![a-z]p)ass(?![a-z])|"
    r"credentials?|access[_-]?key|private[_-]?key)[\w.-]{0,40}(?:\\?[\"'])?\s*[:=](?:[ \t]|\\t)*(?:\\?[\"'])?|"
    r"\\?\"key\\?\"\s*:\s*\\?\"|"
    r"a(?<!\wa)uthorization(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?(?:(?:basic|bearer|token|digest|sharedaccesssignature)\s+)?)"
    r"(?!(?:true|false|null|none)\b|(?:basic|bearer|token|digest|sharedaccesssignature)\s)(?![0-9.]+\b)(?!\[redacted\](?:[\s\"',;&\\]|$))"
    # in quotes, to the same closing quote (a message that says password or token is a label, not a secret)
    # (a backslash inside a value goes with the character after it, a JSON or shell escape, never alone)
    r"((?<=\")(?![^\"\n]*\b(?:passw\w*|passphrase|tokens?)\b)(?![0-9.]+\\?\")(?:[^\"\n\\]|\\[^\"\n]){6,200}?(?=\\?\")|"
    r"(?<=')(?![^'\n]*\b(?:passw\w*|passphrase|tokens?)\b)(?![0-9.]+\\?')(?:[^'\n\\]|\\[^'\n]){6,200}?(?=\\?')|"
    r"(?=(?:[^\s\"',;\\]|\\[^\s\"']){6})[^\s\"',;\\](?:[^\s\"',;\\]|\\[^\s\"'])*)"
)
_ASSIGNED = re.compile(_ASSIGNED_SOURCE)
_ASSIGNED_ANY_CASE = re.compile(_ASSIGNED_SOURCE, re.I)  # for the rare text lower() changes the length of
_KEY_WORD = re.compile(r"api[_-]?key|access[_-]?key|private[_-]?key|\"key\"")  # in lower-cased text
_PASS_WORD = re.compile(r"passw|passphrase|(?<![a-z])pass(?![a-z])")  # not "12 passed"

# URLs (only looked for in text that has "://").
_URL_CREDENTIALS = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)")  # postgres://user:PASSWORD@host
_WEBHOOK = re.compile(
    r"(https?://(?:"
    r"hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/"
    r"|(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api(?:/v\d+)?/webhooks/"
    r"|[\w-]+\.webhook\.office\.com/"
    r"|outlook\.office(?:365)?\.com/webhook/"
    r"|hooks\.zapier\.com/hooks/"
    r"))(?!\[REDACTED\])[^\s\"'<>`)\]]+",
    re.I,
)
_QUERY_SECRET = re.compile(
    r"([?&#;](?:[\w.-]*[_.-])?(?:token|key|apikey|sig|signature|secret|password|passwd|credential|auth)=)"
    r"(?!\[REDACTED\])[^&#\s\"'<>`]{6,}",
    re.I,
)
_TELEGRAM = re.compile(r"(api\.telegram\.org/(?:file/)?bot)[0-9]{5,}:[A-Za-z0-9_\-]{30,}")  # .../bot<id>:<secret>/...

# Azure connection strings (only looked for in text that has "accountkey" or "sharedaccess"): the value of
# AccountKey=, SharedAccessKey=, SharedAccessSignature= up to the next ";" (a SAS holds "=" and "&"), and a
# SharedAccessSignature header's "sr=...&sig=..." after a space. A backslash ends it (the \" of a JSON event).
_AZURE = re.compile(
    r"((?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*|SharedAccessSignature\s+(?=[^\s\"'<>`;]*sig=))"
    r"(?!\[REDACTED\])[^;\s\"'<>`\\]+",
    re.I,
)

# Passwords given on a command line (only looked for in text that has "curl", "mysql" or "mariadb"):
# curl -u / --user / -U / --proxy-user USER:PASSWORD (the part after the first colon; quoted, to the
# closing quote), and mysql's -pPASSWORD / --password=PASSWORD (`mysql -p` alone prompts: nothing to mask).
_CURL_USER = re.compile(
    r"(c(?<![\w-]c)url(?![\w-])[^\n;&|]*?\s(?:-[A-Za-z]{0,5}[uU]|--(?:proxy-)?user)(?:[ \t]+|=)?"
    r"(?:(\\?\")|(\\?'))?[^\s:\"'\\]*:)"
    r"(?!\[REDACTED\])(?(2)[^\"\n\\]+|(?(3)[^'\n\\]+|(?:[^\s\"'\\]|\\[^\s\"'])+))"
)
_MYSQL_PASSWORD = re.compile(
    r"(m(?<![\w-]m)(?:ysql|ariadb)[\w-]*[^\n;&|]*?\s(?:-p|--password=))"
    r"(?!\[REDACTED\])(?:'[^'\n]*'|\"[^\"\n]*\"|(?:[^\s\"'\\]|\\[^\s\"'])+)"
)

# Private keys in PEM form (only looked for in text that has "PRIVATE KEY").
_PEM_BEGIN = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_BLOCK = re.compile(rf"{_PEM_BEGIN}.*?(?:{_PEM_END}|\Z)", re.S)  # BEGIN without END: to the end of the text
_PEM_END_RE = re.compile(_PEM_END)
_PEM_OPENS_LINE = re.compile(rf"{_PEM_BEGIN}[\s\"'`]*$")  # a block whose body follows on the next lines
# Lines of a key block: full body lines (64 or 70 characters), blank or header lines (encrypted PEM, PGP
# armor); just before the END line, the last body line and PGP's checksum line, which may be short.
_PEM_INNER_LINE = re.compile(rf"[ \t]*(?:[{_B64}=]{{40,}}|(?:Proc-Type|DEK-Info|Version|Comment): [^\n]*)?[ \t]*\r?")
_PEM_LAST_LINE = re.compile(rf"[ \t]*[{_B64}=]+[ \t]*\r?")


def _mixed(s: str) -> bool:
    """Upper case, lower case and digits: random base64. A hex digest (git SHA, sha256) has one case only."""
    return any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)


def _b64_run(m: re.Match) -> str:
    s = m.group()
    if len(s) == 40 and _mixed(s):
        segments = [p for p in s.split("/") if p]
        if s.count("/") >= 2 and 3 * sum(1 for p in segments if _WORDLIKE_SEGMENT.fullmatch(p)) >= 2 * len(segments):
            return s  # /Users/Alice/Projects/...: a path, its segments are words
        return MASK
    if len(s) in _KEY_LINE_WIDTHS and _mixed(s):
        text, start, end = m.string, m.start(), m.end()
        if (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end] in "\r\n"):
            return MASK
    return s


def _key_tail(s: str) -> bool:
    """Whether ``s``, the line after a key's body line, is the last line of that base64: padded to a multiple
    of 4 and not a word ("Done" is not; a pure-letter tail of fewer than 16 is left, a small part of a key)."""
    return (len(s) % 4 == 0 and (s.endswith("=") or any(c.isdigit() or c in "+/" for c in s)
                                 or (len(s) >= 16 and not s.islower() and not s.isupper())))


def _mask_key_tail(m: re.Match) -> str:
    start = m.start()
    if (start == 0 or m.string[start - 1] == "\n") and _key_tail(m.group(2)):
        return m.group(1) + MASK
    return m.group()


def _mask_pem(text: str) -> str:
    text = _PEM_BLOCK.sub(MASK, text)
    if "-----END" not in text:
        return text
    # An END with no BEGIN: the start of the block was cut off (the tail of an output). Mask its line
    # and the key-body lines just before it.
    out, pos = [], 0
    for m in _PEM_END_RE.finditer(text):
        start = text.rfind("\n", pos, m.start()) + 1 or pos
        for n in range(LineRedactor.MAX_KEY_LINES):
            if start <= pos:
                break
            nl = text.rfind("\n", pos, start - 1)
            prev = nl + 1 if nl >= 0 else pos
            if not (_PEM_INNER_LINE if n >= 2 else _PEM_LAST_LINE).fullmatch(text, prev, start - 1):
                break
            start = prev
        out += [text[pos:start], MASK]
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------- environment values

class _Secrets(NamedTuple):
    """What the secret environment variables' values look like in a text (see :func:`_secrets`)."""

    literals: list[tuple[str, tuple[str, ...]]]  # (probe, forms): where probe is found, each form is masked
    probes: tuple[str, ...]  # the probes of literals, tested all at once first (most texts hold none)
    split: list[tuple[str, tuple[str, ...]]]  # (value, pieces): a line break in the value leaves a piece whole
    grams: frozenset[str]  # every 8 characters running in those values (LineRedactor's quick test)


_cache: tuple[frozenset[str], dict[str, str], _Secrets] | None = None
_SPLIT_PIECES = 96  # the pieces of a value that may be split over lines cover its first 96 characters


def _secrets() -> _Secrets:
    """The values of secret-looking environment variables (and the lines of multi-line ones), in the forms a
    text may hold them: as they are; escaped (JSON, repr) when they have a quote or a backslash; and a whole
    value in base64 (standard and URL-safe, padded or not, and the part that stays the same wherever the
    value falls in a longer base64 string: three offsets), in hex, percent-encoded, and split over lines.

    Deciding which names look secret costs more than redacting, and a replay redacts thousands of
    strings, so that scan and these encodings are reused while the environment has the same variable names
    and the secret ones keep their values (a variable removed and a secret one added is a new scan).
    """
    global _cache
    # The names as the process holds them (os.environ._data, encoded): iterating os.environ decodes every
    # name, which cost more than redacting a short line (a stream is redacted line by line).
    names = frozenset(getattr(os.environ, "_data", os.environ))
    if _cache is not None:
        known, seen, secrets = _cache
        if known == names and all(os.environ.get(k) == v for k, v in seen.items()):
            return secrets
    seen = {k: v for k, v in os.environ.items() if len(v) >= MIN_ENV_VALUE and secret_name(k)}
    secrets = _secrets_of(set(seen.values()))
    _cache = (names, seen, secrets)
    return secrets


def _secrets_of(whole: set[str]) -> _Secrets:
    """The forms of the secret values ``whole`` a text may hold them in (see :func:`_secrets`)."""
    # longest first: a value inside a longer one is masked after it
    literals = sorted(_literal_groups(whole).items(), key=lambda g: len(g[1][0]), reverse=True)
    split = _split_pieces(whole)
    grams = frozenset(v[i:i + MIN_ENV_VALUE] for v, _ in split for i in range(len(v) - MIN_ENV_VALUE + 1))
    return _Secrets(literals, tuple(p for p, _ in literals), split, grams)


def _literal_groups(whole: set[str]) -> dict[str, tuple[str, ...]]:
    """probe -> forms: each value and each long line of a multi-line one, as it is and escaped (JSON, repr);
    each whole value encoded (base64, hex, percent-encoding)."""
    plain = set(whole)
    for v in whole:
        if "\n" in v:
            plain.update(line.strip() for line in v.splitlines() if len(line.strip()) >= MIN_ENV_VALUE)
    groups: dict[str, tuple[str, ...]] = {}
    for v in plain:
        groups[v] = (v,)
        for e in (json.dumps(v)[1:-1], repr(v)[1:-1]):  # as a log holds it when it has a quote or a backslash
            groups.setdefault(e, (e,))
    for v in whole:  # not each line of a multi-line value: a tool encodes the whole (and a key has ~30 lines)
        for probe, forms in _encoded(v):
            groups.setdefault(probe, forms)
    return groups


def _split_pieces(whole: set[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(value, pieces) for each one-line value, longest first: a line break in the value leaves a piece whole."""
    split = []
    for v in sorted(whole, key=len, reverse=True):
        if "\n" not in v:  # a multi-line value is masked line by line already
            c = max(4, min(16, len(v) // 2))  # two pieces at least: one line break cuts one of them at most
            split.append((v, tuple(v[i:i + c] for i in range(0, min(len(v), _SPLIT_PIECES) - c + 1, c))))
    return split


def _encoded(value: str) -> list[tuple[str, tuple[str, ...]]]:
    """(probe, forms) for ``value`` in base64, hex and percent-encoding; each form holds its probe."""
    raw = value.encode()
    out = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        # Inside a longer base64 string (HTTP Basic's base64("user:" + value), a docker config's "auth", an
        # encoded JSON), the value starts 0, 1 or 2 bytes into a 3-byte group: the characters made of its
        # bits alone are the same whatever comes before and after it. Offset 0 is also the value alone.
        for offset in range(3):
            first, last = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6
            middle = encode(bytes(offset) + raw).decode()[first:last]
            out.append((middle, tuple(dict.fromkeys((whole, whole.rstrip("="), middle))) if offset == 0 else (middle,)))
    hexed = raw.hex()
    out += [(hexed, (hexed,)), (hexed.upper(), (hexed.upper(),))]
    for quoted in (urllib.parse.quote(value, safe=""), urllib.parse.quote(value), urllib.parse.quote_plus(value),
                   urllib.parse.quote(value, safe="!'()*")):  # the last: JavaScript's encodeURIComponent
        out += [(q, (q,)) for q in (quoted, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quoted))
                if q != value]
    return [(p, f) for p, f in out if len(p) >= MIN_ENV_VALUE]


_LINE_BREAK = re.compile(r"\n|\\n")  # a line break, or one escaped in a JSON string


def _mask_split(text: str, values: list[str]) -> str:
    """``text`` with each of ``values`` masked where line breaks cut it: the text is read without its breaks
    (with the spaces before one and the next line's indentation), the values are found there, and what they
    span in ``text`` goes. Linear in the text: no pattern to build per value."""
    starts: list[int] = []  # where each stretch between two breaks starts: in the text read without breaks
    origins: list[int] = []  # and in ``text``
    parts: list[str] = []
    flat, pos = 0, 0
    for m in _LINE_BREAK.finditer(text):
        start, end = m.start(), m.end()
        cr = "\r" if m.group() == "\n" else "\\r"
        if start - len(cr) >= pos and text.startswith(cr, start - len(cr)):
            start -= len(cr)
        while start > pos and text[start - 1] in " \t":
            start -= 1
        while text.startswith((" ", "\t", "\\t"), end):
            end += 2 if text.startswith("\\t", end) else 1
        starts.append(flat)
        origins.append(pos)
        parts.append(text[pos:start])
        flat += start - pos
        pos = end
    starts.append(flat)
    origins.append(pos)
    parts.append(text[pos:])
    joined = "".join(parts)

    def where(i: int) -> int:  # a position in the joined text, in ``text``
        k = bisect.bisect_right(starts, i) - 1
        return origins[k] + i - starts[k]

    spans = []
    for value in values:
        i = joined.find(value)
        while i >= 0:
            spans.append((where(i), where(i + len(value) - 1) + 1))
            i = joined.find(value, i + len(value))
    if not spans:
        return text
    out, pos = [], 0
    for start, end in sorted(spans):
        if start >= pos:
            out += [text[pos:start], MASK]
        elif end <= pos:
            continue
        pos = max(pos, end)
    return "".join(out) + text[pos:]


def _mask_split_ends(line: str, secrets: _Secrets) -> str:
    """``line`` (a stream's, alone) with its part of a secret value split over lines masked: a line that ends
    with the value's first 8 characters or more, starts with its last 8 or more, or lies inside it (the
    middle of a value wrapped over several lines)."""
    body = line.strip()
    n = MIN_ENV_VALUE
    if len(body) < n or (body[:n] not in secrets.grams and body[-n:] not in secrets.grams):
        return line
    begin = len(line) - len(line.lstrip())
    end = begin + len(body)
    if any(body in v for v, _ in secrets.split):
        return line[:begin] + MASK + line[end:]
    head = tail = 0  # the longest start of a value ending the line, the longest end of one starting it
    for v, _ in secrets.split:
        i = v.find(body[-n:])
        while 0 <= i <= len(v) - n - 1:  # where the line's last 8 characters are in v, the value going on after them
            if body.endswith(v[:i + n]):
                head = max(head, i + n)
            i = v.find(body[-n:], i + 1)
        i = v.find(body[:n], 1)
        while i >= 1:  # where its first 8 are, the value having begun before them
            if body.startswith(v[i:]):
                tail = max(tail, len(v) - i)
            i = v.find(body[:n], i + 1)
    if head and tail and head + tail > len(body):  # both in one short line: the longer goes
        head, tail = (head, 0) if head >= tail else (0, tail)
    if head:
        line = line[:end - head] + MASK + line[end:]
    if tail:
        line = line[:begin] + MASK + line[begin + tail:]
    return line


# ---------------------------------------------------------------- redacting


def redact(text: str | None) -> str | None:
    """``text`` with every secret acr can recognise replaced by ``[REDACTED]``; safe to apply twice."""
    if not text:
        return text
    return _redact(text, _secrets())


def _redact(text: str, secrets: _Secrets) -> str:
    """Each pass in turn; every pass first tests for a cheap hint so that most texts skip its regex."""
    text = _mask_known_values(text, secrets)
    text = _mask_urls_and_commands(text)
    text = _TOKENS.sub(lambda m: "Bearer " + MASK if m.group().startswith("Bearer ") else MASK, text)
    if len(text) >= 40:
        text = _B64_RUN.sub(_b64_run, text)
        if MASK + "\n" in text or MASK + "\r\n" in text:
            text = _KEY_TAIL.sub(_mask_key_tail, text)
    return _mask_key_words(text)


def _mask_known_values(text: str, secrets: _Secrets) -> str:
    """The values of secret variables (whole, or split over lines) and private key blocks."""
    if any(map(text.__contains__, secrets.probes)):
        for probe, forms in secrets.literals:
            if probe in text:
                for form in forms:
                    text = text.replace(form, MASK)
    if secrets.split and ("\n" in text or "\\n" in text):
        found = [value for value, pieces in secrets.split if any(map(text.__contains__, pieces))]
        if found:
            text = _mask_split(text, found)
    if "PRIVATE KEY" in text:
        text = _mask_pem(text)
    return text


def _mask_urls_and_commands(text: str) -> str:
    """Credentials inside URLs (webhooks, user:password@, secret query parameters, Telegram bot tokens) and
    in command lines (curl -u, mysql -p)."""
    if "://" in text:
        text = _WEBHOOK.sub(lambda m: m.group(1) + MASK, text)
        text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + MASK, text)
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, text)
    if "api.telegram.org/" in text:
        text = _TELEGRAM.sub(lambda m: m.group(1) + MASK, text)
    if "curl" in text:
        text = _CURL_USER.sub(lambda m: m.group(1) + MASK, text)
    if "mysql" in text or "mariadb" in text:
        text = _MYSQL_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    return text


def _mask_key_words(text: str) -> str:
    """Values assigned to a secret-sounding name (Azure connection strings, ``token=``, ``password:`` ...)."""
    low = text.lower()  # a quick test for the words _ASSIGNED needs spares most texts its slow scan
    if "ccountkey" in low or "sharedaccess" in low:
        text = _AZURE.sub(lambda m: m.group(1) + MASK, text)
        low = text.lower()
    if _names_a_secret(low):
        text = _mask_assigned(text, low)
    return text


def _names_a_secret(low: str) -> bool:
    """Does the lower-cased text hold a word that may name a secret (the cheap gate of :func:`_mask_assigned`)?"""
    return ("token" in low or "secret" in low or "credential" in low or "authorization" in low
            or ("key" in low and _KEY_WORD.search(low) is not None)
            or ("pass" in low and _PASS_WORD.search(low) is not None))


def _mask_assigned(text: str, low: str) -> str:
    if len(low) != len(text):  # a few characters lower-case to two ("İ"): the positions would not match
        return _ASSIGNED_ANY_CASE.sub(lambda m: m.group(1) + MASK, text)
    out, pos = [], 0
    for m in _ASSIGNED.finditer(low):
        out += [text[pos:m.start(2)], MASK]
        pos = m.end(2)
    return "".join(out) + text[pos:] if out else text


class LineRedactor:
    """Redact a stream written line by line (one instance per stream, lines given in order).

    A private key printed over several lines reaches :func:`redact` one line at
    a time, where only its BEGIN line would be recognised. This remembers that
    a block is open: every line from a line ending with
    ``-----BEGIN ... PRIVATE KEY-----`` through the matching END line is
    masked. A block with no END line stops being masked after ``MAX_KEY_LINES``
    lines (the largest keys in use, 16384-bit RSA, take about 200), so a stray
    BEGIN line cannot hide the rest of a log. It also remembers that the last
    line was a line of wrapped base64 (64 or 76 characters), whose shorter last
    line follows. Every other line goes through :func:`redact`, and then loses
    its part of a secret variable's value split over lines when that part is 8
    characters or more: a line is never held back to be seen with the next one,
    so a part shorter than 8 stays readable (:func:`redact` given the whole text
    masks it).
    """

    MAX_KEY_LINES = 300

    def __init__(self) -> None:
        self._open = 0  # lines masked in the open key block; 0: no block is open
        self._body = False  # the last line was a base64 body line (64 or 76 characters): the next may end it

    def line(self, text: str) -> str:
        if self._open:
            end = _PEM_END_RE.search(text)
            if end:
                self._open = 0
                return MASK + (redact(text[end.end():]) or "")
            self._open += 1
            if self._open <= self.MAX_KEY_LINES:
                return MASK
            self._open = 0
        secrets = _secrets()
        bare = text.rstrip("\r")
        after_body = self._body
        self._body = len(bare) in _KEY_LINE_WIDTHS and bool(_KEY_LINE.fullmatch(bare)) and _mixed(bare)
        if after_body and not self._body and _KEY_LAST_LINE_RE.fullmatch(bare) and _key_tail(bare):
            return MASK + text[len(bare):]
        out = _redact(text, secrets) if text else text
        if secrets.grams:
            out = _mask_split_ends(out, secrets)
        if "PRIVATE KEY" in text and _PEM_OPENS_LINE.search(text):
            self._open = 1
        return out


def redact_values(value: Any) -> Any:
    """Every string inside a JSON value redacted, its structure kept: redacting JSON as text could cut it
    (a key block runs to the end of its text) and leave JSON nobody can read back."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_values(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    return value
