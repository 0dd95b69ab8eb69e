"""Keep answers out of everything the explorer shows: applied centrally to every TaskDoc.

:func:`apply` withholds

- files under ``solution/`` (the oracle and the gold patch);
- grader data outside ``environment/``: expected outputs, rubrics, ``*.diff``/``*.patch`` (hidden
  test patches) and ``gold*`` files;
- answer-like keys at any depth in TOML / JSON / YAML-ish metadata (``answer``, ``gold_answer``,
  ``expected_output``, ``solution``, ``reference_*``, ``ground_truth``, ``label``, hidden tests,
  rubrics, hints …: :func:`answer_reason`, the one list the row processors use too), in
  sections and in files (masked in place with ``«withheld»``);
- answers written into grader scripts: answer-named variables (``EXPECTED="42"``,
  ``answer = "..."``), heredocs written to files (``cat > /tmp/expected <<EOF … EOF``) and
  ``echo … > expected`` lines;

and appends human notes saying what was withheld to ``doc.withheld``. It is idempotent.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib as _toml
from typing import Any

from repogym.explorer.model import FileDoc, Section, TaskDoc

__all__ = [
    "MASK",
    "answer_reason",
    "apply",
    "file_reason",
    "is_answer_key",
    "mask_data",
    "mask_json",
    "mask_script",
    "mask_text",
    "mask_toml",
    "mask_yamlish",
]

MASK = "«withheld»"
SOLUTION_REASON = "solution (the answer)"

# The one list of answer-like keys (metadata keys, row columns, facets): every place that
# withholds keys (this module's maskers, the row processors' columns and ``scrub``, the OpenEnv
# adapter) asks :func:`answer_reason`. Matched on the normalised key (see ``_norm_key``).
_PATCH_KEY = re.compile(r"^(?:patch|gold_patch)$")
_TESTS_KEY = re.compile(
    r"^(?:tests?|test_list|test_cases?|test_patch|test_code|test_setup_code|hidden_tests?"
    r"|private_tests?|public_tests?|generated_tests?|unit_tests?|challenge_test_list"
    r"|\w+_tests)$"
)
_RUBRIC_KEY = re.compile(r"^(?:rubrics?|criteria|grading_notes|scoring\w*|judge\w*)$")
_HINTS_KEY = re.compile(r"^(?:hints?|hints_text)$")
_ANSWER_KEY = re.compile(
    r"""^(?:
        answers?|solutions?|labels?|targets?|ground_?truths?|oracles?.*|rubrics?
      | gold.*|reference_.+|expected(?:_.*)?|.*_answers?|.*_solutions?|correct(?:_.*)?
      | .*_expected|.*_gold|golden.*|.*patch(?:es)?|.*_diff|gold_?diff
      | final_answer|answer_\w+|ground_truth\w*|canonical_solution|reference\w+
      | outputs?|completions?|responses?|chosen|rejected|verdict
    )$""",
    re.X,
)
# Keys that look answer-like but are known to be harmless descriptions (tests hold them shown).
_SAFE_KEYS = frozenset(
    {
        # provenance: the change a task was made from (a PR, commit or advisory URL)
        "reference",
        "labels_count",
        "target_os",
        # provenance written by repogym: the pipeline's name and verification counts
        "pr_diff",
        "cve_patches",
        "oracle_runs",
        "oracle_passes",
    }
)

_SCRIPT_EXT = (".sh", ".bash", ".py", ".zsh", ".ps1", "")
_STRUCT_EXT = {
    ".toml": "toml",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".yaml": "yaml",
    ".yml": "yaml",
}
_ANSWER_WORD = re.compile(
    r"expect|answer|gold|solution|ground[_-]?truth|reference|correct|oracle", re.I
)
_VAR_WORD = re.compile(r"expect|answer|gold|solution|ground_?truth|reference|correct|oracle", re.I)


def _norm_key(key: object) -> str:
    return re.sub(r"[\s\-.]+", "_", str(key).strip().strip("\"'").lower())


@functools.lru_cache(maxsize=4096)
def _answer_reason(key: str) -> str | None:
    k = _norm_key(key)
    if k in _SAFE_KEYS:
        return None
    if _PATCH_KEY.match(k):
        return "solution (the gold patch)"
    if _TESTS_KEY.match(k):
        return "hidden tests (grader data)"
    if _RUBRIC_KEY.match(k):
        return "rubric (grader data)"
    if _HINTS_KEY.match(k):
        return "hints (may contain the answer)"
    if _ANSWER_KEY.match(k):
        return "the answer"
    return None


def answer_reason(key: object) -> str | None:
    """Why a key or column called ``key`` is withheld (the answer, hidden tests, a rubric,
    hints), or None when it may be shown. The one rule of answer-like keys."""
    return _answer_reason(str(key))


def is_answer_key(key: object) -> bool:
    """True for metadata keys that hold answers (``gold_answer``, ``expected_output`` …)."""
    return _answer_reason(str(key)) is not None


# ---------------------------------------------------------------- structured data


def mask_data(value: Any, found: list[str] | None = None, _path: str = "") -> Any:
    """A copy of a JSON/TOML value with answer-like keys (at any depth) masked."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            where = f"{_path}.{k}" if _path else str(k)
            if is_answer_key(k):
                out[k] = MASK
                if found is not None:
                    found.append(where)
            else:
                out[k] = mask_data(v, found, where)
        return out
    if isinstance(value, list):
        return [mask_data(v, found, _path) for v in value]
    return value


