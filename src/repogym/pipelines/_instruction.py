"""Instructions from commit and PR text, with no LLM: what to do, never how it was done.

Removed: commit SHAs, URLs, issue and PR references, trailers (Signed-off-by, Co-authored-by,
Change-Id, …), cherry-pick notes, diff blocks and fenced code that looks like a patch, and any
line that repeats an added line of the gold patch.
"""

from __future__ import annotations

import re

from repogym.harbor.validate import leaked_lines

_SHA = re.compile(r"\b[0-9a-f]{7,40}\b")
_URL = re.compile(r"(?:https?|ftp)://\S+|\bwww\.\S+", re.IGNORECASE)
_ISSUE = re.compile(
    r"(?:\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?|refs?|see|re)\b[:\s]*)?"
    r"(?:\b[\w.-]+/[\w.-]+)?(?:#|\bGH-|!)\d+\b",
    re.IGNORECASE,
)
_TRAILER = re.compile(
    r"^(?:signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|change-id|"
    r"cc|pr-url|pr-close|bug|fixes|closes|resolves|refs|see-also)\s*:.*$",
    re.IGNORECASE | re.MULTILINE,
)
_CHERRY = re.compile(r"^\(cherry picked from commit .*\)$", re.MULTILINE)
_FENCE = re.compile(r"```([^\n]*)\n(.*?)(?:```|\Z)", re.DOTALL)
_DIFF_LINE = re.compile(r"^(?:diff --git |index [0-9a-f]+\.\.|@@ .* @@|\+\+\+ |--- [ab/])")
_MERGE_SUBJECT = re.compile(r"^Merge (?:pull request|branch|remote-tracking branch) .*$")
_PR_SUFFIX = re.compile(r"\s*\((?:#|!)\d+\)\s*$")
# A bracket emptied by the removals above: "( )", "(see )", "[, ]" — but never a call's "()".
_EMPTY_REF = re.compile(
    r"\(\s*(?:(?:see|cf\.?|also|and|in|,)\s*)+\)|\(\s+\)|\[\s*(?:,\s*)*\]", re.IGNORECASE
)


def _drop_patchy_fences(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        lang, body = m.group(1).strip().lower(), m.group(2)
        patchy = lang in ("diff", "patch") or any(
            _DIFF_LINE.match(line) for line in body.splitlines()
        )
        return "" if patchy else m.group(0)

    return _FENCE.sub(repl, text)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _scrub(text: str) -> str:
    text = _URL.sub("", text)
    text = _ISSUE.sub("", text)
    text = _SHA.sub("", text)
    text = _EMPTY_REF.sub("", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text)


# A parenthesis holding nothing but references: "(see #12)", "(cf. GH-3, org/repo#4)".
_REF_GROUP = re.compile(
    r"\s*\((?:\s*(?:see|cf\.?|also|fix(?:es)?|closes?|refs?|and|,|[\w.-]+/[\w.-]+#\d+|#\d+|"
    r"GH-\d+|!\d+|[0-9a-f]{7,40}|https?://[^\s)]+)\s*)+\)",
    re.IGNORECASE,
)


def _scrub_line(line: str) -> str:
    """Scrub sentence by sentence; a sentence left with under 4 words after removals goes."""
    line = _REF_GROUP.sub("", line)
    out = []
    for sentence in _SENTENCE.split(line):
        cleaned = _scrub(sentence)
        if cleaned != sentence and len(re.findall(r"\w+", cleaned)) < 4:
            continue
        out.append(cleaned)
    return " ".join(out).rstrip()


def clean_text(text: str) -> str:
    """Scrub one piece of commit/PR text (see module docstring)."""
    text = text.replace("\r\n", "\n")
    text = _drop_patchy_fences(text)
    text = _TRAILER.sub("", text)
    text = _CHERRY.sub("", text)
    lines = [ln for ln in text.splitlines() if not _DIFF_LINE.match(ln)]
    text = "\n".join(_scrub_line(ln) for ln in lines)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def clean_title(title: str) -> str:
    title = _PR_SUFFIX.sub("", title.strip())
    if _MERGE_SUBJECT.match(title):
        return ""
    return clean_text(title).strip(" .:;,-\u2013\u2014")


def build_instruction(
    title: str, body: str, *, workdir: str, gold_patch: str, min_words: int = 4
) -> tuple[str | None, str | None]:
    """(instruction, None) or (None, reason to drop the candidate)."""
    head = clean_title(title)
    text = clean_text(body)
    leaks = set(leaked_lines(f"{head}\n{text}", gold_patch))
    if leaks:
        text = "\n".join(ln for ln in text.splitlines() if ln.strip() not in leaks)
        head = "" if head.strip() in leaks else head
    words = len(re.findall(r"\w+", f"{head} {text}"))
    if words < min_words:
        return None, "instruction too vague"
    parts = [f"# {head}" if head else "# Change requested", ""]
    if text:
        parts += [text, ""]
    parts += [
        f"The repository is checked out at `{workdir}`. Make the change described above in the",
        "source code. Hidden tests will check the behaviour; do not rely on editing tests.",
        "",
    ]
    instruction = "\n".join(parts)
    if leaked_lines(instruction, gold_patch):
        return None, "instruction leaks the fix"
    return instruction, None
