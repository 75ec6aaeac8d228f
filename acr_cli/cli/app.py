"""The ``acr`` Typer application: wiring only.

Errors: an :class:`~acr_cli.errors.AcrError` anywhere below becomes one
message on stderr and its exit code (2 for usage/configuration); any other
exception is a bug: a short message, the traceback in the crash log, exit 70 -- except an
``OSError`` (the file system refused) and an SQLite error past opening the memory (a damaged page, a
lock held too long), which are reported like an AcrError.
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from acr_cli import __version__
from acr_cli.cli import bench, common, config, doctor, gc, init, memory, profiles, recover, run, show, spend, trust
from acr_cli.cli.common import JSON_META, json_error, report_crash, report_error
from acr_cli.cli.terminal import echo
from acr_cli.errors import EXIT_PIPE_CLOSED, AcrError, MemoryFileError, Reported


class AcrGroup(TyperGroup):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _label_option_values(self)
        _note_json(self)

    def invoke(self, ctx):  # type: ignore[override]
        def as_json() -> bool:  # (the command sets it once its options are read)
            return bool(ctx.meta.get(JSON_META))

        try:
            return super().invoke(ctx)
        except Reported as e:
            raise typer.Exit(e.exit_code) from None
        except AcrError as e:
            report_error(e, as_json())
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:  # Ctrl-C in a command with nothing to undo (a replay, a download)
            from acr_cli import interrupts

            echo("acr: cancelled", err=True)
            if as_json():
                json_error("cancelled", None, interrupts.exit_code())
            raise typer.Exit(interrupts.exit_code()) from None
        except SystemExit:
            raise
        except BrokenPipeError:  # `acr ... | head`: the reader left; stop quietly
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(EXIT_PIPE_CLOSED) from None
        except OSError as e:
            # The file system refused (a missing directory, a file where a directory belongs, permissions,
            # a full disk): something the user can act on, not a bug in acr.
            where = f"{e.filename}: " if e.filename else ""
            report_error(AcrError(f"{where}{e.strerror or e}"), as_json())
            raise typer.Exit(AcrError.exit_code) from None
        except Exception as e:
            sqlite3 = sys.modules.get("sqlite3")  # (imported only by commands that use the memory)
            if sqlite3 is not None and isinstance(e, sqlite3.DatabaseError):
                # damage deeper in the file than opening it reads, or a lock held for too long
                report_error(_memory_failure(e), as_json())
                raise typer.Exit(AcrError.exit_code) from None
            if type(e).__module__.split(".")[0] in ("typer", "click"):  # usage errors: Typer prints them
                option = getattr(e, "option_name", "") or ""
                if type(e).__name__ == "NoSuchOption" and not option.startswith("--") \
                        and ctx.invoked_subcommand in ("run", "route"):
                    e.message += "; a request that starts with '-' goes after `--`, e.g. acr run -- \"-v is broken\""
                raise
            raise typer.Exit(report_crash(e, as_json())) from None


def _memory_failure(e: Exception):
    from acr_cli.memory.db import BUSY_TIMEOUT_S

    if "locked" in str(e) or "busy" in str(e):
        return MemoryFileError(f"the memory stayed locked by another process for {BUSY_TIMEOUT_S:g} s ({e})",
                               hint="wait for the other acr command (or whatever holds the file) to finish, then "
                                    "run this again")
    if "readonly" in str(e):  # readable, not writable: nothing is wrong with the file itself
        return MemoryFileError(f"cannot write the memory ({e})",
                               hint="check the file's and its directory's permissions (`acr doctor` says where it "
                                    "is), or pass --memory PATH")
    return MemoryFileError(f"the memory could not be read ({e})",
                           hint="`acr doctor` says where it is; move that file aside (acr starts a new memory) and "
                                "`acr memory import` an export, or try `sqlite3 FILE .recover` on it")


def _note_json(command) -> None:
    """Each command notes in the context's shared ``meta`` whether it was given ``--json``, before it runs, so
    that an error it ends with is also printed as JSON on stdout for the script that reads it."""
    subs = getattr(command, "commands", None)
    if subs is not None:
        for sub in subs.values():
            _note_json(sub)
        return
    invoke = command.invoke

    def noted(ctx, invoke=invoke):
        ctx.meta[JSON_META] = bool(ctx.params.get("json_out"))
        common.forget_printed_json()  # (a test's CliRunner runs many commands in one process)
        return invoke(ctx)

    command.invoke = noted


def _label_option_values(command) -> None:
    """Help shows ``--orders ORDERS``, and no type after a flag or an argument, whatever Typer's version.

    (Recent Typer prints Python annotations instead: ``benchmark <str>``, ``<list[str]>``, and ``<bool>``
    after every flag.)
    Duck-typed on the attributes click and Typer's vendored click share; an option with a metavar keeps it.
    """
    get_params = command.get_params  # what help and parsing read: includes --help and --install-completion

    def labelled(ctx, get_params=get_params):
        params = get_params(ctx)
        for param in params:
            if param.metavar is not None:
                continue
            if param.param_type_name == "argument":  # its name and help say what it is; no <str> beside it
                param.display_type_rich = lambda ctx: None  # (a metavar would drop Typer's [ARG]... in the usage)
            else:
                flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
                param.metavar = "" if flag else (param.name or "value").upper()
        return params

    command.get_params = labelled
    for sub in getattr(command, "commands", {}).values():
        _label_option_values(sub)


app = typer.Typer(
    cls=AcrGroup,
    name="acr",
    help="Route each coding request to the right agent CLI and model, verify the result, escalate, and learn.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    """``acr --version``: the package's version and the memory schema's (acr_cli.memory.db.SCHEMA_VERSION)."""
    if value:
        from acr_cli.memory.db import SCHEMA_VERSION

        echo(f"acr {__version__} (memory schema {SCHEMA_VERSION})")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print acr's version and its memory schema's, and exit."),
) -> None:
    """Route each coding request to the right agent CLI and model, verify the result, escalate, and learn.

    Exit codes: 0 passed / ok, 1 no attempt passed, 2 usage or configuration error, 130 cancelled (Ctrl-C).
    """


app.command("run")(run.run)
app.command("route")(run.route)
app.command("show")(show.show)
app.command("recover")(recover.recover)
app.command("gc")(gc.gc)
app.command("doctor")(doctor.doctor)
app.command("init")(init.init)
app.command("trust")(trust.trust)
app.command("spend")(spend.spend)
app.add_typer(memory.app, name="memory")
app.add_typer(profiles.app, name="profiles")
app.add_typer(bench.app, name="bench")
app.add_typer(config.app, name="config")
