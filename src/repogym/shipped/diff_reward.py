#!/usr/bin/env python3
# ruff: noqa: UP006, UP007, UP031, UP035, UP045
"""Score a predicted unified diff against the gold diff of a text-only ``pr_diff`` task.

This file is self-contained (standard library only, Python 3.8+ syntax, no repogym imports):
pipelines copy it into each generated task's ``tests/`` folder, where it runs under whatever
Python exists there.  ``python diff_reward.py PREDICTED GOLD [--judge X]`` (``-`` for stdin)
prints the result of :func:`score_diff` as JSON.

``score_diff(predicted, gold, weights=None, judge=None)`` returns::

    {"reward": float in [0, 1], "components": {name: float}, "weights": {name: float},
     "format_valid": bool, "capped": bool, "notes": [str, ...]}

Components (each in [0, 1]):

* ``format_valid`` -- a guard, not weighted: the prediction must parse as a unified diff (file
  headers ``--- a/x`` + ``+++ b/x`` or a ``diff --git`` block, every hunk after a file header and
  with as many lines as its ``@@ -a,b +c,d @@`` header declares, every ``---/+++`` file with at
  least one hunk).  Free text before the first file header is tolerated.  An invalid prediction
  scores 0.0; the other components are still computed from whatever parsed, and ``notes`` says
  why it is invalid.
* ``size_sanity`` -- ``(min(p, g) + 1) / (max(p, g) + 1)`` where p and g are the numbers of
  changed (``+``/``-``) lines in the prediction and the gold.
* ``file_targeting`` -- F1 between the sets of files touched (new path, or the old path for
  deletions; ``a/``/``b/`` prefixes removed).
* ``region_overlap`` -- per hunk, the span of old-file lines it changes (insertions sit at the
  old line they precede); a gold hunk is hit when a predicted hunk of the same file is within
  ``REGION_SLACK`` (5) lines of it, and vice versa.  The component is the F1 of the two shares.
  Changed spans rather than whole hunk ranges are used so that the amount of context (``-U``)
  does not matter.
* ``similarity`` -- per file, the mean of (a) the line-level ``difflib.SequenceMatcher`` match
  ratio of removed lines and of added lines and (b) a token-multiset F1 of the signed tokens;
  context lines are ignored, all whitespace is removed before comparing and blank changed lines
  are dropped.  Files are averaged weighted by their changed-line counts (a file present on one
  side only scores 0).  At most ``MAX_LINES_PER_FILE`` lines and ``MAX_TOKENS_PER_FILE`` tokens
  per file and side are compared, and once the sum of ``len(a) * len(b)`` over the line
  comparisons would exceed ``SEQUENCE_BUDGET`` the remaining files' lines are matched as
  unordered multisets (linear time); a note says so when either limit applies.
* ``llm_judge`` -- the ``judge`` argument (0..1) when an LLM judge ran.  When ``judge`` is None
  the component is absent and its weight is redistributed over the others proportionally.

Default weights (``DEFAULT_WEIGHTS``): similarity 0.4 (the content of the change is the most
direct evidence), file_targeting 0.2 and region_overlap 0.2 (cheap structural signals that give
partial credit to a right-place-wrong-code attempt), size_sanity 0.1 (a weak signal, easy to
game, so small), llm_judge 0.1 (useful but noisy).  Weights are normalised to sum to 1 over the
components present; the returned ``weights`` are the ones actually applied.  ``weights=None``
reads ``weights_from_env()``: ``REPOGYM_DIFF_WEIGHT_<NAME>`` (e.g.
``REPOGYM_DIFF_WEIGHT_SIMILARITY=0.5``) overrides one default; an explicit ``weights`` dict is
merged over ``DEFAULT_WEIGHTS`` and ignores the environment.  Weights must be finite and >= 0.

Size cap: when the gold has at least ``CAP_MIN_GOLD_LINES`` (5) changed lines and the
prediction has more than ``CAP_FACTOR`` (10) times as many, or fewer than a tenth as many
(``p * 10 < g``, which includes 0), ``capped`` is True and the reward is at most ``CAP_REWARD``
(0.2).  The gold scores exactly 1.0 against itself when ``judge`` is None.
"""

import argparse
import difflib
import json
import math
import os
import re
import sys
from collections import Counter
from typing import Dict, List, Mapping, Optional, Tuple

