"""``COPY``/``ADD`` sources a build would not find, known before building.

A Dockerfile whose ``COPY`` names a file absent from the build context fails only when the
build reaches that line, possibly minutes in. :func:`missing_sources` reads the Dockerfile
and the context the way a build does (``.dockerignore`` applied, wildcards matched, symlinks
confined to the context) and lists what would fail. Left out, as a build would not look for
them in the context: ``--from=`` copies, heredocs, ``ADD`` of a URL or a git repository, and
sources naming a build variable (their value is known only at build time).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from repogym import dockerfile
from repogym.sandbox._context import (
    ContextError,
    IgnoreRules,
    inside,
    is_wildcard,
    resolve_sources,
)

_REMOTE = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|git@)")


@dataclass(frozen=True)
class MissingSource:
    """One source of one instruction that the build would not find."""

    lineno: int
    keyword: str
    source: str
    why: str

    def message(self) -> str:
        return f"line {self.lineno}: {self.keyword} source {self.source!r} {self.why}"


def _sources(ins: dockerfile.Instruction, escape: str) -> list[str]:
    """The context sources an instruction names (the last word is the destination)."""
    if ins.keyword not in ("COPY", "ADD") or ins.flags.get("from") is not None:
        return []
    if ins.json is not None:
        words = list(ins.json)
    else:
        raw = dockerfile.split_raw(ins.args_without_heredocs, escape)
        words = [w if "$" in w else "".join(dockerfile.expand_words(w, {}, escape)) for w in raw]
    return [
        w for w in words[:-1] if "$" not in w and not (ins.keyword == "ADD" and _REMOTE.match(w))
    ]


def _why(context: Path, source: str, rules: IgnoreRules) -> str | None:
    """Why ``source`` is not in the context (None: it is)."""
    clean = os.path.normpath(source.lstrip("/")).replace(os.sep, "/")
    try:
        if is_wildcard(clean):
            resolve_sources(context, [source], rules)
            return None
        if clean.startswith(".."):
            return "is outside the build context"
        if not os.path.lexists(context / clean):
            return "is not in the build context"
        inside(context, clean, source)
    except ContextError as exc:
        text = str(exc)
        return "matches nothing in the build context" if "matches nothing" in text else text
    if clean != "." and rules.ignored(clean):
        return "is excluded by .dockerignore"
    return None


def missing_sources(context: Path, text: str) -> list[MissingSource]:
    """Every ``COPY``/``ADD`` source of the Dockerfile ``text`` that a build from ``context``
    would not find; [] when the text does not parse (the syntax check says why)."""
    try:
        parsed = dockerfile.parse(text)
        rules = IgnoreRules.load(context)
    except (dockerfile.DockerfileError, ContextError):
        return []
    out = []
    for ins in parsed.instructions:
        try:
            sources = _sources(ins, parsed.escape)
        except dockerfile.DockerfileError:
            continue  # an unterminated quote: the build reports it
        for source in sources:
            why = _why(context, source, rules)
            if why is not None:
                out.append(MissingSource(ins.lineno, ins.keyword, source, why))
    return out


def copied_folders(context: Path, text: str, folders: list[Path]) -> list[tuple[int, Path]]:
    """Which of ``folders`` (e.g. a task's hidden ``tests/`` and ``solution/``) a ``COPY``/``ADD``
    of the Dockerfile ``text`` would put into the image, as ``(line, folder)``: a source that is
    the folder, lies in it, or holds it (``COPY . /app``), unless ``.dockerignore`` excludes it."""
    root = context.resolve()
    hidden = [f.resolve() for f in folders if f.resolve().is_relative_to(root)]
    if not hidden:
        return []
    try:
        parsed = dockerfile.parse(text)
        rules = IgnoreRules.load(context)
    except (dockerfile.DockerfileError, ContextError):
        return []
    out: list[tuple[int, Path]] = []
    for ins in parsed.instructions:
        try:
            found = resolve_sources(context, _sources(ins, parsed.escape), rules)
        except (dockerfile.DockerfileError, ContextError):
            continue  # missing_sources says why
        for folder in hidden:
            rel = folder.relative_to(root).as_posix()
            for source in found:
                holds = folder.is_relative_to(source.path) and not rules.ignored(rel)
                if holds or source.path.is_relative_to(folder):
                    out.append((ins.lineno, folder))
                    break
    return out
