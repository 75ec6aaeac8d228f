"""Readiness of an arm: is its CLI installed, and does it have credentials for the arm's provider?

Asked of the CLIs themselves, without spending anything (observed on claude 2.1.197, codex-cli
0.169.0, opencode 1.18.33; see ``../shared/AGENT_CLIS.md``):

* **claude**: ``claude auth status`` prints JSON ``{"loggedIn": bool, "authMethod", "apiProvider",
  "apiKeySource"?}`` (exit 0 logged in, exit 1 not). It sees ``/login``, ANTHROPIC_API_KEY,
  ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, an ``apiKeyHelper`` or ``env`` in settings.json, and
  Bedrock / Vertex set-ups. ``loggedIn`` false is *not ready*; output without that field (a version
  without the command) is *unknown*.
* **codex**: ``codex login status`` exits 0 when a login is stored in ``$CODEX_HOME`` (ChatGPT, or an
  API key saved with ``codex login --with-api-key``) and prints "Not logged in" with exit 1 otherwise.
  What the installed codex actually sends was checked against a local server (``openai_base_url``):
  ``codex exec`` sends ``CODEX_API_KEY`` as its bearer token, and sends *nothing* for
  ``OPENAI_API_KEY`` (nor for ``CODEX_ACCESS_TOKEN``), although ``codex login status`` says "Not
  logged in" in all three cases and ``codex doctor`` counts OPENAI_API_KEY as "auth is provided by
  environment". Hence, when codex is not logged in:

  - ``CODEX_API_KEY`` set: *ready* (codex exec uses it);
  - ``$CODEX_HOME/config.toml`` selecting a ``model_provider`` other than ``openai`` (top level or in
    the active ``[profiles.X]``; or a config.toml Python cannot parse that mentions ``model_provider``):
    *unknown*: that provider's credentials live in its own config (``env_key``, headers) where no
    status command looks, and a provider that needs none (a local server) runs without any login;
  - only ``OPENAI_API_KEY`` set: *unknown*, with the fix (``printenv OPENAI_API_KEY | codex login
    --with-api-key``, or CODEX_API_KEY): the installed version ignores it, other versions did use it,
    and codex's own doctor disagrees with its exec, so acr does not decide for it;
  - otherwise *not ready*.

  A custom provider makes the arm *unknown* even when ``codex login status`` is happy: the OpenAI
  login says nothing about that provider.
* **opencode**: ``opencode auth list`` lists stored credentials (``auth.json``, one per provider) and,
  in a second section, the provider keys it finds in the environment, each as ``● NAME <grey>DETAIL``
  with ANSI colours even without a TTY. NAME is the provider's display name from opencode's bundled
  catalogue ("Moonshot AI", "Zhipu AI", "MiniMax (minimax.io)"), or its id when the catalogue does not
  know it; DETAIL is the credential type or the variable's name. An arm's provider (the part of the
  model before the first ``/``) is found there case-insensitively by id, by display name (letters and
  digits only: "Moonshot AI" is ``moonshotai``, "Z.AI" is ``zai``), by the names in
  :data:`OPENCODE_PROVIDERS`, or in the environment section by one of its variables. Not found:
  *not ready*, unless an opencode config file defines that provider under ``provider`` (its
  ``options.apiKey`` works although ``auth list`` shows nothing) or the provider takes credentials no
  listing shows (:data:`AMBIENT_PROVIDERS`: AWS / Google credential chains, opencode's own free
  models): then *unknown*. Without credentials, ``opencode run`` ends with "Unexpected server error"
  (its log says ProviderModelNotFoundError: an unconfigured provider has no models).

An arm pointed at a model server on this machine or a private network (:func:`local_endpoint`: a codex
``model_provider`` without ``env_key`` chosen by the arm's ``-c`` arguments or config.toml, an opencode
provider whose ``options.baseURL`` is local) needs no login: no status command runs; it is *ready* when
the server accepts a connection, *unknown* when nothing answers (it may be started later).

A CLI that is on PATH but cannot start is *not ready*: the interpreter its first line names is
missing (``#!/usr/bin/env node`` without Node.js: env exits 127) or the file may not be run (126), and
no attempt could run it either (:func:`cannot_start`). Any check that cannot tell (a version without
the status command, output acr does not understand, a timeout, a start that failed for another reason)
gives *unknown*: the arm is shown as such and still tried.

Each answer is cached in ``<cache>/readiness.json`` per credential scope (:func:`scope`) with the
:func:`fingerprint` of what it depends on, and reused while the fingerprint is the same, for at most
:data:`MAX_AGE_S` (credentials a fingerprint cannot see: a keychain, ``~/.aws``); a timeout or a CLI
that did not start is kept :data:`TRANSIENT_TTL_S` only. Status commands run through
:func:`acr_cli.process.run` (argv, stdin closed, their own process group), one per scope at most,
and ``opencode auth list`` once for all opencode scopes of a process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from acr_cli import process
from acr_cli.agents.base import last_json_object
from acr_cli.atomic import atomic_write
from acr_cli.errors import AcrError
from acr_cli.redact import redact

READY, NOT_READY, UNKNOWN = "ready", "not_ready", "unknown"
STATES = (READY, NOT_READY, UNKNOWN)

CACHE_FILE = "readiness.json"
CACHE_FORMAT = 1  # bump when the checks change meaning: older entries are then ignored
MAX_AGE_S = 24 * 3600.0
TRANSIENT_TTL_S = 300.0
VERSION_TIMEOUT_S = 20.0

INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "opencode": "npm install -g opencode-ai",
}
CLAUDE_FIX = "run `claude` and /login (or `claude auth login`), or set ANTHROPIC_API_KEY"
CODEX_FIX = ("run `codex login` (ChatGPT), or `printenv OPENAI_API_KEY | codex login --with-api-key`, "
             "or set CODEX_API_KEY")
CLAUDE_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL",
              "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY",
              "AWS_BEARER_TOKEN_BEDROCK", "CLAUDE_CONFIG_DIR", "HOME")
CODEX_ENV = ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN", "OPENAI_BASE_URL", "CODEX_HOME", "HOME")
OPENCODE_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "XDG_CONFIG_HOME",
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


@dataclass(frozen=True)
class Readiness:
    state: str  # READY | NOT_READY | UNKNOWN
    reason: str  # for people: "claude: not logged in (claude auth status)"
    fix: str | None  # what to do, e.g. "run `claude` and /login, or set ANTHROPIC_API_KEY"
    version: str | None  # the CLI's version ("?" when it did not say), None when not installed

    @property
    def runnable(self) -> bool:
        """Worth trying: ready, or a check that could not tell."""
        return self.state != NOT_READY


# --------------------------------------------------------------------------- scope and fingerprint


def provider_of(model: str) -> str:
    """The opencode provider id of ``model`` ("moonshotai/kimi-k2.5" -> "moonshotai"), "" if none."""
    head, sep, _ = (model or "").partition("/")
    return head.strip() if sep else ""


def scope(agent: str, model: str, args: Sequence[str] = ()) -> str:
    """The credential scope an arm belongs to: ``claude``, ``codex``, ``opencode:<provider>``
    (``opencode:moonshotai`` for ``moonshotai/kimi-k2.5``), else the agent's name. A codex arm whose
    ``args`` choose a model provider (``-c model_provider=local``) is ``codex:<provider>``: the
    OpenAI login of the other codex arms is not its credential, and a 401 there must not hold it."""
    if agent == "opencode":
        provider = provider_of(model)
        return f"opencode:{provider.lower()}" if provider else "opencode"
    if agent == "codex":
        provider = codex_overrides(args).get("model_provider")
        if provider and provider.lower() != "openai":
            return f"codex:{provider}"
    return agent


def fingerprint(agent: str, model: str, *, executable: str | None = None) -> str:
    """A hash of what the readiness of ``scope(agent, model)`` depends on, without starting anything:
    the resolved executable (path, size, mtime), the stat (mtime, size, inode) of the credential and
    config files the CLI reads, and a sha256 of the values (never the values) of the environment
    variables that matter. ``executable`` defaults to the agent's name."""
    exe = shutil.which(executable or agent)
    parts: dict = {"format": CACHE_FORMAT, "scope": scope(agent, model), "exe": _stat_of(exe) if exe else None}
    if exe:
        parts["exe_real"] = _stat_of(os.path.realpath(exe))
        interpreter = _interpreter(os.path.realpath(exe))
        if interpreter is not None:  # Node.js installed, removed or upgraded under an npm CLI: check again
            parts["interpreter"] = [interpreter, _stat_of(shutil.which(interpreter) or interpreter)]
    # only the files there are: opencode's project files are looked for from the working directory up, and a
    # file that is absent from one directory and another must not read as a login that changed
    parts["files"] = {str(p): st for p in credential_files(agent, model) if (st := _stat_of(p)) is not None}
    parts["env"] = _env_digest(_env_names(agent, model))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def credential_files(agent: str, model: str = "") -> list[Path]:
    """The credential and config files ``agent`` reads (whether or not they exist)."""
    home = Path.home()
    if agent == "claude":
        conf = os.environ.get("CLAUDE_CONFIG_DIR")
        base = Path(conf).expanduser() if conf else home / ".claude"
        files = [base / ".credentials.json", home / ".claude.json", base / "settings.json"]
        if conf:
            files.append(base / ".claude.json")
        return files
    if agent == "codex":
        ch = _codex_home()
        return [ch / "auth.json", ch / "config.toml"]
    if agent == "opencode":
        return [_opencode_data() / "auth.json", *opencode_config_files()]
    return []


