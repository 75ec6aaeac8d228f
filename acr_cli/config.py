"""User settings (``<config>/config.toml``) and project settings (``.acr.toml``).

A setting is resolved, highest first, from: the command line, the project's
``.acr.toml`` (searched upwards from the project directory), the user's
``config.toml``, the profile's ``settings:``, acr's default. ``resolve``
returns the value *and* where it came from, so ``acr route --explain`` and
``acr config show`` can say why.

Both files are TOML::

    profile = "cheap"          # config.toml or .acr.toml
    verify = "pytest -q"       # usually in .acr.toml
    timeout = 900
    max_cost = 2.0
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from acr_cli import profiles, trust
from acr_cli.atomic import atomic_write
from acr_cli.domain import PERMISSIONS
from acr_cli.errors import AcrError, ConfigError, ProfileError
from acr_cli.paths import Paths
from acr_cli.routing import registry
from acr_cli.setting_keys import TABLE, TYPE_NAMES, RaceCount

RACE_LANES = ("auto", "overlay", "worktree")  # race_lanes (acr_cli.workspace.overlay): how race lanes are made
SANDBOX_MODES = ("bwrap", "none")  # the sandbox setting's values (acr_cli.sandbox): bubblewrap, or none

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KEYS = {key: kind for key, (kind, _) in TABLE.items()}
BASELINE_MODES = ("check", "accept", "off")  # the verifier on the untouched tree: see acr_cli.session
PROJECT_FILE = ".acr.toml"
# A project file must not move the user's memory file; it may name the team's shared memory (a URL)
# that runs in the project record into (a project file is trusted like its `verify`, which runs code).
USER_ONLY = ("memory",)


def read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        if path.exists():
            raise ConfigError(f"{path} is not a file", hint="move it aside; acr reads settings from a TOML file there")
        if path.is_symlink():  # dangling, or a loop: the settings written for acr are out of its reach, not absent
            raise ConfigError(f"{path} is a symbolic link to nothing acr can read",
                              hint="point it at the settings file, or remove it")
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except OSError as e:  # unreadable (permissions): never read as "no settings"
        raise ConfigError(f"cannot read {path}: {e.strerror or e}", hint="check its permissions") from None
    for key, val in data.items():
        want = KEYS.get(key)
        if want is None:
            raise ConfigError(f"{path}: unknown setting {key!r}", hint=f"known settings: {', '.join(KEYS)}")
        number = (int,) if want is int else (int, str) if want is RaceCount else (int, float)  # 2.7 is no count
        ok = isinstance(val, number) and not isinstance(val, bool) if want in (int, float, RaceCount) \
            else isinstance(val, want)
        if want is list:
            ok = ok and all(isinstance(item, str) for item in val)
        if not ok:
            raise ConfigError(f"{path}: setting {key!r} should be a {TYPE_NAMES[want]}, got {val!r}")
        problem = check_value(key, val)
        if problem:
            raise ConfigError(f"{path}: setting {key!r}: {problem}")
    return data


def check_value(key: str, value: Any) -> str | None:
    """What is wrong with a setting's value (the same limits as the command-line options), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    for check in _CHECKS.get(key, ()):
        problem = check(value)
        if problem:
            return problem
    return None


def _not_below(low: float, expected: str) -> Callable[[Any], str | None]:
    return lambda value: f"expected {expected}, got {value!r}" if value < low else None


