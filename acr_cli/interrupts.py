"""Ctrl-C, SIGTERM and SIGHUP end an ``acr run`` (and an ``acr bench replay``) the same way.

A closed terminal (SIGHUP), ``kill`` or ``timeout`` (SIGTERM) and Ctrl-C
(SIGINT) all become a :class:`KeyboardInterrupt`: the agent's process group
is killed, the work tree is rolled back, the attempt is recorded as
cancelled, and acr exits with 128 + the signal's number (130 for Ctrl-C).

Some steps must not be cut in half: taking a checkpoint, a rollback, a write
to memory. Inside :func:`deferred` a signal is only noted; it takes effect
when the step is done.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}

received: int | None = None  # the first signal that ended the run
_pending: int | None = None  # a signal noted inside deferred()
_depth = 0
_previous: dict[int, object] = {}  # the handlers install() replaced, put back by uninstall()


def _on_signal(signum, frame) -> None:
    global received, _pending
    received = received or signum
    if _depth:
        _pending = _pending or signum
        return
    raise KeyboardInterrupt


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP to :func:`_on_signal`, noting the first that arrives (:func:`requested`).
    Only the main thread receives signals: elsewhere (acr used as a library) nothing is changed."""
    global received, _pending
    if threading.current_thread() is not threading.main_thread():
        return
    received = _pending = None
    for s in SIGNALS:
        _previous.setdefault(s, signal.getsignal(s))
        signal.signal(s, _on_signal)


def uninstall() -> None:
    """Put back the handlers :func:`install` replaced (``received`` stays, for the exit code)."""
    for s, handler in list(_previous.items()):
        signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    _previous.clear()


def requested() -> bool:
    """Whether a signal arrived while acr's handlers are installed: also one whose KeyboardInterrupt Python
    swallowed (raised inside a finalizer, say a generator the garbage collector closed). Long loops ask
    between steps, so such a signal still stops them."""
    return received is not None and bool(_previous)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold off a signal until the block is done, then raise :class:`KeyboardInterrupt`."""
    global _depth, _pending
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if _depth == 0 and _pending is not None:
        _pending = None
        raise KeyboardInterrupt


def describe() -> str:
    """How the run was interrupted, for messages: ``Ctrl-C``, ``SIGTERM`` or ``SIGHUP``."""
    return NAMES.get(received or signal.SIGINT, "a signal")


def exit_code() -> int:
    return 128 + int(received or signal.SIGINT)
