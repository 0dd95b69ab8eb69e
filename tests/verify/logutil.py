"""Helpers for the parser tests: fixture logs and the parser module."""

from __future__ import annotations

from pathlib import Path

from repogym.shipped import parsers

LOGS = Path(__file__).resolve().parent / "logs"
PARSERS_PY = Path(parsers.__file__).resolve()  # parsers/__init__.py: a task's parsers.py
PARSER_PARTS = sorted(PARSERS_PY.parent.glob("_log_*.py"))  # shipped beside it


def ship_parsers(folder: Path) -> Path:
    """Copy the parsers into ``folder`` as a task ships them; the path of its ``parsers.py``."""
    copy = folder / "parsers.py"
    copy.write_bytes(PARSERS_PY.read_bytes())
    for part in PARSER_PARTS:
        (folder / part.name).write_bytes(part.read_bytes())
    return copy


def read(name: str) -> str:
    """A fixture log as text, line endings untouched."""
    return (LOGS / name).read_bytes().decode("utf-8")


def parse(name: str, runner: str | None = None) -> parsers.ParseResult:
    """Parse a fixture log."""
    return parsers.parse_log(read(name), runner)