COMPONENTS = ("size_sanity", "file_targeting", "region_overlap", "similarity", "llm_judge")
DEFAULT_WEIGHTS = {
    "size_sanity": 0.1,
    "file_targeting": 0.2,
    "region_overlap": 0.2,
    "similarity": 0.4,
    "llm_judge": 0.1,
}
ENV_PREFIX = "REPOGYM_DIFF_WEIGHT_"
REGION_SLACK = 5
CAP_FACTOR = 10
CAP_MIN_GOLD_LINES = 5
CAP_REWARD = 0.2
MAX_LINES_PER_FILE = 1500
MAX_TOKENS_PER_FILE = 20000
SEQUENCE_BUDGET = 2000000  # sum of len(a) * len(b) over the line-sequence comparisons

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


_Hunk = Tuple[Tuple[int, int], List[Tuple[str, str]]]
"""(old-file span of the changed lines, [("+" or "-", line)])."""


class _File:
    def __init__(self, path: Optional[str], from_git: bool) -> None:
        self.path = path
        self.from_git = from_git
        self.has_headers = False
        # each hunk: (start, end) old-file span, list of (sign, text)
        self.hunks: List[_Hunk] = []


class _Diff:
    def __init__(self) -> None:
        self.files: List[_File] = []
        self.error: Optional[str] = None

    def by_path(self) -> Dict[str, List[_File]]:
        out: Dict[str, List[_File]] = {}
        for f in self.files:
            if f.path is not None:
                out.setdefault(f.path, []).append(f)
        return out

    def changed_lines(self) -> int:
        return sum(len(h[1]) for f in self.files for h in f.hunks)


def _clean_path(raw: str) -> Optional[str]:
    path = raw.split("\t", 1)[0].strip()
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        path = path[1:-1]
    if path == "/dev/null" or not path:
        return None
    if path.startswith(("a/", "b/")):
        path = path[2:]
    while path.startswith("./"):
        path = path[2:]
    return path or None


def _git_path(line: str) -> Optional[str]:
    rest = line[len("diff --git ") :]
    idx = rest.rfind(" b/")
    if idx >= 0:
        return _clean_path(rest[idx + 1 :])
    parts = rest.split()
    return _clean_path(parts[-1]) if parts else None


def _read_hunk(lines: List[str], i: int, m: "re.Match[str]") -> Tuple[int, Optional[_Hunk], str]:
    """The hunk whose header ``m`` matched ``lines[i]``: (the index after it, (changed span,
    changes), ""), or (where it broke, None, why) when its lines do not fit the header."""
    n = len(lines)
    old_start = int(m.group(1))
    old_len = 1 if m.group(2) is None else int(m.group(2))
    new_len = 1 if m.group(4) is None else int(m.group(4))
    pos = old_start if old_len > 0 else old_start + 1
    old_rem, new_rem = old_len, new_len
    changes: List[Tuple[str, str]] = []
    positions: List[int] = []
    i += 1
    while old_rem > 0 or new_rem > 0:
        if i >= n:
            return i, None, f"hunk ending at line {i} is truncated (fewer lines than declared)"
        body = lines[i]
        tag = body[:1]
        if tag == "\\":
            pass
        elif tag in ("", " ") and old_rem > 0 and new_rem > 0:
            old_rem -= 1
            new_rem -= 1
            pos += 1
        elif tag == "-" and old_rem > 0:
            changes.append(("-", body[1:]))
            positions.append(pos)
            old_rem -= 1
            pos += 1
        elif tag == "+" and new_rem > 0:
            changes.append(("+", body[1:]))
            positions.append(pos)
            new_rem -= 1
        else:
            return i, None, f"line {i + 1} does not fit the hunk's line counts"
        i += 1
    while i < n and lines[i].startswith("\\"):
        i += 1
    if positions:
        span = (min(positions), max(positions))
    else:
        span = (old_start, old_start + max(old_len, 1) - 1)
    return i, (span, changes), ""


