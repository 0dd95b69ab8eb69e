"""Red-team candidates in Go, Rust and Java: every function the gold patch touched made to fail
at its first statement.

Only one kind, ``raise``, is built in these languages: a value of the right type (the zero
answers of :mod:`.redteam`) cannot be written without the function's types, but a statement
that never returns can, and it must compile whatever the function returns. It is put *before*
the body, which stays (unreachable): removing the body could leave an import or a variable
unused, which Go rejects. The guard keeps the compilers' reachability rules quiet: Go allows
unreachable code; ``if true { … }`` is not folded by Rust's lint; Java exempts ``if (true)``
from its unreachable-statement rule on purpose.

Functions are found in their formatter's layout: a header line ending with ``{`` (Go ``func``
at column 0; Rust ``fn``; Java methods with a return type, not constructors) whose body ends at
the next ``}`` at the header's indentation, and which holds an added line of the gold.
"""

from __future__ import annotations

import re

_GO_FUNC = re.compile(r"^func (?:\([^)]*\)\s*)?(\w+)\(.*\{\s*$")
_RUST_FN = re.compile(
    r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+).*\{\s*$"
)
_JAVA_METHOD = re.compile(
    r"^(\s+)(?:(?:public|protected|private|static|final|synchronized|default)\s+)*"
    r"(?:<[^>]*>\s+)?(?!(?:public|protected|private|static|final|synchronized|default)\b)"
    r"[\w.]+(?:<[^()]*>)?(?:\[\])*\s+(\w+)\s*\([^;]*\)\s*"
    r"(?:throws\s+[\w., ]+)?\{\s*$"
)
GUARD = {
    ".go": '\tif true {\n\t\tpanic("not implemented")\n\t}\n',
    ".rs": "{indent}    if true {{\n{indent}        unimplemented!()\n{indent}    }}\n",
    ".java": '{indent}    if (true) throw new UnsupportedOperationException("not implemented");\n',
}
BRACED_REDTEAM_EXT = tuple(GUARD)


def _is_test(lines: list[str], header: int) -> bool:
    """Whether an attribute or annotation right above the header marks a test (``#[test]``,
    ``#[tokio::test]``, ``@Test``, ``@ParameterizedTest``)."""
    i = header - 1
    while i >= 0 and lines[i].strip().startswith(("#[", "@")):
        if re.search(r"(?:#\[(?:\w+::)*test\b|@\w*Test\b)", lines[i]):
            return True
        i -= 1
    return False


def _functions(lines: list[str], ext: str) -> list[tuple[int, int, str, str]]:
    """``(header line, closing line, name, indent)`` (0-based) of each function."""
    out = []
    for i, line in enumerate(lines):
        text = line.rstrip("\r\n")
        if ext == ".go":
            m, indent = _GO_FUNC.match(text), ""
            name = m[1] if m else None
        else:
            m = (_RUST_FN if ext == ".rs" else _JAVA_METHOD).match(text)
            indent, name = (m[1], m[2]) if m else ("", None)
            if ext == ".java" and m and name in ("if", "for", "while", "switch", "catch"):
                continue
        if name is None or _is_test(lines, i):
            continue
        close = indent + "}"
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip("\r\n") == close), None)
        if end is not None and end > i + 1:
            out.append((i, end, name, indent))
    return out


def rewrite(lines: list[str], added: set[int], path: str) -> tuple[list[str], list[str]] | None:
    """The file with every touched function failing first, and those functions' names; None
    when no function holds an added line (``added``: 1-based lines of the gold post-image)."""
    ext = next((e for e in BRACED_REDTEAM_EXT if path.endswith(e)), None)
    if ext is None:
        return None
    touched = [
        (start, end, name, indent)
        for start, end, name, indent in _functions(lines, ext)
        if any(start + 1 < n <= end for n in added)
    ]
    # Only the outermost functions (a closure inside a touched function is covered by it).
    touched = [t for t in touched if not any(o[0] < t[0] and t[1] < o[1] for o in touched)]
    if not touched:
        return None
    out = list(lines)
    for start, _end, _name, indent in sorted(touched, reverse=True):
        guard = GUARD[ext].format(indent=indent) if ext != ".go" else GUARD[ext]
        if ext == ".java" and out[start + 1].strip().startswith(("super(", "this(")):
            continue
        out[start + 1 : start + 1] = guard.splitlines(keepends=True)
    if out == lines:
        return None
    return out, [name for _s, _e, name, _i in touched]
