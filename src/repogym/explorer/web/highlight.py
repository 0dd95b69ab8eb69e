"""A small regex highlighter for the file viewer: spans with classes, one HTML string per line.

Languages: python, bash, toml, json, dockerfile, diff (anything else is shown as plain text).
Every piece of source text goes through :func:`html.escape`; the only markup emitted is
``<span class="tok-…">``.
"""

from __future__ import annotations

import html
import re
from pathlib import PurePosixPath

# Token classes: kw (keyword), str, com (comment), num, fn (builtin / instruction), key, var,
# add / del / hunk (diff), meta.
_PY_KW = (
    "False None True and as assert async await break class continue def del elif else except "
    "finally for from global if import in is lambda nonlocal not or pass raise return try while "
    "with yield match case"
)
_SH_KW = (
    "if then else elif fi for while until do done case esac function in return exit export "
    "local set unset source trap shift break continue readonly declare"
)
_DOCKER_KW = (
    "FROM RUN CMD LABEL MAINTAINER EXPOSE ENV ADD COPY ENTRYPOINT VOLUME USER WORKDIR ARG "
    "ONBUILD STOPSIGNAL HEALTHCHECK SHELL AS"
)


def _words(words: str) -> str:
    return r"\b(?:" + "|".join(sorted(words.split(), key=len, reverse=True)) + r")\b"


_RULES: dict[str, list[tuple[str, str]]] = {
    "python": [
        ("com", r"#[^\n]*"),
        ("str", r"[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z))"),
        ("str", r"[rRbBuUfF]{0,2}(?:\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?)"),
        ("meta", r"@[\w.]+"),
        ("kw", _words(_PY_KW)),
        ("fn", r"\b(?:print|len|range|open|self|cls|super|isinstance|str|int|dict|list|set)\b"),
        ("num", r"\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b"),
    ],
    "bash": [
        ("com", r"(?<![\w$])#[^\n]*"),
        ("str", r"'[^']*'?"),
        ("str", r"\"(?:\\.|[^\"\\])*\"?"),
        ("var", r"\$(?:\{[^}\n]*\}?|\w+|[@*#?$!0-9])"),
        ("kw", _words(_SH_KW)),
        ("num", r"\b\d+\b"),
    ],
    "toml": [
        ("com", r"#[^\n]*"),
        ("meta", r"^[ \t]*\[\[?[^\]\n]*\]\]?"),
        ("str", r"\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)"),
        ("str", r"\"(?:\\.|[^\"\\\n])*\"?|'[^'\n]*'?"),
        ("key", r"^[ \t]*[\w.\-\"]+(?=[ \t]*=)"),
        ("kw", r"\b(?:true|false)\b"),
        ("num", r"\b\d[\d_:\-.TZ+]*\b"),
    ],
    "json": [
        ("key", r"\"(?:\\.|[^\"\\\n])*\"(?=\s*:)"),
        ("str", r"\"(?:\\.|[^\"\\\n])*\"?"),
        ("kw", r"\b(?:true|false|null)\b"),
        ("num", r"-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b"),
    ],
    "dockerfile": [
        ("com", r"^[ \t]*#[^\n]*"),
        ("kw", r"^[ \t]*(?i:" + "|".join(_DOCKER_KW.split()) + r")\b"),
        ("str", r"\"(?:\\.|[^\"\\\n])*\"?|'[^'\n]*'?"),
        ("var", r"\$(?:\{[^}\n]*\}?|\w+)"),
    ],
    "diff": [
        ("meta", r"^(?:diff |index |--- |\+\+\+ )[^\n]*"),
        ("hunk", r"^@@[^\n]*"),
        ("add", r"^\+[^\n]*"),
        ("del", r"^-[^\n]*"),
    ],
}

_COMPILED: dict[str, re.Pattern[str]] = {
    lang: re.compile(
        "|".join(f"(?P<{cls}_{i}>{rx})" for i, (cls, rx) in enumerate(rules)), re.MULTILINE
    )
    for lang, rules in _RULES.items()
}

_EXT = {
    ".py": "python",
    ".pyi": "python",
    ".sh": "bash",
    ".bash": "bash",
    ".toml": "toml",
    ".json": "json",
    ".jsonl": "json",
    ".diff": "diff",
    ".patch": "diff",
    ".dockerfile": "dockerfile",
}
_ALIASES = {"sh": "bash", "shell": "bash", "py": "python", "docker": "dockerfile", "patch": "diff"}


def language_for(path: str) -> str:
    """The highlighter language for a file path ("" when none applies)."""
    p = PurePosixPath(path)
    if p.name == "Dockerfile" or p.name.startswith("Dockerfile."):
        return "dockerfile"
    return _EXT.get(p.suffix.lower(), "")


def normalize_language(language: str) -> str:
    """Map a language name (e.g. a code-fence tag) to a supported one, or ""."""
    lang = language.strip().lower()
    lang = _ALIASES.get(lang, lang)
    return lang if lang in _RULES else ""


def tokens(text: str, language: str) -> list[tuple[str, str]]:
    """Split ``text`` into ``(class, text)`` pieces; class "" is plain text."""
    rx = _COMPILED.get(normalize_language(language))
    if rx is None:
        return [("", text)] if text else []
    out: list[tuple[str, str]] = []
    pos = 0
    for m in rx.finditer(text):
        if m.start() == m.end():
            continue
        if m.start() > pos:
            out.append(("", text[pos : m.start()]))
        cls = (m.lastgroup or "").split("_", 1)[0]
        out.append((cls, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append(("", text[pos:]))
    return out


def highlight_lines(text: str, language: str) -> list[str]:
    """Highlighted HTML, one string per source line (tokens spanning lines are split)."""
    lines: list[str] = [""]
    for cls, piece in tokens(text, language):
        parts = piece.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append("")
            if part:
                esc = html.escape(part, quote=False)
                lines[-1] += f'<span class="tok-{cls}">{esc}</span>' if cls else esc
    if len(lines) > 1 and lines[-1] == "" and text.endswith("\n"):
        lines.pop()
    return lines


def highlight(text: str, language: str) -> str:
    """Highlighted HTML for a block (lines joined with newlines, for a ``<pre>``)."""
    return "\n".join(highlight_lines(text, language))
