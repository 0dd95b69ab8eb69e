"""Evidence for instructions: what the task itself proves, stated for the agent.

An instruction built from a commit subject alone rarely says enough to pass hidden tests. The
task holds better evidence: the fail-to-pass tests (their names, their docstrings, how each one
fails before the fix) and the names they need that do not exist yet (``interface``). This
module turns that evidence into Markdown sections, and removes from the human text the
sentences that describe *how* the change was made rather than *what* must hold.

Nothing here reads test source into the instruction: a test contributes its name, the first
line of its docstring and the first line of the failure its runner reported (exception type and
message, compared values), trimmed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

MAX_GROUPS = 12
"""Test groups listed in the expected-behaviour section (the rest are counted)."""
MAX_MESSAGE = 160
_PARAM = re.compile(r"\[.*\]$", re.DOTALL)
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x1b]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# ------------------------------------------------------------------------------ residue

# What a squash merge, a PR template or a review tool leaves in a message: not a request.
_RESIDUE_LINE = re.compile(
    r"^\s*(?:[*+-]\s+)?(?:"
    r"apply (?:\w+ )?suggestions? from (?:code )?review.*|"
    r"(?:address(?:ed|ing)?|resolve[sd]?|respond(?:ed)? to) (?:the )?(?:code )?review.*|"
    r"review (?:comments?|feedback|suggestions?).*|"
    r"merge (?:branch|remote-tracking branch|pull request) .*|"
    r"update [\w./-]+\.\w+|"
    r"\[pre-commit\.ci\].*|pre-commit (?:fixes|autoupdate).*|"
    r"(?:fix(?:ed)? |run |apply )?(?:lint(?:ing|er)?|flake8|black|ruff|isort|mypy|prettier|eslint|"
    r"formatting|format|style|typos?|whitespace|tests?|ci|changelog|docs?)(?: fix(?:es)?)?\.?|"
    r"(?:wip|tmp|temp|oops|cleanup|clean up|nit|nits|minor|more|again|fixup!?.*|squash!?.*)\.?|"
    r"co-?authored-?by:?.*|for more information,? see:?.*"
    r")\s*$",
    re.IGNORECASE,
)
# A bullet of a squash merge's commit list that is about the process, not the change.
_PROCESS_BULLET = re.compile(
    r"^\s*[*-]\s+(?:[-*]\s+)?.*\b(?:black|ruff|flake8|isort|mypy|pylint|prettier|eslint|lint(?:er|ing)?"
    r"|pre-commit|tox|ci|typos?|rebased?|merged?|review(?:er|ers)?|pr comments?|docstrings?"
    r"|changelog|re-?format(?:ted|ting)?|formatting|tests?|coverage|wip)\b",
    re.IGNORECASE,
)
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,}|={3,})\s*$")
_CHECKBOX = re.compile(r"^\s*[-*+]\s*\[[ xX]?\]\s*.*$")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*#*\s*$")
_TEMPLATE_HEADINGS = re.compile(
    r"^(?:checklist|pr checklist|type of change|types? of changes|related issues?|"
    r"linked issues?|how has this been tested\??|testing|screenshots?|"
    r"additional (?:context|notes?)|notes? (?:to|for) reviewers?|"
    r"does this (?:pr|change) introduce .*|other information|release notes?)$",
    re.IGNORECASE,
)
_TEMPLATE_LINES = re.compile(
    r"^\s*(?:fixes\s*#\s*\(issue\)|closes\s*#\s*\(issue\)|please (?:describe|include|delete|"
    r"check|read|make sure).*|n/?a\.?|none\.?|_?no response_?|tbd\.?)\s*$",
    re.IGNORECASE,
)


def strip_residue(text: str) -> str:
    """Remove squash-merge residue, PR-template sections, checklists and HTML comments."""
    text = _HTML_COMMENT.sub("", text.replace("\r\n", "\n"))
    out: list[str] = []
    skipping = False  # inside a template section (until the next heading)
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            skipping = bool(_TEMPLATE_HEADINGS.match(heading.group(1).strip(" :")))
            if skipping:
                continue
        elif skipping:
            continue
        if (
            _RULE.match(line)
            or _CHECKBOX.match(line)
            or _RESIDUE_LINE.match(line)
            or _PROCESS_BULLET.match(line)
            or _TEMPLATE_LINES.match(line)
        ):
            continue
        out.append(line)
    # Headings left with nothing under them.
    kept: list[str] = []
    for i, line in enumerate(out):
        if _HEADING.match(line):
            rest = next((ln for ln in out[i + 1 :] if ln.strip()), None)
            if rest is None or _HEADING.match(rest):
                continue
        kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


# ------------------------------------------------------------------------------ tests


@dataclass
class TestGroup:
    """One test function (all its parametrised cases) among the fail-to-pass tests."""

    file: str
    name: str
    """Readable: ``Humanize: naturaltime with tz`` from
    ``TestHumanize::test_naturaltime_with_tz``."""
    ids: list[str] = field(default_factory=list)
    doc: str = ""
    failures: list[str] = field(default_factory=list)

    __test__ = False  # not a pytest class


def _split_id(test_id: str) -> tuple[str, list[str]]:
    """(file, name parts) of a test id: pytest ``f.py::C::t[p]``, Jest ``f.test.js > d > t``,
    unittest ``pkg.mod.Class.test``, go ``pkg/TestX``, Surefire ``pkg.Class#test`` (no file:
    the class's simple name leads), GoogleTest ``Suite.Name``."""
    if "#" in test_id and " " not in test_id.split("#", 1)[0]:
        owner, method = test_id.split("#", 1)
        nested = owner.rsplit(".", 1)[-1].split("$")
        return "", [*nested, _PARAM.sub("", method.split("(", 1)[0])]
    if "::" in test_id:
        file, *parts = test_id.split("::")
        if parts:
            parts[-1] = _PARAM.sub("", parts[-1])
        return file, parts
    if " > " in test_id:
        file, *parts = test_id.split(" > ")
        return file, parts
    if " " not in test_id and "." in test_id and "/" not in test_id:
        bits = test_id.split(".")
        cls = [b for b in bits if b[:1].isupper()]
        if cls:
            i = bits.index(cls[0])
            return ("/".join(bits[:i]) + ".py" if i else ""), bits[i:]
    return "", [_PARAM.sub("", test_id)]


