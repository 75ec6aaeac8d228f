"""Usage limits of a plan (a subscription's 5-hour or weekly window): recognised in each CLI's words, with
the time the limit resets.

What the CLIs say when a plan's limit is reached (their own formats; see ``../shared/AGENT_CLIS.md``):

* **claude**: the result text ``Claude AI usage limit reached|<reset, epoch seconds>`` (older versions), or
  ``You've hit your limit · resets 2pm (Europe/Paris)`` with, in stream-json, a ``rate_limit_event`` whose
  ``rate_limit_info`` has ``status: "rejected"`` and ``resetsAt`` (epoch seconds). The same event with
  ``status: "allowed"`` comes with every healthy run and means nothing.
* **codex**: an ``error`` event and ``turn.failed`` with ``You've hit your usage limit. ... try again at
  3:04 PM.`` (today, the machine's local time), ``... try again at Jul 5th, 2026 8:19 PM.`` (another day),
  ``... try again in 2 days 17 hours 14 minutes.`` (older versions), or the API's own JSON error
  ``{"type": "usage_limit_reached", "resets_at": <epoch>, "resets_in_seconds": N}`` quoted in the message.
* **opencode**: the provider's 429 in its ``error`` event, e.g. ``You have exceeded the 5-hour usage quota. It
  will reset at 2026-07-30 16:11:46 +0800 CST.``; out of quota on some providers it retries silently and
  never exits (see :mod:`acr_cli.agents.opencode`, the watchdog).

Observed against acr's mock API answering as each provider does (``mockapi.limit_response``; the tests
``test_a_plans_usage_limit_through_the_real_cli_holds_its_login_until_the_reset`` in
``tests/agents/test_real_clis.py``), claude 2.1.197, codex-cli 0.171.0, opencode 1.18.33:

* claude reads the ``anthropic-ratelimit-unified-*`` headers only when signed in to a claude.ai plan (OAuth,
  e.g. ``CLAUDE_CODE_OAUTH_TOKEN``); then it prints ``rate_limit_event`` ``{"status": "rejected", "resetsAt":
  <epoch>, "rateLimitType": "five_hour"}`` and the result (``is_error``, ``api_error_status: 429``) ``You've hit
  your session limit · resets 4pm (UTC)`` (``weekly limit``, ``Opus limit``, ``Sonnet limit`` for the other
  windows; the date too when more than a day ahead: ``resets Nov 30, 2:33pm (UTC)``), exit 1. With an API key
  the same 429 is ``API Error: Request rejected (429) · <the body's message>``: a rate limit, no reset.
* codex (an API-key provider too) turns the 429 ``usage_limit_reached`` body into ``error`` and ``turn.failed``
  events ``You’ve hit your usage limit. Upgrade to Pro (...), visit ... or try again at 4:00 PM.`` (a typographic
  apostrophe; the minute, local time; ``resets_at`` itself is not printed), exit 1, at once.
* opencode retries the 429 for ever (tries 2, 4, 8, 16 s apart) with nothing on stdout; with
  ``--print-logs`` each try is a stderr line ``level=ERROR message="stream error" ... error.error="AI_APICallError:
  <the provider's message>"``, which acr reads (:class:`acr_cli.agents.opencode.SilenceWatchdog`).

The reset time is read with the time zone the text gives (an offset, an IANA name, epoch seconds); a clock time
with no zone is the machine's local time (codex prints it so). When no reset time can be read, or the one read
is already past, the limit is held for :data:`FALLBACK_HOLD_S`: trying a limited arm again costs one quick
attempt that never reached a model (not counted against ``max_attempts``), while holding it too long loses the
arm for hours; an hour, the same as the longest cooldown of a transient error, keeps the first cost small
without retrying on every run.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

FALLBACK_HOLD_S = 3600.0
MAX_HOLD = timedelta(days=31)  # a reset further away than a monthly plan's window is a misreading: capped

_LIMIT = re.compile(
    r"usage limit reached|usage_limit_reached|you['\u2019]?ve (hit|reached) your ([\w-]+ ){0,2}limit|hit your usage limit|"
    r"exceeded the [\w\s-]{0,20}usage (quota|limit)|usage quota (exceeded|reached)|out of extra usage|"
    r"(5-hour|five[_ ]hour|weekly|monthly) (usage )?(limit|quota)[^\n]{0,40}(reached|exceeded)|"
    r"free[_ ]tier[_ ]limit|account[_ ]rate[_ ]limit|gousagelimit", re.I)
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()


def is_limit(text: str | None) -> bool:
    """Does ``text`` say a plan's usage limit was reached (not a per-minute rate limit)?"""
    return bool(text and _LIMIT.search(text))


def reset_time(text: str | None, now: datetime | None = None) -> datetime | None:
    """The UTC time a limit resets, read from a CLI's message; None when it names none."""
    if not text:
        return None
    now = now or datetime.now(timezone.utc)
    for read in (_epoch, _in_duration, _iso_with_offset, _resets_clock_zone, _try_again_at):
        t = read(text, now)
        if t is not None:
            return t
    return None


def _epoch(text: str, now: datetime) -> datetime | None:
    m = re.search(r"(?:limit reached\||\"?resets?_?at\"?\s*[:=]\s*|resetsAt\"?\s*[:=]\s*)(\d{9,11})\b", text, re.I)
    return datetime.fromtimestamp(int(m.group(1)), timezone.utc) if m else None


