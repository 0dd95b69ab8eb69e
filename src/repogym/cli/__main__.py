"""``python -m repogym.cli``."""

from repogym.cli import app

if __name__ == "__main__":  # pragma: no cover
    app()
