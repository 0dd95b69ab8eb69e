"""Checks of an instruction against its task: does it leak the fix, does it say enough.

* :func:`leaked_ngrams` — runs of words the instruction shares with the gold patch's added
  lines (a paraphrase of the fix that no whole-line comparison catches), minus runs that the
  tests themselves show (naming what the tests call is specification, not a leak).
* :func:`spec_coverage` — the share of the names the hidden tests need (recorded by the
  generator in ``[metadata.repogym.instruction].required``) that the instruction mentions.
* :func:`min_words` — how many words an instruction needs for a change of a given size.

Used by ``validate`` (the ``leak-ngram`` and ``underspecified`` checks) and by the generators'
solvability gate, so both judge an instruction the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NGRAM = 8
"""Words in a run that counts as shared with the gold patch."""
FOOTER_MARK = "The repository is checked out at"
_WORD = re.compile(r"[A-Za-z0-9_]+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _grams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def gold_added_lines(diff_text: str) -> list[str]:
    """Lines a unified diff adds (without the leading '+'), skipping file headers (a plain
    text scan: for a parsed, hunk-exact view see :func:`repogym.sources.patches.added_lines`)."""
    return [
        line[1:]
        for line in diff_text.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]


def added_text(diff_text: str) -> str:
    """The lines a unified diff adds (file headers skipped), joined."""
    return "\n".join(gold_added_lines(diff_text))


def leaked_ngrams(
    instruction: str, diff_text: str, *, exempt: str = "", n: int = NGRAM
) -> list[str]:
    """Runs of ``n`` words the instruction shares with the gold patch's added lines and that
    ``exempt`` (the tests, the required interface) does not contain, as text."""
    gold = _grams(_words(added_text(diff_text)), n)
    if not gold:
        return []
    allowed = _grams(_words(exempt), n) if exempt else set()
    found = []
    for gram in sorted(_grams(_words(instruction), n) & gold):
        if gram not in allowed:
            found.append(" ".join(gram))
    return found


def sentence_leaks(sentence: str, diff_text: str, *, exempt: str = "", n: int = NGRAM) -> bool:
    """Whether one sentence shares a run of ``n`` words with the fix (see above)."""
    return bool(leaked_ngrams(sentence, diff_text, exempt=exempt, n=n))


def mentioned(name: str, text: str) -> bool:
    """Whether ``text`` names ``name``: a dotted name by its last part as a whole word, an
    option or a message literally."""
    probe = name.strip()
    if not probe:
        return True
    if not re.fullmatch(r"[\w.]+", probe):
        return probe in text
    last = probe.rsplit(".", 1)[-1]
    return re.search(rf"(?<![\w]){re.escape(last)}(?![\w])", text) is not None


def spec_coverage(instruction: str, required: Iterable[str]) -> tuple[float, list[str]]:
    """(share of ``required`` names the instruction mentions, the missing ones); 1.0 when
    nothing is required."""
    names = list(dict.fromkeys(str(n) for n in required))
    if not names:
        return 1.0, []
    missing = [n for n in names if not mentioned(n, instruction)]
    return round(1 - len(missing) / len(names), 4), missing


def statement(instruction: str) -> str:
    """The instruction without repogym's standard closing paragraph."""
    return instruction.split(FOOTER_MARK, 1)[0].strip()


def min_words(changed_lines: int) -> int:
    """Words an instruction's statement needs for a change of ``changed_lines`` code lines:
    ``min(40, 6 + changed_lines // 4)`` — a one-line fix can be stated in a sentence, a
    hundred-line change cannot."""
    return min(40, 6 + max(0, changed_lines) // 4)


def changed_code_lines(diff_text: str) -> int:
    """Added and removed lines of a unified diff (headers skipped)."""
    return sum(
        1
        for line in diff_text.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def underspecified(instruction: str, diff_text: str | None, required: Iterable[str]) -> list[str]:
    """Why a capable engineer could not solve the task from this instruction (empty: fine)."""
    reasons = []
    _, missing = spec_coverage(instruction, required)
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        reasons.append(f"does not name {shown}, which the hidden tests need")
    if diff_text is not None:
        changed = changed_code_lines(diff_text)
        words = len(_WORD.findall(statement(instruction)))
        need = min_words(changed)
        if words < need:
            reasons.append(
                f"states the change in {words} word(s); a {changed}-line change needs {need}"
            )
    return reasons
