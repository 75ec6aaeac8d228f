"""Which project settings files (``.acr.toml``) the user trusts: ``acr trust``.

A repository you clone brings its ``.acr.toml`` with it, so until you trust it acr reads it as the
repository's wish, not yours (as direnv does with ``.envrc`` and editors with a workspace). An
untrusted file may still set what a project naturally decides and what costs you nothing to accept
(``verify``, timeouts, ``baseline``, ``protect``, a built-in or your own profile by name), and only where
your ``config.toml`` does not set it; ``exclude`` (agents or arms never to use) always; ``max_attempts``
and ``max_cost`` only below what would apply without it. It can never:

* name a memory server (``memory``): a URL could send your database password elsewhere, and read-only
  commands (``route``, ``show``, ``memory``, ``doctor``, ``config``) would connect to it;
* set ``permissions`` (what the agent may do), ``share_prompts`` (what leaves your machine) or ``sandbox``,
  except to make acr more careful (``permissions = "read-only"``, ``share_prompts = false``, ``sandbox =
  "bwrap"``, which applies even over your ``config.toml``'s ``sandbox = "none"``);
* name a profile *file*: a profile defines agents (commands acr runs, ``version:`` ones inside
  ``acr doctor`` too) and the arguments each arm passes to its CLI;
* choose the arms (``arms``, ``policy``) or what waiting is worth (``time_weight``): each steers your money;
* race (``race``) or name the command run in each race worktree before its agent (``race_setup``);
* override a setting your ``config.toml`` sets (other than by narrowing it, as above).

Trusting records the file's path and the SHA-256 of its bytes in ``<data>/trusted.json``; a file that
changed since (a ``git pull``) is untrusted again until you look at it and trust it again. A trusted
file ranks above your ``config.toml``, as every project setting did before.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from acr_cli.atomic import atomic_write
from acr_cli.errors import ConfigError

# what an untrusted file may never set, with why (said when one is ignored)
NEVER = {
    "memory": "it chooses your memory; a server it names would receive your credentials",
    "permissions": "it decides what the agent may do",
    "share_prompts": "it decides what leaves your machine",
    "sandbox": "it decides whether the agent is confined",
}
# ... except the one value of each that only makes acr more careful than any other would
CAREFUL = {"permissions": ("read-only",), "share_prompts": (False,), "sandbox": ("bwrap",)}
# careful values that apply even where your config.toml says otherwise: turning the sandbox on costs nothing
CAREFUL_OVER_USER = ("sandbox",)
# routing settings only a trusted file may set: each can steer your money to the arms it prefers
TRUSTED_ONLY = {
    "arms": "it chooses which arms run, and so what you pay",
    "policy": "it chooses which arms run, and so what you pay",
    "time_weight": "it trades your money for speed",
    "race": "it runs several paid arms at once",
    "race_setup": "it is a command acr runs in each race worktree before its agent",
}
# limits an untrusted file may only lower (below your config.toml's, the profile's): narrowing costs you nothing.
# (``exclude`` needs no trust at all: it only takes arms away.)
NARROW_ONLY = ("max_attempts", "max_cost")
PROFILE_FILE = "a profile file defines agents and the commands acr runs"

_said: set[str] = set()  # files whose ignored settings this process has already told about


def _store(data_dir: Path) -> Path:
    return data_dir / "trusted.json"


def _key(file: Path) -> str:
    return str(file.absolute())


def digest(file: Path) -> str | None:
    try:
        return hashlib.sha256(file.read_bytes()).hexdigest()
    except OSError:
        return None


def _read(data_dir: Path) -> dict[str, str]:
    path = _store(data_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the list of trusted project files {path}: {e}",
                          hint="move it aside (every project file is then untrusted until `acr trust`)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a list of trusted files (a JSON object)", hint="move it aside")
    return {str(k): str(v) for k, v in data.items()}


def _write(data_dir: Path, data: dict[str, str]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(_store(data_dir)) as f:
        f.write(json.dumps(data, indent=1, sort_keys=True) + "\n")


def is_trusted(file: Path, data_dir: Path) -> bool:
    """Whether ``file`` is trusted as it is now (same path, same bytes as when trusted)."""
    known = _read(data_dir).get(_key(file))
    return known is not None and known == digest(file)


def trust(file: Path, data_dir: Path) -> bool:
    """Trust ``file`` as it is now; returns whether it was trusted already."""
    now = digest(file)
    if now is None:
        raise ConfigError(f"cannot read {file}", hint="acr trusts a settings file it can read")
    data = _read(data_dir)
    before = data.get(_key(file)) == now
    data[_key(file)] = now
    _write(data_dir, data)
    return before


def forget(file: Path, data_dir: Path) -> bool:
    """Untrust ``file``; returns whether it was on the list."""
    data = _read(data_dir)
    if _key(file) not in data:
        return False
    del data[_key(file)]
    _write(data_dir, data)
    return True


def _plain(text: str) -> str:
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def tell(file: Path, ignored: dict[str, str]) -> None:
    """Say once per command which settings of an untrusted ``file`` were ignored, and how to trust it."""
    if not ignored or _key(file) in _said:
        return
    _said.add(_key(file))
    lines = [f"acr: {_plain(str(file))} is not trusted; ignored:"]
    lines += [f"  {_plain(why)}" for why in ignored.values()]
    lines.append("  read it, then `acr trust` in the project to use it (a changed file needs trusting again)")
    sys.stderr.write("\n".join(lines) + "\n")