def mask_json(text: str, found: list[str]) -> str:
    """Mask answer keys in JSON (or JSON Lines) text; falls back to the YAML-ish line masker."""
    try:
        data = json.loads(text)
    except ValueError:
        lines = text.splitlines()
        if len(lines) > 1:
            out = []
            try:
                for line in lines:
                    out.append(
                        json.dumps(mask_data(json.loads(line), found), ensure_ascii=False)
                        if line.strip()
                        else line
                    )
                return "\n".join(out) + ("\n" if text.endswith("\n") else "")
            except ValueError:
                pass
        return mask_yamlish(text, found)
    masked = mask_data(data, found)
    if masked == data:
        return text
    return json.dumps(masked, indent=2, ensure_ascii=False) + "\n"


# Every alternative of _ANSWER_KEY needs one of these words in the (lower-cased) key, and key
# normalisation only lower-cases and turns separator runs into "_" (no word holds "_"): a key
# without any of them is never an answer key.
_KEY_WORDS = (
    "answer", "solution", "label", "target", "ground", "oracle", "rubric", "gold",
    "reference", "expected", "correct", "patch", "diff", "test", "criteria", "grading",
    "scoring", "judge", "hint", "output", "completion", "response", "chosen", "rejected",
    "verdict",
)  # fmt: skip
_BARE_RUN = re.compile(r"[A-Za-z0-9_\-]+")


_BARE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# Line breaks other than \n and \r\n (str.splitlines splits there too): the fast check
# reasons about \n-separated lines only, so texts holding one take the full path.
_ODD_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # and a \r not before \n


def _has_key_word(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in _KEY_WORDS)


