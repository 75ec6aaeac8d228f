"""Readiness of an arm: is its CLI installed, and does it have credentials for the arm's provider?

Asked of the CLIs themselves, without spending anything: each agent module owns its check
(:meth:`acr_cli.agents.base.Adapter.readiness`: which status command, how to read it, which files and
variables it depends on; observed facts in ``../shared/AGENT_CLIS.md``); this module runs it, caches
it and handles what every CLI shares.

An arm pointed at a model server on this machine or a private network (:func:`local_endpoint`, as its
agent finds it in its arguments and configuration) needs no login: no status command runs; it is *ready* when
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
:func:`acr_cli.process.run` (argv, stdin closed, their own process group), each command at most once
a minute per process (several scopes may share one: one listing of every provider's credentials).
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


def _agent(agent: str):
    from acr_cli.agents import registry

    return registry.agent(agent)


def scope(agent: str, model: str, args: Sequence[str] = ()) -> str:
    """The credential scope an arm belongs to: the agent's name, or a narrower scope the agent defines
    (``opencode:<provider>``; ``codex:<provider>`` for a codex arm whose ``args`` choose a model provider)."""
    return _agent(agent).scope(model, args)


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
    return _agent(agent).credential_files(model)


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
    return _agent(agent).env_names(model)


def _env_digest(names: Iterable[str]) -> str:
    h = hashlib.sha256()
    for name in sorted(set(names)):
        val = os.environ.get(name)
        h.update(name.encode() + b"\0" + (b"-" if val is None else b"+" + val.encode("utf-8", "surrogateescape"))
                 + b"\0")
    return h.hexdigest()


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
    """(provider, base URL) when the arm talks to a model server on this machine or network (:func:`is_local_url`),
    else None: the agent says where its arms point (a codex model_provider, an opencode provider's baseURL)."""
    return _agent(agent).local_endpoint(model, args)


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
    lines = strip_ansi(res.stdout or res.stderr).strip().splitlines()
    version = _redact(lines[0].strip()) if lines else None
    _VERSIONS[key] = version
    if version and cache is not None:
        cache.put_version(key, version)
    return version


_VERSIONS: dict[str, str | None] = {}
START_PROBLEMS: dict[str, str] = {}  # executable path -> why it cannot start (cannot_start), as this process saw


def _install_fix(agent: str, executable: str) -> str:
    install = _agent(agent).install
    if install:
        return f"install it: {install}"
    return f"install `{executable}` and put it on PATH, or fix `agents.{agent}.command` in the profile"


def _probe(agent: str, model: str, exe: str, cwd: Path, timeout: float,
           args: Sequence[str] = ()) -> tuple[str, str, str | None, bool]:
    """(state, reason, fix, transient) from the agent's own check (its status command)."""
    return _agent(agent).readiness(exe, model, args, lambda argv: _status(agent, argv, cwd, timeout))


_MEMO: dict[str, tuple[float, object]] = {}  # one status command per agent and state of its inputs, per process
_MEMO_S = 60.0


def _status(agent: str, argv: list[str], cwd: Path, timeout: float):
    key = hashlib.sha256(json.dumps([argv, fingerprint(agent, "", executable=argv[0]),
                                     sorted(os.environ.items())]).encode("utf-8", "surrogateescape")).hexdigest()
    now = time.monotonic()
    hit = _MEMO.get(key)
    if hit is not None and now - hit[0] < _MEMO_S:
        return hit[1]
    res = _run(argv, cwd, timeout, env={**_agent(agent).status_env, "NO_COLOR": "1"})
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
        line = first_line(res.stderr)
        return line if "bad interpreter" in line or line.endswith("Permission denied") else None
    if res.exit_code in (126, 127) and not (res.stdout or "").strip():
        return first_line(res.stderr) or f"exit {res.exit_code}"
    return None


def _start_fix(agent: str, executable: str) -> str:
    install = _agent(agent).install
    how = f"reinstall it ({install})" if install else "reinstall it"
    return (f"install the interpreter the first line of `{shutil.which(executable) or executable}` names "
            f"(Node.js for the npm-installed CLIs), or {how}")


def cannot_tell(agent: str, command: str, res) -> tuple[str, str, str | None, bool] | None:
    """The answer for a status command whose CLI cannot start (not ready), timed out or did not start
    (unknown), else None."""
    why = cannot_start(res)
    if why is not None:
        exe = command.split()[0]
        return NOT_READY, f"{agent}: `{exe}` cannot start: {why}", _start_fix(agent, exe), True
    if res.not_started:
        return UNKNOWN, f"{agent}: `{command}` could not start ({first_line(res.stderr)})", None, True
    if res.timed_out:
        return (UNKNOWN, f"{agent}: `{command}` did not answer within {res.duration_s:.0f} s",
                f"run `{command}` yourself to see why", True)
    return None


# --------------------------------------------------------------------------- helpers


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str | None) -> str:
    return _ANSI.sub("", text or "")


def json_object(text: str | None) -> dict | None:
    return last_json_object(strip_ansi(text))


def _redact(text: str) -> str:
    return redact(text) or ""


def first_line(text: str | None, n: int = 120) -> str:
    for line in strip_ansi(text).splitlines():
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