def _parse(text: str) -> _Diff:
    diff = _Diff()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    i = 0
    cur: Optional[_File] = None
    after_hunk = False
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            cur = _File(_git_path(line), True)
            diff.files.append(cur)
            after_hunk = False
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            old = _clean_path(line[4:])
            new = _clean_path(lines[i + 1][4:])
            path = new if new is not None else old
            if cur is not None and cur.from_git and not cur.has_headers and not cur.hunks:
                if path is not None:
                    cur.path = path
            else:
                cur = _File(path, False)
                diff.files.append(cur)
            cur.has_headers = True
            after_hunk = False
            i += 2
            continue
        m = _HUNK_RE.match(line)
        if m:
            if cur is None:
                diff.error = f"hunk before any file header (line {i + 1})"
                return diff
            i, hunk, error = _read_hunk(lines, i, m)
            if hunk is None:
                diff.error = error
                return diff
            cur.hunks.append(hunk)
            after_hunk = True
            continue
        if (
            after_hunk
            and line[:1] in ("+", "-", " ")
            and line != "-- "
            and not line.startswith(("--- ", "+++ "))
        ):
            diff.error = f"line {i + 1}: hunk has more lines than its header declares"
            return diff
        if (
            cur is not None
            and cur.from_git
            and not cur.hunks
            and line.startswith(("rename to ", "copy to "))
        ):
            cur.path = _clean_path(line.split(" to ", 1)[1]) or cur.path
        i += 1
    if not diff.files:
        diff.error = "no file headers ('--- a/x' + '+++ b/x' or 'diff --git')"
    else:
        for f in diff.files:
            if f.has_headers and not f.hunks:
                diff.error = f"file {f.path or '/dev/null'} has headers but no hunks"
                break
    return diff


def _f1(hit_a: float, hit_b: float) -> float:
    return 0.0 if hit_a + hit_b <= 0 else 2.0 * hit_a * hit_b / (hit_a + hit_b)


def _file_targeting(pred: _Diff, gold: _Diff) -> float:
    p, g = set(pred.by_path()), set(gold.by_path())
    if not p and not g:
        return 1.0
    return 2.0 * len(p & g) / (len(p) + len(g))


def _spans(diff: _Diff) -> List[Tuple[str, int, int]]:
    return [(f.path, h[0][0], h[0][1]) for f in diff.files if f.path is not None for h in f.hunks]


def _near(a: Tuple[str, int, int], others: List[Tuple[str, int, int]]) -> bool:
    return any(a[0] == b[0] and max(0, b[1] - a[2], a[1] - b[2]) <= REGION_SLACK for b in others)


def _region_overlap(pred: _Diff, gold: _Diff) -> float:
    p, g = _spans(pred), _spans(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    recall = sum(1 for h in g if _near(h, p)) / len(g)
    precision = sum(1 for h in p if _near(h, g)) / len(p)
    return _f1(recall, precision)


def _norm_changes(files: List[_File]) -> Tuple[List[str], List[str]]:
    removed: List[str] = []
    added: List[str] = []
    for f in files:
        for _span, changes in f.hunks:
            for sign, text in changes:
                key = "".join(text.split())
                if key:
                    (removed if sign == "-" else added).append(key)
    return removed, added


def _matched(a: List[str], b: List[str], budget: List[int], notes: List[str]) -> int:
    """Lines matched in order (SequenceMatcher) while the work budget lasts, else as multisets."""
    if not a or not b:
        return 0
    cost = len(a) * len(b)
    if cost > budget[0]:
        if not budget[1]:
            notes.append("similarity: large diff, some lines compared as unordered multisets")
            budget[1] = 1
        return sum((Counter(a) & Counter(b)).values())
    budget[0] -= cost
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in sm.get_matching_blocks())


def _tokens(removed: List[str], added: List[str], notes: List[str], label: str) -> Counter:
    out: List[Tuple[str, str]] = []
    for sign, seq in (("-", removed), ("+", added)):
        for line in seq:
            out.extend((sign, t) for t in _TOKEN_RE.findall(line))
    if len(out) > MAX_TOKENS_PER_FILE:
        notes.append(f"similarity: {label} truncated to {MAX_TOKENS_PER_FILE} tokens")
        out = out[:MAX_TOKENS_PER_FILE]
    return Counter(out)


def _similarity(pred: _Diff, gold: _Diff, notes: List[str]) -> float:
    pf, gf = pred.by_path(), gold.by_path()
    total_w = 0.0
    total = 0.0
    budget = [SEQUENCE_BUDGET, 0]
    for path in sorted(set(pf) | set(gf)):
        pr, pa = _norm_changes(pf.get(path, []))
        gr, ga = _norm_changes(gf.get(path, []))
        weight = float(max(1, len(pr) + len(pa) + len(gr) + len(ga)))
        total_w += weight
        if path not in pf or path not in gf:
            continue
        if not (pr or pa or gr or ga):
            total += weight
            continue
        seqs = [pr, pa, gr, ga]
        for k, seq in enumerate(seqs):
            if len(seq) > MAX_LINES_PER_FILE:
                notes.append(f"similarity: {path} truncated to {MAX_LINES_PER_FILE} lines per side")
                seqs[k] = seq[:MAX_LINES_PER_FILE]
        pr, pa, gr, ga = seqs
        size = len(pr) + len(pa) + len(gr) + len(ga)
        line_ratio = (
            2.0 * (_matched(pr, gr, budget, notes) + _matched(pa, ga, budget, notes)) / size
            if size
            else 1.0
        )
        pt = _tokens(pr, pa, notes, "prediction " + path)
        gt = _tokens(gr, ga, notes, "gold " + path)
        tsize = sum(pt.values()) + sum(gt.values())
        token_f1 = 2.0 * sum((pt & gt).values()) / tsize if tsize else 1.0
        total += weight * (0.5 * line_ratio + 0.5 * token_f1)
    return total / total_w if total_w else 1.0


