"""Regenerate acr.bash, acr.zsh and acr.fish from the app: python completions/generate.py.

The scripts call back into ``acr`` (``_ACR_COMPLETE=complete_<shell> acr``), so they stay
valid when commands change; a test fails when these files differ from what the installed
Typer would generate. Install one with ``acr --install-completion`` or source it by hand.
"""

from __future__ import annotations

from pathlib import Path

SHELLS = ("bash", "zsh", "fish")


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="acr", complete_var="_ACR_COMPLETE", shell=shell).rstrip("\n") + "\n"


def main() -> None:
    here = Path(__file__).parent
    for shell in SHELLS:
        (here / f"acr.{shell}").write_text(script(shell))
        print(f"wrote {here / f'acr.{shell}'}")


if __name__ == "__main__":
    main()