def _toml_key_free(text: str) -> bool:
    """True when no key of ``text`` can be answer-like, read as TOML or by the line masker.

    Every key part either reader can see is one of: a run of bare-key characters, the text
    between two consecutive quote characters of one kind on a line (a quoted key), or a
    dotted part of a ``[table]`` line (the line masker's split). An answer-like key holds a
    key word, so only the candidates around each key word in the text are checked. A
    backslash (escapes can spell any key), a character whose lower case is longer than
    itself, or an unusual line break means "maybe" (the caller parses).
    """
    if "\\" in text:
        return False
    low = text.lower()
    hits = []
    for w in _KEY_WORDS:  # str.find is much faster than a regex alternation here
        k = low.find(w)
        while k >= 0:
            hits.append(k)
            k = low.find(w, k + 1)
    if not hits:
        return True
    if len(low) != len(text) or any(c in text for c in _ODD_BREAKS):
        return False
    if "\r" in text and "\r" in text.replace("\r\n", ""):
        return False
    n = len(text)
    for pos in hits:
        i = j = pos
        while i > 0 and text[i - 1] in _BARE_CHARS:
            i -= 1
        while j < n and text[j] in _BARE_CHARS:
            j += 1
        cands = [text[i:j]]
        ls = text.rfind("\n", 0, pos) + 1
        le = text.find("\n", pos)
        line = text[ls : le if le >= 0 else n]
        at = pos - ls
        for q in ('"', "'"):
            before = line.count(q, 0, at)
            if before and line.count(q, at):
                a = line.rfind(q, 0, at) + 1
                cands.append(line[a : line.find(q, at)])
        if "[" in line:
            header = _TOML_HEADER.match(line)
            if header:
                cands.extend(_split_dotted(header.group(1)))
        if any(is_answer_key(c) for c in cands):
            return False
    return True


def mask_toml(text: str, found: list[str]) -> str:
    """Mask answer keys in TOML text; tables whose name is answer-like are masked whole.

    The line form keeps comments and order; if it misses a key (inline tables), the parsed
    document is masked and written back instead. A text none of whose possible keys is
    answer-like (see :func:`_toml_key_free`) is returned as it is, without parsing.
    """
    if _toml_key_free(text):
        return text
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError:
        return _mask_toml_lines(text, found)
    probe: list[str] = []
    mask_data(data, probe)
    if not probe:
        return text
    before = len(found)
    masked = _mask_toml_lines(text, found)
    try:
        if not _leaks(_toml.loads(masked)):
            return masked
    except _toml.TOMLDecodeError:
        pass
    import tomli_w

    del found[before:]
    found.extend(probe)
    return tomli_w.dumps(mask_data(data))


def _leaks(value: Any, masked: bool = False) -> bool:
    """True when something under an answer-like key is not the mask."""
    if isinstance(value, dict):
        return any(_leaks(v, masked or is_answer_key(k)) for k, v in value.items())
    if isinstance(value, list):
        return any(_leaks(v, masked) for v in value)
    return masked and value != MASK


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_PART = r"""(?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-]+)"""
_TOML_KEYVAL = re.compile(rf"^(\s*)({_TOML_PART}(?:\s*\.\s*{_TOML_PART})*)(\s*=\s*)(.*)$")


