"""Helpers shared by the commands: paths, memory, profile loading, output."""

from __future__ import annotations

import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

import typer

from acr_cli.cli.terminal import echo, json_safe
from acr_cli.errors import EXIT_INTERNAL, AcrError

MEMORY_HELP = ("Memory file, or a team's postgresql:// URL (default: ACR_MEMORY, else a URL in .acr.toml, "
               "else `memory` in config.toml, else memory.sqlite in acr's data dir).")
PROFILE_HELP = "Profile name (built-in or in <config>/profiles) or path to a profile YAML."
JSON_HELP = "Print machine-readable JSON on stdout (an error too: {\"error\": {...}})."
JSON_META = "acr.json"  # ctx.meta key: the running command was given --json (cli/app.py)


def paths():
    from acr_cli.paths import Paths

    return Paths.from_env()


def open_memory(memory: str | Path | None, create: bool = True, read_only: bool = False,
                project: Path | None = None, local_copy: bool = False, settings: Any = None):
    """The memory in effect for a command (``--memory``, else ACR_MEMORY, .acr.toml, config.toml, the
    default): :func:`acr_cli.memory.opening.open_memory`. ``local_copy`` (views): while the team's server is
    away, its local copy, with a warning on stderr. ``settings`` (runs, `acr route`): a team's server opens as
    the team's memory, with the local file and ``share_prompts`` these settings give."""
    from acr_cli.memory.opening import open_memory as open_at

    p = paths()
    location = p.memory_choice(memory, project)
    fallback = p.local_copy(location) if local_copy and location.is_server else None
    team_copy = p.local_copy(location) if settings is not None and location.is_server else None
    share = bool(settings.resolve("share_prompts", default=True)[0]) if team_copy is not None else True
    return open_at(location, create=create, read_only=read_only, team_copy=team_copy, share_prompts=share,
                   fallback=fallback, warn=lambda message: echo(f"acr: warning: {message}", err=True))


def open_local_memory(read_only: bool = False, memory: str | None = None):
    """With a team's shared memory (``--memory``, else the one in effect): the local file, which holds this
    machine's own runs and arm health (None while there is none yet)."""
    path = paths().local_copy(paths().memory_choice(memory))
    return open_memory(str(path), create=False, read_only=read_only) if path.exists() else None


PIPE_WIDTH = 4096  # columns of output that goes to a pipe or a file: wide enough that no line is cut


def console(stderr: bool = False):
    """A rich Console on stdout (or stderr). On a terminal it wraps at the terminal's width; into a pipe or a
    file (``| less``, ``> out.txt``, a CI log) lines stay whole unless COLUMNS says otherwise: rich would
    otherwise wrap and cut at 80 columns, or at the width of a terminal on another stream, splitting the
    commands, run ids and arm names people copy from it. Whatever it prints is made terminal-safe
    (acr_cli/cli/terminal.py)."""
    import os

    from acr_cli.cli import terminal

    width = None
    if not _is_terminal(sys.stderr if stderr else sys.stdout) and not os.environ.get("COLUMNS", "").isdigit():
        width = PIPE_WIDTH
    return terminal.console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed
        return False


_printed_json = False  # the command has printed its JSON: an error after it is not printed as a second document


def forget_printed_json() -> None:
    global _printed_json
    _printed_json = False


def print_json(obj: Any) -> None:
    """JSON that strict parsers (jq, JSON.parse) accept: a non-finite number is written as null; no control
    character or bidirectional override is written raw (json_safe)."""
    global _printed_json
    if sys.stdout is None:  # stdout closed (`>&-`): nobody to read it; the command's work is done
        return
    _printed_json = True
    sys.stdout.write(json_safe(json.dumps(_finite_or_null(obj), indent=2, ensure_ascii=False, default=str,
                                          allow_nan=False)) + "\n")