def _in_duration(text: str, now: datetime) -> datetime | None:
    m = re.search(r"\"?resets_in_seconds\"?\s*[:=]\s*(\d+)", text)
    if m:
        return now + timedelta(seconds=int(m.group(1)))
    m = re.search(r"try again in ((?:\s*\d+\s*(?:days?|hours?|minutes?|mins?|seconds?|secs?),?)+)", text, re.I)
    if not m:
        return None
    unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    seconds = sum(int(n) * unit[u[0].lower()] for n, u in re.findall(r"(\d+)\s*([a-z]+)", m.group(1), re.I))
    return now + timedelta(seconds=seconds)


def _iso_with_offset(text: str, now: datetime) -> datetime | None:
    """``reset at 2026-07-30 16:11:46 +0800`` (or ``...T16:11:46Z``): a date and time with its offset."""
    m = re.search(r"(\d{4}-\d{2}-\d{2})[ T](\d{1,2}:\d{2}(?::\d{2})?)\s*(Z|[+-]\d{2}:?\d{2}|UTC)?", text)
    if not m:
        return None
    clock = m.group(2) if m.group(2).count(":") == 2 else m.group(2) + ":00"
    try:
        t = datetime.fromisoformat(f"{m.group(1)}T{clock}")
    except ValueError:
        return None
    zone = m.group(3)
    if zone in ("Z", "UTC"):
        return t.replace(tzinfo=timezone.utc)
    if zone:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        offset = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
        return t.replace(tzinfo=offset).astimezone(timezone.utc)
    return t.astimezone().astimezone(timezone.utc)  # no zone: the machine's local time


def _resets_clock_zone(text: str, now: datetime) -> datetime | None:
    """claude's ``resets 2pm (Asia/Shanghai)`` / ``resets 5:30am (Europe/Warsaw)``: the next such time there; more
    than a day ahead claude writes the date too: ``resets Nov 30, 2:33pm (UTC)`` (``Jan 2, 2027, 2pm`` another
    year)."""
    m = re.search(r"resets?\s+(?:at\s+)?(?:([A-Za-z]{3})\s+(\d{1,2}),\s+(?:(\d{4}),\s+)?)?"
                  r"(\d{1,2})(?::(\d{2}))?\s*([ap]m)\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\)", text, re.I)
    if not m:
        return None
    try:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(m.group(7))
    except Exception:  # an unknown zone name (or no tz database): local time
        zone = None
    hour, minute, half = int(m.group(4)), int(m.group(5) or 0), m.group(6)
    if not m.group(1):
        return _next_clock(hour, minute, half, zone, now)
    if m.group(1).lower() not in _MONTHS:
        return None
    here = now.astimezone(zone) if zone is not None else now.astimezone()
    year = int(m.group(3) or here.year)
    try:
        t = here.replace(year=year, month=_MONTHS.index(m.group(1).lower()) + 1, day=int(m.group(2)),
                         hour=_hour24(hour, half), minute=minute, second=0, microsecond=0)
    except ValueError:
        return None
    return t.astimezone(timezone.utc)


def _try_again_at(text: str, now: datetime) -> datetime | None:
    """codex's ``try again at 3:04 PM`` (today) or ``try again at Jul 5th, 2026 8:19 PM``, the machine's local time."""
    m = re.search(r"try again at\s+(?:([A-Za-z]{3})[a-z]*\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+)?"
                  r"(\d{1,2}):(\d{2})\s*([AP]M)?", text, re.I)
    if not m:
        return None
    hour, minute, half = int(m.group(4)), int(m.group(5)), m.group(6)
    if m.group(1):
        if m.group(1).lower() not in _MONTHS:
            return None
        hour = _hour24(hour, half)
        try:
            local = datetime(int(m.group(3)), _MONTHS.index(m.group(1).lower()) + 1, int(m.group(2)), hour, minute)
        except ValueError:
            return None
        return local.astimezone().astimezone(timezone.utc)
    return _next_clock(hour, minute, half, None, now)


def _hour24(hour: int, half: str | None) -> int:
    if not half:
        return hour % 24
    return hour % 12 + (12 if half.lower() == "pm" else 0)


def _next_clock(hour: int, minute: int, half: str | None, zone, now: datetime) -> datetime | None:
    """The first time at or after ``now`` (less a minute: a reset being printed as it passes) the clock in
    ``zone`` (None: local) shows ``hour:minute``."""
    hour = _hour24(hour, half)
    if hour > 23 or minute > 59:
        return None
    here = now.astimezone(zone) if zone is not None else now.astimezone()
    t = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if t < here - timedelta(minutes=1):
        t += timedelta(days=1)
    return t.astimezone(timezone.utc)


def hold_until(resets_at: datetime | None, now: datetime | None = None) -> tuple[datetime, bool]:
    """Until when to hold a limited login, and whether that time was read from the CLI (False: the fallback)."""
    now = now or datetime.now(timezone.utc)
    if resets_at is None or resets_at <= now:  # none named, or one already past (claude was seen to repeat a
        return now + timedelta(seconds=FALLBACK_HOLD_S), False  # stale reset for hours): the fallback
    return min(resets_at, now + MAX_HOLD).astimezone(timezone.utc), True  # (callers write it with a Z)
