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
import os
import re
import time
from pathlib import Path
from typing import Callable, Sequence

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
    xdg_dir,
)
from acr_cli.domain import Arm
from acr_cli.health import limits
from acr_cli.health import readiness as r

SESSION_TIMEOUT = 30.0  # seconds for each of `opencode session list` and `opencode export` (about 2 s each)

PERMISSION = {
    "read-only": {"edit": "deny", "bash": "deny"},
    "workspace-write": {"edit": "allow", "bash": "allow"},
    "full": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
}


INSTALL = "npm install -g opencode-ai"


class OpencodeAdapter(Adapter):
    name = "opencode"
    executable = "opencode"
    install = INSTALL
    login_fix = ("add credentials for the model's provider: `opencode auth login`, or set its API key "
                 "(e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY)")
    check_model = "mock/mock-model"
    reports_cost = True
    status_env = {"OPENCODE_DISABLE_AUTOUPDATE": "1"}

    def env_names(self, model: str) -> list[str]:
        names = set(ENV) | set(provider_env_vars(provider_of(model).lower()))
        # a provider acr does not know reads a variable acr cannot name: any *_API_KEY may be it
        names |= {k for k in os.environ if k.upper().endswith(("_API_KEY", "_APIKEY"))}
        return sorted(names)

    def writable_dirs(self, env) -> list[Path]:
        """Its XDG data (login, sessions), config, cache and state directories."""
        return [xdg_dir(env, var, default) / "opencode" for var, default in
                (("XDG_DATA_HOME", ".local/share"), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"),
                 ("XDG_STATE_HOME", ".local/state"))]

    def credential_files(self, model: str) -> list[Path]:
        return [opencode_data() / "auth.json", *opencode_config_files()]

    def scope(self, model: str, args: Sequence[str] = ()) -> str:
        """``opencode:<provider>`` (``opencode:moonshotai`` for ``moonshotai/kimi-k2.5``): one login per provider."""
        provider = provider_of(model)
        return f"opencode:{provider.lower()}" if provider else "opencode"

    def local_endpoint(self, model: str, args: Sequence[str] = ()) -> tuple[str, str] | None:
        """The model's provider, defined in an opencode config file with a local ``options.baseURL``."""
        provider = provider_of(model)
        url = opencode_base_url(provider) if provider else None
        return (provider, url) if url and r.is_local_url(url) else None

    def readiness(self, exe: str, model: str, args, status) -> tuple:
        """Credentials for the model's provider in ``opencode auth list`` (see :func:`auth_readiness`)."""
        provider = provider_of(model)
        if not provider:
            return (r.UNKNOWN, f"opencode: model {model!r} names no provider (PROVIDER/MODEL expected)",
                    "write the model as PROVIDER/MODEL, e.g. moonshotai/kimi-k2.5", False)
        return auth_readiness(provider, status([exe, "auth", "list"]))

    def classify_error(self, text: str, model: str):
        """opencode 1.18.33 says "Unexpected server error" for a provider without credentials and for an unknown
        model alike (its logs name the cause); a real 5xx carries its status."""
        if not re.search(r"unexpected server error", text, re.I):
            return None
        from acr_cli.health.errors import SETUP, Problem, fix_for

        return Problem(SETUP, "provider refused the request (no credentials for it, or an unknown model)",
                       fix_for(self.name, model, "login") + f"; check the model name {model!r} too")

    def sandbox_env(self, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "mock",
                                  "options": {"baseURL": f"{mock_url}/v1", "apiKey": "acr-mock-key",
                                              "timeout": 60000},
                                  "models": {"mock-model": {"name": "mock-model",
                                                            "cost": {"input": 3, "output": 15}}}}},
            "model": self.check_model,
            "autoupdate": False,
            "share": "disabled",
        }
        path = root / "opencode.json"
        path.write_text(json.dumps(config, indent=2))
        return {"OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
                "OPENCODE_DISABLE_CLAUDE_CODE": "1", "npm_config_registry": f"{mock_url}/npm/"}

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
        events = _Events()
        for ev in json_lines(stdout):
            events.read(ev)
        res = events.res
        res.tokens_in, res.tokens_out = events.tokens_in, events.tokens_out
        # opencode reports cost 0 when the model has no price in its catalogue: treat as unknown.
        res.cost_usd = events.cost if events.cost else None
        if events.error or exit_code:
            res.error = events.error or short(_stderr_reason(stderr)) or f"opencode exited with {exit_code}"
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


