"""OpenAI Codex CLI (``codex``).

Non-interactive: ``codex exec --json -m M -C DIR -s SANDBOX -c
approval_policy="never" [--skip-git-repo-check] -- PROMPT`` (a prompt too long
for one argument goes to stdin instead). Output is JSONL
events: ``thread.started{thread_id}``, ``item.completed{item}``
(``agent_message``, ``command_execution``, ``error``), ``turn.completed{usage}``,
``turn.failed{error}``. Codex reports tokens but no cost: acr prices them from
the profile. A plan's usage limit ends the turn with "You've hit your usage limit ... try again at
<time>" (read by :mod:`acr_cli.health.limits`); an ``error`` object of type ``usage_limit_reached`` with
``resets_at`` / ``resets_in_seconds``, where a version prints one, gives the reset exactly.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Callable, Sequence

from acr_cli.agents.base import (
    Adapter,
    AgentResult,
    Invocation,
    as_int,
    home_of,
    json_event,
    json_lines,
    limit_reset,
    prompt_fits_argv,
    short,
)
from acr_cli.domain import Arm

SANDBOX = {"read-only": "read-only", "workspace-write": "workspace-write", "full": "danger-full-access"}


def _in_git(workdir: Path) -> bool:
    return any((p / ".git").exists() for p in (workdir, *workdir.parents))


INSTALL = "npm install -g @openai/codex"
LOGIN_HINT = ("run `codex login` (ChatGPT), or `printenv OPENAI_API_KEY | codex login --with-api-key`, "
              "or set CODEX_API_KEY")
ENV = ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN", "OPENAI_BASE_URL", "CODEX_HOME", "HOME")


class CodexAdapter(Adapter):
    name = "codex"
    executable = "codex"
    install = INSTALL
    login_fix = "log in: `codex login` (or `printenv OPENAI_API_KEY | codex login --with-api-key`), or set CODEX_API_KEY"
    price_provider = "openai"
    check_model = "gpt-5.5"  # a slug codex knows: no "model metadata" warning against the mock

    def env_names(self, model: str) -> list[str]:
        return list(ENV)

    def writable_dirs(self, env) -> list[Path]:
        """``$CODEX_HOME`` (``~/.codex``): its login, config, sessions and logs."""
        home = env.get("CODEX_HOME")
        return [Path(home).expanduser() if home else home_of(env) / ".codex"]

    def credential_files(self, model: str) -> list[Path]:
        return [codex_home() / "auth.json", codex_home() / "config.toml"]

    def scope(self, model: str, args: Sequence[str] = ()) -> str:
        """``codex``, or ``codex:<provider>`` when the arm's ``args`` choose a model provider other than OpenAI
        (``-c model_provider=local``): the OpenAI login of the other codex arms is not its credential."""
        provider = codex_overrides(args).get("model_provider")
        return f"codex:{provider}" if provider and provider.lower() != "openai" else "codex"

    def local_endpoint(self, model: str, args: Sequence[str] = ()) -> tuple[str, str] | None:
        """The ``model_provider`` the arm's ``args`` choose (else config.toml's), with its ``base_url`` from
        ``args`` or ``[model_providers.NAME]``, when that provider names no ``env_key`` (codex then sends no key)."""
        from acr_cli.health.readiness import is_local_url

        over = codex_overrides(args)
        provider = over.get("model_provider") or codex_provider()
        if not provider or provider in ("?", "openai"):
            return None
        table = (_codex_config().get("model_providers") or {}).get(provider) or {}
        table = table if isinstance(table, dict) else {}
        prefix = f"model_providers.{provider}."
        url = over.get(prefix + "base_url") or table.get("base_url")
        if over.get(prefix + "env_key") or table.get("env_key") or not isinstance(url, str):
            return None
        return (provider, url) if is_local_url(url) else None

    def readiness(self, exe: str, model: str, args, status) -> tuple:
        """``codex login status`` exits 0 when a login is stored in ``$CODEX_HOME`` (ChatGPT, or a key saved with
        ``codex login --with-api-key``) and prints "Not logged in" with exit 1 otherwise. Checked against a local
        server: ``codex exec`` sends ``CODEX_API_KEY`` as its bearer token and nothing for ``OPENAI_API_KEY``
        (0.169.0), although its own doctor counts the latter. Hence, not logged in: CODEX_API_KEY set is *ready*;
        only OPENAI_API_KEY set is *unknown* (other versions did use it); otherwise *not ready*. A model provider
        other than OpenAI (the arm's ``-c``, or config.toml's) is *unknown*: its credentials are in its own
        settings, where no status command looks."""
        from acr_cli.health import readiness as r

        cmd = "codex login status"
        res = status([exe, "login", "status"])
        early = r.cannot_tell("codex", cmd, res)
        if early:
            return early
        text = r.strip_ansi((res.stdout or "") + "\n" + (res.stderr or ""))
        chosen = codex_overrides(args).get("model_provider")
        if chosen and chosen.lower() != "openai":
            return (r.UNKNOWN, f"codex: the arm's arguments select model_provider {chosen!r}: its credentials are in "
                               "that provider's settings, where no status command looks", None, False)
        provider = codex_provider()
        if provider:
            name = "a model_provider" if provider == "?" else f"model_provider {provider!r}"
            return (r.UNKNOWN, f"codex: {codex_home() / 'config.toml'} selects {name}: its credentials are in that "
                               "provider's settings, where no status command looks", None, False)
        logged_out = re.search(r"not logged in", text, re.I)
        if res.exit_code == 0 and not logged_out and re.search(r"logged in", text, re.I):
            how = ("an API key" if re.search(r"api key", text, re.I)
                   else "ChatGPT" if "chatgpt" in text.lower() else None)
            return r.READY, f"codex: logged in ({'using ' + how if how else cmd})", None, False
        if logged_out:
            if os.environ.get("CODEX_API_KEY", "").strip():
                return r.READY, "codex: CODEX_API_KEY is set (codex exec sends it)", None, False
            if os.environ.get("OPENAI_API_KEY", "").strip():
                return (r.UNKNOWN, "codex: not logged in; OPENAI_API_KEY is set, but codex exec (0.169.0, as checked) "
                                   "does not send it, other versions did",
                        "printenv OPENAI_API_KEY | codex login --with-api-key (or set CODEX_API_KEY)", False)
            return r.NOT_READY, f"codex: not logged in ({cmd})", LOGIN_HINT, False
        return (r.UNKNOWN, f"codex: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                           f"{r.first_line(text) or 'nothing'})", "run `codex login status` yourself", False)

    def sandbox_env(self, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
        home = root / "codex-home"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'model = "{self.check_model}"\nmodel_provider = "mock"\napproval_policy = "never"\n'
            'sandbox_mode = "workspace-write"\ncheck_for_update_on_startup = false\n\n'
            "[analytics]\nenabled = false\n\n"
            "[features]\nplugins = false\nremote_plugin = false\napps = false\nin_app_updates = false\n\n"
            f'[model_providers.mock]\nname = "mock"\nbase_url = "{mock_url}/v1"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\nstream_idle_timeout_ms = 60000\n")
        return {"CODEX_HOME": str(home)}

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "exec", "--json", "-m", arm.model, "-C", str(workdir),
                "-s", SANDBOX.get(permissions, "workspace-write"), "-c", 'approval_policy="never"']
        if not _in_git(workdir):
            argv.append("--skip-git-repo-check")
        argv += list(arm.args)
        if prompt_fits_argv(prompt):
            return Invocation(argv + ["--", prompt])
        return Invocation(argv, stdin=prompt)  # no prompt argument: codex exec reads it from stdin

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        argv = [self.executable, "-m", arm.model, "-C", str(workdir), "-s", SANDBOX.get(permissions, "workspace-write")]
        return Invocation(argv + list(arm.args) + (["--", prompt] if prompt else []))

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        events = _Events()
        for ev in json_lines(stdout):
            events.read(ev)
        res = events.res
        res.tokens_in, res.tokens_out = events.tokens_in, events.tokens_out
        if events.failure or exit_code:
            res.limit_resets_at = limit_reset(events.failure or events.notice, res.limit_resets_at)
            res.error = short(events.failure or events.notice or _stderr_reason(stderr) or f"codex exited with {exit_code}")
        return res

    def describe(self, line: str) -> str | None:
        ev = json_event(line)
        if ev is None:
            return None
        item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        if ev.get("type") == "item.completed":
            if item.get("type") == "command_execution":
                return f"$ {short(item.get('command'), 100)} -> {item.get('exit_code')}"
            if item.get("type") == "agent_message":
                return short(item.get("text"), 120)
            if item.get("type") == "file_change":
                return "edit: " + short(json.dumps(item.get("changes")), 100)
        if ev.get("type") == "turn.failed":
            return "turn failed: " + short((ev.get("error") or {}).get("message"))
        return None

    def session_usage(self, workdir: Path, since: float) -> tuple[int, int] | None:
        """Token totals from the newest ``$CODEX_HOME/sessions/Y/M/D/rollout-*.jsonl`` written after ``since``."""
        home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        files = [p for p in (home / "sessions").glob("*/*/*/rollout-*.jsonl") if p.stat().st_mtime >= since]
        if not files:
            return None
        return rollout_usage(max(files, key=lambda p: p.stat().st_mtime).read_text(errors="replace"))


class _Events:
    """What the ``exec --json`` events of one codex run say, read one event at a time."""

    def __init__(self) -> None:
        self.res = AgentResult()
        self.tokens_in: int | None = None  # summed over the turns
        self.tokens_out: int | None = None
        self.failure: str | None = None  # turn.failed: the run gave up
        self.notice: str | None = None  # top-level "error" events: also retry notices ("Reconnecting... 1/5")
        #                                 of runs that recover

    def read(self, ev: dict) -> None:
        kind = ev.get("type")
        handler = self._BY_TYPE.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, ev)

    def _thread_started(self, ev: dict) -> None:
        self.res.session_id = ev.get("thread_id") or self.res.session_id

    def _turn_completed(self, ev: dict) -> None:
        usage = ev.get("usage") or {}
        self.tokens_in = _plus(self.tokens_in, as_int(usage.get("input_tokens")))
        self.tokens_out = _plus(self.tokens_out, as_int(usage.get("output_tokens")))

    def _turn_failed(self, ev: dict) -> None:
        err = ev.get("error")
        self.res.limit_resets_at = _usage_limit(err, self.res.limit_resets_at)
        self.failure = (err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
                        ) or "turn failed"

    def _error(self, ev: dict) -> None:
        self.notice = ev.get("message") or self.notice
        self.res.limit_resets_at = _usage_limit(ev.get("error"), self.res.limit_resets_at)

    def _item_completed(self, ev: dict) -> None:
        item = ev.get("item") or {}
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            self.res.text = item["text"]

    _BY_TYPE: dict[str, Callable[[_Events, dict], None]] = {
        "thread.started": _thread_started, "turn.completed": _turn_completed, "turn.failed": _turn_failed,
        "error": _error, "item.completed": _item_completed,
    }


def _plus(total: int | None, more: int | None) -> int | None:
    """A token count summed over turns: None until a turn reports one."""
    return total if more is None else (total or 0) + more


def rollout_usage(text: str) -> tuple[int, int] | None:
    """The last ``token_count`` event's ``info.total_token_usage`` (input, output)."""
    best = None
    for ev in json_lines(text):
        payload = ev.get("payload") if isinstance(ev.get("payload"), dict) else {}
        info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
        total = info.get("total_token_usage")
        if isinstance(total, dict):
            best = (as_int(total.get("input_tokens")) or 0, as_int(total.get("output_tokens")) or 0)
    return best


