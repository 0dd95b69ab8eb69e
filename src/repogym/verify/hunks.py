"""Unified-diff hunks of a gold patch: parsed per file, applied to a base text, renumbered and
rendered back as git-style diffs (how mutants are written)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from repogym.sources.patches import FilePatch, parse_patch

# --------------------------------------------------------------------------- hunks

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_NO_EOL = "\\ No newline at end of file"


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    heading: str  # text after the closing "@@", verbatim
    # (tag " "/"-"/"+", content without "\n" (CR kept), the line has no newline)
    lines: list[tuple[str, str, bool]]

    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"


@dataclass
class PatchedFile:
    index: int
    fp: FilePatch
    code: bool
    header: list[str] = field(default_factory=list)  # extended git header, without "index"
    names: list[str] = field(default_factory=list)  # the "---" and "+++" lines
    hunks: list[Hunk] = field(default_factory=list)
    base: list[str] | None = None  # base lines with their "\n" ([] for a new file)
    gold: list[str] | None = None  # gold post-image lines
    plus_at: dict[int, tuple[int, int]] = field(default_factory=dict)  # line -> (hunk, row)
    mutable: bool = False


def parse_section(text: str) -> tuple[list[str], list[str], list[Hunk]] | None:
    """Header lines, ``---``/``+++`` lines and hunks of one file section (None if odd)."""
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    header: list[str] = []
    names: list[str] = []
    hunks: list[Hunk] = []
    i, n = 0, len(rows)
    while i < n and not rows[i].startswith("@@ "):
        if rows[i].startswith("--- ") and i + 1 < n and rows[i + 1].startswith("+++ "):
            names = [rows[i], rows[i + 1]]
            i += 2
            break
        header.append(rows[i])
        i += 1
    while i < n:
        m = _HUNK_HEADER.match(rows[i])
        if m is None:
            return None
        old_len = 1 if m.group(2) is None else int(m.group(2))
        new_len = 1 if m.group(4) is None else int(m.group(4))
        hunk = Hunk(int(m.group(1)), old_len, int(m.group(3)), new_len, m.group(5), [])
        i += 1
        old_left, new_left = old_len, new_len
        while i < n and (old_left > 0 or new_left > 0):
            row = rows[i]
            tag = row[:1] or " "
            if tag == "\\":
                if not hunk.lines:
                    return None
                t, c, _ = hunk.lines[-1]
                hunk.lines[-1] = (t, c, True)
                i += 1
                continue
            if tag not in " -+":
                return None
            if tag != "+":
                old_left -= 1
            if tag != "-":
                new_left -= 1
            hunk.lines.append((tag, row[1:], False))
            i += 1
        if old_left or new_left:
            return None
        while i < n and rows[i].startswith("\\"):
            if not hunk.lines:
                return None
            t, c, _ = hunk.lines[-1]
            hunk.lines[-1] = (t, c, True)
            i += 1
        hunks.append(hunk)
    return header, names, hunks


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (only ``\\n`` splits); the last may lack it."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _full(content: str, no_eol: bool) -> str:
    return content if no_eol else content + "\n"


def apply_hunks(
    base: list[str], hunks: list[Hunk], plus_at: dict[int, tuple[int, int]] | None = None
) -> list[str] | None:
    """Post-image of ``hunks`` on ``base`` (exact positions), None when they do not match."""
    out: list[str] = []
    cur = 0
    for h_i, h in enumerate(hunks):
        start = h.old_start - 1 if h.old_len > 0 else h.old_start
        if start < cur or start > len(base):
            return None
        out += base[cur:start]
        cur = start
        for r_i, (tag, content, no_eol) in enumerate(h.lines):
            full = _full(content, no_eol)
            if tag != "+":
                if cur >= len(base) or base[cur] != full:
                    return None
                cur += 1
            if tag != "-":
                out.append(full)
                if tag == "+" and plus_at is not None:
                    plus_at[len(out)] = (h_i, r_i)
    return out + base[cur:]


def renumber(hunks: list[Hunk]) -> list[Hunk]:
    """Drop hunks without changes, recount lengths and the new-side start lines."""
    out: list[Hunk] = []
    delta = 0
    for h in hunks:
        if not any(tag != " " for tag, _, _ in h.lines):
            continue
        old_len = sum(1 for tag, _, _ in h.lines if tag != "+")
        new_len = sum(1 for tag, _, _ in h.lines if tag != "-")
        old_pos = h.old_start if h.old_len > 0 else h.old_start + 1
        new_pos = old_pos + delta
        new_start = new_pos if new_len > 0 else new_pos - 1
        out.append(Hunk(h.old_start, old_len, new_start, new_len, h.heading, list(h.lines)))
        delta += new_len - old_len
    return out


def _quote(path: str) -> str:
    """A path for a synthesized git header, C-quoted when git would need quotes."""
    if not any(ch in '"\\' or ord(ch) < 32 or ord(ch) == 127 for ch in path):
        return path
    out = []
    for ch in path:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def render_file(f: PatchedFile, hunks: list[Hunk], absent: bool) -> str:
    """The mutated file's section ("" when it leaves the file as in the base)."""
    status = f.fp.status
    if (status == "A" and absent) or (status == "D" and not hunks):
        return ""
    if f.fp.git:
        header, names = list(f.header), list(f.names)
    else:
        old, new = f.fp.old_path, f.fp.new_path
        a, b = old if old is not None else new, new if new is not None else old
        header = [f"diff --git {_quote('a/' + (a or ''))} {_quote('b/' + (b or ''))}"]
        if status == "A":
            header.append("new file mode 100644")
        elif status == "D":
            header.append("deleted file mode 100644")
        names = [
            "--- " + ("/dev/null" if old is None else _quote("a/" + old)),
            "+++ " + ("/dev/null" if new is None else _quote("b/" + new)),
        ]
    if not names:
        old, new = f.fp.old_path, f.fp.new_path
        names = [
            "--- " + ("/dev/null" if old is None else _quote("a/" + old)),
            "+++ " + ("/dev/null" if new is None else _quote("b/" + new)),
        ]
    if not hunks:
        if status == "M" and not any(h.startswith(("old mode ", "new mode ")) for h in header):
            return ""
        return "".join(h + "\n" for h in header)
    out = [h + "\n" for h in header] + [nm + "\n" for nm in names]
    for h in hunks:
        out.append(h.header() + h.heading + "\n")
        for tag, content, no_eol in h.lines:
            out.append(tag + content + "\n")
            if no_eol:
                out.append(_NO_EOL + "\n")
    return "".join(out)