class _Events:
    """What the ``run --format json`` events of one opencode run say, read one event at a time."""

    def __init__(self) -> None:
        self.res = AgentResult()
        self.tokens_in: int | None = None  # summed over the steps
        self.tokens_out: int | None = None
        self.cost: float | None = None
        self.error: str | None = None

    def read(self, ev: dict) -> None:
        self.res.session_id = ev.get("sessionID") or self.res.session_id
        kind = ev.get("type")
        handler = self._BY_TYPE.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, ev)

    def _text(self, ev: dict) -> None:
        part = ev.get("part") or {}
        if isinstance(part.get("text"), str):
            self.res.text = part["text"]

    def _step_finish(self, ev: dict) -> None:
        part = ev.get("part") or {}
        tokens = part.get("tokens") or {}
        self.tokens_in = _plus(self.tokens_in, _input_tokens(tokens))
        self.tokens_out = _plus(self.tokens_out, as_int(tokens.get("output")))
        cost = as_float(part.get("cost"))
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def _error(self, ev: dict) -> None:
        err = ev.get("error") or {}
        data = err.get("data") or {}
        status = data.get("statusCode")
        msg = data.get("message") or err.get("name") or "error"
        self.res.limit_resets_at = limit_reset(str(msg), self.res.limit_resets_at)
        self.error = f"API error {status}: {short(msg)}" if status and str(status) not in str(msg) else short(msg)

    _BY_TYPE: dict[str, Callable[[_Events, dict], None]] = {
        "text": _text, "step_finish": _step_finish, "error": _error,
    }


def _plus(total: int | None, more: int | None) -> int | None:
    """A token count summed over steps: None until a step reports one."""
    return total if more is None else (total or 0) + more


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


# --------------------------------------------------------------------------- credentials and providers
#
# `opencode auth list` lists stored credentials (auth.json, one per provider) and, in a second section, the
# provider keys it finds in the environment, each as `● NAME <grey>DETAIL` with ANSI colours even without a
# TTY. NAME is the provider's display name from opencode's bundled catalogue ("Moonshot AI", "MiniMax
# (minimax.io)"), or its id when the catalogue does not know it; DETAIL is the credential type or the
# variable's name. An arm's provider (the model before the first `/`) is found there case-insensitively by
# id, by display name (letters and digits only: "Z.AI" is `zai`), by the names in OPENCODE_PROVIDERS, or in
# the environment section by one of its variables. Not found: not ready, unless an opencode config file
# defines that provider (its `options.apiKey` works although `auth list` shows nothing) or the provider takes
# credentials no listing shows (AMBIENT_PROVIDERS): then unknown. Without credentials `opencode run` ends
# with "Unexpected server error" (its log says ProviderModelNotFoundError).


def provider_of(model: str) -> str:
    """The opencode provider id of ``model`` ("moonshotai/kimi-k2.5" -> "moonshotai"), "" if none."""
    head, sep, _ = (model or "").partition("/")
    return head.strip() if sep else ""


ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "XDG_CONFIG_HOME",
                "XDG_DATA_HOME", "HOME")