def _check_weight(name: str, value: object, source: str) -> float:
    if name not in DEFAULT_WEIGHTS:
        raise ValueError(
            f"unknown diff reward weight {name!r} from {source} (known: {', '.join(COMPONENTS)})"
        )
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"invalid diff reward weight {source}={value!r}: not a number") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"invalid diff reward weight {source}={value!r}: must be finite and >= 0")
    return number


def weights_from_env(environ: Mapping[str, str] = os.environ) -> Dict[str, float]:
    """``DEFAULT_WEIGHTS`` with ``REPOGYM_DIFF_WEIGHT_<NAME>`` overrides; ValueError if invalid."""
    weights = dict(DEFAULT_WEIGHTS)
    for key in sorted(environ):
        if key.startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX) :].lower()
            weights[name] = _check_weight(name, environ[key].strip(), key)
    return weights


def score_diff(
    predicted: str,
    gold: str,
    *,
    weights: Optional[Mapping[str, float]] = None,
    judge: Optional[float] = None,
) -> dict:
    """Score ``predicted`` against ``gold`` (see the module docstring)."""
    if weights is None:
        base = weights_from_env()
    else:
        base = dict(DEFAULT_WEIGHTS)
        for name, value in weights.items():
            base[name] = _check_weight(name, value, f"weights[{name!r}]")
    if judge is not None:
        judge_value = _check_weight("llm_judge", judge, "judge")
        if judge_value > 1:
            raise ValueError(f"invalid judge score {judge!r}: must be within [0, 1]")

    notes: List[str] = []
    pred_diff = _parse(predicted or "")
    gold_diff = _parse(gold or "")
    if gold_diff.error is not None:
        notes.append("gold diff does not parse: " + gold_diff.error)
    format_valid = pred_diff.error is None
    if not format_valid:
        notes.append(f"prediction is not a valid unified diff: {pred_diff.error}")

    p_lines, g_lines = pred_diff.changed_lines(), gold_diff.changed_lines()
    components: Dict[str, float] = {
        "format_valid": 1.0 if format_valid else 0.0,
        "size_sanity": (min(p_lines, g_lines) + 1.0) / (max(p_lines, g_lines) + 1.0),
        "file_targeting": _file_targeting(pred_diff, gold_diff),
        "region_overlap": _region_overlap(pred_diff, gold_diff),
        "similarity": _similarity(pred_diff, gold_diff, notes),
    }
    if judge is not None:
        components["llm_judge"] = float(judge)

    used = {name: base[name] for name in COMPONENTS if name in components}
    total = sum(used.values())
    if total <= 0:
        raise ValueError("diff reward weights of the available components sum to 0")
    applied = {name: (used.get(name, 0.0) / total) for name in COMPONENTS}
    reward = sum(applied[name] * components[name] for name in used)
    reward = min(1.0, max(0.0, round(reward, 6)))

    capped = g_lines >= CAP_MIN_GOLD_LINES and (
        p_lines > CAP_FACTOR * g_lines or p_lines * CAP_FACTOR < g_lines
    )
    if capped:
        notes.append(
            f"size cap: {p_lines} changed lines predicted vs {g_lines} in gold; "
            f"reward capped at {CAP_REWARD}"
        )
        reward = min(reward, CAP_REWARD)
    if not format_valid:
        reward = 0.0
    return {
        "reward": reward,
        "components": {k: round(v, 6) for k, v in components.items()},
        "weights": {k: round(v, 6) for k, v in applied.items()},
        "format_valid": format_valid,
        "capped": capped,
        "notes": notes,
    }


# ----------------------------------------------------------------------------- making diffs


