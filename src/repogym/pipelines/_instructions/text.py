"""Instructions from commit, PR and issue text: what to do, never how it was done.

The deterministic instruction needs no LLM; :class:`InstructionRewriter` optionally rewrites it
with one and keeps the deterministic text whenever the rewrite fails or leaks the fix.

Removed: commit SHAs, URLs, issue and PR references, trailers (Signed-off-by, Co-authored-by,
Change-Id, …), cherry-pick notes, squash-merge residue and PR-template sections, diff blocks and
fenced code that looks like a patch, and any line that repeats an added line of the gold patch.

:func:`compose` then states the task from evidence (``evidence``): the cleaned text without
the sentences that describe the implementation, the expected behaviour the fail-to-pass tests
prove, and the interface they need (``interface``).
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from repogym._secrets import redact
from repogym.pipelines._instructions.evidence import (
    TestGroup,
    behaviour_section,
    drop_how,
    strip_residue,
)
from repogym.taskdir.instruction_checks import FOOTER_MARK, sentence_leaks, spec_coverage
from repogym.taskdir.validate import leaked_lines

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
# A machine trailer of a message's last paragraph: a hyphenated key and ":" (PiperOrigin-RevId,
# Reviewed-on) or an upper-case key and "=" (COPYBARA_INTEGRATE_REVIEW=, RELNOTES=).
_KEY_TRAILER = re.compile(r"^(?:[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+\s*:|[A-Z][A-Z0-9_]*=)\s*\S")
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
    # Space left before punctuation by a removal ("in #12 .") — never before a method name
    # (".configureOutput()") or a path (".env").
    text = re.sub(r"[ \t]+([.,;:!?])(?=\s|$)", r"\1", text)
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


def _drop_key_trailers(text: str) -> str:
    """The last paragraph removed when every line of it is a machine trailer (as git reads
    trailers: only in the last paragraph, so prose with a colon elsewhere stays)."""
    paragraphs = re.split(r"\n[ \t]*\n", text.rstrip())
    lines = [ln for ln in paragraphs[-1].splitlines() if ln.strip()]
    if len(paragraphs) > 1 and lines and all(_KEY_TRAILER.match(ln) for ln in lines):
        return "\n\n".join(paragraphs[:-1])
    return text


def clean_text(text: str) -> str:
    """Scrub one piece of commit/PR text (see module docstring)."""
    text = strip_residue(text.replace("\r\n", "\n"))
    text = _drop_patchy_fences(text)
    text = _TRAILER.sub("", text)
    text = _CHERRY.sub("", text)
    text = _drop_key_trailers(text)
    lines = [ln for ln in text.splitlines() if not _DIFF_LINE.match(ln)]
    text = "\n".join(_scrub_line(ln) for ln in lines)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


# A conventional-commit type prefix ("fix: ", "feat(parser)!: "): for changelogs, not agents.
_TYPE_PREFIX = re.compile(
    r"^(?:fix|feat|feature|bugfix|hotfix|refactor|perf|chore|docs?|style|test|build|ci)"
    r"(?:\([^)]*\))?!?:\s+",
    re.IGNORECASE,
)


def clean_title(title: str) -> str:
    title = _PR_SUFFIX.sub("", title.strip())
    if _MERGE_SUBJECT.match(title):
        return ""
    title = _TYPE_PREFIX.sub("", title)
    return clean_text(title).strip(" .:;,-\u2013\u2014")


def _footer(workdir: str) -> list[str]:
    return [
        f"{FOOTER_MARK} `{workdir}`. Make the change described above in the",
        "source code. Hidden tests will check the behaviour; do not rely on editing tests.",
        "",
    ]


def _tdd_footer(workdir: str) -> list[str]:
    return [
        f"{FOOTER_MARK} `{workdir}`. Change the source code so that the tests",
        "named above pass. The test files are restored to their given content before grading,",
        "so editing them does not help.",
        "",
    ]


def build_instruction(
    title: str,
    body: str,
    *,
    workdir: str,
    gold_patch: str,
    min_words: int = 4,
    footer: str | None = None,
) -> tuple[str | None, str | None]:
    """(instruction, None) or (None, reason to drop the candidate): the title and body cleaned,
    lines that give the fix away removed, then ``footer`` (default: the runtime one, naming
    ``workdir``)."""
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
    if footer is None:
        instruction = "\n".join(parts + _footer(workdir))
    else:
        instruction = "\n".join(parts) + footer
    if leaked_lines(instruction, gold_patch):
        return None, "instruction leaks the fix"
    return instruction, None


# ------------------------------------------------------------------------- evidence


@dataclass
class Evidence:
    """What the task proves, for :func:`compose`."""

    groups: list[TestGroup]
    """The fail-to-pass tests, grouped by test function."""
    interface: str = ""
    """The rendered required-interface section (``interface.render_interface``)."""
    required: list[str] = field(default_factory=list)
    """The names that section gives (what ``spec_coverage`` counts)."""
    visible: str = ""
    """Text naming is allowed to repeat: the tests' source, the rendered interface."""
    test_files: list[str] = field(default_factory=list)


