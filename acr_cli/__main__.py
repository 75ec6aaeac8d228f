"""Entry point for ``acr`` and ``python -m acr_cli``."""


def main() -> None:
    import sys

    for n, arg in enumerate(sys.argv[1:], 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:  # bytes the locale could not decode: acr's text, JSON and SQLite are UTF-8
            from acr_cli.errors import printable

            sys.stderr.write(f"acr: error: argument {n} is not valid UTF-8: {printable(arg)}\n"
                             "  hint: convert it first, e.g. with iconv -f latin1 -t utf-8\n")
            raise SystemExit(2)
    try:
        from acr_cli.cli.app import app
    except KeyboardInterrupt:  # Ctrl-C while Python is still loading acr: nothing started yet
        raise SystemExit(130) from None
    app(prog_name="acr")


if __name__ == "__main__":
    main()
