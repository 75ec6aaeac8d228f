"""The command reference (docs/commands.md) is every command's --help as acr prints it now."""

from __future__ import annotations

from acr_cli.cli import reference


def test_the_command_reference_is_current():
    written = reference.FILE.read_text(encoding="utf-8")
    assert written == reference.render(), "stale: run `python -m acr_cli.cli.reference --write` and commit the file"


def test_the_reference_names_every_command():
    written = reference.FILE.read_text(encoding="utf-8")
    for path in reference.commands():
        assert f"## `acr{''.join(' ' + p for p in path)}`" in written
    assert "## `acr memory forget`" in written and "## `acr bench replay`" in written
