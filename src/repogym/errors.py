"""The root of repogym's own exceptions.

Every error class the project raises on purpose derives from :class:`RepogymError`, so a caller
(the CLI, an integration) can tell "repogym refused or failed, with a message meant for a user"
from a bug, with one ``except``. Classes keep their historical bases too (``TaskError`` is
still a ``ValueError``, ``SourceError`` a ``RuntimeError``): code catching those keeps working.
"""

from __future__ import annotations


class RepogymError(Exception):
    """Base class of the errors repogym raises deliberately (their message is for users)."""
