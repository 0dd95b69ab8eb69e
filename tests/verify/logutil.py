"""Helpers for the parser tests: fixture logs and the parser module."""

from __future__ import annotations

from pathlib import Path

from repogym.verify import parsers

LOGS = Path(__file__).resolve().parent / "logs"
PARSERS_PY = Path(parsers.__file__).resolve()


def read(name: str) -> str:
    """A fixture log as text, line endings untouched."""
    return (LOGS / name).read_bytes().decode("utf-8")


def parse(name: str, runner: str | None = None) -> parsers.ParseResult:
    """Parse a fixture log."""
    return parsers.parse_log(read(name), runner)
