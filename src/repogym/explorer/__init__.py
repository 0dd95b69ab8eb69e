"""repogym explorer: browse, search and read RL environments' tasks without their answers.

This package root stays light: the web layer (FastAPI) is imported only by ``explorer.web``.
"""

from repogym.explorer.model import EnvDoc, FileDoc, Section, TaskDoc

__all__ = ["EnvDoc", "FileDoc", "Section", "TaskDoc"]