def _one_of(choices: Sequence[str], expected: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in choices else f"expected {expected}, got {value!r}"


def _no_empty_item(expected: str) -> Callable[[Any], str | None]:
    return lambda value: f"expected {expected}, got an empty one" if any(not item.strip() for item in value) else None


def _some_arm(value: list[str]) -> str | None:
    return None if value else "expected at least one arm (leave the setting out to use every arm of the profile)"


def _policy(value: str) -> str | None:
    try:
        registry.parse(value, live=True, option="policy")
    except AcrError as e:
        return e.message
    return None


def _race(value: Any) -> str | None:
    from acr_cli.routing.race import parse_ask

    try:
        parse_ask(value)
    except ValueError as e:
        return str(e)
    return None


def _non_empty(value: Any) -> str | None:
    return None if str(value).strip() else "expected a non-empty string"


def _memory_location(value: Any) -> str | None:
    if "://" in str(value) and not str(value).startswith(("postgresql://", "postgres://")):
        return f"expected a file path or a postgresql:// URL, got {value!r}"
    return None


_ARMS = _no_empty_item('agents or arms such as "codex" or "codex:gpt-5.4"')
# each setting's checks, in order: the first problem found is the one reported
_CHECKS: dict[str, tuple[Callable[[Any], str | None], ...]] = {
    "timeout": (_not_below(1, "at least 1 (seconds)"),),
    "verify_timeout": (_not_below(1, "at least 1 (seconds)"),),
    "max_attempts": (_not_below(1, "at least 1"),),
    "max_cost": (_not_below(0, "0 or more (USD)"),),
    "time_weight": (_not_below(0, "0 or more (USD a minute)"),),
    "baseline": (_one_of(BASELINE_MODES, "check, accept or off"),),
    "permissions": (_one_of(PERMISSIONS, f"one of {', '.join(PERMISSIONS)}"),),
    "protect": (_no_empty_item('globs such as "tests/**"'),),
    "race": (_race,),
    "race_copy": (_no_empty_item('globs such as ".env"'),),
    "arms": (_ARMS, _some_arm),
    "exclude": (_ARMS,),
    "policy": (_policy,),
    "profile": (_non_empty,),
    "memory": (_non_empty, _memory_location),
    "sandbox": (_one_of(SANDBOX_MODES, "bwrap or none"),),
    "race_lanes": (_one_of(RACE_LANES, "auto, overlay or worktree"),),
}


def find_project_file(project: Path) -> Path | None:
    for d in (project, *project.parents):
        candidate = d / PROJECT_FILE
        if candidate.is_file() or candidate.exists() or candidate.is_symlink():  # not a file: read_toml says so
            return candidate
        if (d / ".git").exists():
            break
    return None


def _anchor_profile_path(data: dict[str, Any], file: Path | None) -> None:
    """A relative profile path in a settings file is relative to that file (not to where acr runs)."""
    spec = data.get("profile")
    if file is not None and isinstance(spec, str) and profiles.is_path(spec):
        p = Path(spec).expanduser()
        if not p.is_absolute():
            data["profile"] = str(file.parent / p)


class Settings:
    """Layered settings with provenance. A project file the user has not trusted (acr_cli.trust) ranks below
    the user's config.toml, and what it may never set is dropped: ``ignored`` says what, and why."""

    def __init__(self, user_file: Path, project: Path | None, data_dir: Path | None = None):
        self.user_file = user_file
        self.user = read_toml(user_file)
        self.project_file = find_project_file(project) if project else None
        self.project = read_toml(self.project_file) if self.project_file else {}
        self.trusted = True
        self.ignored: dict[str, str] = {}  # key -> why an untrusted project file's value was not used
        if self.project_file is not None and self.project:
            self.trusted = trust.is_trusted(self.project_file, data_dir or Paths.from_env().data_dir)
            if not self.trusted:
                self._drop_untrusted()
        for data, where in ((self.user, user_file), (self.project, self.project_file)):
            _anchor_profile_path(data, where)
        for key in USER_ONLY:
            if key == "memory" and str(self.project.get(key, "")).startswith(("postgresql://", "postgres://")):
                continue
            if key in self.project:
                raise ConfigError(f"{self.project_file}: setting {key!r} belongs in the user's config.toml "
                                  f"({user_file}) or ACR_MEMORY, not in a project file",
                                  hint="a project file may name a team's shared memory: memory = \"postgresql://...\"")

    def _drop_untrusted(self) -> None:
        for key, value in list(self.project.items()):
            if trust.CAREFUL.get(key, ()) == (value,) and (key not in self.user or key in trust.CAREFUL_OVER_USER):
                continue  # only more careful than anything else could make it
            if key == "exclude":
                continue  # it only takes arms away (and adds to the user's own list)
            if key in trust.NARROW_ONLY and key in self.user and value < self.user[key]:
                continue  # lower than the user's own limit (resolve compares it with the profile's too)
            if key in trust.NEVER:
                why = trust.NEVER[key]
            elif key in trust.TRUSTED_ONLY:
                why = trust.TRUSTED_ONLY[key]
            elif key == "profile" and profiles.is_path(str(value)):
                why = trust.PROFILE_FILE
            elif key in trust.NARROW_ONLY and key in self.user:
                why = f"your {self.user_file.name} sets {self.user[key]!r}; an untrusted file may only lower it"
            elif key in self.user:
                why = f"your {self.user_file.name} sets it"
            else:
                continue
            if key == "memory":  # never a password on the screen
                from acr_cli.memory.postgres import masked

                value = masked(str(value))
            self.ignored[key] = f"{key} = {value!r} ({why})"
            del self.project[key]

    def tell(self) -> None:
        """Say (once per command, on stderr) what an untrusted project file set that was not used."""
        if self.ignored and self.project_file is not None:
            trust.tell(self.project_file, self.ignored)

    def resolve(self, key: str, cli_value: Any = None, profile_value: Any = None,
                default: Any = None) -> tuple[Any, str]:
        """(value, where it comes from): the command line, the project file, the user's file, the profile, the
        default. An untrusted project file's ``max_attempts``/``max_cost`` apply only when lower than what
        would apply without them (acr_cli.trust.NARROW_ONLY)."""
        if cli_value is not None:
            return cli_value, "command line"
        if key in self.project:
            if not self.trusted and key in trust.NARROW_ONLY:
                below = self.resolve_without_project(key, profile_value, default)
                if below[0] is not None and below[0] <= self.project[key]:
                    return below
            return self.project[key], str(self.project_file)
        return self.resolve_without_project(key, profile_value, default)

    def resolve_without_project(self, key: str, profile_value: Any = None, default: Any = None) -> tuple[Any, str]:
        if key in self.user:
            return self.user[key], str(self.user_file)
        if profile_value is not None:
            return profile_value, "profile"
        return default, "default"


# the settings of a run, resolved flag > .acr.toml > config.toml > profile > default
RUN_KEYS = ("verify", "timeout", "verify_timeout", "max_attempts", "max_cost", "permissions", "baseline", "protect",
            "sandbox", "race", "race_copy", "race_lanes", "race_setup")
DEFAULTS = {"baseline": "check", "sandbox": "none", "race_lanes": "auto"}


@dataclass(frozen=True)
class Option:
    value: Any
    source: str  # "command line", a settings file's path, "profile", "default"


def resolve_options(settings: Settings, profile: Any, flags: dict[str, Any] | None = None) -> dict[str, Option]:
    """Every run setting with the value that applies and where it comes from (``acr run``, ``acr route``
    and ``acr config show`` all ask here). A blank ``verify`` (``--verify ""``, ``verify = ""`` in a
    file) means no verifier: None, with its source. ``profile`` None: a profile that could not be
    loaded (``config show`` still shows the rest)."""
    out: dict[str, Option] = {}
    flags = flags or {}
    for key in RUN_KEYS:
        default = DEFAULTS.get(key)
        from_profile = getattr(profile.settings, key, None) if profile is not None else None
        value, source = settings.resolve(key, flags.get(key), from_profile, default)
        if key == "verify" and isinstance(value, str) and not value.strip():
            value = None
        if source == "profile" and profile is not None:
            source = f"profile {profile.name}"
        out[key] = Option(value, source)
    if out["permissions"].value not in PERMISSIONS:
        raise ConfigError(f"permissions {out['permissions'].value!r}: expected one of {', '.join(PERMISSIONS)}")
    if out["sandbox"].value not in SANDBOX_MODES:
        raise ConfigError(f"sandbox {out['sandbox'].value!r} (from {out['sandbox'].source}): expected bwrap or none")
    if out["baseline"].value not in BASELINE_MODES:
        raise ConfigError(f"baseline {out['baseline'].value!r} (from {out['baseline'].source}): expected one of "
                          f"{', '.join(BASELINE_MODES)}")
    return out


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "yes", "on", "1"):
        return True
    if low in ("false", "no", "off", "0"):
        return False
    raise ValueError(raw)


