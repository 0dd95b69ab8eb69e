"""Tiny text statistics."""

from textstats.counts import char_count, line_count, word_count

__all__ = ["char_count", "line_count", "word_count"]