def file_diff(path: str, old: Optional[str], new: Optional[str]) -> str:
    """A git-style unified diff (3 lines of context) of one text file; ``None`` = absent.

    Both the ``pr_diff`` pipeline (for the gold) and the task's verifier (for the agent's
    edits) build their diffs with this function, so equal file contents give equal diffs.
    """
    if old == new:
        return ""
    a = (old or "").splitlines(True)
    b = (new or "").splitlines(True)
    out = ["diff --git a/%s b/%s\n" % (path, path)]
    if old is None:
        out.append("new file mode 100644\n")
    elif new is None:
        out.append("deleted file mode 100644\n")
    body = list(difflib.unified_diff(a, b, n=3))
    if not body:
        return ""
    out.append("--- %s\n" % ("/dev/null" if old is None else "a/" + path))
    out.append("+++ %s\n" % ("/dev/null" if new is None else "b/" + path))
    for line in body[2:]:  # difflib's own ---/+++ lines are replaced above
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def tree_diff(changes: List[Tuple[str, Optional[str], Optional[str]]]) -> str:
    """Concatenated :func:`file_diff` of ``(path, old, new)`` triples, in path order."""
    return "".join(file_diff(p, o, n) for p, o, n in sorted(changes, key=lambda c: c[0]))


# ----------------------------------------------------------------------------- LLM judge

JUDGE_MAX_CHARS = 12000
JUDGE_SYSTEM = (
    "You grade code changes. You are given a task description, the reference change that "
    "solved it, and a candidate change, both as unified diffs. Judge whether the candidate "
    "makes the same behavioural change as the reference: equivalent code written differently "
    "is fully correct; missing, wrong or harmful edits lower the score. Answer with one JSON "
    'object and nothing else: {"score": <number from 0 to 1>, "reason": "<one sentence>"}.'
)
JUDGE_TEMPLATE = (
    "Task description:\n{instruction}\n\n"
    "Reference change:\n```diff\n{gold}\n```\n\n"
    "Candidate change:\n```diff\n{predicted}\n```\n\n"
    "How well does the candidate accomplish the task, compared with the reference?"
)
_SCORE_RE = re.compile(r'"?score"?\s*[:=]\s*"?(-?\d+(?:\.\d+)?)', re.IGNORECASE)


def _clip(text: str) -> str:
    if len(text) <= JUDGE_MAX_CHARS:
        return text
    return text[:JUDGE_MAX_CHARS] + "\n[... %d more characters cut]" % (len(text) - JUDGE_MAX_CHARS)


def judge_messages(predicted: str, gold: str, instruction: str) -> List[Dict[str, str]]:
    """The chat messages of the LLM judge (one place for the prompt, host and verifier)."""
    user = JUDGE_TEMPLATE.format(
        instruction=_clip(instruction.strip() or "(none)"),
        gold=_clip(gold.strip()),
        predicted=_clip(predicted.strip()),
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_judge_score(text: str) -> float:
    """The score in a judge's answer (JSON ``{"score": x}``, ``score: x`` or a bare number).

    ValueError when there is no score or it lies outside [0, 1].
    """
    raw = (text or "").strip()
    if raw.startswith("```"):
        raw = raw.strip("`").strip()
        if raw.lower().startswith("json"):
            raw = raw[4:].strip()
    value: Optional[float] = None
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "score" in obj:
        try:
            if isinstance(obj["score"], bool):
                raise TypeError
            value = float(obj["score"])
        except (TypeError, ValueError):
            raise ValueError("judge answer has a non-numeric score") from None
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        value = float(obj)
    else:
        m = _SCORE_RE.search(raw)
        if m:
            value = float(m.group(1))
    if value is None:
        raise ValueError("judge answer has no score")
    if not math.isfinite(value) or value < 0 or value > 1:
        raise ValueError("judge score %r is outside [0, 1]" % value)
    return value


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    with open(path, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Score a predicted unified diff against the gold.")
    ap.add_argument("predicted", help="predicted diff file ('-' for stdin)")
    ap.add_argument("gold", help="gold diff file ('-' for stdin)")
    ap.add_argument("--judge", type=float, default=None, help="LLM judge score in [0, 1]")
    args = ap.parse_args(argv)
    texts = []
    for path in (args.predicted, args.gold):
        try:
            texts.append(_read(path))
        except OSError as exc:
            print(f"diff_reward: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    try:
        result = score_diff(texts[0], texts[1], judge=args.judge)
    except ValueError as exc:
        print(f"diff_reward: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
