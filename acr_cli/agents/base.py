"""The adapter interface every agent CLI implements, and helpers they share.

An adapter knows one CLI: how to build its argv for a non-interactive run
(never a shell string), the environment it needs, and how to read its
machine-readable output into an :class:`AgentResult`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from acr_cli.domain import Arm


@dataclass
class Invocation:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the inherited environment
    stdin: str | None = None  # text written to the agent's stdin, then EOF (default: /dev/null)


# Linux refuses a single argument over 128 KiB (MAX_ARG_STRLEN). A longer prompt goes to the
# agent's stdin instead, which `claude -p` and `codex exec` read when no prompt argument is given.
ARGV_PROMPT_MAX = 100_000  # bytes


def prompt_fits_argv(prompt: str) -> bool:
    return len(prompt.encode("utf-8")) <= ARGV_PROMPT_MAX


@dataclass
class AgentResult:
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # as reported by the agent itself
    session_id: str | None = None
    text: str | None = None  # the agent's final message
    error: str | None = None  # API error, rate limit, auth...: the attempt is an `error`
    failed: str | None = None  # the agent ran but cannot have succeeded (e.g. all tools denied)
    # a plan's usage limit the CLI reported in a structured event (claude's rejected rate_limit_event, codex's
    # usage_limit_reached): when it resets (epoch seconds), 0 when it gave no time (acr_cli.health.limits)
    limit_resets_at: float | None = None


class Adapter:
    """Base class: subclasses set ``name``/``executable`` and implement the methods."""

    name: str = ""
    executable: str = ""

    def invocation(self, prompt: str, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        raise NotImplementedError

    def interactive(self, prompt: str | None, arm: Arm, workdir: Path, permissions: str) -> Invocation:
        """Argv for the agent's own interactive screen (used under a pty)."""
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str, exit_code: int | None) -> AgentResult:
        raise NotImplementedError

    def describe(self, line: str) -> str | None:
        """A one-line human summary of an output line for the live view, or None to skip it."""
        return None

    def session_usage(self, workdir: Path, since: float) -> tuple[int, int] | None:
        """Tokens (in, out) of the newest session started after ``since``, from the agent's files."""
        return None

    def watchdog(self, silence_s: float | None) -> "Watchdog | None":
        """A watch over a non-interactive run's output for a CLI that can wait forever without a word
        (``silence_s``: the profile's ``model_silence``), or None: the CLI needs none."""
        return None

    def version_argv(self) -> list[str]:
        return [self.executable, "--version"]

    # ------------------------------------------------------------ what acr knows about the CLI besides a run
    # (defaults: a CLI acr knows nothing about, such as a profile's own `agents:` entry)

    install: str | None = None  # the command that installs the CLI
    login_fix: str | None = None  # what to do after a login error (acr_cli.health.errors)
    price_provider: str | None = None  # the catalog's provider of a model named without one (acr_cli.pricing)
    check_model: str | None = None  # the model `acr doctor --check` asks its mock API for; None: no self-check
    reports_cost: bool = False  # the CLI prints a run's cost (the self-check expects to read one)
    status_env: dict[str, str] = {}  # added to the environment of its status command (no update checks)

    def env_names(self, model: str) -> list[str]:
        """The environment variables the CLI's credentials depend on (their values are hashed, never kept)."""
        return []

    def credential_files(self, model: str) -> list[Path]:
        """The credential and config files the CLI reads (whether or not they exist)."""
        return []

    def writable_dirs(self, env: Mapping[str, str]) -> list[Path]:
        """The directories the CLI writes its own state to (config, login, sessions, caches), for a child
        environment ``env``: writable inside acr's sandbox (acr_cli.sandbox), made there when missing."""
        return []

    def writable_files(self, env: Mapping[str, str]) -> list[Path]:
        """Single files the CLI rewrites outside its directories (writable inside the sandbox when present)."""
        return []

    def scope(self, model: str, args: Sequence[str] = ()) -> str:
        """The credential scope of an arm: arms of one scope share a login (acr_cli.health.readiness.scope)."""
        return self.name

    def local_endpoint(self, model: str, args: Sequence[str] = ()) -> tuple[str, str] | None:
        """(provider, base URL) when the arm talks to a model server on this machine or network, else None."""
        return None

    def readiness(self, exe: str, model: str, args: Sequence[str], status: Callable) -> tuple:
        """(state, reason, fix, transient) of an arm's credentials, asked of the CLI without spending anything.
        ``status(argv)`` runs a status command once per process and returns its process result."""
        from acr_cli.health.readiness import UNKNOWN

        return UNKNOWN, f"{self.name}: acr has no credential check for this CLI", None, False

    def classify_error(self, text: str, model: str) -> Any:
        """A :class:`acr_cli.health.errors.Problem` for an error message only this CLI words so, or None
        (the shared patterns then apply)."""
        return None

    def sandbox_env(self, mock_url: str, root: Path, plan: bool = False) -> dict[str, str]:
        """Environment (and config files under ``root``) that point the CLI at acr's mock model API.
        ``plan``: signed in as a subscriber of a plan, where the CLI tells a plan's login from an API key."""
        return {}


