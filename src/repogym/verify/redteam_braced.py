"""Red-team candidates in Go, Rust, Java, C and C++: every function the gold patch touched made
to fail at its first statement.

Only one kind, ``raise``, is built in these languages: a value of the right type (the zero
answers of :mod:`.redteam`) cannot be written without the function's types, but a statement
that never returns can, and it must compile whatever the function returns. It is put *before*
the body, which stays (unreachable): removing the body could leave an import or a variable
unused, which Go rejects. The guard keeps the compilers' reachability rules quiet: Go allows
unreachable code; ``if true { … }`` is not folded by Rust's lint; Java exempts ``if (true)``
from its unreachable-statement rule on purpose; C and C++ trap with GCC's and Clang's
``__builtin_trap()``, which needs no header.

Function bodies are found by the brace-language lexer (:mod:`.braced_lex`), outermost only;
the guard goes on a line of its own after the body's ``{`` (a body opened mid-line is left
alone), indented one level deeper than the line holding the function's name. Test functions
(``#[test]``, ``@Test``, … right above) and Java constructors (a name in capitals; a guard
before ``super(…)`` would not compile) are not rewritten.
"""

from __future__ import annotations

import itertools
import re

from repogym.verify.braced_lex import LANGUAGES, LexError, functions

_C_GUARD = "{indent}    if (1) __builtin_trap();\n"
GUARD = {
    ".go": '\tif true {\n\t\tpanic("not implemented")\n\t}\n',
    ".rs": "{indent}    if true {{\n{indent}        unimplemented!()\n{indent}    }}\n",
    ".java": '{indent}    if (true) throw new UnsupportedOperationException("not implemented");\n',
    **{ext: _C_GUARD for ext, lang in LANGUAGES.items() if lang in ("c", "cpp")},
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
    """``(line of the body's {, line of its }, name, indent)`` (0-based) of each function whose
    body opens at the end of a line."""
    text = "".join(lines)
    try:
        toks, found = functions(text, LANGUAGES[ext])
    except LexError:
        return []
    ends = list(itertools.accumulate(len(line) for line in lines))  # offset after each line
    out = []
    for func in found:
        brace = text.count("\n", 0, toks[func.open][2])
        if toks[func.open + 1][2] < ends[brace]:
            continue  # the body goes on on the brace's line
        header = func.line - 1
        if _is_test(lines, header) or (ext == ".java" and func.name[:1].isupper()):
            continue
        line = lines[header]
        indent = line[: len(line) - len(line.lstrip())]
        out.append((brace, text.count("\n", 0, toks[func.close][2]), func.name, indent))
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
