"""Write a user-named file so that a failure never leaves it half-written or leaves debris beside it.

The text goes to a temporary file in the target's own directory, which replaces the target
only once it is complete. A symlink is written through (its target is replaced, the link
stays); a target that is not a regular file (``/dev/stdout``, a FIFO) is written directly,
since replacing it would destroy it. A directory is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from acr_cli.errors import AcrError


@contextlib.contextmanager
def atomic_write(path: Path, mode: int = 0o600) -> Iterator[IO[str]]:
    """Yield a text file whose content becomes ``path`` when the block ends without an error.

    ``mode`` applies to a file that does not exist yet; an existing file keeps its mode.
    """
    try:
        st = os.stat(path)  # follows links: /dev/stdout to the pipe or file it stands for
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise AcrError(f"cannot write {path}: {e.strerror}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise AcrError(f"{path} is a directory", hint="give a file name")
    if (st is not None and not stat.S_ISREG(st.st_mode)) or str(path).startswith(("/dev/", "/proc/")):
        try:  # a pipe, a device, a descriptor's name: written as it is, never replaced
            with open(path, "w", encoding="utf-8") as f:
                yield f
        except OSError as e:
            raise AcrError(f"cannot write {path}: {e.strerror}") from None
        return
    real = Path(os.path.realpath(path))  # a symlink is written through
    if not real.parent.is_dir():
        raise AcrError(f"cannot write {path}: directory {real.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    except OSError as e:
        raise AcrError(f"cannot write {path}: {e.strerror}") from None
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, real)
    except OSError as e:
        _drop(tmp)
        raise AcrError(f"cannot write {path}: {e.strerror}") from None
    except BaseException:
        _drop(tmp)
        raise


def _drop(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