# opencode provider id -> (display names, API-key variables), from opencode 1.18.33's bundled catalogue:
# the providers of acr's profiles, common ones, and those whose display name is not their id.
# A provider missing here is still matched by id and name, and by <ID>_API_KEY.
OPENCODE_PROVIDERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "anthropic": (("Anthropic",), ("ANTHROPIC_API_KEY",)),
    "openai": (("OpenAI",), ("OPENAI_API_KEY",)),
    "zhipuai": (("Zhipu AI",), ("ZHIPU_API_KEY",)),
    "zhipuai-coding-plan": (("Zhipu AI Coding Plan",), ("ZHIPU_API_KEY",)),
    "zai": (("Z.AI",), ("ZHIPU_API_KEY",)),
    "zai-coding-plan": (("Z.AI Coding Plan",), ("ZHIPU_API_KEY",)),
    "alibaba": (("Alibaba",), ("DASHSCOPE_API_KEY",)),
    "alibaba-cn": (("Alibaba (China)",), ("DASHSCOPE_API_KEY",)),
    "moonshotai": (("Moonshot AI",), ("MOONSHOT_API_KEY",)),
    "moonshotai-cn": (("Moonshot AI (China)",), ("MOONSHOT_API_KEY",)),
    "kimi-code-plan-global": (("Kimi For Coding (kimi.ai)",), ("KIMI_API_KEY",)),
    "kimi-code-plan-cn": (("Kimi For Coding (kimi.com)",), ("KIMI_API_KEY",)),
    "minimax": (("MiniMax (minimax.io)",), ("MINIMAX_API_KEY",)),
    "minimax-cn": (("MiniMax (minimax.cn)",), ("MINIMAX_API_KEY",)),
    "minimax-coding-plan": (("MiniMax Token Plan (minimax.io)",), ("MINIMAX_API_KEY",)),
    "minimax-cn-coding-plan": (("MiniMax Token Plan (minimax.cn)",), ("MINIMAX_API_KEY",)),
    "openrouter": (("OpenRouter",), ("OPENROUTER_API_KEY",)),
    "deepseek": (("DeepSeek",), ("DEEPSEEK_API_KEY",)),
    "google": (("Google",), ("GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY")),
    "xai": (("xAI",), ("XAI_API_KEY",)),
    "groq": (("Groq",), ("GROQ_API_KEY",)),
    "mistral": (("Mistral",), ("MISTRAL_API_KEY",)),
    "github-copilot": (("GitHub Copilot",), ("GITHUB_TOKEN",)),
    "azure": (("Azure",), ("AZURE_API_KEY",)),
    "vercel": (("Vercel AI Gateway",), ("AI_GATEWAY_API_KEY",)),
    "volcengine": (("Volcengine Ark",), ("ARK_API_KEY",)),
    "stepfun": (("StepFun (China)",), ("STEPFUN_API_KEY",)),
    "stepfun-ai": (("StepFun (Global)",), ("STEPFUN_API_KEY",)),
    "huggingface": (("Hugging Face",), ("HF_TOKEN",)),
    "opencode": (("OpenCode Zen",), ("OPENCODE_API_KEY",)),
}
# Providers whose credentials can come from where `opencode auth list` does not look: missing from
# its listing, they are "unknown", not "not ready".
AMBIENT_PROVIDERS = {
    "amazon-bedrock": "AWS credentials (~/.aws, AWS_PROFILE, instance roles) are not listed",
    "google-vertex": "Google application-default credentials are not listed",
    "google-vertex-anthropic": "Google application-default credentials are not listed",
    "opencode": "opencode's free models need no key",
}


def opencode_data() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "opencode"


