"""Red-team candidates in Go, Rust, Java, C and C++: every function the gold patch touched made
to fail at its first statement (``raise``), or to end the process with status 0 there
(``exit``).

The kinds that return a value are not built in these languages: a value of the right type
(the zero answers of :mod:`.redteam`) cannot be written without the function's types, but a
statement that never returns can, and it must compile whatever the function returns. It is
put *before* the body, which stays (unreachable): removing the body could leave an import or
a variable unused, which Go rejects. The guard keeps the compilers' reachability rules quiet:
Go allows unreachable code; ``if true { … }`` is not folded by Rust's lint; Java exempts
``if (true)`` from its unreachable-statement rule on purpose; C and C++ trap (or exit) with
GCC's builtins ``__builtin_trap()`` and ``__builtin_exit()``, which need no header, called in
the initializer of an unused constant declared first.

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

_C_EXTS = [ext for ext, lang in LANGUAGES.items() if lang in ("c", "cpp")]
_C_DECLARATION = "{{indent}}    const int repogym_guard_ __attribute__((unused)) = ({call}, 0);\n"
"""A declaration, not a statement: C89 code (``-Wdeclaration-after-statement``, yyjson) takes
no statement before the body's own declarations."""
GUARD = {
    ".go": '\tif true {\n\t\tpanic("not implemented")\n\t}\n',
    ".rs": "{indent}    if true {{\n{indent}        unimplemented!()\n{indent}    }}\n",
    ".java": '{indent}    if (true) throw new UnsupportedOperationException("not implemented");\n',
    **dict.fromkeys(_C_EXTS, _C_DECLARATION.format(call="__builtin_trap()")),
}
_GO_EXIT = "repogym_exit_"
"""The name the Go ``exit`` candidate imports ``os`` under (its own import declaration after
the package clause: a second import of ``os`` under another name compiles beside the file's)."""
EXIT_GUARD = {
    ".go": f"\tif true {{\n\t\t{_GO_EXIT}.Exit(0)\n\t}}\n",
    ".rs": "{indent}    if true {{\n{indent}        std::process::exit(0)\n{indent}    }}\n",
    ".java": "{indent}    if (true) System.exit(0);\n",
    **dict.fromkeys(_C_EXTS, _C_DECLARATION.format(call="__builtin_exit(0)")),
}
"""The ``exit`` kind: the process ends with status 0 as soon as a touched function is called
(a test binary that ctest runs whole then passes, whatever it checked; Go's own test binaries
report a test's ``os.Exit(0)`` as a failure, a ``TestMain`` or ``init`` ending them is missing
results)."""
GUARDS = {"raise": GUARD, "exit": EXIT_GUARD}
BRACED_KINDS = tuple(GUARDS)
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


def rewrite(
    lines: list[str], added: set[int], path: str, kind: str = "raise"
) -> tuple[list[str], list[str]] | None:
    """The file with every touched function failing first (``kind`` ``raise``) or ending the
    process with status 0 (``exit``), and those functions' names; None when no function holds
    an added line (``added``: 1-based lines of the gold post-image) or the kind has no guard in
    the file's language."""
    guards = GUARDS[kind]
    ext = next((e for e in guards if path.endswith(e)), None)
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
        guard = guards[ext].format(indent=indent) if ext != ".go" else guards[ext]
        if ext == ".java" and out[start + 1].strip().startswith(("super(", "this(")):
            continue
        out[start + 1 : start + 1] = guard.splitlines(keepends=True)
    if out == lines:
        return None
    if ext == ".go" and kind == "exit" and not _import_os(out):
        return None
    return out, [name for _s, _e, name, _i in touched]


_GO_PACKAGE = re.compile(r"^package\s+\w+\s*(?://.*)?$")


def _import_os(lines: list[str]) -> bool:
    """Add ``import repogym_exit_ "os"`` after the Go file's package clause (in place); False
    when no package clause starts a line."""
    for i, line in enumerate(lines):
        if _GO_PACKAGE.match(line.rstrip("\n")):
            lines[i + 1 : i + 1] = ["\n", f'import {_GO_EXIT} "os"\n']
            return True
    return False
