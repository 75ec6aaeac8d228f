"""What kind of error ended an attempt: set-up, transient, or neither (read from the CLI's own words).

* **set-up**: the arm cannot work here until a person does something: not logged in, 401/403,
  an unknown model, a provider that is not configured, quota or credit exhausted, a CLI that
  cannot start (the interpreter its first line names is missing). The arm is set
  aside for later tasks (see :mod:`acr_cli.health.state`).
* **transient**: it may work in a minute: 429 / rate limit, 5xx, overloaded, a connection reset,
  a network timeout. The arm cools down for a while that grows with repeated errors.

* **limit**: a plan's usage limit was reached (:mod:`acr_cli.health.limits`): every arm of that login is
  held until the limit resets (the time the CLI names, else a fallback), then tried again by itself.

None is evidence about the model's skill. An error matching neither (a crash of the CLI, an
argument it refused) is left to the router like any other error. The patterns are the CLIs'
observed messages (``../shared/AGENT_CLIS.md``) and the HTTP statuses they quote; a quota message
wins over its 429, an authentication message over a generic "server error".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from acr_cli.health import limits

SETUP = "setup"
TRANSIENT = "transient"
LIMIT = "limit"
# kinds of error that show the attempt never reached a model: not counted against max_attempts (acr_cli.loop)
BEFORE_MODEL = (SETUP, LIMIT)


@dataclass(frozen=True)
class Problem:
    kind: str  # SETUP | TRANSIENT | LIMIT
    what: str  # short, for people: "not logged in", "rate limited (429)"
    fix: str | None = None  # what to do (set-up errors)
    model_only: bool = False  # a set-up error about this model (unknown, not allowed): the agent's other models may work
    until: str | None = None  # a limit: UTC ISO time it resets (read from the CLI, else the fallback)
    until_known: bool = False  # that time was read from the CLI's own words


# (pattern, kind, what, fix key): first match wins, so the more specific come first
_RULES: list[tuple[re.Pattern[str], str, str, str | None]] = [
    (re.compile(p, re.I), kind, what, fix) for p, kind, what, fix in [
        # the CLI never ran: `#!/usr/bin/env node` without Node.js (env's words), a shebang naming a
        # program that is gone, a binary for another machine
        (r"\benv: [^\n]*: no such file or directory|bad interpreter|exec format error|cannot execute binary",
         SETUP, "cannot start (the interpreter it needs is missing)", "start"),
        (r"insufficient[_ ]quota|exceeded your current quota|credit balance is too low|out of credits|"
         r"billing|payment required|\b402\b", SETUP, "quota or credit exhausted", "billing"),
        (r"not logged in|please run /login|please log ?in|login required|no credentials|missing bearer|"
         r"missing api key|api key (is )?(missing|not (set|found))|no api key", SETUP, "not logged in", "login"),
        # (a 403 before the 401 patterns: claude words it "Failed to authenticate. API Error: 403 ...")
        (r"\b403\b|forbidden|permission[_ ]denied.*(model|api)|not allowed to (use|access)|"
         r"does not have (permission to use|access to model)", SETUP, "access refused (403)", "access"),
        (r"\b401\b|unauthori[sz]ed|failed to authenticate|invalid[ _-]?(x-)?api[ _-]?key|authentication[_ ]error|"
         r"incorrect api key", SETUP, "credentials refused (401)", "login"),
        (r"model[^\n]{0,80}(not found|(does|may|might) not exist|is not supported|unknown)|unknown model|"
         r"providermodelnotfound|model metadata[^\n]*not found|invalid model", SETUP, "unknown model", "model"),
        (r"provider[^\n]{0,60}(not (found|configured)|unknown)|provideriniterror|no provider", SETUP,
         "provider not configured", "login"),
        (r"\b429\b|rate[_ ]?limit|too many requests", TRANSIENT, "rate limited (429)", None),
        (r"\b529\b|overloaded", TRANSIENT, "overloaded", None),
        (r"\b50[0234]\b|internal server error|bad gateway|service unavailable|gateway time-?out|"
         r"unexpected server error|server_error", TRANSIENT, "server error (5xx)", None),
        (r"econnreset|connection (reset|refused|closed|error)|socket hang up|etimedout|network (error|timeout)|"
         r"timed out|dns|getaddrinfo|enotfound|eai_again|stream (disconnected|error)", TRANSIENT, "network error", None),
    ]
]


def classify(agent: str, model: str, text: str | None, ran: bool = False,
             resets_at: datetime | None = None) -> Problem | None:
    """The problem an error attempt's message shows, or None when it is none of the kinds. ``ran``: the CLI
    showed it had started (an exit status of its own, tokens, an answer): then a line about a missing
    interpreter came from something it ran (a plugin, a tool, the project's scripts), not from its start.
    ``resets_at``: a limit's reset time the CLI gave outside the message (a stream event); it also makes
    the error a limit."""
    if not text:
        return None
    if resets_at is not None or limits.is_limit(text):
        return usage_limit(text, resets_at or limits.reset_time(text))
    own = _agent(agent).classify_error(text, model)  # words only this CLI uses
    if own is not None:
        return own
    for pattern, kind, what, fix in _RULES:
        if fix == "start" and ran:
            continue
        if pattern.search(text):
            return Problem(kind, what, fix_for(agent, model, fix) if kind == SETUP else None,
                           model_only=fix in ("model", "access"))
    return None


def usage_limit(text: str | None, resets_at: datetime | None, what: str = "usage limit reached",
                now: datetime | None = None) -> Problem:
    """A plan's usage limit, held until ``resets_at`` (else the fallback of :mod:`acr_cli.health.limits`)."""
    until, known = limits.hold_until(resets_at, now)
    return Problem(LIMIT, what, until=until.strftime("%Y-%m-%dT%H:%M:%SZ"), until_known=known)


def _agent(agent: str):
    from acr_cli.agents import registry

    return registry.agent(agent)


def fix_for(agent: str, model: str, key: str | None) -> str:
    """What to do about a set-up error of kind ``key`` ("start", "billing", "model", "access"; else a login)."""
    if key == "start":
        return (f"install the interpreter the first line of `{agent}` names (Node.js for the npm-installed "
                f"CLIs) or reinstall {agent}, then `acr doctor --reset`")
    if key == "billing":
        return f"add credit or raise the quota of the account {agent} uses, then `acr doctor --reset`"
    if key == "model":
        return (f"check the model name {model!r} (`{agent}` lists the ones it knows), or remove the arm "
                "from your profile")
    if key == "access":
        return f"the account {agent} uses may not use {model}: check its plan, or remove the arm from your profile"
    return (_agent(agent).login_fix or f"check {agent}'s credentials and configuration") + ", then `acr doctor`"
