"""What acr prints for people, made harmless to the terminal that shows it.

Text from outside acr reaches the terminal: names of files an agent made, its answer and its errors,
a verifier's output, the request, ref and branch names, a project's settings, memory's contents. A
terminal obeys the control characters in it: ESC starts sequences that write the clipboard (OSC 52),
retitle the window, clear the screen or hide what follows; BEL ends them; CR and backspace overwrite
what was printed; the C1 characters U+0080-U+009F are one-character forms of ESC's sequences; the
bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) reorder what follows, so that
``evil\\u202egnp.py`` reads as ``evilyp.png``. :func:`terminal_safe` shows each as its escape in
Python's notation, ``\\x1b``, ``\\x07``, ``\\x9b``, ``\\u202e``: visible, unambiguous, what ``repr``
would show. Tab and newline stay (an answer keeps its lines), a CR or CRLF is a newline (a redrawn
progress line shows each draw); a name printed on one line (``one_line``) escapes them too.

Where it applies, once for all: the rich consoles of :func:`console` pass every string and Text
they render through it (markup, table cells, titles), and :func:`echo` is ``typer.echo`` for plain
lines; the commands print through nothing else (``tests/cli/test_terminal.py`` checks). ``--json``
output is escaped by :func:`json_safe`.
"""

from __future__ import annotations

import re
from functools import lru_cache

_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"\r\n?|[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")  # (tab and newline stay)
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")  # json.dumps escapes U+0000-U+001F itself


def _escape(ch: str) -> str:
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def _shown(ch: str) -> str:
    return "\n" if ch in ("\r\n", "\r") else _escape(ch)


def terminal_safe(text: str, one_line: bool = False) -> str:
    """``text`` as a terminal may show it: control characters and bidirectional overrides as ``\\x1b`` /
    ``\\u202e``; tabs and newlines kept, a CR or CRLF made a newline, unless ``one_line`` (a file or ref
    name in a list: a newline in it must not start a line that looks like acr's own), which escapes them
    too. Text already safe comes back unchanged, so applying it twice does no harm."""
    if one_line:
        return _UNSAFE_IN_LINE.sub(lambda m: _escape(m.group()), text)
    return _UNSAFE.sub(lambda m: _shown(m.group()), text)


def json_safe(document: str) -> str:
    """A JSON document with DEL, the C1 characters and the bidirectional overrides written as ``\\uXXXX``
    escapes, as json.dumps writes ESC, BEL and the rest of C0 (with ``ensure_ascii=False`` it leaves these
    raw, and ``cat`` or ``jq -r`` would hand them to a terminal). Outside strings a JSON document has none
    of them, so it means the same."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def echo(message: str = "", err: bool = False, one_line: bool = False) -> None:
    """``typer.echo`` of a line made terminal-safe (``one_line``: see terminal_safe)."""
    import typer

    typer.echo(terminal_safe(str(message), one_line), err=err)


def console(**options):
    """A rich Console (the options are rich's) that renders every string and Text terminal-safe."""
    return _console_class()(**options)


@lru_cache(maxsize=None)
def _console_class():
    # defined on first use: rich takes ~70 ms to import, and `acr --help`, `acr route` never need it
    from rich.console import Console
    from rich.text import Span, Text

    def safe_text(text: Text) -> Text:
        """The Text with each unsafe character replaced by its escape, in that character's style."""
        plain = text.plain
        if not _UNSAFE.search(plain):
            return text
        out, last = text.blank_copy(), 0
        for m in _UNSAFE.finditer(plain):
            shown = _shown(m.group())
            styles = [span.style for span in text[m.start():m.end()].spans]
            out.append_text(text[last:m.start()])
            out.append_text(Text(shown, spans=[Span(0, len(shown), style) for style in styles], end=""))
            last = m.end()
        out.append_text(text[last:])
        return out

    class SafeConsole(Console):
        """Strings (print's arguments, markup, table cells and titles) are made safe before rich parses and
        measures them; a Text built elsewhere (rich drops only BEL, BS, VT, FF and CR from it) as rendered."""

        def render_str(self, text: str, **kwargs):  # type: ignore[override]
            return super().render_str(terminal_safe(text), **kwargs)

        def render(self, renderable, options=None):  # type: ignore[override]
            if isinstance(renderable, Text):
                renderable = safe_text(renderable)
            return super().render(renderable, options)

    return SafeConsole
