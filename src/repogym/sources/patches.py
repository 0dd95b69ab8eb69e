"""Unified diff helpers: parse a patch into per-file sections, split tests from source.

Which files are tests is :func:`repogym.shipped.testfiles.is_test_path` (re-exported here).

Patches are ``str`` decoded from git's bytes with UTF-8 + ``surrogateescape`` (see
:func:`decode_patch` / :func:`encode_patch`), so content in any encoding round-trips exactly.

The parser understands git diffs (``diff --git`` sections with extended headers: new/deleted
file modes, renames, copies, mode changes, ``GIT binary patch`` and ``Binary files … differ``,
C-quoted paths such as ``"a/caf\\303\\251.py"``) and plain unified diffs (``---``/``+++``
pairs). Hunks are read by their line counts, so content lines that look like headers (a removed
``-- comment`` shows up as ``--- comment``) never start a new file, and ``\\ No newline at end
of file`` markers stay with their hunk. Text before the first file (mail headers, a commit
message) and stray lines after a file's last hunk are dropped.

Path rules: git sections lose their first path component (what ``git apply -p1`` does);
plain unified diffs lose a leading ``a/`` / ``b/`` only; ``rename``/``copy`` header paths are
taken as written; ``/dev/null`` means "no file on this side".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from repogym.shipped.testfiles import is_test_path

__all__ = [
    "FilePatch",
    "added_lines",
    "decode_patch",
    "encode_patch",
    "file_diff",
    "files_in_patch",
    "is_test_path",
    "parse_patch",
    "split_patch",
]

# --------------------------------------------------------------------------- encoding


def decode_patch(data: bytes) -> str:
    """Bytes from git → patch text (UTF-8, undecodable bytes kept as surrogates)."""
    return data.decode("utf-8", "surrogateescape")


def encode_patch(text: str) -> bytes:
    """Patch text → the exact bytes to write or feed to ``git apply``."""
    return text.encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- parsing

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}


@dataclass(slots=True)
class FilePatch:
    """One file's section of a patch. ``old_path`` is None for a new file, ``new_path`` None
    for a deletion; ``text`` is the section verbatim (every line ends with ``\\n``)."""

    old_path: str | None
    new_path: str | None
    status: str  # A, D, M, R, C
    binary: bool
    text: str
    git: bool = True
    added: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The post-image path, or the pre-image path for a deletion."""
        return self.new_path if self.new_path is not None else self.old_path or ""


def _unquote(s: str) -> tuple[str, str]:
    """Parse a C-quoted git path at the start of ``s``; return (path, rest after the quote)."""
    raw = s.encode("utf-8", "surrogateescape")
    out = bytearray()
    i, n = 1, len(raw)
    while i < n:
        c = raw[i]
        if c == 0x22:  # closing quote
            return out.decode("utf-8", "surrogateescape"), raw[i + 1 :].decode(
                "utf-8", "surrogateescape"
            )
        if c == 0x5C and i + 1 < n:  # backslash
            nxt = raw[i + 1]
            if 0x30 <= nxt <= 0x37:
                j = i + 1
                while j < n and j < i + 4 and 0x30 <= raw[j] <= 0x37:
                    j += 1
                out.append(int(raw[i + 1 : j], 8) & 0xFF)
                i = j
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    # unterminated: take everything
    return out.decode("utf-8", "surrogateescape"), ""


def _name(value: str) -> str | None:
    """A path from a ``---``/``+++``/``rename from`` value; None for /dev/null."""
    if value.startswith('"'):
        name, _ = _unquote(value)
    else:
        name = value.split("\t", 1)[0]
        if name.endswith("\r"):
            name = name[:-1]
    return None if name == "/dev/null" else name


def _strip1(name: str | None) -> str | None:
    if name is None:
        return None
    _, sep, rest = name.partition("/")
    return rest if sep else name