def set_user_value(path: Path, key: str, raw: str) -> Any:
    want = KEYS.get(key)
    if want is None:
        raise ConfigError(f"unknown setting {key!r}", hint=f"known settings: {', '.join(KEYS)}")
    try:
        if want is list:  # `acr config set protect "tests/**, check.py"`: comma-separated
            value = [item.strip() for item in raw.split(",") if item.strip()]
        elif want is RaceCount:  # `acr config set race 3` stores a number, `race auto` a string
            value = int(raw) if raw.strip().isdigit() else raw.strip()
        else:
            value = _parse_bool(raw) if want is bool else want(raw)
    except ValueError:
        raise ConfigError(f"{key} needs a {TYPE_NAMES[want]}, got {raw!r}") from None
    problem = check_value(key, value)
    if problem:
        raise ConfigError(f"{key}: {problem}")
    if key == "verify" and not value.strip():
        value = ""  # no verifier, as `--verify ""`: stored as such, so it overrides the profile's
    if key == "profile":
        try:  # a profile that does not load would break every later command: check it now
            profiles.load(value, Paths.from_env().profiles_dir)
        except ProfileError as e:
            import shlex

            raise ConfigError(f"profile {value!r} is not valid, so it was not set: {e.message}",
                              hint=f"fix it, then set it again (`acr profiles validate {shlex.quote(value)}` "
                                   "checks it)") from None
        if profiles.is_path(value):  # stored as found from here: it must mean the same file from anywhere
            value = str(Path(value).expanduser().resolve())
    data = read_toml(path)
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_settings(path, data, key)
    return value