class Watchdog:
    """Reads a run's output lines (``line``) and says when the run is stuck (``check``: a reason, or None)."""

    def line(self, stream: str, line: str) -> None:
        pass

    def check(self) -> str | None:
        return None


# --------------------------------------------------------------------------- helpers


def json_event(line: str) -> dict[str, Any] | None:
    """One line of an agent's JSON event stream as an object; None for anything else (a log line, a
    JSON value that is not an object, a line cut short)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``text`` that sits on a line of its own; other lines are skipped."""
    for line in text.splitlines():
        obj = json_event(line)
        if obj is not None:
            yield obj


def tool_call(tool: Any, args: Any) -> str:
    """A tool call as a progress line shows it: ``Bash: pytest -q``, the command or file it names, else its
    arguments as JSON."""
    args = args if isinstance(args, dict) else {}
    what = args.get("command") or args.get("file_path") or args.get("filePath") or json.dumps(args)
    return f"{tool}: {short(what, 100)}"


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in ``text``: a whole-document object, or the last one-line object."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
    found = None
    for found in json_lines(text):
        pass
    return found


def dig(obj: Any, path: str) -> Any:
    """``dig({"a": {"b": 1}}, "a.b") == 1``; None when any step is missing."""
    for part in path.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


# 2,000 times the largest context window in one attempt: a number beyond it is a CLI's bug (and more than an
# INTEGER column holds on a team's PostgreSQL server: acr_cli.memory.dialect.INT_MAX)
MAX_COUNT = 2**31 - 1


def as_int(val: Any) -> int | None:
    """A count an agent CLI reported (tokens), or None when it is not one: negative, absurdly large, not a number."""
    if isinstance(val, bool) or val is None:
        return None
    try:
        n = int(val)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        return None
    return n if 0 <= n <= MAX_COUNT else None


def as_float(val: Any) -> float | None:
    """An amount an agent CLI reported (USD, a time), or None when it is not one: negative, infinite, NaN."""
    if isinstance(val, bool) or val is None:
        return None
    try:
        x = float(val)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) and x >= 0 else None


def limit_reset(text: str | None, before: float | None = None) -> float | None:
    """For ``AgentResult.limit_resets_at``: when a message (read whole, before it is shortened) says a plan's usage
    limit was reached, its reset (epoch seconds; 0 when it names none), else ``before``."""
    from acr_cli.health import limits

    if before is not None or not limits.is_limit(text):
        return before
    at = limits.reset_time(text)
    return at.timestamp() if at is not None else 0.0


def home_of(env: Mapping[str, str]) -> Path:
    """The home directory a child with environment ``env`` sees (its ``HOME``, else the user's)."""
    return Path(env["HOME"]).expanduser() if env.get("HOME") else Path.home()


def xdg_dir(env: Mapping[str, str], var: str, default: str) -> Path:
    """An XDG base directory (``XDG_CACHE_HOME``...) as a child with ``env`` finds it, else ``~/<default>``."""
    return Path(env[var]).expanduser() if env.get(var) else home_of(env) / default


def tail(text: str, n: int = 20) -> str:
    return "\n".join((text or "").splitlines()[-n:])


def short(text: str | None, n: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"