def _git_header_names(rest: str) -> tuple[str | None, str | None]:
    """Names from ``diff --git A B`` (prefix stripped); best effort for unquoted spaces."""
    if rest.startswith('"'):
        a, tail = _unquote(rest)
        tail = tail.lstrip(" ")
        b = _unquote(tail)[0] if tail.startswith('"') else tail
        return _strip1(a), _strip1(b)
    # unquoted a, quoted b
    start = 0
    while (k := rest.find(' "', start)) != -1:
        b, tail = _unquote(rest[k + 1 :])
        if not tail.strip():
            return _strip1(rest[:k]), _strip1(b)
        start = k + 1
    # both unquoted: for an unrenamed file both sides name the same path
    candidates = [i for i, ch in enumerate(rest) if ch == " "]
    for i in candidates:
        left, right = _strip1(rest[:i]), _strip1(rest[i + 1 :])
        if left == right:
            return left, right
    if candidates:
        mid = candidates[len(candidates) // 2]
        return _strip1(rest[:mid]), _strip1(rest[mid + 1 :])
    return _strip1(rest), _strip1(rest)


class _Section:
    __slots__ = (
        "git",
        "lines",
        "header_names",
        "minus",
        "plus",
        "rename_from",
        "rename_to",
        "copy",
        "new_file",
        "deleted",
        "binary",
        "in_binary",
        "had_content",
        "added",
    )

    def __init__(self, git: bool) -> None:
        self.git = git
        self.lines: list[str] = []
        self.header_names: tuple[str | None, str | None] = (None, None)
        self.minus: tuple[bool, str | None] = (False, None)  # (seen, name)
        self.plus: tuple[bool, str | None] = (False, None)
        self.rename_from: str | None = None
        self.rename_to: str | None = None
        self.copy = False
        self.new_file = False
        self.deleted = False
        self.binary = False
        self.in_binary = False
        self.had_content = False
        self.added: list[str] = []

    def finish(self) -> FilePatch:
        old, new = self.header_names
        if self.minus[0]:
            old = _strip1(self.minus[1]) if self.git else self.minus[1]
        if self.plus[0]:
            new = _strip1(self.plus[1]) if self.git else self.plus[1]
        if not self.git and old is not None and new is not None:
            if old.startswith("a/") and new.startswith("b/"):
                old, new = old[2:], new[2:]
        elif not self.git and old is None and new is not None and new.startswith("b/"):
            new = new[2:]
        elif not self.git and new is None and old is not None and old.startswith("a/"):
            old = old[2:]
        if self.rename_from is not None:
            old = self.rename_from
        if self.rename_to is not None:
            new = self.rename_to
        if self.new_file:
            old = None
        if self.deleted:
            new = None
        if old is None:
            status = "A"
        elif new is None:
            status = "D"
        elif self.rename_from is not None or self.rename_to is not None:
            status = "C" if self.copy else "R"
        else:
            status = "M"
        return FilePatch(
            old_path=old,
            new_path=new,
            status=status,
            binary=self.binary,
            text="".join(self.lines),
            git=self.git,
            added=self.added,
        )


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (never on ``\\r``, form feeds, …), every line ending in ``\\n``."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p + "\n" for p in parts]


def parse_patch(diff_text: str) -> list[FilePatch]:
    """Split a unified diff into per-file sections (see the module docstring for the rules)."""
    lines = _lines(diff_text)
    n = len(lines)
    sections: list[_Section] = []
    cur: _Section | None = None
    i = 0
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            cur = _Section(git=True)
            cur.header_names = _git_header_names(line[11:-1])
            cur.lines.append(line)
            sections.append(cur)
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            if cur is None or not cur.git or cur.minus[0] or cur.had_content:
                cur = _Section(git=False)
                sections.append(cur)
            cur.minus = (True, _name(line[4:-1]))
            cur.plus = (True, _name(lines[i + 1][4:-1]))
            cur.lines += (line, lines[i + 1])
            i += 2
            continue
        if cur is None:  # preamble
            i += 1
            continue
        m = _HUNK_RE.match(line) if line.startswith("@@ ") else None
        if m is not None:
            cur.had_content = True
            cur.in_binary = False
            cur.lines.append(line)
            i += 1
            old_left = 1 if m.group(2) is None else int(m.group(2))
            new_left = 1 if m.group(4) is None else int(m.group(4))
            while i < n and (old_left > 0 or new_left > 0):
                body = lines[i]
                c = body[0]
                if c == " " or body == "\n":
                    old_left -= 1
                    new_left -= 1
                elif c == "-":
                    old_left -= 1
                elif c == "+":
                    new_left -= 1
                    cur.added.append(body[1:-1])
                elif c != "\\":
                    break  # truncated hunk: stop here
                cur.lines.append(body)
                i += 1
            while i < n and lines[i].startswith("\\"):
                cur.lines.append(lines[i])
                i += 1
            continue
        if cur.in_binary:
            cur.lines.append(line)
            i += 1
            continue
        if cur.had_content or not cur.git:
            i += 1  # stray line after the last hunk (mail signature, …)
            continue
        # git extended header line
        if line.startswith("GIT binary patch"):
            cur.binary = cur.in_binary = cur.had_content = True
        elif line.startswith("Binary files ") and line.endswith(" differ\n"):
            cur.binary = cur.had_content = True
        elif line.startswith("new file mode "):
            cur.new_file = True
        elif line.startswith("deleted file mode "):
            cur.deleted = True
        elif line.startswith(("rename from ", "copy from ")):
            cur.copy = line.startswith("copy")
            cur.rename_from = _name(line.split(" ", 2)[2][:-1])
        elif line.startswith(("rename to ", "copy to ")):
            cur.rename_to = _name(line.split(" ", 2)[2][:-1])
        cur.lines.append(line)
        i += 1
    return [s.finish() for s in sections]


# --------------------------------------------------------------------------- public helpers


def split_patch(diff_text: str, is_test: Callable[[str], bool] = is_test_path) -> tuple[str, str]:
    """Split a patch into (source part, test part); each is a valid diff or ``""``.

    A file section goes to the test part when its post-image path (the pre-image path for a
    deletion) satisfies ``is_test``. Sections are whole, so each part applies on its own to
    the base the full patch applies to; the two parts together are the full patch minus
    any preamble.
    """
    source: list[str] = []
    tests: list[str] = []
    for fp in parse_patch(diff_text):
        (tests if is_test(fp.path) else source).append(fp.text)
    return "".join(source), "".join(tests)


def file_diff(path: str, old: str | None, new: str) -> str:
    """A git-style diff of one text file (``old`` None: a new file) that ``git apply`` and
    ``patch -p1`` take; ``""`` when nothing changed. For a change computed rather than read
    from git (a file's code without its inline tests, say)."""
    body = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile=f"b/{path}",
        n=3,
    )
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body
    )
    if not text:
        return ""
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if old is None else "")
    return head + text


def files_in_patch(diff_text: str) -> list[str]:
    """Every path a patch touches, in order, without repeats (both sides of a rename/copy)."""
    seen: dict[str, None] = {}
    for fp in parse_patch(diff_text):
        for p in (fp.old_path, fp.new_path):
            if p is not None:
                seen.setdefault(p, None)
    return list(seen)


def added_lines(diff_text: str) -> list[str]:
    """Content of every ``+`` line in the hunks (without the ``+`` and the newline)."""
    out: list[str] = []
    for fp in parse_patch(diff_text):
        out += fp.added
    return out