def _readable(part: str) -> str:
    """``test_decorator_info`` → ``decorator info``; ``CacheMethodTest`` → ``Cache method``."""
    if " " in part:
        return part.strip()
    name = re.sub(r"^(?:test_?|Test)|(?:_?[Tt]ests?)$", "", part) or part
    if "_" in name:
        return name.replace("_", " ").strip().lower()
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).split()
    return " ".join([words[0], *(w.lower() if not w.isupper() else w for w in words[1:])])


def _docstrings(path: Path) -> dict[str, str]:
    """``Class.func`` / ``func`` → first docstring line, for a Python test file."""
    out: dict[str, str] = {}
    try:
        if path.stat().st_size > 1_000_000:
            return out
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return out

    def visit(nodes: Iterable[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                first = doc.strip().split("\n\n")[0]
                if first:
                    out[prefix + node.name] = " ".join(first.split())

    visit(tree.body, "")
    return out


def clean_message(message: str) -> str:
    """One line of a runner's failure message: no ANSI, no control characters, trimmed."""
    line = _ANSI.sub("", message).strip().splitlines()[0] if message.strip() else ""
    line = _CTRL.sub("", line).strip()
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 1].rstrip() + "…"
    return line


def _id_names(test_id: str) -> set[str]:
    """The names a test's definition carries in code: the last ``::`` segment of its id
    (parameters dropped) and, for a Go subtest ``TestX/case``, its function ``TestX``."""
    leaf = _PARAM.sub("", test_id.rsplit("::", 1)[-1].rsplit(" > ", 1)[-1])
    return {leaf, leaf.split("/", 1)[0], leaf.rsplit(".", 1)[-1]} - {""}


def changed_first(f2p: list[str], test_patch: str) -> list[str]:
    """``f2p`` with the tests the change adds or edits first: a test whose name is on an added
    line of the test patch, or in the heading of a hunk (the function git shows it in) whose
    first change comes before any new top-level line (else the hunk only follows that function).
    When a new symbol breaks a whole package's build, every test of it fails before the fix;
    the ones the change is about then lead the evidence, which lists only :data:`MAX_GROUPS`."""
    words: set[str] = set()
    heading: str | None = None
    for line in test_patch.splitlines():
        if line.startswith("@@"):
            heading = line.split("@@", 2)[-1]
            continue
        if line.startswith(("+++", "---")) or line[:1] not in ("+", "-", " "):
            continue
        body = line[1:]
        if line[0] == "+":
            words.update(re.findall(r"\w+", body))
        if heading is not None and body.strip():
            if body[:1].isalpha():
                heading = None  # a new top-level item before any change: not that function
            elif line[0] != " ":
                words.update(re.findall(r"\w+", heading))
                heading = None
    changed = [t for t in f2p if _id_names(t) & words]
    seen = set(changed)
    return changed + [t for t in f2p if t not in seen]


def group_tests(
    f2p: Iterable[str], head: Path | None = None, failures: Mapping[str, str] | None = None
) -> list[TestGroup]:
    """Group F2P ids by test function; readable names, docstrings (from ``head``) and the
    distinct failure messages seen before the fix."""
    failures = failures or {}
    groups: dict[tuple[str, tuple[str, ...]], TestGroup] = {}
    docs: dict[str, dict[str, str]] = {}
    for test_id in f2p:
        file, parts = _split_id(test_id)
        key = (file, tuple(parts))
        group = groups.get(key)
        if group is None:
            readable = [_readable(p) for p in parts if p]
            name = ": ".join(readable) if readable else test_id
            group = groups[key] = TestGroup(file=file, name=name)
            if head is not None and file.endswith(".py"):
                if file not in docs:
                    docs[file] = _docstrings(head / file)
                group.doc = docs[file].get(".".join(parts), "")
        group.ids.append(test_id)
        # A module that fails to import reports its error once, under the file's id.
        message = clean_message(failures.get(test_id) or failures.get(file, ""))
        if message and message not in group.failures:
            group.failures.append(message)
    return list(groups.values())


def _md(text: str) -> str:
    """Inline code for a message (backticks inside become quotes)."""
    return "`" + text.replace("`", "'") + "`"


def _common_failure(groups: list[TestGroup]) -> str | None:
    """The one failure every group shows, when there are many groups (listing each would
    repeat it)."""
    if len(groups) <= 4:
        return None
    seen = {tuple(g.failures) for g in groups}
    if len(seen) == 1:
        only = next(iter(seen))
        if len(only) == 1:
            return only[0]
    return None


def behaviour_section(groups: list[TestGroup]) -> str:
    """The expected-behaviour section: one bullet per test group."""
    if not groups:
        return ""
    lines = [
        "## Expected behaviour",
        "",
        "Hidden tests check the following; each fails on the current code:",
        "",
    ]
    common = _common_failure(groups)
    if common:
        names = ", ".join(g.doc or g.name for g in groups[:8])
        more = f" and {len(groups) - 8} more" if len(groups) > 8 else ""
        files = sorted({g.file for g in groups if g.file})
        where = " in " + ", ".join(f"`{f}`" for f in files[:3]) if files else ""
        lines.append(
            f"- {len(groups)} tests{where} ({names}{more}). Now each fails with {_md(common)}"
        )
        return "\n".join(lines) + "\n"
    for group in groups[:MAX_GROUPS]:
        what = group.doc or group.name
        cases = f" ({len(group.ids)} cases)" if len(group.ids) > 1 else ""
        where = f" (`{group.file}`)" if group.file else ""
        line = f"- {what}{cases}{where}"
        if group.failures:
            shown = "; ".join(_md(m) for m in group.failures[:2])
            line += f". Now: {shown}"
        lines.append(line)
    if len(groups) > MAX_GROUPS:
        lines.append(f"- … and {len(groups) - MAX_GROUPS} more test(s)")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ how, not what

_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_QUOTED = re.compile(r"(?<![\w])(['\"])([^'\"\n]{2,60})\1(?![\w])")
_IDENT = re.compile(
    r"\b(?:[A-Za-z_][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*"
    r"|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Za-z_]\w*\(\)"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")


def _terms(sentence: str) -> set[str]:
    """Code-like terms of a sentence: backticked text, quoted literals, identifiers with an
    underscore, camelCase or a dot, calls ``f()``."""
    terms = {m.group(1).strip() for m in _BACKTICK.finditer(sentence)}
    terms |= {m.group(2).strip() for m in _QUOTED.finditer(sentence)}
    plain = _BACKTICK.sub(" ", sentence)
    terms |= {m.group(0).removesuffix("()") for m in _IDENT.finditer(plain)}
    return {t for t in terms if len(t) >= 2}


def changed_code(gold_patch: str) -> str:
    """The added and removed lines of a patch (without the +/-), joined."""
    out = []
    for line in gold_patch.splitlines():
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            out.append(line[1:])
    return "\n".join(out)


_BLOCK_LINE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#|>|```|\|)|^\s{4}")


def _lines(text: str) -> list[str]:
    """The text's lines, with the wrapped lines of a prose paragraph joined into one (so a
    sentence is never split across lines); list items, headings, quotes and code stay."""
    out: list[str] = []
    for line in text.split("\n"):
        prose = line.strip() and not _BLOCK_LINE.match(line)
        prev = out[-1] if out else ""
        if prose and prev.strip() and not _BLOCK_LINE.match(prev):
            out[-1] = prev.rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def how_sentences(text: str, gold_patch: str, visible: str) -> list[str]:
    """Sentences that describe the implementation: a code-like term that the gold patch's
    changed lines hold but ``visible`` (the tests, the required interface) does not."""
    code = changed_code(gold_patch)
    found = []
    for para in _lines(text):
        for sentence in _SENTENCE_SPLIT.split(para):
            terms = _terms(sentence)
            hidden = [t for t in terms if t in code and t not in visible]
            if hidden:
                found.append(sentence)
    return found


def drop_how(text: str, gold_patch: str, visible: str) -> tuple[str, list[str]]:
    """``text`` without the sentences of :func:`how_sentences` (and the removed sentences)."""
    how = how_sentences(text, gold_patch, visible)
    if not how:
        return text, []
    out = []
    for para in _lines(text):
        kept = [s for s in _SENTENCE_SPLIT.split(para) if s not in how]
        line = " ".join(kept)
        if para.strip() and not line.strip():
            continue
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip(), how