@dataclass
class Composed:
    """An instruction and what went into it (recorded in ``[metadata.repogym.instruction]``)."""

    text: str
    mode: str
    spec_coverage: float
    missing: list[str]
    removed: list[str] = field(default_factory=list)
    """Sentences of the human text dropped as describing the implementation."""

    def record(self, required: list[str]) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "spec_coverage": self.spec_coverage,
            "required": required,
            "missing": self.missing,
            "removed_sentences": len(self.removed),
            "words": len(re.findall(r"\w+", self.text.split(FOOTER_MARK, 1)[0])),
        }


def _statement(title: str, body: str, gold_patch: str, visible: str) -> tuple[str, str, list]:
    """Cleaned title and body without implementation sentences or word runs of the fix."""
    head = clean_title(title)
    text = clean_text(body)
    leaks = set(leaked_lines(f"{head}\n{text}", gold_patch))
    if leaks:
        text = "\n".join(ln for ln in text.splitlines() if ln.strip() not in leaks)
        head = "" if head.strip() in leaks else head
    text, removed = drop_how(text, gold_patch, visible)
    # The title names the change; it goes only when it repeats the fix's words.
    if sentence_leaks(head, gold_patch, exempt=visible):
        removed.append(head)
        head = ""
    paragraphs = []
    for para in text.split("\n"):
        if para.strip() and sentence_leaks(para, gold_patch, exempt=visible):
            removed.append(para)
            continue
        paragraphs.append(para)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(paragraphs)).strip()
    return head, text, removed


def _without_echoes(text: str, head: str) -> str:
    """Drop lines that only repeat the title (a squash merge lists the first commit's subject
    as a bullet under the pull request's title)."""
    norm = re.sub(r"\W+", " ", head).strip().lower()
    if not norm:
        return text
    kept = []
    for line in text.split("\n"):
        probe = re.sub(r"\W+", " ", line.lstrip(" *+-")).strip().lower()
        if probe and probe in norm:
            continue
        kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def compose(
    title: str,
    body: str,
    *,
    workdir: str,
    gold_patch: str,
    evidence: Evidence,
    mode: str = "evidence",
) -> Composed:
    """The instruction of a runtime task in ``mode``:

    * ``title`` — the cleaned commit/PR text only (the required interface is appended by the
      solvability gate when it is missing);
    * ``evidence`` — the text without implementation sentences, the expected behaviour of each
      fail-to-pass test group and the required interface;
    * ``tdd`` — as ``evidence``, pointing at the test files the workspace now holds;
    * ``llm`` — the ``evidence`` text, which the caller hands to the rewriter.
    """
    if mode == "title":
        text, why = build_instruction(title, body, workdir=workdir, gold_patch=gold_patch)
        text = text or "\n".join(["# Change requested", "", *_footer(workdir)])
        cov, missing = spec_coverage(text, evidence.required)
        return Composed(text, mode, cov, missing)
    head, text, removed = _statement(title, body, gold_patch, evidence.visible)
    text = _without_echoes(text, head)
    if not head and evidence.groups:
        head = f"Make {evidence.groups[0].name} work"
    parts = [f"# {head}" if head else "# Change requested", ""]
    if text:
        parts += [text, ""]
    if mode == "tdd" and evidence.test_files:
        names = ", ".join(f"`{f}`" for f in evidence.test_files[:10])
        parts += [
            "## Tests to make pass",
            "",
            f"The workspace holds new or changed tests in {names}. They fail on the current",
            "code; the behaviour they check is summarised below.",
            "",
        ]
    section = behaviour_section(evidence.groups)
    if section:
        parts += [section.rstrip("\n"), ""]
    if evidence.interface:
        parts += [evidence.interface.rstrip("\n"), ""]
    parts += _tdd_footer(workdir) if mode == "tdd" else _footer(workdir)
    final = "\n".join(parts)
    cov, missing = spec_coverage(final, evidence.required)
    return Composed(final, mode, cov, missing, removed)