def _finite_or_null(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    return obj


def finite(value: float | None) -> float | None:
    """Typer callback: a number option must be finite (``inf`` and ``nan`` parse as floats)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"expected a finite number, got {value}")
    return value


def report_error(e: AcrError, as_json: bool = False) -> None:
    """The error on stderr; with ``--json`` also on stdout (:func:`json_error`)."""
    echo(f"acr: error: {e.message}", err=True)  # a message may quote an agent's or a verifier's output
    if e.hint:
        echo(f"  hint: {e.hint}", err=True)
    if as_json:
        json_error(e.message, e.hint, e.exit_code)


def json_error(message: str, hint: str | None, exit_code: int) -> None:
    """An error as one line a script reading ``--json`` output can parse (README: "Commands"):
    ``{"error": {"message": ..., "hint": ... or null, "exit_code": N}}``; nothing when the command has printed
    its JSON already (stdout holds one document; its fields and the exit code say what went wrong)."""
    if sys.stdout is None or _printed_json:
        return
    try:
        sys.stdout.write(json_safe(json.dumps({"error": {"message": message, "hint": hint or None,
                                                         "exit_code": exit_code}}, ensure_ascii=False)) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # the reader left, a full device, a closed stdout: stderr has said it
        pass


def report_crash(e: BaseException, as_json: bool = False) -> int:
    from acr_cli.redact import redact  # here: `acr --help` must not compile its patterns
    where = "stderr"
    try:
        log = paths().crash_log
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(redact("".join(traceback.format_exception(type(e), e, e.__traceback__))) + "\n")
        where = str(log)
    except OSError:
        traceback.print_exception(type(e), e, e.__traceback__)
    message, hint = f"{type(e).__name__}: {redact(str(e))}", f"this is a bug in acr; the traceback is in {where}"
    echo(f"acr: internal error: {message}", err=True)
    echo(f"  {hint}", err=True)
    if as_json:
        json_error(f"internal error: {message}", hint, EXIT_INTERNAL)
    return EXIT_INTERNAL


def load_profile(spec: str | None, project: Path | None = None):
    """The profile named on the command line, else by .acr.toml / config.toml, else ``balanced``."""
    from acr_cli import profiles
    from acr_cli.config import Settings

    p = paths()
    settings = Settings(p.config_file, project, p.data_dir)
    settings.tell()
    name, source = settings.resolve("profile", spec, default=profiles.DEFAULT_PROFILE)
    try:
        return profiles.load(name, p.profiles_dir, cache_dir=p.cache_dir / "profiles"), settings
    except AcrError as e:
        if source not in ("command line", "default"):
            e.message += f" (the profile is set in {source})"
        raise


def fmt_money(x: float | None, digits: int | None = 2) -> str:
    """Money for people, through acr's one formatter (acr_cli.money.usd)."""
    from acr_cli.money import usd

    return usd(x, digits)


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def parse_since(text: str | None) -> str | None:
    """``7d``, ``24h``, ``30m`` or an ISO date -> an ISO timestamp (UTC) to compare with."""
    import re
    import time

    if not text:
        return None
    m = re.fullmatch(r"(\d+)\s*([smhdw])", text.strip())
    if m:
        secs = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        try:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - secs))
        except (OverflowError, OSError, ValueError):  # before year 1: everything
            return "0000"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?Z?)?", text.strip()):
        from datetime import datetime

        stamp = text.strip().replace(" ", "T")
        try:
            datetime.fromisoformat(stamp.rstrip("Z"))
        except ValueError as e:  # 2026-13-45 or 2026-02-30 would compare as text and mislead
            raise AcrError(f"--since {text!r}: not a real date ({e})") from None
        return stamp
    raise AcrError(f"--since {text!r}: expected a duration like 7d, 24h, 30m or a date like 2026-11-01")


def project_dir(project: Path | None) -> Path:
    """``--project`` (default: the current directory), resolved; an error when it is not a directory."""
    p = (project or Path.cwd()).resolve()
    if not p.exists():
        raise AcrError(f"project directory {p} does not exist")
    if not p.is_dir():
        raise AcrError(f"--project {p} is a file; give the project's directory")
    return p


def check_kind(kind: str | None) -> str | None:
    """``--kind``, checked against the task kinds acr knows."""
    from acr_cli.context import KINDS

    if kind is not None and kind not in KINDS:
        raise AcrError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    return kind


def task_state(task: dict) -> str:
    """running, passed, unverified (accepted with no verifier: ``passed`` is NULL) or not passed."""
    if task["finished_at"] is None:
        return "running"
    if task["passed"] is None:
        return "unverified"
    return "passed" if task["passed"] else "not passed"
