"""Keep a task's answer out of its run events.

A run's events show what the agent and the verifier printed. The oracle's output may print the
gold patch, a verifier may print the expected output it compares with, and an agent that found
the fix prints the fixed lines, so every event text shown goes through :class:`AnswerMask`: a
line that holds a piece of the answer is replaced by :data:`MASKED`. The answer is every file
the explorer withholds from the task's pages (:func:`repogym.explorer.withhold.file_reason`:
``solution/``, hidden test patches, expected outputs, gold data…): the lines a patch adds, every
line of other such files, and the quoted strings of its scripts (``printf 'the answer'``). Lines
the task shows anyway (``instruction.md``, ``environment/``, the tests that are not withheld) and
short pieces (under :data:`MIN_LEN` characters) are not answers and stay. (The trial also never
shows the oracle's own output: see the service.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

__all__ = ["MASKED", "AnswerMask"]

MASKED = "«withheld: a line of the answer»"
MIN_LEN = 12
"""Lines shorter than this (stripped) are too common to be an answer."""
_QUOTED = re.compile(r"'([^'\n]{12,})'|\"([^\"\n]{12,})\"")
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
READ_LIMIT = 32 << 20
"""Bytes of a task's visible files read to tell answer lines from lines shown anyway."""


def _text_lines(path: Path, budget: list[int]) -> list[str]:
    try:
        size = path.stat().st_size
        if size > budget[0] or size > 4 << 20:
            return []
        budget[0] -= size
        data = path.read_bytes()
    except OSError:
        return []
    if b"\x00" in data[:4096]:
        return []
    return data.decode("utf-8", "replace").splitlines()


def _files(folder: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__"))
        out.extend(Path(dirpath) / f for f in sorted(filenames))
    return out


class AnswerMask:
    """The answer lines of one task, and a filter over event texts."""

    def __init__(self, lines: set[str]) -> None:
        self.lines = lines
        self._by_len = sorted(lines, key=len, reverse=True)

    @classmethod
    def for_task(cls, task_dir: Path) -> AnswerMask:
        from repogym.explorer.withhold import file_reason

        budget = [READ_LIMIT]
        answer: set[str] = set()
        shown_files: list[Path] = []
        for f in _files(task_dir):
            rel = f.relative_to(task_dir).as_posix()
            if rel.startswith("environment/") or rel == "instruction.md":
                shown_files.append(f)
                continue
            if file_reason(rel) is None:
                if rel.startswith("tests/"):
                    shown_files.append(f)
                continue
            patch = f.suffix in (".diff", ".patch")
            script = f.suffix == ".sh"
            heredoc: str | None = None
            for line in _text_lines(f, budget):
                if patch:
                    if not line.startswith("+") or line.startswith("+++"):
                        continue
                    line = line[1:]
                if script and heredoc is None:
                    # a script's commands are not the answer; its strings and heredocs are
                    for quoted in _QUOTED.finditer(line):
                        piece = (quoted.group(1) or quoted.group(2)).removesuffix("\\n").strip()
                        if len(piece) >= MIN_LEN:
                            answer.add(piece)
                    if m := _HEREDOC.search(line):
                        heredoc = m.group(1)
                    continue
                if heredoc is not None and line.strip() == heredoc:
                    heredoc = None
                    continue
                line = line.strip()
                if len(line) >= MIN_LEN:
                    answer.add(line)
        if not answer:
            return cls(set())
        shown = "\n".join(x for f in shown_files for x in _text_lines(f, budget))
        return cls({a for a in answer if a not in shown})

    def text(self, value: str) -> str:
        """``value`` with every line that holds an answer line replaced."""
        if not self.lines or not value:
            return value
        out = []
        changed = False
        for line in value.split("\n"):
            if len(line.strip()) >= MIN_LEN and any(a in line for a in self._by_len):
                out.append(MASKED)
                changed = True
            else:
                out.append(line)
        return "\n".join(out) if changed else value

    def data(self, value: Any, depth: int = 0) -> Any:
        """Every string inside ``value`` (dicts, lists) masked."""
        if isinstance(value, str):
            return self.text(value)
        if depth > 20:
            return value
        if isinstance(value, dict):
            return {k: self.data(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v, depth + 1) for v in value]
        return value
