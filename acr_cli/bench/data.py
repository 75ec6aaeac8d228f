"""Where the benchmark files come from, and checking them.

Sources, first match wins: ``--data-dir DIR``, ``$ACR_BENCH_DATA``, acr's
cache dir (``<cache>/coderouterbench``, filled by ``acr bench download``).
A checksum mismatch in a directory you point at is a warning naming the
file (you may be testing a newer release); a download that does not match
is an error and is not kept.

Downloads come from the Hugging Face dataset ``Lance1573/CodeRouterBench``:
``{endpoint}/datasets/Lance1573/CodeRouterBench/resolve/{revision}/{file}``,
where the endpoint is ``$ACR_HF_ENDPOINT`` (else ``$HF_ENDPOINT``, else
https://huggingface.co) so a mirror can stand in.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from acr_cli.errors import AcrError

DATASET = "Lance1573/CodeRouterBench"
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"


@dataclass
class DataDir:
    path: Path
    source: str  # "--data-dir", "ACR_BENCH_DATA" or "cache"
    warnings: list[str]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def env_data_dir() -> Path | None:
    value = os.environ.get("ACR_BENCH_DATA")
    return Path(value).expanduser() if value else None


def locate(files: dict[str, str | None], data_dir: Path | None, cache: Path) -> DataDir:
    """Find a directory holding ``files`` ({name: sha256}); check the checksums."""
    candidates: list[tuple[Path, str]] = []
    if data_dir is not None:
        candidates.append((data_dir, "--data-dir"))
    elif env_data_dir() is not None:
        candidates.append((env_data_dir(), "ACR_BENCH_DATA"))
    else:
        candidates.append((cache, "cache"))
    path, source = candidates[0]
    missing = [n for n in files if not (path / n).is_file()]
    if missing:
        if source == "cache":
            raise AcrError(f"the benchmark files are not downloaded yet ({', '.join(missing)} missing in {path})",
                           hint="run `acr bench download`, or point at a copy with --data-dir DIR / ACR_BENCH_DATA")
        raise AcrError(f"{source} {path}: missing {', '.join(missing)}",
                       hint="point at a folder with the CodeRouterBench files, or run `acr bench download`")
    warnings = []
    for name, want in files.items():
        if want and sha256_of(path / name) != want:
            warnings.append(f"{path / name}: sha256 differs from the published file; results may not match the paper")
    return DataDir(path, source, warnings)


def url_for(name: str, revision: str = DEFAULT_REVISION, endpoint: str | None = None) -> str:
    base = (endpoint or os.environ.get("ACR_HF_ENDPOINT") or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    if not base.startswith(("http://", "https://")):
        raise AcrError(f"the Hugging Face endpoint {base!r} is not an http(s) URL",
                       hint="check ACR_HF_ENDPOINT / HF_ENDPOINT, e.g. https://hf-mirror.com")
    return f"{base.rstrip('/')}/datasets/{DATASET}/resolve/{revision}/{name}"


Progress = Callable[[str, int, int | None], None]  # (file, bytes so far, total or None)


def download(files: dict[str, str | None], dest: Path, *, revision: str = DEFAULT_REVISION,
             endpoint: str | None = None, progress: Progress | None = None, force: bool = False,
             timeout: float = 60.0) -> list[Path]:
    """Fetch ``files`` into ``dest`` atomically, verifying sha256; skips files already good."""
    import urllib.error
    import urllib.request

    dest.mkdir(parents=True, exist_ok=True)
    done = []
    for name, want in files.items():
        target = dest / name
        if not force and target.is_file() and (want is None or sha256_of(target) == want):
            done.append(target)
            continue
        url = url_for(name, revision, endpoint)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=dest)
        h = hashlib.sha256()
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "acr-bench-download"})
            token = os.environ.get("HF_TOKEN")
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(req, timeout=timeout) as resp, os.fdopen(fd, "wb") as out:
                total = resp.headers.get("Content-Length")
                total_i = int(total) if total and total.isdigit() else None
                got = 0
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    out.write(chunk)
                    h.update(chunk)
                    got += len(chunk)
                    if progress:
                        progress(name, got, total_i)
            if want and h.hexdigest() != want:
                raise AcrError(f"{name}: downloaded file's sha256 {h.hexdigest()[:12]}… does not match "
                               f"the expected {want[:12]}…", hint="the mirror may serve another revision; try --revision")
            os.replace(tmp, target)
            done.append(target)
        except urllib.error.HTTPError as e:
            raise AcrError(f"download of {url} failed: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            reason = getattr(e, "reason", None) or e
            raise AcrError(f"download of {url} failed: {reason}",
                           hint="no network? copy the files by hand and use --data-dir DIR") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return done
