"""Mutation sites in brace languages: Go, Rust, Java, C and C++.

One operator, chosen because it compiles by construction wherever the original compiles:
``negate_condition`` wraps the condition of an ``if``/``while`` line the gold patch added in a
negation — ``if C {`` → ``if !(C) {`` (Go, Rust), ``if (C)`` → ``if (!(C))`` (Java, C, C++;
``} else if`` too). A condition is negated only when it is whole on its line and plainly a
boolean expression: Go ``if`` lines with an init statement (``;``), Rust ``if let`` /
``while let``, C++ ``if constexpr`` and declarations in a condition (``if (auto x = f())``,
``if (init; cond)``), and lines with comments, character or raw literals, or brackets inside
strings, are left alone. ``hunk_revert`` applies to these files as to any code file
(:mod:`.mutants`).
"""

from __future__ import annotations

import re

from repogym.verify.mutation_sites import Site, snippet

GO_RUST_EXT = (".go", ".rs")
PAREN_EXT = (".java", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".kt")
BRACED_EXT = GO_RUST_EXT + PAREN_EXT

# `if C {` / `} else if C {` / `while C {` with nothing after the brace.
_BARE = re.compile(
    r"^(?P<lead>\s*(?:\}\s*else\s+)?(?:if|while)\s+)(?P<cond>.+?)(?P<tail>\s*\{\s*)$"
)
# `if (` / `} else if (` / `while (`: the condition runs to the matching parenthesis.
_PAREN = re.compile(r"^(?P<lead>\s*(?:\}\s*else\s+)?(?:if|while)\s*)\(")
_ASSIGN = re.compile(r"(?<![=!<>])=(?!=)")


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _plain(line: str) -> bool:
    """No comment, character or raw literal that could hide a bracket or a keyword, and no
    bracket inside a double-quoted string."""
    if any(mark in line for mark in ("'", "`", "//", "/*", 'r"', "r#")):
        return False
    return not any(set(m.group(0)) & set("(){}") for m in _STRING.finditer(line))


def _bare_site(content: str, rust: bool) -> str | None:
    m = _BARE.match(content)
    if m is None:
        return None
    cond = m["cond"].strip()
    if ";" in cond or cond.startswith("let ") or (rust and " let " in f" {cond} "):
        return None
    if cond.startswith("!(") and cond.endswith(")"):
        return None
    return f"{m['lead']}!({cond}){m['tail']}"


def _paren_site(content: str) -> str | None:
    m = _PAREN.match(content)
    if m is None:
        return None
    start = m.end() - 1
    depth = 0
    for i in range(start, len(content)):
        if content[i] == "(":
            depth += 1
        elif content[i] == ")":
            depth -= 1
            if depth == 0:
                cond = content[start + 1 : i].strip()
                if not cond or ";" in cond or _ASSIGN.search(cond) or cond.startswith("!("):
                    return None
                return f"{content[:start]}(!({cond})){content[i + 1 :]}"
    return None  # the condition goes on past this line


def negate_line(content: str, path: str) -> str | None:
    """``content`` (one line of ``path``) with its ``if``/``while`` condition negated, or None
    when the line has no condition that is plainly negatable (see the module's notes)."""
    if not _plain(content) or "constexpr" in content:
        return None
    low = path.lower()
    if low.endswith(GO_RUST_EXT):
        new = _bare_site(content, rust=low.endswith(".rs"))
    else:
        new = _paren_site(content)
    return new if new is not None and new != content else None


def braced_candidates(contents: list[str], added: set[int], path: str) -> list[Site]:
    """``negate_condition`` sites on the added lines of a Go, Rust, Java or C/C++ file."""
    low = path.lower()
    out: list[Site] = []
    for ln in sorted(added):
        if not 1 <= ln <= len(contents):
            continue
        content = contents[ln - 1]
        new = negate_line(content, low)
        if new is not None:
            out.append(Site("negate_condition", ln, {ln: new}, f"negate: {snippet(content)}"))
    return out
