"""Query text and the environment search's in-memory index, for :mod:`repogym.explorer.store`.

The user's words become FTS5 queries (:func:`tasks_match` for the task index, :func:`env_match`
for the trigram index of environments); :class:`EnvCache` holds every environment card and its
facet sets as bitmasks (bit = place in the default order), so filtering and counting thousands
of environments costs microseconds.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from repogym.explorer.facets import (
    DEFAULT_PAGE_SIZE,
    FACET_KEY,
    FACETS,
    MAX_PAGE_SIZE,
    MAX_QUERY_CHARS,
    MAX_WORDS,
)


class EnvMatch(NamedTuple):
    """The user's words for the trigram index of environments."""

    fts: str | None
    """FTS query of the words of three characters or more (None: no such word)."""
    short: list[str]
    """Shorter words, lowercased, matched as substrings."""


class Paging(NamedTuple):
    page: int
    size: int


class EnvHits(NamedTuple):
    """Environments matching an FTS query, as bitmasks over the default order."""

    strong: int
    """Those whose id or title hold every word."""
    every: int
    """All of them."""


# ---------------------------------------------------------------------------- query text


def query_words(q: str | None) -> list[str]:
    if not q:
        return []
    return str(q)[:MAX_QUERY_CHARS].replace("\x00", " ").split()[:MAX_WORDS]


def phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def tasks_match(q: str | None) -> str | None:
    """An FTS5 (unicode61) query for the user's words, or None when there is nothing to match.

    Each word is one quoted phrase; words with no letter or digit are dropped (they hold no
    token); ``*`` goes after the last phrase only, added by us.
    """
    words = [w for w in query_words(q) if any(ch.isalnum() for ch in w)]
    if not words:
        return None
    parts = [phrase(w) for w in words]
    parts[-1] += "*"
    return " ".join(parts)


def env_match(q: str | None) -> EnvMatch:
    """For the trigram index: (FTS query of words ≥ 3 characters, shorter words to find).

    Trigram phrases match substrings case-insensitively; words under three characters cannot
    be looked up in a trigram index, so they are matched as substrings by the caller.
    """
    long_words, short = [], []
    for w in query_words(q):
        if len(w) >= 3:
            long_words.append(w)
        elif any(ch.isalnum() for ch in w):
            short.append(w)
    fts = " ".join(phrase(w) for w in long_words) or None
    return EnvMatch(fts, [w.lower() for w in short])


def norm_filters(filters: Mapping[str, Iterable[str]] | None) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, values in (filters or {}).items():
        if not isinstance(key, str) or not FACET_KEY.match(key):
            continue
        if isinstance(values, str):
            values = [values]
        vals = {str(v) for v in values if v is not None and str(v) != ""}
        if vals:
            out[key] = vals
    return out


def paging(page: int, size: int) -> Paging:
    try:
        page = max(1, int(page))
    except (TypeError, ValueError):
        page = 1
    try:
        size = min(MAX_PAGE_SIZE, max(1, int(size)))
    except (TypeError, ValueError):
        size = DEFAULT_PAGE_SIZE
    return Paging(page, size)


# ---------------------------------------------------------------------------- bitmasks


def bits_of(rids: Iterable[int], nbytes: int) -> int:
    """A set of small non-negative ints as an int bitmask."""
    buf = bytearray(nbytes)
    for r in rids:
        buf[r >> 3] |= 1 << (r & 7)
    return int.from_bytes(buf, "little")


compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