# --------------------------------------------------------------------------- patched files


def patched_files(
    gold_patch: str, is_code: Callable[[str], bool], read_base: Callable[[str], str | None]
) -> list[PatchedFile] | None:
    """The files of ``gold_patch`` with their hunks, and for code files (``is_code``; a
    predicate that raises means no) the base and gold post-image lines, read through
    ``read_base(path)`` (None when absent); None when the patch cannot be parsed. What mutants
    and red-team candidates are built from."""
    try:
        sections = parse_patch(gold_patch)
    except Exception:  # noqa: BLE001 - never raise on odd input
        return None
    files: list[PatchedFile] = []
    for i, fp in enumerate(sections):
        try:
            code = bool(is_code(fp.path))
        except Exception:  # noqa: BLE001
            code = False
        f = PatchedFile(i, fp, code)
        if not fp.binary:
            parsed = parse_section(fp.text)
            if parsed is not None:
                f.header = [h for h in parsed[0] if not h.startswith("index ")]
                f.names, f.hunks = parsed[1], parsed[2]
        files.append(f)
    _load(files, read_base)
    return files


def _load(files: list[PatchedFile], read_base: Callable[[str], str | None]) -> None:
    """Each code file's base and gold lines (left alone when a path is in several sections
    or its base cannot be read)."""
    counts: dict[str, int] = {}
    for f in files:
        for p in {f.fp.old_path, f.fp.new_path}:
            if p is not None:
                counts[p] = counts.get(p, 0) + 1
    for f in files:
        fp = f.fp
        if not f.code or fp.binary or not f.hunks:
            continue
        if any(counts.get(p, 0) > 1 for p in (fp.old_path, fp.new_path) if p is not None):
            continue  # a path in several sections: positions would not be against the base
        if fp.status == "A":
            base_text: str | None = ""
        else:
            try:
                base_text = read_base(fp.old_path or "")
            except Exception:  # noqa: BLE001 - an unreadable base: leave the file alone
                base_text = None
        if not isinstance(base_text, str):
            continue
        f.base = split_lines(base_text) if base_text else []
        f.gold = apply_hunks(f.base, f.hunks, f.plus_at)
        f.mutable = f.gold is not None