def unset_user_value(path: Path, key: str) -> bool:
    if key not in KEYS:
        raise ConfigError(f"unknown setting {key!r}", hint=f"known settings: {', '.join(KEYS)}")
    data = read_toml(path)
    if key not in data:
        return False
    del data[key]
    _write_settings(path, data, key)
    return True


def _write_settings(path: Path, data: dict[str, Any], key: str) -> None:
    """Write ``data`` to the settings file, changing only ``key``'s line: the user's comments,
    order and layout stay. (The files hold flat ``key = value`` lines, which read_toml checks.)"""
    old = ""
    if path.is_file():
        with open(path, encoding="utf-8", newline="") as f:  # as it is: a CRLF file stays CRLF
            old = f.read()
    text = edit_toml_line(old, key, data.get(key))
    try:
        same = tomllib.loads(text) == data
    except tomllib.TOMLDecodeError:
        same = False
    if not same:  # a layout the line edit cannot follow: correct beats pretty
        import tomli_w

        text = tomli_w.dumps(data)
    with atomic_write(path) as f:
        f.write(text)


def edit_toml_line(text: str, key: str, value: Any) -> str:
    """``text`` with the statement of top-level ``key`` set to ``value`` (removed when None).

    A trailing comment on the statement's last line is kept; a new key goes at the end.
    """
    import re

    import tomli_w

    lines = text.splitlines(keepends=True)
    head = re.compile(r"\s*(?:%s|\"%s\"|'%s')\s*=" % ((re.escape(key),) * 3))
    new = tomli_w.dumps({key: value}).rstrip("\n") if value is not None else None
    for i, line in enumerate(lines):
        if not head.match(line):
            continue
        for j in range(i + 1, len(lines) + 1):  # the statement may span lines (a multi-line string)
            stmt = "".join(lines[i:j])
            if _parses(stmt):
                break
        else:
            continue  # not a statement's start (a line inside a multi-line string, say)
        if new is None:
            return "".join(lines[:i] + lines[j:])
        last = lines[j - 1].rstrip("\r\n")
        eol = lines[j - 1][len(last):] or "\n"  # keep a CRLF file CRLF
        comment = ""
        prefix = "".join(lines[i:j - 1])
        for pos in (k for k, ch in enumerate(last) if ch == "#"):
            if _parses(prefix + last[:pos]):
                comment = "  " + last[pos:]
                break
        return "".join(lines[:i]) + new + comment + eol + "".join(lines[j:])
    if new is None:
        return text
    return text + ("\n" if text and not text.endswith("\n") else "") + new + "\n"


def _parses(text: str) -> bool:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return True
