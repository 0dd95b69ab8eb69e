"""Processors: turn one row of a row dataset into a :class:`TaskDoc`.

A processor recognises a row shape (:meth:`Processor.match` scores a row from 0 to 1) and maps
such rows to task pages. The rows adapter picks, per dataset, the processor with the best mean
score over the first rows. Built-ins: SWE-bench-like rows (``swe-bench``), question/answer rows
(``qa``) and a fallback that shows any row's text columns (``generic``). Columns that hold the
answer, hidden tests or a rubric are never shown: each processor names them in
:meth:`Processor.withheld_columns` and the page says what was withheld.

Plug in more with :func:`register_processor`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from repogym.explorer.model import FileDoc, Section, TaskDoc
from repogym.explorer.withhold import answer_reason

__all__ = [
    "Processor",
    "answer_like",
    "pick_processor",
    "processors",
    "register_processor",
    "scrub",
    "summarize",
    "unregister_processor",
]


def answer_like(name: str) -> str | None:
    """Why a column / key called ``name`` is withheld, or None when it may be shown
    (:func:`repogym.explorer.withhold.answer_reason`: one rule for every page)."""
    return answer_reason(name)


def scrub(value: Any, path: str = "", notes: list[str] | None = None) -> Any:
    """``value`` with answer-like keys removed at any depth; removed key paths go to ``notes``."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if answer_like(str(k)):
                if notes is not None:
                    notes.append(where)
                continue
            out[str(k)] = scrub(v, where, notes)
        return out
    if isinstance(value, list | tuple):
        return [scrub(v, path, notes) for v in value]
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return value


def summarize(text: str, limit: int = 300) -> str:
    """The first lines of ``text`` as plain text, at most ``limit`` characters."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(#+|[-*>]|```\w*)\s*", "", line).strip()
        if line:
            lines.append(line)
        if sum(len(x) for x in lines) > limit:
            break
    out = re.sub(r"\s+", " ", " ".join(lines)).strip()
    return out if len(out) <= limit else out[: limit - 1].rstrip() + "…"


def _title_from(text: str, limit: int = 80) -> str:
    first = summarize(text, limit)
    return first or "untitled"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _as_list(value: Any) -> list[str]:
    """A list of test ids from a list, a JSON array string, or a newline list."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [v for v in value.splitlines() if v.strip()]
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _metadata_section(row: Mapping[str, Any], skip: set[str], notes: list[str]) -> Section | None:
    rest = {k: v for k, v in row.items() if k not in skip and not answer_like(k)}
    if not rest:
        return None
    removed: list[str] = []
    clean = scrub(rest, "", removed)
    if removed:
        notes.append("metadata keys withheld (answer-like): " + ", ".join(sorted(removed)))
    body = json.dumps(clean, ensure_ascii=False, indent=2, default=str)
    return Section("metadata", "Metadata", body, format="code", language="json")


def _facets(row: Mapping[str, Any], pipeline: str) -> dict[str, str]:
    facets = {"pipeline": pipeline}
    for facet, names in (
        ("category", ("category", "type", "subject", "domain", "topic", "ability")),
        ("difficulty", ("difficulty", "level")),
        ("language", ("language", "lang", "programming_language")),
        ("source", ("source", "dataset", "data_source")),
    ):
        for name in names:
            v = row.get(name)
            if isinstance(v, str | int) and not isinstance(v, bool) and str(v).strip():
                facets[facet] = str(v).strip()[:60]
                break
    return facets


def _withheld_files(row: Mapping[str, Any], cols: Mapping[str, str]) -> list[FileDoc]:
    """Placeholders for withheld file-like columns (patches, test code): path, size, reason."""
    files = []
    for col, reason in cols.items():
        value = row.get(col)
        if value is None or value == "":
            continue
        if reason.startswith("solution"):
            path = "solution/patch.diff" if col in ("patch", "gold_patch") else f"solution/{col}"
        elif reason.startswith("hidden tests"):
            path = "tests/test_patch.diff" if col == "test_patch" else f"tests/{col}"
        else:
            continue
        size = len(value.encode()) if isinstance(value, str) else len(_text(value).encode())
        files.append(FileDoc(path=path, size=size, data=None, withheld=reason))
    return files