def compose_synthesized(head: str, body: str, evidence: Evidence, workdir: str) -> Composed:
    """The instruction of a synthesized task: ``head`` and ``body`` as written (the pipeline's
    own text, nothing to clean), the expected behaviour of the fail-to-pass tests, the footer."""
    parts = [f"# {head}", "", body.strip(), ""]
    section = behaviour_section(evidence.groups)
    if section:
        parts += [section.rstrip("\n"), ""]
    parts += _footer(workdir)
    text = "\n".join(parts)
    return Composed(text, "evidence", 1.0, [])


def repair(composed: Composed, evidence: Evidence, workdir: str) -> Composed:
    """Add the evidence a ``title`` instruction lacks (required interface, expected behaviour)
    before its closing paragraph."""
    body = composed.text.split(FOOTER_MARK, 1)[0].rstrip()
    extra = []
    if composed.missing and evidence.interface and evidence.interface not in body:
        extra.append(evidence.interface.rstrip("\n"))
    section = behaviour_section(evidence.groups)
    if section and section.rstrip("\n") not in body:
        extra.append(section.rstrip("\n"))
    text = "\n\n".join([body, *extra]) + "\n\n" + "\n".join(_footer(workdir))
    cov, missing = spec_coverage(text, evidence.required)
    return Composed(text, composed.mode, cov, missing, composed.removed)


# ------------------------------------------------------------------------- linked issues


def issue_instruction_text(
    pr_title: str, pr_body: str, issues: list[tuple[str, str]]
) -> tuple[str, str]:
    """(title, body) for :func:`build_instruction` when a pull request names the issues it
    fixes: the first issue's title, every issue's text, then the pull request as context."""
    if not issues:
        return pr_title, pr_body
    title = issues[0][0]
    parts = [issues[0][1].strip()]
    for other_title, other_body in issues[1:]:
        parts.append(f"Also: {other_title.strip()}\n\n{other_body.strip()}")
    context = "\n\n".join(p for p in (clean_title(pr_title), clean_text(pr_body)) if p)
    if context:
        parts.append(f"Context from the change request:\n\n{context}")
    return title, "\n\n".join(p for p in parts if p)


# ------------------------------------------------------------------------- LLM rewrite

REWRITE_SYSTEM = (
    "You turn bug reports and change requests into task statements for a software engineer "
    "who will work in the repository. Say what is wrong or missing and what the expected "
    "behaviour is, with any names, inputs and outputs the report gives. Never describe the "
    "solution: no code of a fix, no patch, no diff, no hint about which lines to change. "
    "Keep every name, signature, option and message the input lists as required, spelled "
    "exactly, and the expected behaviour it gives. "
    "Reply with the task statement only, in Markdown, starting with a one-line '# ' title."
)
SECRET_ENV = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "HF_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "REPOGYM_LLM_API_KEY",
)
"""Credentials a rewrite must never contain (an endpoint could echo them back)."""

_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text.replace("`", "")).strip()


def rewrite_leaks(text: str, gold_patch: str) -> list[str]:
    """Added lines of the gold patch that the text repeats, verbatim or up to whitespace and
    backticks (non-trivial lines only, as :func:`repogym.taskdir.validate.leaked_lines`)."""
    from repogym.taskdir.instruction_checks import gold_added_lines
    from repogym.taskdir.validate import LEAK_MIN_CHARS

    found = list(leaked_lines(text, gold_patch))
    flat = _norm(text)
    for line in gold_added_lines(gold_patch):
        probe = _norm(line)
        if (
            len(probe) >= LEAK_MIN_CHARS
            and sum(c.isalnum() for c in probe) >= 8
            and probe in flat
            and probe not in found
        ):
            found.append(probe)
    return found


