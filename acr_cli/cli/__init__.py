"""The command line: a thin Typer layer. Commands parse options, call the library, render data."""
