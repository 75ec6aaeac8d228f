"""opencode (``opencode``).

Non-interactive: ``opencode run --format json -m PROVIDER/MODEL --dir DIR``,
with the prompt on stdin (then EOF) and ``PWD`` set to the project (opencode
trusts ``PWD``). The prompt goes through stdin because ``opencode run``
re-quotes every message argument that contains a space (``say "hi"`` would
reach the model as ``"say \"hi\""``); text read from stdin arrives as is. Output is
JSONL events carrying ``sessionID``: ``text{part.text}``, ``tool_use``,
``step_finish{part.tokens, part.cost}`` (summed over steps), ``error``.
Permissions are passed as inline config in ``OPENCODE_PERMISSION``.

Out of quota (a plan's limit, a provider's 429 it deems retryable), ``opencode run`` retries silently and
never exits: nothing on stdout, even with ``--format json`` (opencode 1.17-1.18). Its log has the provider's
answer, so acr asks for the log on stderr (``--print-logs --log-level=WARN``: a few lines a run, one
``level=ERROR message="stream error" ... error.error="..."`` line per failed try). :class:`SilenceWatchdog`
ends such a run: at once when a logged error says a plan's usage limit was reached (its reset is read from
it), else after ``model_silence`` seconds without an answer (see its rule there).

Interactive sessions print no usage; afterwards ``opencode session list --format json``
names the project's newest session and ``opencode export ID`` prints it with its
totals in ``info.tokens`` (input, output, cache read/write).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from acr_cli import process
from acr_cli.agents.base import (
    Adapter,
    AgentResult,
    Invocation,
    Watchdog,
    as_float,
    as_int,
    json_event,
    json_lines,
    limit_reset,
    short,
    tool_call,
)
from acr_cli.domain import Arm
from acr_cli.health import limits

SESSION_TIMEOUT = 30.0  # seconds for each of `opencode session list` and `opencode export` (about 2 s each)

PERMISSION = {
    "read-only": {"edit": "deny", "bash": "deny"},
    "workspace-write": {"edit": "allow", "bash": "allow"},
    "full": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
}


class OpencodeAdapter(Adapter):
    name = "opencode"
    executable = "opencode"

    def _env(self, workdir: Path, permissions: str) -> dict[str, str]:
        perm = PERMISSION.get(permissions, PERMISSION["workspace-write"])
        return {"PWD": str(workdir), "OPENCODE_PERMISSION": json.dumps(perm)}

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "run", "--format", "json", "-m", arm.model, "--dir", str(workdir),
                "--print-logs", "--log-level=WARN"]
        return Invocation(argv + list(arm.args), self._env(workdir, permissions), stdin=prompt)

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, str(workdir), "-m", arm.model] + list(arm.args)
        if prompt:
            argv += ["--prompt", prompt]
        return Invocation(argv, self._env(workdir, permissions))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        res = AgentResult()
        tin = tout = None
        cost = None
        error = None
        for ev in json_lines(stdout):
            res.session_id = ev.get("sessionID") or res.session_id
            kind = ev.get("type")
            part = ev.get("part") or {}
            if kind == "text" and isinstance(part.get("text"), str):
                res.text = part["text"]
            elif kind == "step_finish":
                tokens = part.get("tokens") or {}
                step_in = _input_tokens(tokens)
                if step_in is not None:
                    tin = (tin or 0) + step_in
                if as_int(tokens.get("output")) is not None:
                    tout = (tout or 0) + as_int(tokens.get("output"))
                if as_float(part.get("cost")) is not None:
                    cost = (cost or 0.0) + as_float(part.get("cost"))
            elif kind == "error":
                err = ev.get("error") or {}
                data = err.get("data") or {}
                status = data.get("statusCode")
                msg = data.get("message") or err.get("name") or "error"
                res.limit_resets_at = limit_reset(str(msg), res.limit_resets_at)
                error = f"API error {status}: {short(msg)}" if status and str(status) not in str(msg) else short(msg)
        res.tokens_in, res.tokens_out = tin, tout
        # opencode reports cost 0 when the model has no price in its catalogue: treat as unknown.
        res.cost_usd = cost if cost else None
        if error or exit_code:
            res.error = error or short(_stderr_reason(stderr)) or f"opencode exited with {exit_code}"
        return res

    def watchdog(self, silence_s: float | None) -> Watchdog | None:
        return SilenceWatchdog(silence_s) if silence_s else None

    def session_usage(self, workdir: Path, since: float) -> tuple[int, int] | None:
        """Tokens of the newest opencode session in ``workdir`` updated after ``since`` (None if none)."""
        env = process.child_env(workdir)
        listing = process.run([self.executable, "session", "list", "--format", "json", "-n", "20"], cwd=workdir,
                              env=env, timeout=SESSION_TIMEOUT)
        sid = newest_session(listing.stdout, workdir, since)
        if sid is None:
            return None
        exported = process.run([self.executable, "export", sid], cwd=workdir, env=env, timeout=SESSION_TIMEOUT)
        return export_usage(exported.stdout)

    def describe(self, line: str) -> str | None:
        ev = json_event(line)
        if ev is None:
            return None
        part = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        if ev.get("type") == "tool_use":
            state = part.get("state") if isinstance(part.get("state"), dict) else {}
            return tool_call(part.get("tool"), state.get("input"))
        if ev.get("type") == "text":
            return short(part.get("text"), 120)
        if ev.get("type") == "error":
            return "error: " + short(json.dumps(ev.get("error")), 120)
        return None


class SilenceWatchdog(Watchdog):
    """Ends an ``opencode run`` that waits on its model for longer than ``silence_s`` seconds with nothing printed.

    The rule: opencode waits on the model from its start to its first ``step_start`` event, and from each
    ``step_finish`` to the next ``step_start`` (a step starts when the model's answer starts streaming).
    Only those waits are watched: inside a step a tool may run for long, and its event comes when it ends.

    The bound (profile setting ``model_silence``, 150 s by default), from first principles: a healthy run
    starts in 4-8 s and a provider starts streaming within seconds; opencode retries a transient error
    (5xx, a rate limit) with a backoff from 2 s, doubling, and was seen to give up on a 500 after ~87 s
    with exit 1. A wait far beyond that (here: over 1.5 times it) is a retry that will not end by
    itself (an exhausted quota whose reset is hours away); acr's own ``timeout`` still bounds the rest.

    A provider's error in opencode's log (stderr) that says a plan's usage limit was reached ends the run at
    once, with that error (and so its reset) in the reason: such a retry only ends at the reset.
    """

    def __init__(self, silence_s: float, clock=time.monotonic):
        self.silence_s, self.clock = silence_s, clock
        self.waiting_since: float | None = clock()  # waiting on the model since then; None: a step runs
        self.provider_error: str | None = None  # the last error opencode logged for a model request

    def line(self, stream: str, line: str) -> None:
        if stream == "err":
            self.provider_error = logged_error(line) or self.provider_error
            return
        ev = json_event(line)
        kind = ev.get("type") if ev else None
        if kind == "step_start":
            self.waiting_since = None
        elif kind == "step_finish":
            self.waiting_since = self.clock()

    def check(self) -> str | None:
        if self.waiting_since is not None and limits.is_limit(self.provider_error):
            return f"opencode retries silently on its provider's usage limit: {self.provider_error}"
        if self.waiting_since is None or self.clock() - self.waiting_since <= self.silence_s:
            return None
        said = f"; its last logged error: {short(self.provider_error)}" if self.provider_error else ""
        return (f"no answer from the model for {self.silence_s:g}s and nothing printed (model_silence): opencode "
                f"retries silently when out of quota{said}")


def logged_error(line: str) -> str | None:
    """The error of one of opencode's ``level=ERROR`` log lines (``error.error="AI_APICallError: ..."``), without
    the error class's name; None for any other line."""
    if "level=ERROR" not in line:
        return None
    m = re.search(r'\berror(?:\.error|\.message)?="((?:[^"\\]|\\.)*)"', line)
    if not m:
        return None
    text = m.group(1).replace('\\"', '"')
    return re.sub(r"^\w*Error:\s*", "", text) or None


def newest_session(listing: str, workdir: Path, since: float) -> str | None:
    """The id of the newest session of ``workdir`` in ``opencode session list --format json`` output
    updated at or after ``since`` (seconds; opencode counts milliseconds)."""
    try:
        sessions = json.loads(listing or "null")
    except ValueError:
        return None
    best = None
    for ses in sessions if isinstance(sessions, list) else []:
        if not isinstance(ses, dict) or ses.get("directory") != str(workdir) or not ses.get("id"):
            continue
        updated = as_float(ses.get("updated"))
        if updated is not None and updated >= since * 1000 and (best is None or updated > best[0]):
            best = (updated, str(ses["id"]))
    return best[1] if best else None


def export_usage(text: str) -> tuple[int, int] | None:
    """(input incl. cache reads/writes, output) tokens from ``opencode export ID`` output."""
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    info = data.get("info") if isinstance(data, dict) else None
    tokens = info.get("tokens") if isinstance(info, dict) else None
    tin = _input_tokens(tokens) if isinstance(tokens, dict) else None
    return None if tin is None else (tin, as_int(tokens.get("output")) or 0)


def _input_tokens(tokens: dict) -> int | None:
    """opencode's ``tokens``: input plus cache reads and writes (all of it was read by the model)."""
    base = as_int(tokens.get("input"))
    if base is None:
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    return base + (as_int(cache.get("read")) or 0) + (as_int(cache.get("write")) or 0)


def _stderr_reason(text: str) -> str:
    """Why a run failed, from stderr: its last line that is not a log line, else the last error logged."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if not _LOG_LINE.match(ln)]
    if said:
        return said[-1]
    logged = [e for e in map(logged_error, lines) if e]
    return logged[-1] if logged else ""


_LOG_LINE = re.compile(r"^timestamp=\S+ level=[A-Z]+ ")
