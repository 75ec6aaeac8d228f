"""What acr prints never hands a terminal the control sequences an agent, a verifier or a project planted
(issue 40): a file named with OSC 52 (writes the clipboard), a title sequence, clear-screen or a
bidirectional override is shown escaped by `acr run`, `show`, `memory log`, `recover` and in error
messages, and `--json` carries none of them raw (acr_cli/cli/terminal.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import BAD, GOOD, VERIFY, acr, git

from acr_cli.cli.terminal import json_safe, terminal_safe

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: the terminal's clipboard now holds `rm -rf ~`
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
EVIL = f"evil{CLIPBOARD}{TITLE}{CLEAR}\u202egnp.py"  # shown raw, the override makes it read "evilyp.png"
EVIL_SHOWN = r"evil\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\u202egnp.py"
FORGED = "notes\n  passed with claude:claude-opus-4-6.txt"  # a name that would print a line of acr's own
FORGED_SHOWN = r"notes\x0a  passed with claude:claude-opus-4-6.txt"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # what must never reach a terminal


def raw(text: str) -> list[str]:
    return RAW.findall(text)


def in_diffstat(out: str, name: str) -> bool:
    """``name`` has a line of its own in the list of changed files (names padded to the longest)."""
    return any(re.fullmatch(rf"  {re.escape(name)} +\+1 -0", line) for line in out.splitlines())


def test_the_names_an_agent_gave_its_files_and_its_answer_are_shown_escaped(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD, EVIL: "x\n", FORGED: "y\n"},
              "text": f"Fixed.{TITLE}{CLEAR} \x9b31m", "stderr": f"warning{CLIPBOARD}"})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", "codex:gpt-5.4", cwd=project)
    assert r.returncode == 0, r.stderr
    assert raw(r.stdout) == [] and raw(r.stderr) == []
    assert in_diffstat(r.stdout, EVIL_SHOWN) and in_diffstat(r.stdout, FORGED_SHOWN)  # "Changed 3 file(s)"
    assert not any(line.startswith("  passed with") for line in r.stdout.splitlines())
    assert r"Fixed.\x1b]0;pwned\x07\x1b[2J \x9b31m" in r.stdout  # the answer
    assert (project / EVIL).read_text() == "x\n"  # (the file is the agent's to keep: only how it is shown changed)

    shown = acr("show", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert raw(shown.stdout) == [] and in_diffstat(shown.stdout, EVIL_SHOWN) and in_diffstat(shown.stdout, FORGED_SHOWN)
    log = acr("memory", "log", cwd=project)
    assert log.returncode == 0, log.stderr
    assert raw(log.stdout) == [] and r"Fixed.\x1b]0;pwned" in log.stdout


def test_json_output_carries_no_raw_control_character_and_keeps_the_names(project, fakes_on_path, scenario):
    scenario({"match": {"agent": "codex"}, "write": {"calc.py": GOOD, EVIL: "x\n"}, "text": "Done \x9b2J\u2066."})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert raw(r.stdout) == []  # json.dumps escapes ESC and BEL; C1 and the overrides are escaped too
    out = json.loads(r.stdout)
    assert EVIL in [c["path"] for c in out["changes"]] and out["answer"] == "Done \x9b2J\u2066."  # the data intact
    shown = acr("show", "--json", cwd=project)
    assert raw(shown.stdout) == [] and json.loads(shown.stdout)["answer"] == "Done \x9b2J\u2066."


def test_an_error_that_quotes_the_verifiers_output_is_escaped(project, fakes_on_path):
    # a verifier the shell cannot run: the run stops before any agent, quoting what it printed
    verify = "printf 'boom\\033]0;pwned\\007\\033[2J\\n' >&2; exit 127"
    r = acr("run", "fix the add function", "--verify", verify, "--arms", "codex:gpt-5.4", cwd=project)
    assert r.returncode == 2
    assert raw(r.stderr) == [] and r"boom\x1b]0;pwned\x07\x1b[2J" in r.stderr
    r = acr("run", "fix the add function", "--verify", verify, "--arms", "codex:gpt-5.4", "--json", cwd=project)
    assert r.returncode == 2 and raw(r.stdout) == [] and raw(r.stderr) == []
    assert "boom\x1b]0;pwned" in json.loads(r.stdout)["error"]["message"]


def test_what_a_rollback_put_aside_is_named_escaped(project, fakes_on_path, scenario):
    # the failed attempt leaves an ignored file whose name holds a newline and a clear-screen: the live view
    # names it among what the rollback undid, on one line
    (project / ".gitignore").write_text("*.tmp\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    name = f"cache\n{CLEAR}x.tmp"
    scenario({"match": {"agent": "opencode"}, "write": {"calc.py": BAD, name: "junk\n"}},
             {"match": {"agent": "codex"}, "write": {"calc.py": GOOD}})
    r = acr("run", "fix the add function", "--verify", VERIFY, "--arms", "opencode:moonshotai/kimi-k2.5,codex:gpt-5.4",
            cwd=project)
    assert r.returncode == 0, r.stderr
    assert raw(r.stdout) == [] and raw(r.stderr) == []
    assert r"cache\x0a\x1b[2Jx.tmp" in r.stderr  # one line: the newline escaped too


def test_recover_names_what_it_moved_aside_escaped(project):
    from acr_cli.workspace import Workspace

    (project / ".gitignore").write_text("*.tmp\n")
    Workspace.open(project).checkpoint("20260101-000000-abcdef-1")  # then acr was killed, mid-attempt
    (project / f"x{TITLE}\u202e.tmp").write_text("made by the attempt\n")
    r = acr("recover", cwd=project)
    assert r.returncode == 0, r.stderr
    assert raw(r.stdout) == [] and r"x\x1b]0;pwned\x07\u202e.tmp" in r.stdout


def test_terminal_safe_and_json_safe():
    assert terminal_safe("a\tb\nc\r\nd\re") == "a\tb\nc\nd\ne"  # lines kept, nothing overwrites a line
    assert terminal_safe("a\tb\nc\r", one_line=True) == r"a\x09b\x0ac\x0d"
    assert terminal_safe(EVIL) == EVIL_SHOWN and terminal_safe(EVIL_SHOWN) == EVIL_SHOWN  # twice: the same
    assert terminal_safe("\x7f\x80\x9f\u200bé\u2069") == "\\x7f\\x80\\x9f\u200bé\\u2069"  # printable text untouched
    doc = json.dumps({"k": "\x1b\x9b\u202e\x7fé"}, ensure_ascii=False)
    assert raw(json_safe(doc)) == [] and json.loads(json_safe(doc)) == {"k": "\x1b\x9b\u202e\x7fé"}


def test_the_commands_print_only_through_the_terminal_safe_paths():
    """Every command prints through acr_cli/cli/terminal.py (its console or echo) or print_json: a new
    ``typer.echo``, ``print`` or write to stdout would print what it is given raw."""
    cli = Path(__file__).parents[2] / "acr_cli" / "cli"
    allowed = {"terminal.py": 1, "common.py": 2, "reference.py": 2, "bench_render.py": 2}  # echo; JSON; docs; CSV/md
    direct = re.compile(r"\btyper\.echo\(|\bclick\.echo\(|(?<![.\w])print\(|\bsys\.std(out|err)\.write\(")
    for f in sorted(cli.glob("*.py")):
        hits = [line.strip() for line in f.read_text().splitlines() if direct.search(line)]
        assert len(hits) <= allowed.get(f.name, 0), (f.name, hits)
