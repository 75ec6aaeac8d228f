"""Arm health kept in memory (table ``arm_health``), so parallel runs and later runs share it.

* A **set-up** error sets the arm's credential scope aside (every claude arm when claude is not
  logged in; one opencode provider when its key is refused) for later tasks; one about the model
  itself (unknown, or not allowed to this account) sets that arm aside alone. It comes back when
  what its readiness depends on changes (the CLI, its credential or config files, the API-key
  variables: :func:`acr_cli.health.readiness.fingerprint`), or with ``acr doctor --reset``.
* A **usage limit** (:mod:`acr_cli.health.limits`) holds the arm's credential scope (every arm of that
  login) until the limit resets; then it is tried again by itself (or sooner when its readiness inputs
  change, or with ``acr doctor --reset``).
* A **transient** error cools the arm down for ``COOL_BASE_S`` x 2^(errors in a row - 1), at most
  ``COOL_MAX_S``; the count starts again after an attempt that ran (any verdict but error).

Settings, from first principles (no benchmark data involved): a provider's rate-limit window is
typically a minute, so the first cooldown is one; doubling reaches the hour cap after seven
errors in a row, by when the problem is not transient and a person should look.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable, Iterable

from acr_cli.domain import Arm
from acr_cli.health import readiness
from acr_cli.health.errors import LIMIT, SETUP
from acr_cli.health.limits import FALLBACK_HOLD_S
from acr_cli.redact import redact

if TYPE_CHECKING:  # the error patterns compile on import: routing, which only reads health, skips them
    from acr_cli.health.errors import Problem

COOL_BASE_S = 60.0
COOL_MAX_S = 3600.0
SET_ASIDE, COOLING, HELD = "set_aside", "cooling", "held"


@dataclass(frozen=True)
class Health:
    state: str  # SET_ASIDE | COOLING | HELD
    reason: str
    fix: str | None = None
    until: str | None = None  # cooling, held: UTC ISO time it ends
    errors: int = 1
    since: str | None = None

    def label(self) -> str:
        """The state in a few words: "set aside", "cooling down", "held until 14:00 (usage limit)"."""
        if self.state == HELD:
            return f"held until {_clock(self.until)} (usage limit)"
        return "set aside" if self.state == SET_ASIDE else "cooling down"

    def describe(self) -> str:
        if self.state == HELD:
            return f"held until {_clock(self.until)} (usage limit): {self.reason}"
        if self.state == SET_ASIDE:
            return f"set aside since {_local(self.since)}: {self.reason}" + (f"; {self.fix}" if self.fix else "")
        return f"cooling down until {_local(self.until)} after {self.errors} error(s) in a row: {self.reason}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(s: str) -> datetime:
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def _local(s: str | None) -> str:
    if not s:
        return "?"
    t = _parse(s).astimezone()
    return t.strftime("%H:%M:%S") if t.date() == datetime.now().astimezone().date() else t.strftime("%Y-%m-%d %H:%M")


def _clock(s: str | None) -> str:
    """A reset time for people: HH:MM today, else the date too (local time). A time within a minute is
    rounded up, so the time shown is never before the reset (13:59:39 reads 14:00)."""
    if not s:
        return "?"
    t = _parse(s).astimezone()
    if t.second:
        t = t.replace(second=0) + timedelta(minutes=1)
    return t.strftime("%H:%M") if t.date() == datetime.now().astimezone().date() else t.strftime("%Y-%m-%d %H:%M")


def cooldown_s(errors: int) -> float:
    return min(COOL_BASE_S * 2 ** max(errors - 1, 0), COOL_MAX_S)


class HealthBook:
    """Read and write arm health in a memory. ``scope_of(agent, model)`` names an arm's credential
    scope, ``fingerprint_of(agent, model)`` what its readiness depends on now (both cheap)."""

    def __init__(self, memory, scope_of: Callable[[str, str], str] | None = None,
                 fingerprint_of: Callable[[str, str], str] | None = None):
        if fingerprint_of is None:
            fingerprint_of = readiness.fingerprint
        self.m = memory
        self.scope_of, self.fingerprint_of = scope_of, fingerprint_of

    def _scope(self, arm: Arm) -> str:
        """The arm's credential scope: its arguments count (a codex arm on a provider of its own)."""
        if self.scope_of is not None:
            return self.scope_of(arm.agent, arm.model)
        return readiness.scope(arm.agent, arm.model, arm.args)

    def _rows(self) -> list:
        return self.m.arm_health_rows()  # (a read-only memory from before arm health: none)

    def record(self, arm: Arm, problem: "Problem", detail: str | None = None, now: datetime | None = None) -> Health:
        """Remember what an error attempt showed; returns the arm's health now."""
        now = now or _now()
        reason = redact(f"{problem.what}" + (f" ({_short(detail)})" if detail else ""))
        if problem.kind == LIMIT:
            reason += "" if problem.until_known else f"; no reset time ahead given, tried again in {FALLBACK_HOLD_S / 60:g} min"
            key = f"scope:{self._scope(arm)}"
            self.m.put_arm_health(key, state=HELD, agent=arm.agent, model=arm.model, reason=reason,
                                  fingerprint=self.fingerprint_of(arm.agent, arm.model), until=problem.until,
                                  updated_at=_iso(now))
            return Health(HELD, reason, until=problem.until, since=_iso(now))
        if problem.kind == SETUP:
            key = f"model:{arm.id}" if problem.model_only else f"scope:{self._scope(arm)}"
            self.m.put_arm_health(key, state=SET_ASIDE, agent=arm.agent, model=arm.model, reason=reason,
                                  fix=problem.fix, fingerprint=self.fingerprint_of(arm.agent, arm.model),
                                  updated_at=_iso(now))
            return Health(SET_ASIDE, reason, problem.fix, since=_iso(now))
        key = f"arm:{arm.id}"
        errors = self.m.arm_health_errors(key) + 1
        until = _iso(now + timedelta(seconds=cooldown_s(errors)))
        self.m.put_arm_health(key, state=COOLING, agent=arm.agent, model=arm.model, reason=reason, errors=errors,
                              until=until, updated_at=_iso(now))
        return Health(COOLING, reason, until=until, errors=errors, since=_iso(now))

    def ran(self, arm: Arm) -> None:
        """An attempt of ``arm`` ran (any verdict but error): its transient errors are behind it."""
        try:
            self.m.forget_arm_health(f"arm:{arm.id}")
        except Exception:  # a read-only memory: nothing to forget
            pass

    def of(self, arms: Iterable[Arm], now: datetime | None = None) -> dict[str, Health]:
        """arm id -> its health, for the arms that cannot be tried now. A set-aside or held scope whose
        readiness inputs changed since, and a hold whose limit has reset, are lifted (and forgotten)."""
        now = now or _now()
        rows = {r["key"]: r for r in self._rows()}
        if not rows:
            return {}
        out: dict[str, Health] = {}
        lifted: list[str] = []
        fingerprints: dict[str, str] = {}
        for arm in arms:
            scope = self._scope(arm)
            aside = False
            for r in (rows.get(f"scope:{scope}"), rows.get(f"model:{arm.id}")):
                if r is None or r["key"] in lifted:
                    continue
                fp = fingerprints.get(scope) or fingerprints.setdefault(scope, self.fingerprint_of(arm.agent, arm.model))
                over = r["state"] == HELD and (not r["until"] or _parse(r["until"]) <= now)  # the limit reset
                if fp == r["fingerprint"] and not over:
                    out[arm.id] = (Health(HELD, r["reason"], until=r["until"], since=r["updated_at"])
                                   if r["state"] == HELD else
                                   Health(SET_ASIDE, r["reason"], r["fix"], since=r["updated_at"]))
                    aside = True
                    break
                lifted.append(r["key"])
            if aside:
                continue
            c = rows.get(f"arm:{arm.id}")
            if c is not None and c["until"] and _parse(c["until"]) > now:
                out[arm.id] = Health(COOLING, c["reason"], until=c["until"], errors=c["errors"], since=c["updated_at"])
        for key in lifted:
            try:
                self.m.forget_arm_health(key)
            except Exception:
                pass
        return out

    def reset(self) -> int:
        """Forget all arm health (`acr doctor --reset`)."""
        return self.m.forget_arm_health()


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