def _usage_limit(err, before: float | None) -> float | None:
    """The reset (epoch seconds) of an error object of type ``usage_limit_reached``, else ``before``."""
    if not isinstance(err, dict) or err.get("type") != "usage_limit_reached":
        return before
    at = as_int(err.get("resets_at"))
    if at:
        return float(at)
    after = as_int(err.get("resets_in_seconds"))
    return time.time() + after if after is not None else 0.0


def _stderr_reason(stderr: str) -> str:
    noise = ("could not create PATH aliases", "Reading additional input from stdin")
    lines = [ln for ln in (stderr or "").splitlines() if ln.strip() and not any(n in ln for n in noise)]
    return lines[-1] if lines else ""


# --------------------------------------------------------------------------- codex's configuration


def codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def _toml(text: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def codex_overrides(args: Sequence[str]) -> dict[str, str]:
    """The ``-c key=value`` / ``--config key=value`` overrides in a codex arm's ``args``, each value as codex
    reads it (TOML, else the raw text): ``{"model_provider": "local", "model_providers.local.base_url": ...}``."""
    out: dict[str, str] = {}
    items = [str(a) for a in args]
    for i, a in enumerate(items):
        if a in ("-c", "--config") and i + 1 < len(items):
            pair = items[i + 1]
        elif a.startswith("--config="):
            pair = a.split("=", 1)[1]
        else:
            continue
        key, sep, value = pair.partition("=")
        if sep:
            out[key.strip()] = _toml_value(value.strip())
    return out


def _toml_value(text: str) -> str:
    """A ``-c`` value as codex takes it: parsed as TOML (``"x"`` is ``x``), else the text itself."""
    try:
        return str(_toml(f"v = {text}")["v"])
    except Exception:
        return text


def codex_provider(config: Path | None = None) -> str | None:
    """The model_provider ``$CODEX_HOME/config.toml`` selects when it is not OpenAI's: the top-level
    one, or the active profile's. "?" for a file Python cannot parse that mentions model_provider."""
    path = config or codex_home() / "config.toml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        data = _toml(text)
    except Exception:
        return "?" if re.search(r"^\s*model_provider\s*=", text, re.M) else None
    chosen = [data.get("model_provider")]
    profiles = data.get("profiles")
    if isinstance(data.get("profile"), str) and isinstance(profiles, dict):
        prof = profiles.get(data["profile"])
        if isinstance(prof, dict):
            chosen.append(prof.get("model_provider"))
    for p in chosen:
        if isinstance(p, str) and p.strip() and p.strip().lower() != "openai":
            return p.strip()
    return None


def _codex_config() -> dict:
    try:
        return _toml((codex_home() / "config.toml").read_text(encoding="utf-8", errors="replace"))
    except Exception:  # no file, or one codex itself would refuse
        return {}