def _split_dotted(key: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", key)]


def _value_open(value: str) -> str | None:
    """The closing token a multi-line TOML value still waits for, if any."""
    v = value.strip()
    for q in ('"""', "'''"):
        if v.startswith(q) and (len(v) < 6 or not v.endswith(q) or v.count(q) < 2):
            return q
    if v.startswith("[") or v.startswith("{"):
        depth = 0
        in_str: str | None = None
        for ch in v:
            if in_str:
                if ch == in_str:
                    in_str = None
            elif ch in "\"'":
                in_str = ch
            elif ch in "[{":
                depth += 1
            elif ch in "]}":
                depth -= 1
            elif ch == "#":
                break
        return "]" if depth > 0 else None
    return None


def _mask_toml_lines(text: str, found: list[str]) -> str:
    out: list[str] = []
    table_masked = False
    table = ""
    waiting: str | None = None  # inside a masked multi-line value
    skipping: str | None = None  # inside an unmasked multi-line value
    depth = 0
    for line in text.splitlines(keepends=True):
        if waiting or skipping:
            closer = waiting or skipping
            if closer == "]":
                depth += line.count("[") + line.count("{") - line.count("]") - line.count("}")
                done = depth <= 0
            else:
                done = closer is not None and closer in line
            if waiting is None:
                out.append(line)
            if done:
                waiting = skipping = None
            continue
        header = _TOML_HEADER.match(line)
        if header:
            table = header.group(1)
            parts = _split_dotted(table)
            table_masked = any(is_answer_key(p) for p in parts)
            if table_masked:
                found.append(table)
            out.append(line)
            continue
        kv = _TOML_KEYVAL.match(line)
        if kv and not line.lstrip().startswith("#"):
            key_parts = _split_dotted(kv.group(2))
            value = kv.group(4)
            closer = _value_open(value)
            if table_masked or any(is_answer_key(p) for p in key_parts):
                if not table_masked:
                    found.append(f"{table}.{kv.group(2)}" if table else kv.group(2))
                nl = "\n" if line.endswith("\n") else ""
                out.append(f'{kv.group(1)}{kv.group(2)}{kv.group(3)}"{MASK}"{nl}')
                if closer:
                    waiting = closer
                    depth = _bracket_depth(value) if closer == "]" else 0
                continue
            if closer:
                skipping = closer
                depth = _bracket_depth(value) if closer == "]" else 0
        out.append(line)
    return "".join(out)


def _bracket_depth(value: str) -> int:
    return value.count("[") + value.count("{") - value.count("]") - value.count("}")


_YAML_KEY = re.compile(r"^(\s*(?:-\s+)?)([\"']?[\w\-. ]+[\"']?)(\s*:)(\s*)(.*)$")


def mask_yamlish(text: str, found: list[str]) -> str:
    """Mask ``key: value`` lines (and the block under ``key:``) whose key is answer-like."""
    if not _has_key_word(text):
        return text  # no line's key can be answer-like: nothing would change
    return _mask_yamlish_lines(text, found)


def _mask_yamlish_lines(text: str, found: list[str]) -> str:
    out: list[str] = []
    block_indent: int | None = None
    for line in text.splitlines(keepends=True):
        indent = len(line) - len(line.lstrip())
        if block_indent is not None:
            if line.strip() and indent <= block_indent:
                block_indent = None
            else:
                continue
        m = _YAML_KEY.match(line)
        if m and is_answer_key(m.group(2)):
            found.append(m.group(2).strip().strip("\"'"))
            nl = "\n" if line.endswith("\n") else ""
            out.append(f"{m.group(1)}{m.group(2)}{m.group(3)} {MASK}{nl}")
            rest = m.group(5).strip()
            if not rest or rest in ("|", ">", "|-", ">-", "|+", ">+"):
                block_indent = indent
            continue
        out.append(line)
    return "".join(out)


# ---------------------------------------------------------------- grader scripts

_ASSIGN = re.compile(
    r"""^(?P<lead>\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*|typeset\s+)?)
        (?P<name>[A-Za-z_][A-Za-z0-9_]*)
        (?P<op>\s*(?::\s*[\w\[\], .|]+\s*)?=(?!=)\s*)
        (?P<value>.*)$""",
    re.X,
)
_HEREDOC = re.compile(r"<<(-?)\s*(?:'([^']+)'|\"([^\"]+)\"|\\?([A-Za-z_][\w]*))")
_ECHO_TO_FILE = re.compile(
    r"^(?P<lead>\s*(?:echo|printf)\b(?:\s+-[a-zA-Z]+)*\s+)(?P<args>.+?)(?P<redir>\s*>>?\s*\S+)\s*$"
)


def _quote_of(value: str) -> str:
    v = value.lstrip()
    for q in ('"""', "'''", '"', "'"):
        if v.startswith(q):
            return q
    return ""


def mask_script(text: str, found: list[str]) -> str:
    """Mask answers written into a grader script (shell or Python), keeping its shape."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nl = "\n" if line.endswith("\n") else ""
        body = line[:-1] if nl else line
        stripped = body.lstrip()
        if stripped.startswith("#"):
            out.append(line)
            i += 1
            continue
        hd = _HEREDOC.search(body)
        if hd:
            delim = hd.group(2) or hd.group(3) or hd.group(4)
            strip_tabs = hd.group(1) == "-"
            head = body[: hd.start()]
            writes_file = bool(re.search(r"(?:^|[^<>&0-9])>>?\s*\S|\btee\b", body))
            answerish = bool(_ANSWER_WORD.search(body))
            out.append(line)
            i += 1
            block: list[str] = []
            while i < len(lines):
                candidate = lines[i].rstrip("\n")
                if (candidate.lstrip("\t") if strip_tabs else candidate) == delim:
                    break
                block.append(lines[i])
                i += 1
            if writes_file or answerish:
                found.append(f"heredoc <<{delim}" + (f" ({head.strip()[:40]})" if head else ""))
                out.append(f"{MASK}\n")
            else:
                out.append(mask_script("".join(block), found))
            if i < len(lines):
                out.append(lines[i])
                i += 1
            continue
        m = _ASSIGN.match(body)
        if m and _VAR_WORD.search(m.group("name")):
            value = m.group("value")
            q = _quote_of(value)
            found.append(m.group("name"))
            out.append(f"{m.group('lead')}{m.group('name')}{m.group('op')}{q}{MASK}{q}{nl}")
            i += 1
            # A value left open (triple quotes, an unclosed quote, a bracket) runs on.
            closer = None
            rest = value.strip()
            triple_open = q in ('"""', "'''") and rest.count(q) < 2
            single_open = q in ('"', "'") and rest.count(q) % 2 == 1
            if triple_open or single_open:
                closer = q
            elif rest[:1] in "([{" and _bracket_depth(rest) + rest.count("(") - rest.count(")"):
                closer = {"(": ")", "[": "]", "{": "}"}[rest[0]]
            if closer:
                while i < len(lines):
                    done = closer in lines[i]
                    i += 1
                    if done:
                        break
            continue
        e = _ECHO_TO_FILE.match(body)
        if e and _ANSWER_WORD.search(e.group("redir")):
            found.append(f"write to {e.group('redir').strip().lstrip('>').strip()}")
            out.append(f"{e.group('lead')}{MASK}{e.group('redir')}{nl}")
            i += 1
            continue
        out.append(line)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- files and sections


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


@functools.lru_cache(maxsize=4096)
def file_reason(path: str) -> str | None:
    """Why a file is withheld whole, or None when it may be shown (perhaps masked)."""
    parts = path.split("/")
    top = parts[0].lower()
    if top in ("solution", "solutions"):
        return SOLUTION_REASON
    if top == "environment":
        return None  # what the agent works in is visible to the agent anyway
    name = parts[-1].lower()
    stem = name.split(".", 1)[0]
    ext = _ext(name)
    if ext in (".diff", ".patch"):
        if top == "tests":
            return "hidden test patch (grader data)"
        return "patch (may hold the answer)"
    if top == "tests" and len(parts) > 2 and parts[1].lower() in ("files", "hidden"):
        return "hidden tests (grader data)"  # the same content as a hidden test patch
    if stem.startswith("gold") or stem.startswith("golden"):
        return "gold data (grader data)"
    if any(w in stem for w in ("expected", "answer", "ground_truth", "groundtruth")) or stem in (
        "solution",
        "solutions",
        "reference",
        "oracle",
    ):
        return "expected output (grader data)"
    if stem.startswith("rubric"):
        return "rubric (grader data)"
    return None


def mask_text(text: str, language: str, found: list[str]) -> str:
    """Mask a text by its language: toml, json/jsonl, yaml, or a script."""
    lang = language.lower()
    if len(text) <= _MEMO_MAX:
        masked, names = _mask_memo(text, lang)
        found.extend(names)
        return masked
    return _mask_text(text, lang, found)


_MEMO_MAX = 64 * 1024


@functools.lru_cache(maxsize=512)
def _mask_memo(text: str, lang: str) -> tuple[str, tuple[str, ...]]:
    """Masking is a pure function of (text, language): identical grader files, and a
    ``task.toml`` shown both as a section and as a file, are masked once."""
    found: list[str] = []
    masked = _mask_text(text, lang, found)
    return masked, tuple(found)


def _mask_text(text: str, lang: str, found: list[str]) -> str:
    if lang == "toml":
        return mask_toml(text, found)
    if lang in ("json", "jsonl"):
        return mask_json(text, found)
    if lang in ("yaml", "yml"):
        return mask_yamlish(text, found)
    if lang in ("bash", "sh", "shell", "zsh", "python", "py"):
        return mask_script(text, found)
    return text


@functools.lru_cache(maxsize=4096)
def _file_language(path: str) -> str:
    ext = _ext(path)
    if ext in _STRUCT_EXT:
        return _STRUCT_EXT[ext]
    if ext in (".sh", ".bash", ".zsh"):
        return "bash"
    if ext == ".py":
        return "python"
    return ""


def _mask_file(f: FileDoc, notes: list[str]) -> None:
    if f.withheld:
        f.data = None
        return
    reason = file_reason(f.path)
    if reason:
        f.data = None
        f.withheld = reason
        return
    if f.data is None:
        return
    top = f.path.split("/", 1)[0]
    if top == "environment":
        return
    lang = _file_language(f.path)
    if not lang:
        if top != "tests" or "." in f.path.rsplit("/", 1)[-1]:
            return
        if not f.data.startswith(b"#!"):
            return
        lang = "bash"
    if lang in ("bash", "python") and top != "tests":
        return  # scripts outside the grader are not grader scripts
    try:
        text = f.data.decode("utf-8")
    except UnicodeDecodeError:
        return
    found: list[str] = []
    masked = mask_text(text, "jsonl" if lang == "jsonl" else lang, found)
    if found and masked != text:
        f.data = masked.encode("utf-8")
        f.size = len(f.data)
        notes.append(f"{f.path}: answers masked ({_list(found)})")


def _list(items: list[str], limit: int = 4) -> str:
    seen = list(dict.fromkeys(items))
    more = f", +{len(seen) - limit} more" if len(seen) > limit else ""
    return ", ".join(seen[:limit]) + more


def _mask_section(s: Section, notes: list[str]) -> None:
    if s.id == "instruction":
        return  # what the agent is told; answers never belong there
    found: list[str] = []
    if s.format == "code":
        masked = mask_text(s.body, s.language, found)
    else:
        masked = mask_text(s.body, "yaml", found)  # mask_yamlish, memoised
    if found and masked != s.body:
        s.body = masked
        notes.append(f"{s.title or s.id}: answers masked ({_list(found)})")


def apply(doc: TaskDoc) -> TaskDoc:
    """Withhold and mask answers in ``doc`` (in place) and return it; adds notes to ``withheld``."""
    notes: list[str] = []
    for s in doc.sections:
        _mask_section(s, notes)
    counts: dict[str, list[str]] = {}
    for f in doc.files:
        was = f.withheld
        _mask_file(f, notes)
        if f.withheld and not was:
            counts.setdefault(f.withheld, []).append(f.path)
    for reason, paths in counts.items():
        if reason == SOLUTION_REASON:
            notes.append(f"solution/ ({len(paths)} file{'s' * (len(paths) != 1)}): {reason}")
        else:
            notes.append(f"{_list(paths, 3)}: {reason}")
    for key in [k for k in doc.facets if is_answer_key(k)]:
        del doc.facets[key]
        notes.append(f"facet {key}: answer-like, withheld")
    for n in notes:
        if n not in doc.withheld:
            doc.withheld.append(n)
    return doc