def opencode_config_files(start: Path | None = None) -> list[Path]:
    """Where opencode may find provider definitions: $OPENCODE_CONFIG, the global config
    (``$XDG_CONFIG_HOME/opencode``), $OPENCODE_CONFIG_DIR, and the project's ``opencode.json(c)``
    and ``.opencode/`` from ``start`` (the working directory) up to the git root."""
    out: list[Path] = []
    env = os.environ.get("OPENCODE_CONFIG")
    if env:
        out.append(Path(env).expanduser())
    xdg = os.environ.get("XDG_CONFIG_HOME")
    conf = (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "opencode"
    out += [conf / n for n in ("opencode.json", "opencode.jsonc", "config.json")]
    cdir = os.environ.get("OPENCODE_CONFIG_DIR")
    if cdir:
        out += [Path(cdir).expanduser() / n for n in ("opencode.json", "opencode.jsonc")]
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the working directory was removed
        return out
    for d in [here, *here.parents][:20]:
        out += [d / "opencode.json", d / "opencode.jsonc", d / ".opencode" / "opencode.json",
                d / ".opencode" / "opencode.jsonc"]
        if (d / ".git").exists():
            break
    return out


def provider_env_vars(provider: str) -> tuple[str, ...]:
    known = OPENCODE_PROVIDERS.get(provider)
    guess = re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY" if provider else None
    return tuple(dict.fromkeys([*(known[1] if known else ()), *([guess] if guess else [])]))


def opencode_base_url(provider: str) -> str | None:
    """``options.baseURL`` of ``provider`` in the first opencode config file that defines it, else None."""
    pid = provider.lower()
    for path in opencode_config_files():
        try:
            data = jsonc(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        prov = data.get("provider") if isinstance(data, dict) else None
        for key, entry in (prov.items() if isinstance(prov, dict) else ()):
            if isinstance(key, str) and key.lower() == pid and isinstance(entry, dict):
                url = (entry.get("options") or {}).get("baseURL") if isinstance(entry.get("options"), dict) else None
                return url if isinstance(url, str) else None
    return None


_BULLET = re.compile(r"^\s*[●•*]\s+")
_GREY = re.compile(r"\x1b\[90m")


def opencode_listing(raw: str) -> list[tuple[str, str, str]] | None:
    """(section, name, detail) for each entry of ``opencode auth list``; section is "stored" or "env".
    None when the output is not a listing acr recognises."""
    entries: list[tuple[str, str, str]] = []
    section = None
    recognised = False
    for line in raw.splitlines():
        plain = r.strip_ansi(line).strip()
        low = plain.lower()
        if re.match(r"^[┌╭+]?\s*credentials\b", low):
            section, recognised = "stored", True
            continue
        if re.match(r"^[┌╭+]?\s*environment\b", low):
            section, recognised = "env", True
            continue
        if re.search(r"\b\d+\s+(credentials?|environment variables?)\s*$", low):
            recognised = True
            continue
        if section is None or not _BULLET.match(r.strip_ansi(line)):
            continue
        body = _BULLET.sub("", line.replace("\x1b[0m", ""), count=1)
        if _GREY.search(body):  # "Moonshot AI <grey>api": the grey part is the detail
            name, detail = _GREY.split(body, maxsplit=1)
        else:  # no colours: the detail is the last word
            name, _, detail = r.strip_ansi(body).rstrip().rpartition(" ")
        entries.append((section, r.strip_ansi(name).strip(), r.strip_ansi(detail).strip()))
    return entries if recognised else None


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def auth_readiness(provider: str, res) -> tuple[str, str, str | None, bool]:
    cmd = "opencode auth list"
    early = r.cannot_tell("opencode", cmd, res)
    if early:
        return early
    pid = provider.lower()
    entries = opencode_listing(res.stdout or "")
    if entries is None or res.exit_code not in (0, None):
        return (r.UNKNOWN, f"opencode: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                         f"{r.first_line(r.strip_ansi(res.stdout or res.stderr)) or 'nothing'})", None, False)
    known = OPENCODE_PROVIDERS.get(pid, ((), ()))
    names = {_norm(pid), *(_norm(n) for n in known[0])}
    env_vars = set(provider_env_vars(pid))
    for section, name, detail in entries:
        if _norm(name) in names or (section == "env" and detail.strip() in env_vars):
            where = f"{detail} in the environment" if section == "env" else "stored, auth.json"
            return r.READY, f"opencode: credentials for provider {provider} ({where})", None, False
    defined = opencode_defines(pid)
    if defined is not None:
        return (r.UNKNOWN, f"opencode: `{cmd}` lists no credentials for provider {provider}, but {defined} defines "
                         "that provider (its options may hold the key)", None, False)
    if pid in AMBIENT_PROVIDERS:
        return (r.UNKNOWN, f"opencode: `{cmd}` lists no credentials for provider {provider} "
                         f"({AMBIENT_PROVIDERS[pid]})", None, False)
    env_hint = " or ".join(known[1][:2] or provider_env_vars(pid)[:1])
    label = known[0][0] if known[0] else provider
    return (r.NOT_READY, f"opencode: no credentials for provider {provider} ({cmd})",
            f"run `opencode auth login` and choose {label}, or set {env_hint}", False)


def opencode_defines(provider: str) -> str | None:
    """The opencode config file (or ``OPENCODE_CONFIG_CONTENT``) that defines ``provider`` under
    ``provider``, else None. A file acr cannot parse counts when it names the provider in quotes."""
    pid = provider.lower()
    sources: list[tuple[str, str]] = []
    inline = os.environ.get("OPENCODE_CONFIG_CONTENT")
    if inline:
        sources.append(("OPENCODE_CONFIG_CONTENT", inline))
    for path in opencode_config_files():
        try:
            sources.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    for name, text in sources:
        data = jsonc(text)
        if isinstance(data, dict):
            prov = data.get("provider")
            if isinstance(prov, dict) and any(isinstance(k, str) and k.lower() == pid for k in prov):
                return name
        elif data is None and re.search(r'"' + re.escape(pid) + r'"\s*:', text, re.I):
            return name
    return None


def jsonc(text: str):
    """JSON with // and /* */ comments and trailing commas (opencode.jsonc); None if it is not that."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    cleaned = re.sub(r",(\s*[}\]])", r"\1", "".join(out))
    try:
        return json.loads(cleaned)
    except ValueError:
        return None