class EnvCache:
    """Everything the environment search needs, loaded once per snapshot."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.cards: dict[int, dict[str, Any]] = {}
        self.by_id: dict[str, int] = {}
        self.text: dict[int, str] = {}  # what short words are looked for in
        rows = db.execute(
            "SELECT rid, id, kind, title, summary, task_count, facets, source, tags, task_facets,"
            " first_task, last_task FROM envs"
        ).fetchall()
        self.facet_sets: dict[str, dict[str, set[int]]] = {f: {} for f in FACETS}
        self.task_range: dict[int, tuple[int, int]] = {}
        for rid, eid, kind, title, summary, n, facets, source, tags, counts, lo, hi in rows:
            self.cards[rid] = {
                "id": eid,
                "kind": kind,
                "title": title,
                "summary": summary,
                "task_count": n,
                "facets": json.loads(facets),
                "source": source,
            }
            self.by_id[eid] = rid
            self.text[rid] = f"{eid} {title} {summary} {tags}".lower()
            self.facet_sets["kind"].setdefault(kind, set()).add(rid)
            self.task_range[rid] = (lo, hi)
            for facet, values in json.loads(counts).items():
                if facet in self.facet_sets and facet != "kind":
                    for value in values:
                        self.facet_sets[facet].setdefault(value, set()).add(rid)
        by_name = sorted(self.cards, key=lambda r: (self.cards[r]["title"].lower(), r))
        self.order_name = by_name
        self.order_tasks = sorted(by_name, key=lambda r: -(self.cards[r]["task_count"] or 0))
        self.pos_name = {r: i for i, r in enumerate(self.order_name)}
        self.pos_tasks = {r: i for i, r in enumerate(self.order_tasks)}
        # The same sets as bitmasks whose bit p is the environment at place p of the default
        # order (most tasks first): intersections and counts of thousands of environments cost
        # microseconds, and a page in that order is read straight off the bits.
        pos = self.pos_tasks
        self.nbytes = (len(self.cards) >> 3) + 1
        self.all_bits = bits_of(pos.values(), self.nbytes)
        self.facet_bits = {
            f: {v: bits_of((pos[r] for r in rids), self.nbytes) for v, rids in values.items()}
            for f, values in self.facet_sets.items()
        }
        # Words under three characters cannot use the trigram index: every one- and
        # two-character substring of the searchable text maps to its environments instead.
        grams: dict[str, bytearray] = {}
        nbytes = self.nbytes
        for rid, t in self.text.items():
            p = pos[rid]
            byte, bit = p >> 3, 1 << (p & 7)
            for g in {t[i : i + n] for n in (1, 2) for i in range(len(t) - n + 1)}:
                buf = grams.get(g)
                if buf is None:
                    buf = grams[g] = bytearray(nbytes)
                buf[byte] |= bit
        self.short_bits = {g: int.from_bytes(buf, "little") for g, buf in grams.items()}
        self.cards_json: dict[int, str] = {}  # filled as cards are served


_NONZERO = re.compile(rb"[^\x00]")
_BYTE_BITS = [tuple(i for i in range(8) if b >> i & 1) for b in range(256)]
_BLOCK = 128  # bytes counted at once when skipping to a page


def positions(bits: int, nbytes: int, start: int = 0, count: int = -1) -> list[int]:
    """The places of the set bits of ``bits``, from the ``start``-th on, at most ``count``
    (all when negative): whole blocks are skipped by counting, zero bytes at C speed."""
    mb = bits.to_bytes(nbytes, "little")
    out: list[int] = []
    seen = 0
    i = 0
    while start and i < nbytes:
        n = int.from_bytes(mb[i : i + _BLOCK], "little").bit_count()
        if seen + n > start:
            break
        seen += n
        i += _BLOCK
    for m in _NONZERO.finditer(mb, i):
        j = m.start()
        for b in _BYTE_BITS[mb[j]]:
            if seen >= start:
                out.append(j * 8 + b)
                if len(out) == count:
                    return out
            seen += 1
    return out


def env_hits(db: sqlite3.Connection, c: EnvCache, fts: str) -> EnvHits:
    """The environments matching an FTS query as two bitmasks (bit = place in the default
    order): those whose id or title hold every word, and all of them. Relevance puts the
    first ones first, then the others, each by task count (the bits' own order): two unranked
    index lookups, several times cheaper than bm25 over every hit, and a clear order for a
    catalog."""
    sql = "SELECT rowid FROM envs_fts WHERE envs_fts MATCH ?"
    pos = c.pos_tasks
    strong = bits_of(
        (pos[r] for (r,) in db.execute(sql, ("{id title} : (" + fts + ")",))), c.nbytes
    )
    every = bits_of((pos[r] for (r,) in db.execute(sql, (fts,))), c.nbytes)
    return EnvHits(strong, every)
