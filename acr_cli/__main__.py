"""Entry point for ``acr`` and ``python -m acr_cli``."""


def main() -> None:
    from acr_cli.cli.app import app

    app(prog_name="acr")


if __name__ == "__main__":
    main()
