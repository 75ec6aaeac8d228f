"""``acr bench``: replay routing policies on CodeRouterBench."""

from __future__ import annotations

import typer

app = typer.Typer(help="Replay routing policies on CodeRouterBench (OOD176, ID2919) or on your own memory.",
                  no_args_is_help=True)
