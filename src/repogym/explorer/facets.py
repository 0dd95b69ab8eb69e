"""The one definition of the explorer's facets and limits (index, snapshot, store, web, MCP).

Facets are the keys a search can be filtered and counted by; limits bound what a query may ask
for, at the store (which clamps) and at the web layer (which refuses with a 400).
"""

from __future__ import annotations

import re

FACETS = ("kind", "language", "category", "difficulty", "pipeline", "grading", "network")
"""Facets counted on the environment search page (kind is the environment's own)."""
TASK_FACETS = ("language", "category", "difficulty", "pipeline", "grading", "network")
"""Facets of tasks kept as index columns."""
COLUMN_FACETS = ("language", "category", "difficulty", "pipeline")
"""Task facets stored as their own columns of the snapshot's ``tasks`` table (the others go
into its JSON ``facets`` column)."""
TASK_FILTER_COLUMNS = (*TASK_FACETS, "runnable")
"""Columns a task search can be filtered by."""
FACET_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,40}$")
"""What a facet name may look like (others are ignored by the store)."""

# -- store (clamps)
MAX_WORDS = 16
"""Words of a query the store looks for (the rest are ignored)."""
MAX_QUERY_CHARS = 1000
"""Characters of a query the store reads."""
MAX_PAGE_SIZE = 200
"""Largest page the store answers (larger sizes are clamped)."""
DEFAULT_PAGE_SIZE = 24
"""Page size when none (or an unusable one) is given."""

# -- web API (refuses with 400)
MAX_Q = 500
"""Longest ``q`` the web API accepts."""
MAX_PAGE = 10_000
"""Highest ``page`` the web API accepts."""
MAX_SIZE = 100
"""Largest ``size`` the web API accepts."""

__all__ = [
    "COLUMN_FACETS",
    "DEFAULT_PAGE_SIZE",
    "FACETS",
    "FACET_KEY",
    "MAX_PAGE",
    "MAX_PAGE_SIZE",
    "MAX_Q",
    "MAX_QUERY_CHARS",
    "MAX_SIZE",
    "MAX_WORDS",
    "TASK_FACETS",
    "TASK_FILTER_COLUMNS",
]
