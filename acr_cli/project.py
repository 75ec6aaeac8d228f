"""Which project a request is made in: one name for a repository on every clone and every machine.

A team's shared memory (acr_cli.memory.team) learns per project, so two clones of one repository,
at different paths on different machines, must be one project. The identity, first found:

1. ``git:<root commit>``: the repository's first commit (the oldest, if history joined several),
   the same in every full clone and unchanged by new commits, branches or remotes. A shallow
   clone does not have it (its oldest commit is wherever the clone was cut): next;
2. ``url:<host>/<path>``: the ``origin`` remote, normalised (no scheme, user, password or port;
   ``git@host:a/b.git``, ``https://host/a/b`` and ``ssh://git@host:22/a/b.git`` are one);
3. ``<directory name>@<6 hex of the path's SHA-256>``: the work tree's path (no git, or git with
   neither), as acr named every project before identities.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import urlsplit

from acr_cli import process
from acr_cli.workspace.git import safe_env

_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@github.com:owner/repo.git


def path_key(root: Path) -> str:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:6]
    return f"{root.name or 'root'}@{digest}"


def identity(root: Path) -> str:
    """The project identity of the work tree (or directory) ``root``: see the module docstring."""
    if not (root / ".git").exists():
        return path_key(root)
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow == "false":
        roots = (_git(root, "rev-list", "--max-parents=0", "HEAD") or "").split()
        if roots:
            return f"git:{sorted(roots)[0][:12]}"
    url = normalise_url(_git(root, "config", "--get", "remote.origin.url") or "")
    return f"url:{url}" if url else path_key(root)


def normalise_url(url: str) -> str:
    """A remote's URL as ``host/path``: lower-case host, no scheme, user, password, port or ``.git``."""
    url = url.strip()
    if not url:
        return ""
    m = _SCP_LIKE.match(url)
    if m and "://" not in url:
        host, path = m.group(1), m.group(2)
    else:
        try:
            parts = urlsplit(url)
        except ValueError:
            return ""
        host, path = parts.hostname or "", parts.path
        if parts.scheme == "file" or not host:
            return ""  # a local path: no better than the work tree's own
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host.lower()}/{path}" if host and path else ""


def _git(cwd: Path, *args: str) -> str | None:
    """A read-only git query, in acr's guarded git environment (acr_cli.workspace.git.safe_env): no hook,
    fsmonitor, replace object or graft of the repository's, nor a ``GIT_DIR`` of acr's own environment,
    decides what it answers."""
    r = process.short_call(["git", *args], cwd=cwd, env=safe_env(), timeout=30)
    return r.stdout.strip() if r.ok else None
