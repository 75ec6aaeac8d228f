"""A child's output: read on threads in bounded pieces, kept in memory bounded (its start and its end, for
the parsers), written redacted to the attempt's log bounded in bytes, handed line by line to a callback."""

from __future__ import annotations

import collections
import sys
import threading
from typing import IO, Callable

from acr_cli.redact import LineRedactor

LineCallback = Callable[[str, str], None]  # (stream name "out"|"err", line without newline)

LOG_MAX_BYTES = 64 * 2**20  # an attempt's log file, as written: a runaway agent must not fill the disk
KEEP_HEAD_BYTES = 2 * 2**20  # of a stream, kept in memory for parsing: its start (session, model)...
KEEP_TAIL_BYTES = 16 * 2**20  # ...and its end (the result, the usage)
LINE_MAX_BYTES = 2**20  # a longer line is cut: its first LINE_MAX_BYTES bytes are kept


class Capture:
    """A stream's lines for the output parsers, bounded: the first and the last few MiB of it.

    Sizes are counted as the memory a line takes (``sys.getsizeof`` plus the list slot), so a flood
    of tiny lines is bounded as well as a few long ones. With lines cut at :data:`LINE_MAX_BYTES`,
    the head holds at most ``KEEP_HEAD_BYTES`` plus one line and the tail at most
    ``KEEP_TAIL_BYTES`` or one line; a line's str takes at most 4 bytes a character.
    """

    def __init__(self) -> None:
        self.head: list[str] = []
        self.tail: collections.deque[str] = collections.deque()
        self.head_bytes = self.tail_bytes = 0

    def append(self, line: str) -> None:
        size = sys.getsizeof(line) + 8
        if self.head_bytes < KEEP_HEAD_BYTES:
            self.head.append(line)
            self.head_bytes += size
            return
        self.tail.append(line)
        self.tail_bytes += size
        while self.tail_bytes > KEEP_TAIL_BYTES and len(self.tail) > 1:
            self.tail_bytes -= sys.getsizeof(self.tail.popleft()) + 8

    def text(self) -> str:
        return "\n".join([*self.head, *self.tail])


class LogSink:
    """Where one run writes its output: the log file, bounded in bytes as written (see run()). Once a line
    would take the file past ``limit``, one note says so and nothing more of the run's output is written.
    A write that fails (a full disk, an I/O error, a closed file) ends logging too; ``problem`` says why.
    Called under the run's lock."""

    def __init__(self, log: IO[str] | None, limit: int):
        self.log, self.limit = log, limit
        self.size = _position(log) if log is not None else 0  # bytes in the file so far
        self.full = False
        self.problem: str | None = None
        self.redactors = {"out": LineRedactor(), "err": LineRedactor()}  # a key block spans lines: one per stream

    def write(self, name: str, line: str) -> None:
        if self.log is None or self.full or self.problem:
            return
        try:
            entry = f"[{name}] {self.redactors[name].line(line)}\n"
            size = len(entry) if entry.isascii() else len(entry.encode("utf-8", "replace"))
            if self.size + size > self.limit:
                self.full = True
                self.log.write(f"[{name}] ... (the log reached {_bytes(self.limit)}, acr's limit for an attempt's "
                               "log: the rest is not logged)\n")
            else:
                self.log.write(entry)
                self.size += size
        except Exception as e:  # a full disk, an I/O error, a closed file: stop logging, keep draining
            why = e.strerror if isinstance(e, OSError) and e.strerror else (str(e) or type(e).__name__)
            self.problem = f"logging stopped: {why}"


def _position(log: IO[str]) -> int:
    """The log file's size so far (its position; acr's logs are written from the start or appended to), 0 when
    it cannot tell (a pipe)."""
    try:
        return max(0, int(log.tell()))
    except (AttributeError, OSError, ValueError, TypeError):
        return 0


def _bytes(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 2**20 and n % 2**20 == 0 else f"{n:,} bytes"


class Readers:
    """The threads that drain a child's stdout and stderr (and feed its stdin), and what they kept.

    Once :meth:`stop` was called (the run returned), the pipes keep being drained and nothing is kept."""

    def __init__(self, log: LogSink, on_line: LineCallback | None) -> None:
        self.log, self.on_line = log, on_line
        self.out, self.err = Capture(), Capture()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self, stdout: IO[bytes], stderr: IO[bytes], stdin: IO[bytes] | None, stdin_text: str | None) -> None:
        """One thread per pipe (stdin only when there is ``stdin_text`` to feed it)."""
        self.threads.append(threading.Thread(target=self._pump, args=(stdout, "out", self.out), daemon=True))
        self.threads.append(threading.Thread(target=self._pump, args=(stderr, "err", self.err), daemon=True))
        if stdin_text is not None:
            self.threads.append(threading.Thread(target=_feed, args=(stdin, stdin_text), daemon=True))
        for t in self.threads:
            t.start()

    def join(self) -> None:
        for t in self.threads:
            if t.ident is not None:  # started
                t.join(timeout=5)

    def stop(self) -> None:
        self.done.set()

    def _pump(self, stream: IO[bytes], name: str, sink: Capture) -> None:
        try:
            while True:
                raw = stream.readline(LINE_MAX_BYTES)
                if not raw:
                    break
                cut = 0
                if len(raw) >= LINE_MAX_BYTES and not raw.endswith(b"\n"):
                    cut = _drop_rest_of_line(stream)
                if not self.done.is_set():
                    self._take(name, sink, raw, cut)
        except (OSError, ValueError):  # the pipe broke or was closed under us: nothing more to read
            pass
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def _take(self, name: str, sink: Capture, raw: bytes, cut: int) -> None:
        """Keep one line, log it and show it; whatever goes wrong with it, the pipe keeps being drained."""
        try:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if cut:
                line += f" [... line cut: {cut} bytes dropped]"
            sink.append(line)
            with self.lock:
                self.log.write(name, line)
                if self.on_line is not None:
                    try:
                        self.on_line(name, line)
                    except Exception:  # a broken live view must not break the run
                        pass
        except Exception:  # pragma: no cover - whatever happens to one line, keep draining
            pass


def _feed(stdin: IO[bytes], text: str) -> None:
    try:
        stdin.write(text.encode("utf-8"))
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass


def _drop_rest_of_line(stream: IO[bytes]) -> int:
    """Read and drop the rest of an over-long line, a piece at a time; how many bytes were dropped."""
    dropped = 0
    while True:
        more = stream.readline(LINE_MAX_BYTES)
        if not more:
            return dropped
        if more.endswith(b"\n"):
            return dropped + len(more.rstrip(b"\r\n"))
        dropped += len(more)