@dataclass
class Rewrite:
    """What the LLM rewrite of one instruction came to."""

    status: str
    """``accepted`` (the rewrite is the instruction), ``rejected`` or ``failed`` (the
    deterministic instruction is kept)."""
    reason: str | None = None
    instruction: str | None = None
    llm: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The record for generate-report.json and ``[metadata.repogym]`` (no text)."""
        out: dict[str, Any] = {"llm": self.llm, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        out["input_tokens"] = self.input_tokens
        out["output_tokens"] = self.output_tokens
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 6)
        return out


class InstructionRewriter:
    """Rewrites deterministic instructions with an LLM, keeping them when the rewrite fails,
    leaks a line of the gold patch, carries a credential or comes back empty (thread-safe)."""

    def __init__(self, llm: Any, *, max_tokens: int = 800) -> None:
        self.llm = llm
        self.spec = f"{llm.provider}/{llm.model}"
        self.max_tokens = max_tokens
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _secrets(self) -> list[str]:
        values = [os.environ.get(name, "").strip() for name in SECRET_ENV]
        key = getattr(self.llm, "_api_key", None)
        return [v for v in [*values, key] if v and len(v) >= 8 and v != "not-needed"]

    def rewrite(
        self,
        instruction: str,
        *,
        gold_patch: str,
        workdir: str,
        min_words: int = 4,
        required: list[str] | None = None,
        visible: str = "",
    ) -> Rewrite:
        """Ask for a rewrite of ``instruction`` (already cleaned; the LLM never sees the patch).
        A rewrite that drops a ``required`` name or repeats a run of the fix's words (other
        than ``visible`` text, e.g. the tests) is rejected."""
        from repogym.llm import LLMError

        statement = instruction.split("\nThe repository is checked out at", 1)[0].strip()
        messages = [
            {"role": "system", "content": REWRITE_SYSTEM},
            {"role": "user", "content": f"Rewrite this as a task statement:\n\n{statement}"},
        ]
        result = Rewrite(status="failed", llm=self.spec)
        try:
            reply = self.llm.chat(messages, max_tokens=self.max_tokens, temperature=0.0)
        except LLMError as exc:
            result.reason = redact(" ".join(str(exc).split()), self._secrets())[:300]
        else:
            result.input_tokens, result.output_tokens = reply.input_tokens, reply.output_tokens
            result.cost_usd = reply.cost_usd
            result.status, result.reason, result.instruction = self._check(
                reply.text,
                gold_patch=gold_patch,
                workdir=workdir,
                min_words=min_words,
                required=required or [],
                visible=visible,
            )
        with self._lock:
            self.counts[result.status] += 1
        return result

    def _check(
        self,
        text: str,
        *,
        gold_patch: str,
        workdir: str,
        min_words: int,
        required: list[str] | None = None,
        visible: str = "",
    ) -> tuple[str, str | None, str | None]:
        raw = text.replace("\r\n", "\n").strip()
        if redact(raw, self._secrets()) != raw:
            return "rejected", "the rewrite contains a credential", None
        leaks = rewrite_leaks(raw, gold_patch)
        if leaks:
            return "rejected", f"the rewrite repeats {len(leaks)} added line(s) of the fix", None
        lines = raw.splitlines()
        title = ""
        if lines and lines[0].startswith("#"):
            title, lines = lines[0].lstrip("#").strip(), lines[1:]
        body = clean_text("\n".join(lines))
        title = clean_title(title)
        if len(re.findall(r"\w+", f"{title} {body}")) < min_words:
            return "rejected", "the rewrite is empty or too vague", None
        parts = [f"# {title}" if title else "# Change requested", ""]
        if body:
            parts += [body, ""]
        parts += _footer(workdir)
        final = "\n".join(parts)
        if rewrite_leaks(final, gold_patch):
            return "rejected", "the rewrite repeats an added line of the fix", None
        if sentence_leaks(final.split(FOOTER_MARK, 1)[0], gold_patch, exempt=visible):
            return "rejected", "the rewrite repeats a run of words of the fix", None
        _, missing = spec_coverage(final, required or [])
        if missing:
            return "rejected", "the rewrite drops required name(s): " + ", ".join(missing[:5]), None
        return "accepted", None, final

    def summary(self) -> dict[str, Any]:
        """Token and cost totals over every call, and how many rewrites were kept."""
        from repogym._secrets import redact_url

        usage = self.llm.usage
        endpoint = getattr(self.llm, "endpoint", None)
        return {
            "llm": self.spec,
            "endpoint": redact_url(endpoint) if endpoint else None,
            "calls": usage.calls,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": round(usage.cost_usd, 6) if usage.calls > usage.unpriced_calls else None,
            "unpriced_calls": usage.unpriced_calls,
            "accepted": self.counts["accepted"],
            "rejected": self.counts["rejected"],
            "failed": self.counts["failed"],
        }
