"""Entry point for ``acr`` and ``python -m acr_cli``."""


def main() -> None:
    try:
        from acr_cli.cli.app import app
    except KeyboardInterrupt:  # Ctrl-C while Python is still loading acr: nothing started yet
        raise SystemExit(130) from None
    app(prog_name="acr")


if __name__ == "__main__":
    main()
