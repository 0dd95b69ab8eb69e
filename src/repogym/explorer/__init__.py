"""repogym explorer: browse, search and read RL environments' tasks without their answers.

This package root stays light: the web layer (FastAPI) is imported only by ``explorer.web``.

Log lines of the explorer name things taken from datasets (task folders, row ids, server
names): every record of the explorer's loggers is made terminal-safe here (control characters
shown as ``\\x1b``-style text, see :func:`repogym.ui.safe_text`) before any handler prints it.
"""

import logging

from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc

__all__ = ["EnvDoc", "FileDoc", "Section", "TaskDoc"]

LOGGERS = ("repogym.explorer", "repogym.explorer.rows", "repogym.explorer.hub")


def _terminal_safe(record: logging.LogRecord) -> bool:
    from repogym.ui import safe_text

    try:
        message = record.getMessage()
    except Exception:  # a bad format: show the template and its arguments as they are
        message = f"{record.msg!s} {record.args!r}"
    record.msg, record.args = safe_text(message), None
    return True


for _name in LOGGERS:
    _logger = logging.getLogger(_name)
    if _terminal_safe not in _logger.filters:
        _logger.addFilter(_terminal_safe)