@runtime_checkable
class Processor(Protocol):
    """Maps rows of one shape to task pages."""

    name: str

    def match(self, row: Mapping[str, Any]) -> float:
        """0 = not this shape; up to 1 = surely this shape."""
        ...

    def withheld_columns(self, row: Mapping[str, Any]) -> dict[str, str]:
        """Columns never shown, with the reason shown instead."""
        ...

    def to_task(self, row: Mapping[str, Any], task_id: str) -> TaskDoc:
        """The task page for ``row`` (withheld columns left out)."""
        ...


def _default_withheld(row: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k in row:
        reason = answer_like(str(k))
        if reason:
            out[str(k)] = reason
    return out


class SweBenchProcessor:
    """SWE-bench-like rows: an issue, a repository at a commit, a gold patch and hidden tests."""

    name = "swe-bench"
    KNOWN = (
        "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
        "FAIL_TO_PASS", "PASS_TO_PASS", "hints_text", "version", "environment_setup_commit",
        "created_at",
    )  # fmt: skip

    def match(self, row: Mapping[str, Any]) -> float:
        if not isinstance(row.get("problem_statement"), str):
            return 0.0
        if not any(k in row for k in ("patch", "test_patch", "base_commit", "FAIL_TO_PASS")):
            return 0.0
        return 0.6 + 0.4 * sum(k in row for k in self.KNOWN) / len(self.KNOWN)

    def withheld_columns(self, row: Mapping[str, Any]) -> dict[str, str]:
        return _default_withheld(row)

    def to_task(self, row: Mapping[str, Any], task_id: str) -> TaskDoc:
        notes: list[str] = []
        hidden = self.withheld_columns(row)
        statement = _text(row.get("problem_statement"))
        repo = _text(row.get("repo")).strip()
        commit = _text(row.get("base_commit")).strip()
        f2p = _as_list(row.get("FAIL_TO_PASS"))
        p2p = _as_list(row.get("PASS_TO_PASS"))
        env_lines = []
        if repo:
            env_lines.append(f"Repository `{repo}`" + (f" at commit `{commit}`" if commit else ""))
        for key, label in (
            ("version", "Version"),
            ("environment_setup_commit", "Environment set up at commit"),
        ):
            if row.get(key):
                env_lines.append(f"{label}: `{_text(row[key]).strip()}`")
        grading = [
            "Graded by the repository's tests after the hidden test patch is applied: "
            f"{len(f2p)} test(s) must go from failing to passing and {len(p2p)} must keep passing."
        ]
        if f2p:
            grading.append("\n**Fail to pass**\n\n```text\n" + "\n".join(f2p) + "\n```")
        if p2p:
            grading.append("\n**Pass to pass**\n\n```text\n" + "\n".join(p2p) + "\n```")
        sections = [
            Section("instruction", "Instruction", statement),
            Section("environment", "Environment", "\n\n".join(env_lines) or "unknown"),
            Section("grading", "How it is graded", "\n".join(grading)),
        ]
        meta = _metadata_section(
            row,
            {"problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", *hidden},
            notes,
        )
        if meta:
            sections.append(meta)
        for col, reason in hidden.items():
            notes.append(f"column {col!r} withheld: {reason}")
        instance = _text(row.get("instance_id")).strip()
        environment = f"{repo}@{commit[:12]}" if repo and commit else (repo or "repository")
        return TaskDoc(
            id=task_id,
            title=instance or task_id,
            summary=summarize(statement),
            facets=_facets(row, self.name),
            grading="tests",
            environment=environment,
            network="unknown",
            runnable=False,
            sections=sections,
            files=_withheld_files(row, hidden),
            aliases=[f"instance:{instance}"] if instance else [],
            withheld=notes,
        )


_PROMPTS = ("question", "problem", "prompt", "instruction", "query", "input", "messages",
            "conversations", "conversation")  # fmt: skip
_CHOICES = ("choices", "options", "candidates")
_CONTEXT = ("context", "passage", "system", "system_prompt", "background", "input")
_ASSISTANT = ("assistant", "gpt", "model", "bot")


def _chat(value: Any) -> list[tuple[str, str]] | None:
    """A chat prompt (``[{"role", "content"}]`` or ``[{"from", "value"}]``) as (role, text)."""
    if not isinstance(value, list) or not value:
        return None
    turns = []
    for m in value:
        if not isinstance(m, Mapping):
            return None
        role = m.get("role", m.get("from"))
        content = m.get("content", m.get("value"))
        if not isinstance(role, str) or content is None:
            return None
        turns.append((role, _text(content)))
    return turns


class QAProcessor:
    """Question / answer rows: a question (prompt, instruction, problem, or a chat prompt) and
    its answer. In a chat prompt, trailing assistant turns are the answer and are withheld."""

    name = "qa"

    def _prompt_col(self, row: Mapping[str, Any]) -> str | None:
        for col in _PROMPTS:
            v = row.get(col)
            if (isinstance(v, str) and v.strip()) or _chat(v):
                return col
        return None

    def _question(self, row: Mapping[str, Any], col: str, notes: list[str]) -> str:
        value = row.get(col)
        turns = _chat(value)
        if turns is None:
            return _text(value)
        dropped = 0
        while turns and turns[-1][0].lower() in _ASSISTANT:
            turns.pop()
            dropped += 1
        if dropped:
            notes.append(f"column {col!r}: {dropped} final assistant turn(s) withheld: the answer")
        if len(turns) == 1:
            return turns[0][1]
        return "\n\n".join(f"**{role}**\n\n{text}" for role, text in turns)

    def match(self, row: Mapping[str, Any]) -> float:
        if self._prompt_col(row) is None:
            return 0.0
        hidden = self.withheld_columns(row)
        return 0.5 + (0.3 if hidden else 0.0)

    def withheld_columns(self, row: Mapping[str, Any]) -> dict[str, str]:
        return _default_withheld(row)

    def to_task(self, row: Mapping[str, Any], task_id: str) -> TaskDoc:
        notes: list[str] = []
        hidden = self.withheld_columns(row)
        col = self._prompt_col(row) or ""
        question = self._question(row, col, notes)
        body = question
        used = {col}
        for name in _CHOICES:
            choices = row.get(name)
            if choices in (None, "", []):
                continue
            used.add(name)
            if isinstance(choices, Mapping) and isinstance(choices.get("text"), list):
                labels = choices.get("label") or [chr(65 + i) for i in range(len(choices["text"]))]
                lines = [
                    f"- **{lab}** {txt}" for lab, txt in zip(labels, choices["text"], strict=False)
                ]
            elif isinstance(choices, list):
                lines = [f"- **{chr(65 + i)}** {_text(c)}" for i, c in enumerate(choices)]
            else:
                lines = [_text(choices)]
            body += "\n\n**Choices**\n\n" + "\n".join(lines)
            break
        sections = [Section("instruction", "Instruction", body)]
        for name in _CONTEXT:
            v = row.get(name)
            if name not in used and isinstance(v, str) and v.strip():
                used.add(name)
                sections.append(Section(f"context-{name}", name.replace("_", " ").title(), v))
        tests = [c for c, r in hidden.items() if r.startswith("hidden tests")]
        rubric = [c for c, r in hidden.items() if r.startswith("rubric")]
        answers = [c for c, r in hidden.items() if r in ("the answer", "solution (the gold patch)")]
        reward = row.get("reward_model")
        style = reward.get("style") if isinstance(reward, Mapping) else None
        if isinstance(reward, Mapping):
            used.add("reward_model")
            if any(answer_like(str(k)) for k in reward):
                notes.append("reward_model: reference answer withheld")
        if tests:
            grading, how = "tests", f"hidden tests ({', '.join(tests)}) run against the answer"
        elif style == "model":
            grading, how = "llm-judge", "a reward model (reward_model.style = model)"
        elif style == "rule":
            grading, how = "exact-match", "a rule against the reference answer (reward_model)"
        elif rubric:
            grading, how = "llm-judge", f"a judge scores the answer with a rubric ({rubric[0]})"
        elif answers:
            grading, how = "exact-match", f"compared with the reference answer ({answers[0]})"
        else:
            grading, how = "unknown", "no answer or test column was found"
        sections.append(Section("grading", "How it is graded", f"Graded by {how}; withheld."))
        entry = row.get("entry_point")
        if isinstance(entry, str) and entry:
            sections[-1].body += f"\n\nEntry point: `{entry}`"
            used.add("entry_point")
        meta = _metadata_section(row, used | set(hidden), notes)
        if meta:
            sections.append(meta)
        for c, reason in hidden.items():
            notes.append(f"column {c!r} withheld: {reason}")
        title = row.get("title") if isinstance(row.get("title"), str) else None
        return TaskDoc(
            id=task_id,
            title=(title or _title_from(question)),
            summary=summarize(question),
            facets=_facets(row, self.name),
            grading=grading,
            environment="text only",
            network="unknown",
            runnable=False,
            sections=sections,
            files=_withheld_files(row, {c: hidden[c] for c in tests}),
            withheld=notes,
        )


class GenericProcessor:
    """Any row: text columns as sections (the longest first), the rest as metadata."""

    name = "generic"

    def match(self, row: Mapping[str, Any]) -> float:
        return 0.1

    def withheld_columns(self, row: Mapping[str, Any]) -> dict[str, str]:
        return _default_withheld(row)

    def to_task(self, row: Mapping[str, Any], task_id: str) -> TaskDoc:
        notes: list[str] = []
        hidden = self.withheld_columns(row)
        texts = [
            (k, v)
            for k, v in row.items()
            if k not in hidden and isinstance(v, str) and (len(v) > 80 or "\n" in v)
        ]
        texts.sort(key=lambda kv: -len(kv[1]))
        sections = []
        for i, (k, v) in enumerate(texts[:8]):
            sid = "instruction" if i == 0 else f"column-{re.sub(r'[^a-z0-9]+', '-', k.lower())}"
            sections.append(Section(sid, k.replace("_", " ").capitalize(), v, format="text"))
        used = {k for k, _ in texts[:8]}
        meta = _metadata_section(row, used | set(hidden), notes)
        if meta:
            sections.append(meta)
        for c, reason in hidden.items():
            notes.append(f"column {c!r} withheld: {reason}")
        main = texts[0][1] if texts else ""
        title = next(
            (str(row[k]) for k in ("title", "name") if isinstance(row.get(k), str) and row[k]),
            _title_from(main) if main else task_id,
        )
        return TaskDoc(
            id=task_id,
            title=title,
            summary=summarize(main),
            facets=_facets(row, self.name),
            grading="unknown",
            environment="text only",
            network="unknown",
            runnable=False,
            sections=sections,
            files=[],
            withheld=notes,
        )


_lock = threading.Lock()
_processors: list[Processor] = [SweBenchProcessor(), QAProcessor(), GenericProcessor()]


def register_processor(processor: Processor) -> None:
    """Add (or replace, by name) a processor; it competes with the built-ins on every dataset."""
    with _lock:
        _processors[:] = [p for p in _processors if p.name != processor.name]
        _processors.append(processor)


def unregister_processor(name: str) -> None:
    """Remove the processor called ``name`` (no error when absent)."""
    with _lock:
        _processors[:] = [p for p in _processors if p.name != name]


def processors() -> list[Processor]:
    """The registered processors."""
    with _lock:
        return list(_processors)


def pick_processor(sample: Sequence[Mapping[str, Any]]) -> Processor:
    """The processor with the best mean score over ``sample`` (the first rows of a dataset)."""
    best: tuple[float, int, Processor] | None = None
    for i, p in enumerate(processors()):
        try:
            score = sum(float(p.match(r)) for r in sample) / max(len(sample), 1)
        except Exception:
            continue
        # later registrations win ties, so a plug-in can override a built-in shape
        if best is None or (score, i) > (best[0], best[1]):
            best = (score, i, p)
    if best is None or best[0] <= 0:
        return GenericProcessor()
    return best[2]