def _codex_home() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def _opencode_data() -> Path:
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


def _interpreter(path: str) -> str | None:
    """The program a script's ``#!`` line runs (``node`` for ``#!/usr/bin/env node``), or None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]  # env -S node ...: the first word not an option
    return words[0] if words else None


def _stat_of(path) -> list | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [str(path), st.st_size, st.st_mtime_ns, st.st_ino]


def _env_names(agent: str, model: str) -> list[str]:
    if agent == "claude":
        return list(CLAUDE_ENV)
    if agent == "codex":
        return list(CODEX_ENV)
    if agent == "opencode":
        provider = provider_of(model).lower()
        names = set(OPENCODE_ENV) | set(_opencode_env_vars(provider))
        # a provider acr does not know reads a variable acr cannot name: any *_API_KEY may be it
        names |= {k for k in os.environ if k.upper().endswith(("_API_KEY", "_APIKEY"))}
        return sorted(names)
    return []


def _env_digest(names: Iterable[str]) -> str:
    h = hashlib.sha256()
    for name in sorted(set(names)):
        val = os.environ.get(name)
        h.update(name.encode() + b"\0" + (b"-" if val is None else b"+" + val.encode("utf-8", "surrogateescape"))
                 + b"\0")
    return h.hexdigest()


def _opencode_env_vars(provider: str) -> tuple[str, ...]:
    known = OPENCODE_PROVIDERS.get(provider)
    guess = re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY" if provider else None
    return tuple(dict.fromkeys([*(known[1] if known else ()), *([guess] if guess else [])]))


# --------------------------------------------------------------------------- the check


def check(agent: str, model: str, adapter_executable: str, *, cache_dir: Path, timeout: float = 10.0,
          refresh: bool = False, version_argv: Sequence[str] | None = None, args: Sequence[str] = ()) -> Readiness:
    """The readiness of arm ``agent:model`` (extra CLI arguments ``args``) whose CLI is ``adapter_executable``.

    An arm pointed at a model server on this machine or the local network (:func:`local_endpoint`) needs
    no login: it is ready when the server answers, unknown (still tried) when nothing does now; no status
    command runs and nothing is cached. Otherwise reuses the answer cached in ``cache_dir/readiness.json``
    for the arm's scope while its :func:`fingerprint` is the same (``refresh`` ignores the cache), or runs
    the status command (at most ``timeout`` seconds) and ``version_argv`` (default ``EXE --version``)."""
    exe = located(adapter_executable)
    if exe is None:
        return Readiness(NOT_READY, f"{agent}: `{adapter_executable}` is not installed (not found on PATH)",
                         _install_fix(agent, adapter_executable), None)
    local = local_endpoint(agent, model, args)
    if local is not None:
        version = installed_version(adapter_executable, cache_dir=cache_dir, version_argv=version_argv,
                                    refresh=refresh) or "?"
        return _local_readiness(agent, *local, version)
    sc = scope(agent, model, args)
    cache = _Cache(Path(cache_dir))
    if not refresh:
        hit = cache.get(sc, fingerprint(agent, model, executable=adapter_executable))
        if hit is not None:
            return hit
    version = installed_version(adapter_executable, cache_dir=cache_dir, version_argv=version_argv,
                                refresh=refresh) or "?"
    state, reason, fix, transient = _probe(agent, model, exe, Path(cache_dir), timeout, args)
    result = Readiness(state, reason, fix, version)
    # the fingerprint after the check: a status command may itself create the files it reads
    # (claude writes ~/.claude.json on its first start)
    cache.put(sc, fingerprint(agent, model, executable=adapter_executable), result,
              ttl=TRANSIENT_TTL_S if transient else MAX_AGE_S)
    return result


def known_not_ready(agent: str, model: str, adapter_executable: str, cache_dir: Path,
                    args: Sequence[str] = ()) -> str | None:
    """Why arm ``agent:model`` cannot run, if ``acr doctor`` (or ``acr init``) found it not ready and nothing it
    depends on has changed since (the cached answer, its fingerprint unchanged); else None. Runs no command:
    what ``acr run`` and ``acr route`` ask before they plan. An arm on a local server (:func:`local_endpoint`)
    is never held for a login; it cannot run while nothing accepts a connection at its endpoint (a server not
    started: the CLIs would retry it until acr's timeout), which one connection attempt tells."""
    if shutil.which(adapter_executable) is None:
        return None  # (the caller says "not installed" itself)
    local = local_endpoint(agent, model, args)
    if local is not None:
        return None if answers(local[1]) else f"nothing answers at {local[1]}: start its server (e.g. `ollama serve`)"
    hit = _Cache(Path(cache_dir)).get(scope(agent, model, args),
                                      fingerprint(agent, model, executable=adapter_executable))
    if hit is None or hit.state != NOT_READY:
        return None
    return f"not ready ({hit.reason})" + (f"; {hit.fix}" if hit.fix else "")


# --------------------------------------------------------------------------- local model servers

LOCAL_HOSTS = ("localhost", "host.docker.internal")
PROBE_TIMEOUT_S = 1.0


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
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        return str(tomllib.loads(f"v = {text}")["v"])
    except Exception:
        return text


def is_local_url(url: str) -> bool:
    """Whether ``url`` names a server on this machine or a private network (loopback, 10/8, 192.168/16,
    ``localhost``): what ollama, vLLM and llama.cpp's server listen on, and what needs no provider login."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    if host in LOCAL_HOSTS or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def local_endpoint(agent: str, model: str, args: Sequence[str] = ()) -> tuple[str, str] | None:
    """(provider, base URL) when the arm talks to a local model server, else None.

    codex: the ``model_provider`` its ``args`` choose (else ``$CODEX_HOME/config.toml``'s), with that
    provider's ``base_url`` from ``args`` or ``[model_providers.NAME]`` in config.toml, when the provider
    names no ``env_key`` (then codex sends no key at all). opencode: the model's provider, defined in an
    opencode config file with ``options.baseURL``. Local means :func:`is_local_url`."""
    if agent == "codex":
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
    if agent == "opencode":
        provider = provider_of(model)
        url = opencode_base_url(provider) if provider else None
        return (provider, url) if url and is_local_url(url) else None
    return None


def _codex_config() -> dict:
    try:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        return tomllib.loads((_codex_home() / "config.toml").read_text(encoding="utf-8", errors="replace"))
    except Exception:  # no file, or one codex itself would refuse
        return {}


def opencode_base_url(provider: str) -> str | None:
    """``options.baseURL`` of ``provider`` in the first opencode config file that defines it, else None."""
    pid = provider.lower()
    for path in opencode_config_files():
        try:
            data = _jsonc(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        prov = data.get("provider") if isinstance(data, dict) else None
        for key, entry in (prov.items() if isinstance(prov, dict) else ()):
            if isinstance(key, str) and key.lower() == pid and isinstance(entry, dict):
                url = (entry.get("options") or {}).get("baseURL") if isinstance(entry.get("options"), dict) else None
                return url if isinstance(url, str) else None
    return None


def answers(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts a TCP connection at ``url``'s host and port (nothing is sent)."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _local_readiness(agent: str, provider: str, url: str, version: str) -> Readiness:
    """A local arm: ready when its server answers now, else unknown (it may be started later)."""
    where = f"{agent}: provider {provider} at {url}, a local server (no login needed)"
    if answers(url):
        return Readiness(READY, where, None, version)
    return Readiness(UNKNOWN, f"{where}: nothing answers there now", "start the server (e.g. `ollama serve`)",
                     version)


def located(executable: str) -> str | None:
    """The absolute path of the file ``executable`` names on PATH (None: not found). Absolute, because a
    relative PATH entry (``node_modules/.bin``) means nothing to a command run from another directory."""
    exe = shutil.which(executable)
    return os.path.abspath(exe) if exe else None


def installed_version(executable: str, *, cache_dir: Path | None = None, version_argv: Sequence[str] | None = None,
                      refresh: bool = False, timeout: float = VERSION_TIMEOUT_S) -> str | None:
    """The first line ``EXE --version`` (or ``version_argv``) prints; None if not installed or it
    said nothing. Cached (with ``cache_dir``) until the executable's file changes."""
    exe = located(executable)
    if exe is None:
        return None
    argv = [str(a) for a in (version_argv or [exe, "--version"])]
    if argv[0] == executable:
        argv[0] = exe
    key = hashlib.sha256(json.dumps([_stat_of(exe), _stat_of(os.path.realpath(exe)), argv]).encode()).hexdigest()
    cache = _Cache(Path(cache_dir)) if cache_dir is not None else None
    if key in _VERSIONS:  # asked already by this process (`refresh` too: one call per executable)
        return _VERSIONS[key]
    if cache is not None and not refresh:
        hit = cache.version(key)
        if hit is not None:
            return hit
    res = _run(argv, Path(cache_dir) if cache_dir is not None else Path.home(), timeout)
    why = cannot_start(res) if res is not None else None
    if why is not None:
        _VERSIONS[key] = None
        START_PROBLEMS[exe] = why
        return None
    if res is None or res.timed_out or res.not_started:
        _VERSIONS[key] = None  # asked once per process: a CLI that hangs costs its timeout once, not per arm
        return None
    lines = _strip_ansi(res.stdout or res.stderr).strip().splitlines()
    version = _redact(lines[0].strip()) if lines else None
    _VERSIONS[key] = version
    if version and cache is not None:
        cache.put_version(key, version)
    return version


_VERSIONS: dict[str, str | None] = {}
START_PROBLEMS: dict[str, str] = {}  # executable path -> why it cannot start (cannot_start), as this process saw


def _install_fix(agent: str, executable: str) -> str:
    if agent in INSTALL:
        return f"install it: {INSTALL[agent]}"
    return f"install `{executable}` and put it on PATH, or fix `agents.{agent}.command` in the profile"


def _probe(agent: str, model: str, exe: str, cwd: Path, timeout: float,
           args: Sequence[str] = ()) -> tuple[str, str, str | None, bool]:
    """(state, reason, fix, transient) from the agent's status command."""
    if agent == "claude":
        return _claude(_status(agent, [exe, "auth", "status"], cwd, timeout))
    if agent == "codex":
        return _codex(_status(agent, [exe, "login", "status"], cwd, timeout),
                      codex_overrides(args).get("model_provider"))
    if agent == "opencode":
        provider = provider_of(model)
        if not provider:
            return (UNKNOWN, f"opencode: model {model!r} names no provider (PROVIDER/MODEL expected)",
                    "write the model as PROVIDER/MODEL, e.g. moonshotai/kimi-k2.5", False)
        return _opencode(provider, _status(agent, [exe, "auth", "list"], cwd, timeout))
    return UNKNOWN, f"{agent}: acr has no credential check for this CLI", None, False


_MEMO: dict[str, tuple[float, object]] = {}  # one status command per agent and state of its inputs, per process
_MEMO_S = 60.0


def _status(agent: str, argv: list[str], cwd: Path, timeout: float):
    key = hashlib.sha256(json.dumps([argv, fingerprint(agent, "", executable=argv[0]),
                                     sorted(os.environ.items())]).encode("utf-8", "surrogateescape")).hexdigest()
    now = time.monotonic()
    hit = _MEMO.get(key)
    if hit is not None and now - hit[0] < _MEMO_S:
        return hit[1]
    res = _run(argv, cwd, timeout, env={"DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                                        "NO_COLOR": "1"})
    _MEMO[key] = (now, res)
    return res


def _run(argv: list[str], cwd: Path, timeout: float, env: dict | None = None):
    try:
        cwd.mkdir(parents=True, exist_ok=True)
    except OSError:
        cwd = Path.home()
    if not cwd.is_dir():
        cwd = Path("/")
    try:
        return process.run(argv, cwd=cwd, env=process.child_env(cwd, env), timeout=timeout)
    except process.Cancelled:  # Ctrl-C: the command's group is dead; nothing of acr's to undo
        raise KeyboardInterrupt from None


def cannot_start(res) -> str | None:
    """Why a CLI that is on PATH cannot run at all, from what running it gave, else None: exec found no
    interpreter or no permission, or ``env`` (the usual first line, ``#!/usr/bin/env node``) found no
    program to run and exited 127 (126: not executable) before the CLI printed anything."""
    if res.not_started:
        line = _first_line(res.stderr)
        return line if "bad interpreter" in line or line.endswith("Permission denied") else None
    if res.exit_code in (126, 127) and not (res.stdout or "").strip():
        return _first_line(res.stderr) or f"exit {res.exit_code}"
    return None


def _start_fix(agent: str, executable: str) -> str:
    how = f"reinstall it ({INSTALL[agent]})" if agent in INSTALL else "reinstall it"
    return (f"install the interpreter the first line of `{shutil.which(executable) or executable}` names "
            f"(Node.js for the npm-installed CLIs), or {how}")


def _cannot_tell(agent: str, command: str, res) -> tuple[str, str, str | None, bool] | None:
    """The answer for a status command whose CLI cannot start (not ready), timed out or did not start
    (unknown), else None."""
    why = cannot_start(res)
    if why is not None:
        exe = command.split()[0]
        return NOT_READY, f"{agent}: `{exe}` cannot start: {why}", _start_fix(agent, exe), True
    if res.not_started:
        return UNKNOWN, f"{agent}: `{command}` could not start ({_first_line(res.stderr)})", None, True
    if res.timed_out:
        return (UNKNOWN, f"{agent}: `{command}` did not answer within {res.duration_s:.0f} s",
                f"run `{command}` yourself to see why", True)
    return None


def _claude(res) -> tuple[str, str, str | None, bool]:
    cmd = "claude auth status"
    early = _cannot_tell("claude", cmd, res)
    if early:
        return early
    obj = _json_object(res.stdout)
    logged = obj.get("loggedIn") if obj else None
    if not isinstance(logged, bool):
        return (UNKNOWN, f"claude: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                         f"{_first_line(res.stdout or res.stderr) or 'nothing'})",
                "update claude (`claude update`), or check its login yourself", False)
    if not logged:
        return NOT_READY, f"claude: not logged in ({cmd})", CLAUDE_FIX, False
    how = [str(obj[k]) for k in ("authMethod", "apiKeySource") if isinstance(obj.get(k), str) and obj[k]]
    if isinstance(obj.get("apiProvider"), str) and obj["apiProvider"] not in ("firstParty", ""):
        how.append(obj["apiProvider"])
    return READY, f"claude: logged in ({', '.join(dict.fromkeys(how)) or cmd})", None, False


def codex_provider(config: Path | None = None) -> str | None:
    """The model_provider ``$CODEX_HOME/config.toml`` selects when it is not OpenAI's: the top-level
    one, or the active profile's. "?" for a file Python cannot parse that mentions model_provider."""
    path = config or _codex_home() / "config.toml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        data = tomllib.loads(text)
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


def _codex(res, chosen: str | None = None) -> tuple[str, str, str | None, bool]:
    """``chosen``: the model_provider the arm's own arguments select (``-c model_provider=...``)."""
    cmd = "codex login status"
    early = _cannot_tell("codex", cmd, res)
    if early:
        return early
    text = _strip_ansi((res.stdout or "") + "\n" + (res.stderr or ""))
    if chosen and chosen.lower() != "openai":
        return (UNKNOWN, f"codex: the arm's arguments select model_provider {chosen!r}: its credentials are in "
                         "that provider's settings, where no status command looks", None, False)
    provider = codex_provider()
    if provider:
        name = "a model_provider" if provider == "?" else f"model_provider {provider!r}"
        return (UNKNOWN, f"codex: {_codex_home() / 'config.toml'} selects {name}: its credentials are in that "
                         "provider's settings, where no status command looks", None, False)
    logged_out = re.search(r"not logged in", text, re.I)
    if res.exit_code == 0 and not logged_out and re.search(r"logged in", text, re.I):
        how = "an API key" if re.search(r"api key", text, re.I) else "ChatGPT" if "chatgpt" in text.lower() else None
        return READY, f"codex: logged in ({'using ' + how if how else cmd})", None, False
    if logged_out:
        if os.environ.get("CODEX_API_KEY", "").strip():
            return READY, "codex: CODEX_API_KEY is set (codex exec sends it)", None, False
        if os.environ.get("OPENAI_API_KEY", "").strip():
            return (UNKNOWN, "codex: not logged in; OPENAI_API_KEY is set, but codex exec (0.169.0, as checked) "
                             "does not send it, other versions did",
                    "printenv OPENAI_API_KEY | codex login --with-api-key (or set CODEX_API_KEY)", False)
        return NOT_READY, f"codex: not logged in ({cmd})", CODEX_FIX, False
    return (UNKNOWN, f"codex: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                     f"{_first_line(text) or 'nothing'})", "run `codex login status` yourself", False)


_BULLET = re.compile(r"^\s*[●•*]\s+")
_GREY = re.compile(r"\x1b\[90m")


def opencode_listing(raw: str) -> list[tuple[str, str, str]] | None:
    """(section, name, detail) for each entry of ``opencode auth list``; section is "stored" or "env".
    None when the output is not a listing acr recognises."""
    entries: list[tuple[str, str, str]] = []
    section = None
    recognised = False
    for line in raw.splitlines():
        plain = _strip_ansi(line).strip()
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
        if section is None or not _BULLET.match(_strip_ansi(line)):
            continue
        body = _BULLET.sub("", line.replace("\x1b[0m", ""), count=1)
        if _GREY.search(body):  # "Moonshot AI <grey>api": the grey part is the detail
            name, detail = _GREY.split(body, maxsplit=1)
        else:  # no colours: the detail is the last word
            name, _, detail = _strip_ansi(body).rstrip().rpartition(" ")
        entries.append((section, _strip_ansi(name).strip(), _strip_ansi(detail).strip()))
    return entries if recognised else None


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _opencode(provider: str, res) -> tuple[str, str, str | None, bool]:
    cmd = "opencode auth list"
    early = _cannot_tell("opencode", cmd, res)
    if early:
        return early
    pid = provider.lower()
    entries = opencode_listing(res.stdout or "")
    if entries is None or res.exit_code not in (0, None):
        return (UNKNOWN, f"opencode: `{cmd}` gave output acr does not understand (exit {res.exit_code}: "
                         f"{_first_line(_strip_ansi(res.stdout or res.stderr)) or 'nothing'})", None, False)
    known = OPENCODE_PROVIDERS.get(pid, ((), ()))
    names = {_norm(pid), *(_norm(n) for n in known[0])}
    env_vars = set(_opencode_env_vars(pid))
    for section, name, detail in entries:
        if _norm(name) in names or (section == "env" and detail.strip() in env_vars):
            where = f"{detail} in the environment" if section == "env" else "stored, auth.json"
            return READY, f"opencode: credentials for provider {provider} ({where})", None, False
    defined = opencode_defines(pid)
    if defined is not None:
        return (UNKNOWN, f"opencode: `{cmd}` lists no credentials for provider {provider}, but {defined} defines "
                         "that provider (its options may hold the key)", None, False)
    if pid in AMBIENT_PROVIDERS:
        return (UNKNOWN, f"opencode: `{cmd}` lists no credentials for provider {provider} "
                         f"({AMBIENT_PROVIDERS[pid]})", None, False)
    env_hint = " or ".join(known[1][:2] or _opencode_env_vars(pid)[:1])
    label = known[0][0] if known[0] else provider
    return (NOT_READY, f"opencode: no credentials for provider {provider} ({cmd})",
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
        data = _jsonc(text)
        if isinstance(data, dict):
            prov = data.get("provider")
            if isinstance(prov, dict) and any(isinstance(k, str) and k.lower() == pid for k in prov):
                return name
        elif data is None and re.search(r'"' + re.escape(pid) + r'"\s*:', text, re.I):
            return name
    return None


def _jsonc(text: str):
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


# --------------------------------------------------------------------------- helpers


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _strip_ansi(text: str | None) -> str:
    return _ANSI.sub("", text or "")


def _json_object(text: str | None) -> dict | None:
    return last_json_object(_strip_ansi(text))


def _redact(text: str) -> str:
    return redact(text) or ""


def _first_line(text: str | None, n: int = 120) -> str:
    for line in _strip_ansi(text).splitlines():
        line = " ".join(line.split())
        # codex's warning about PATH aliases comes first on every run: not the answer
        if line and not line.startswith("WARNING: proceeding"):
            line = _redact(line)
            return line if len(line) <= n else line[: n - 1] + "…"
    return ""


class _Cache:
    """``readiness.json``: {"format", "scopes": {scope: {fingerprint, checked_at, expires_at, readiness}},
    "versions": {key: version}}. Unreadable or from another format: empty. Written whole (atomically);
    a cache that cannot be written is only a slower next time."""

    def __init__(self, cache_dir: Path):
        self.path = cache_dir / CACHE_FILE

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"format": CACHE_FORMAT, "scopes": {}, "versions": {}}
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            return {"format": CACHE_FORMAT, "scopes": {}, "versions": {}}
        for k in ("scopes", "versions"):
            if not isinstance(data.get(k), dict):
                data[k] = {}
        return data

    def get(self, sc: str, fp: str) -> Readiness | None:
        entry = self._load()["scopes"].get(sc)
        if not isinstance(entry, dict) or entry.get("fingerprint") != fp:
            return None
        expires = entry.get("expires_at")
        if not isinstance(expires, (int, float)) or time.time() >= expires:
            return None
        r = entry.get("readiness")
        try:
            out = Readiness(**r)
        except TypeError:
            return None
        return out if out.state in STATES else None

    def put(self, sc: str, fp: str, r: Readiness, ttl: float) -> None:
        data = self._load()
        now = time.time()
        data["scopes"][sc] = {"fingerprint": fp, "checked_at": now, "expires_at": now + ttl, "readiness": asdict(r)}
        self._save(data)

    def version(self, key: str) -> str | None:
        v = self._load()["versions"].get(key)
        return v if isinstance(v, str) else None

    def put_version(self, key: str, version: str) -> None:
        data = self._load()
        data["versions"][key] = version
        if len(data["versions"]) > 50:  # old executables' entries
            data["versions"] = dict(list(data["versions"].items())[-50:])
        self._save(data)

    def _save(self, data: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(self.path) as f:
                json.dump(data, f, indent=1, sort_keys=True)
        except (OSError, AcrError):
            pass
