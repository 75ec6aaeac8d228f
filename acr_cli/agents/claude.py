"""Claude Code (``claude``).

Non-interactive: ``claude -p --output-format stream-json --verbose --model M
[permission flags] -- PROMPT`` (a prompt too long for one argument goes to stdin
instead). The stream is one JSON object per line; the last one (``type:
result``) carries ``total_cost_usd``, ``usage``, ``session_id``, ``result``
(final text), ``is_error`` and ``permission_denials``. A run whose tool calls were all denied exits 0 with
subtype ``success``: acr counts it as a failed attempt. A plan's usage limit shows as a ``rate_limit_event``
with ``rate_limit_info.status`` "rejected" and ``resetsAt`` (epoch seconds), and as the result text
(:mod:`acr_cli.health.limits`); the event with status "allowed" comes with healthy runs and is ignored.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from acr_cli.agents.base import (
    Adapter,
    AgentResult,
    Invocation,
    as_float,
    as_int,
    home_of,
    json_event,
    json_lines,
    limit_reset,
    prompt_fits_argv,
    short,
    tool_call,
    xdg_dir,
)
from acr_cli.domain import Arm

EDIT_TOOLS = "Bash,Edit,Write,MultiEdit,NotebookEdit,Read,Glob,Grep,LS,TodoWrite"
WRITE_TOOLS = "Bash,Edit,Write,MultiEdit,NotebookEdit"


INSTALL = "npm install -g @anthropic-ai/claude-code"
LOGIN_HINT = "run `claude` and /login (or `claude auth login`), or set ANTHROPIC_API_KEY"
# what `claude auth status` and a run's credentials depend on
ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL",
       "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY",
       "AWS_BEARER_TOKEN_BEDROCK", "CLAUDE_CONFIG_DIR", "HOME")


class ClaudeAdapter(Adapter):
    name = "claude"
    executable = "claude"
    install = INSTALL
    login_fix = "log in: run `claude` and type /login, or set ANTHROPIC_API_KEY"
    price_provider = "anthropic"
    check_model = "claude-sonnet-4-6"
    reports_cost = True
    status_env = {"DISABLE_AUTOUPDATER": "1"}

    def env_names(self, model: str) -> list[str]:
        return list(ENV)

    def writable_dirs(self, env) -> list[Path]:
        """Its config (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``: login, sessions, todos), cache, data and state."""
        conf = env.get("CLAUDE_CONFIG_DIR")
        return [Path(conf).expanduser() if conf else home_of(env) / ".claude",
                xdg_dir(env, "XDG_CACHE_HOME", ".cache") / "claude",
                xdg_dir(env, "XDG_DATA_HOME", ".local/share") / "claude",
                xdg_dir(env, "XDG_STATE_HOME", ".local/state") / "claude"]

    def writable_files(self, env) -> list[Path]:
        """``~/.claude.json``: its settings and per-project state, beside the config directory."""
        return [home_of(env) / ".claude.json"]

    def credential_files(self, model: str) -> list[Path]:
        conf = os.environ.get("CLAUDE_CONFIG_DIR")
        base = Path(conf).expanduser() if conf else Path.home() / ".claude"
        files = [base / ".credentials.json", Path.home() / ".claude.json", base / "settings.json"]
        if conf:
            files.append(base / ".claude.json")
        return files

    def readiness(self, exe: str, model: str, args, status) -> tuple:
        """``claude auth status`` prints JSON ``{"loggedIn": bool, "authMethod", "apiProvider", "apiKeySource"?}``
        (exit 0 logged in, 1 not); it sees /login, the key variables, an ``apiKeyHelper`` and Bedrock / Vertex
        set-ups. ``loggedIn`` false is *not ready*; output without that field (an older CLI) is *unknown*."""
        from acr_cli.health import readiness as r

        cmd = "claude auth status"
        res = status([exe, "auth", "status"])
        early = r.cannot_tell("claude", cmd, res)
        if early:
            return early
        obj = r.json_object(res.stdout)
        logged = obj.get("loggedIn") if obj else None
        if not isinstance(logged, bool):
            return (r.UNKNOWN, f"claude: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                               f"{r.first_line(res.stdout or res.stderr) or 'nothing'})",
                    "update claude (`claude update`), or check its login yourself", False)
        if not logged:
            return r.NOT_READY, f"claude: not logged in ({cmd})", LOGIN_HINT, False
        how = [str(obj[k]) for k in ("authMethod", "apiKeySource") if isinstance(obj.get(k), str) and obj[k]]
        if isinstance(obj.get("apiProvider"), str) and obj["apiProvider"] not in ("firstParty", ""):
            how.append(obj["apiProvider"])
        return r.READY, f"claude: logged in ({', '.join(dict.fromkeys(how)) or cmd})", None, False

    def sandbox_env(self, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
        """``plan``: signed in as a claude.ai subscriber (a mock OAuth token) instead of with an API key: only
        then does claude read a plan's limit headers (``anthropic-ratelimit-unified-*``) and report them
        (``rate_limit_event``)."""
        login = ({"CLAUDE_CODE_OAUTH_TOKEN": "acr-mock-oauth-token",
                  "CLAUDE_CODE_OAUTH_SCOPES": "user:inference user:profile"}
                 if plan else {"ANTHROPIC_API_KEY": "acr-mock-key"})
        return {**login, "ANTHROPIC_BASE_URL": mock_url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0", "API_TIMEOUT_MS": "60000"}

    def _permission_args(self, permissions: str) -> list[str]:
        if permissions == "read-only":
            return ["--permission-mode", "default", f"--disallowedTools={WRITE_TOOLS}"]
        if permissions == "full":
            return ["--permission-mode", "bypassPermissions"]
        return ["--permission-mode", "acceptEdits", f"--allowedTools={EDIT_TOOLS}"]

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose", "--model", arm.model]
        argv += self._permission_args(permissions) + list(arm.args)
        if prompt_fits_argv(prompt):
            return Invocation(argv + ["--", prompt])
        return Invocation(argv, stdin=prompt)

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "--model", arm.model] + self._permission_args(permissions) + list(arm.args)
        return Invocation(argv + (["--", prompt] if prompt else []))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        """The stream-json events: the ``result`` event's usage, cost, text and error; tool calls counted to
        tell "every tool call was denied"; a rejected ``rate_limit_event`` as a usage limit."""
        res = AgentResult()
        final, tool_uses = _read_events(stdout, res)
        if final is None:
            res.error = ("usage limit reached (rate_limit_event: rejected)" if res.limit_resets_at is not None
                         else _first_line(stderr) or f"claude produced no result (exit {exit_code})")
            return res
        _read_result(final, res)
        if (final.get("is_error") or (final.get("subtype") not in (None, "success")) or exit_code
                or res.limit_resets_at is not None):
            _read_error(final, res)
            return res
        res.failed = _all_denied(final, tool_uses)
        return res

    def describe(self, line: str) -> str | None:
        ev = json_event(line)
        if ev is None:
            return None
        if ev.get("type") == "assistant":
            parts = []
            message = ev.get("message") if isinstance(ev.get("message"), dict) else {}
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    parts.append(tool_call(block.get("name"), block.get("input")))
                elif block.get("type") == "text" and block.get("text"):
                    parts.append(short(block["text"], 120))
            return " · ".join(parts) or None
        if ev.get("type") == "result":
            from acr_cli.money import usd

            return f"result: {ev.get('subtype')} cost {usd(ev.get('total_cost_usd', '?'))}"
        return None

    def session_usage(self, workdir: Path, since: float) -> tuple[int, int] | None:
        """Tokens of the newest transcript in ``~/.claude/projects/<project>/`` written after ``since``.

        Claude names the folder after the working directory with every character other
        than a letter or digit turned into ``-``; one API message can appear on several
        lines, so usage is counted once per message id (its last line).
        """
        folder = Path.home() / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(workdir))
        files = [p for p in folder.glob("*.jsonl") if p.stat().st_mtime >= since] if folder.is_dir() else []
        if not files:
            return None
        return transcript_usage(max(files, key=lambda p: p.stat().st_mtime).read_text(errors="replace"))


def transcript_usage(text: str) -> tuple[int, int] | None:
    per_message: dict[str, tuple[int, int]] = {}
    for ev in json_lines(text):
        msg = ev.get("message")
        usage = msg.get("usage") if isinstance(msg, dict) else None
        if isinstance(usage, dict):
            tin = sum(as_int(usage.get(k)) or 0 for k in
                      ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            per_message[str(msg.get("id") or len(per_message))] = (tin, as_int(usage.get("output_tokens")) or 0)
    if not per_message:
        return None
    return sum(v[0] for v in per_message.values()), sum(v[1] for v in per_message.values())


def _read_events(stdout: str, res: AgentResult) -> tuple[dict | None, int]:
    """Walk the events once: the session id and a rejected rate limit into ``res``; return the ``result``
    event (None: the run ended without one) and how many tool calls the assistant made."""
    final = None
    tool_uses = 0
    for ev in json_lines(stdout):
        kind = ev.get("type")
        res.session_id = ev.get("session_id") or res.session_id
        if kind == "assistant":
            tool_uses += _tool_uses(ev)
        elif kind == "result":
            final = ev
        elif kind == "rate_limit_event":
            res.limit_resets_at = _rejected_until(ev.get("rate_limit_info"), res.limit_resets_at)
    return final, tool_uses


def _tool_uses(ev: dict) -> int:
    """The tool_use blocks of one assistant message."""
    message = ev.get("message") if isinstance(ev.get("message"), dict) else {}
    return sum(1 for block in message.get("content") or []
               if isinstance(block, dict) and block.get("type") == "tool_use")


def _read_result(final: dict, res: AgentResult) -> None:
    """Tokens (input counts cache writes and reads), cost and text of the ``result`` event."""
    usage = final.get("usage") or {}
    tin = as_int(usage.get("input_tokens"))
    if tin is not None:
        tin += sum(as_int(usage.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    res.tokens_in, res.tokens_out = tin, as_int(usage.get("output_tokens"))
    res.cost_usd = as_float(final.get("total_cost_usd"))
    res.text = final.get("result") if isinstance(final.get("result"), str) else None


def _read_error(final: dict, res: AgentResult) -> None:
    """A failed run's error (with the API status when the text does not already say it) and any reset time
    its text gives (an answer may quote such words, so only a failed run is read for them)."""
    res.limit_resets_at = limit_reset(res.text, res.limit_resets_at)
    status = final.get("api_error_status")
    detail = res.text or final.get("subtype") or "error"
    res.error = f"API error {status}: {short(detail)}" if status and str(status) not in str(detail) else short(detail)


def _all_denied(final: dict, tool_uses: int) -> str | None:
    """Why the attempt failed when every tool call it made was denied (the profile's permissions), else None."""
    denials = final.get("permission_denials") or []
    if not denials or len(denials) < max(tool_uses, 1):
        return None
    names = sorted({str(d.get("tool_name", "?")) for d in denials if isinstance(d, dict)})
    return f"all {len(denials)} tool calls were denied ({', '.join(names)}); check the profile's permissions"


def _rejected_until(info, before: float | None) -> float | None:
    """A ``rate_limit_event``'s reset time (epoch seconds; 0 when it gives none) when it says the limit is
    reached (status "rejected"), else ``before``."""
    if not isinstance(info, dict) or str(info.get("status", "")).lower() != "rejected":
        return before
    return as_float(info.get("resetsAt")) or 0.0


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return short(line)
    return ""
