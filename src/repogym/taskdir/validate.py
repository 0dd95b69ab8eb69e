"""Static checks of task directories (``repogym validate``).

Each check yields :class:`Problem` rows naming the task and the file. A task fails when it has
any problem of severity ``error``. Nothing here writes to disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repogym import dockerfile
from repogym.taskdir.compose import ignored_compose_files
from repogym.taskdir.config import verifier_mode
from repogym.taskdir.discover import duplicate_id_message, duplicate_ids
from repogym.taskdir.hashing import content_hash, list_task_files, read_bytes
from repogym.taskdir.instruction_checks import (
    NGRAM,
    gold_added_lines,
    leaked_ngrams,
    statement,
    underspecified,
)
from repogym.taskdir.provenance import Provenance
from repogym.taskdir.runnable import environment_type_refusal, separate_verifier_refusals
from repogym.taskdir.task import INSTRUCTION, TASK_TOML, Task, TaskError, load_task
from repogym.taskdir.trust import (
    HostLimits,
    check_files,
    check_limits,
    check_toml,
    load_limits,
    requested_env,
)

KNOWN_REWARD_KINDS = frozenset(
    {
        "test_execution",
        "diff_similarity",
        "llm_judge",
        "exact_match",
        "output_match",
        "equivalence",
        "rubric",
        "custom",
    }
)
ENVIRONMENT_FILES = ("Dockerfile", "docker-compose.yaml")
TEST_SCRIPTS = ("test.sh",)
LEAK_MIN_CHARS = 16
"""A gold-patch added line shorter than this (after stripping) is too generic to count as a leak."""


@dataclass(frozen=True)
class Problem:
    severity: str  # "error" | "warning"
    check: str
    file: str
    message: str


@dataclass
class TaskReport:
    """Everything validate found about one task."""

    task_id: str
    path: str
    problems: list[Problem] = field(default_factory=list)
    adversarial: dict[str, Any] | None = None
    """With ``--deep``: the recorded red-team figures (``adversarial_floor``,
    ``gameability_gap``, ``adversarial_candidates``), when the task has them."""

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "path": self.path,
            "ok": self.ok,
            "problems": [asdict(p) for p in self.problems],
            **({"adversarial": self.adversarial} if self.adversarial is not None else {}),
        }


class TaskFiles:
    """One listing of a task's files and a cache of their bytes, shared by every check."""

    CACHE_LIMIT = 1 << 20  # files larger than this are read again rather than kept

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listing = list_task_files(path)
        self.links = {rel: link for rel, link in self.listing}
        self._cache: dict[str, bytes] = {}

    def is_file(self, rel: str) -> bool:
        return self.links.get(rel) is False

    def read(self, rel: str) -> bytes:
        data = self._cache.get(rel)
        if data is None:
            data = read_bytes(os.path.join(self.path, rel))
            if len(data) <= self.CACHE_LIMIT:
                self._cache[rel] = data
        return data

    def under(self, prefix: str, suffix: str) -> list[str]:
        return [
            r
            for r, link in self.listing
            if not link and r.startswith(prefix) and r.endswith(suffix)
        ]


def _err(check: str, file: str, message: str) -> Problem:
    return Problem("error", check, file, message)


def _warn(check: str, file: str, message: str) -> Problem:
    return Problem("warning", check, file, message)


def validate_task(path: Path | str, *, deep: bool = False) -> TaskReport:
    """Run every static check on one task folder."""
    path = Path(path)
    report = TaskReport(task_id=path.name, path=str(path))
    try:
        files = TaskFiles(path)
    except OSError as exc:
        report.problems.append(_err("paths", ".", f"cannot list the task: {exc.strerror}"))
        return report
    try:
        task = load_task(path)
    except TaskError as exc:
        report.problems.append(_err("schema", exc.file, str(exc)))
        # Still check what does not need task.toml, so one run shows every problem.
        report.problems.extend(_check_instruction(files))
        report.problems.extend(_check_paths(files))
        return report
    if not task.raw:
        # Every setting would be a default: almost surely a truncated or unwritten file.
        report.problems.append(_err("schema", TASK_TOML, f"{TASK_TOML} is empty"))
    for warning in task.warnings:
        report.problems.append(_warn("legacy", TASK_TOML, warning))
    if task.is_multi_step:
        report.problems.extend(_check_steps(task, files))
    else:
        report.problems.extend(_check_instruction(files))
        report.problems.extend(_check_tests(files))
    report.problems.extend(_check_environment(task, files, deep=deep))
    for reason in separate_verifier_refusals(task.config, task.path):
        report.problems.append(_err("verifier", "tests/Dockerfile", reason))
    report.problems.extend(_check_paths(files))
    report.problems.extend(_check_trust(task))
    report.problems.extend(_check_provenance(task, files))
    report.problems.extend(_check_leak(files))
    report.problems.extend(_check_solvable(task, files))
    if deep:
        report.problems.extend(_check_deep(files))
        report.adversarial = adversarial_figures(task)
        report.problems.extend(_check_gameable(report.adversarial))
        report.problems.extend(_check_canaries(task, files))
    return report


def _check_canaries(task: Task, files: TaskFiles) -> Iterator[Problem]:
    """A runtime-verified task whose judge plants no canary cannot tell tests made to pass
    from tests passed (``canaries = 0`` recorded by the gate), and candidates the gate never
    confirmed are only reported by the judge, never judged."""
    prov = task.provenance
    count = prov.evaluation.get("canaries") if prov is not None else None
    if count == 0:
        yield _warn(
            "canaries",
            TASK_TOML,
            "no canaries (canaries = 0): the task's tests gave no expectation to contradict, "
            "so tests made to pass without a fix are not caught by them",
        )
    rel = "tests/canaries.json"
    if files.is_file(rel):
        try:
            data = json.loads(files.read(rel))
        except ValueError:
            yield _err("canaries", rel, "not valid JSON")
            return
        if not isinstance(data, dict) or not isinstance(data.get("pool"), list):
            yield _err("canaries", rel, "no pool of canaries")
        elif data.get("status") != "confirmed":
            yield _warn(
                "canaries",
                rel,
                "canaries not confirmed by the gate yet (run repogym verify): the judge "
                "reports their outcomes but does not judge them",
            )


def adversarial_figures(task: Task) -> dict[str, Any] | None:
    """The red-team figures ``repogym verify --adversarial`` (or generate's gate) recorded in
    ``[metadata.repo2env.evaluation]``, with ``winners`` (the kinds that earned the full
    reward); None when the task was never measured."""
    prov = task.provenance
    block = prov.evaluation if prov is not None else {}
    if "adversarial_floor" not in block:
        return None
    keys = ("adversarial_floor", "gameability_gap", "adversarial_candidates", "nop_reward")
    out = {k: block[k] for k in keys if k in block}
    results = block.get("adversarial_results") or []
    out["winners"] = [
        str(r.get("kind")) for r in results if isinstance(r, dict) and r.get("killed") is False
    ]
    return out


def _check_gameable(figures: dict[str, Any] | None) -> Iterator[Problem]:
    if not figures:
        return
    gap, floor = figures.get("gameability_gap"), figures.get("adversarial_floor")
    if figures.get("winners"):
        yield _err(
            "adversarial",
            TASK_TOML,
            f"gameable: generic wrong solutions earn the full reward "
            f"({', '.join(figures['winners'])}; adversarial floor {floor})",
        )
    elif isinstance(gap, int | float) and gap > 0:
        yield _warn(
            "adversarial",
            TASK_TOML,
            f"generic wrong solutions earn partial credit (adversarial floor {floor}, "
            f"gameability gap {gap:g}; see adversarial_results)",
        )


def _check_instruction(files: TaskFiles, rel: str = INSTRUCTION) -> Iterator[Problem]:
    if not files.is_file(rel):
        yield _err("instruction", rel, f"{rel} is missing")
        return
    try:
        text = files.read(rel).decode("utf-8")
    except UnicodeDecodeError as exc:
        yield _err("instruction", rel, f"not UTF-8 (byte {exc.start}: {exc.reason})")
        return
    if not text.strip():
        yield _err("instruction", rel, f"{rel} is empty")


def _check_steps(task: Task, files: TaskFiles) -> Iterator[Problem]:
    """A multi-step task: each step has its instruction and a test script (its own, or the
    task's ``tests/test.sh``); the task-level ``instruction.md`` is optional."""
    shared_tests = files.is_file("tests/test.sh")
    for step in task.config.steps or []:
        base = f"steps/{step.name}"
        yield from _check_instruction(files, f"{base}/{INSTRUCTION}")
        separate = verifier_mode(step.verifier, task.config.verifier) == "separate"
        if not separate and not shared_tests and not files.is_file(f"{base}/tests/test.sh"):
            yield _err("tests", f"{base}/tests/test.sh", f"step {step.name!r} has no test script")
    if files.is_file(INSTRUCTION):
        yield from _check_instruction(files)


def _check_environment(task: Task, files: TaskFiles, *, deep: bool) -> Iterator[Problem]:
    kind = environment_type_refusal(task.config)
    if kind is not None:
        yield _err("environment", TASK_TOML, kind)
        return
    has_def = any(files.is_file(f"environment/{name}") for name in ENVIRONMENT_FILES)
    if not has_def and not task.config.environment.docker_image:
        yield _err(
            "environment",
            "environment/",
            "no environment definition: add environment/Dockerfile or set "
            "[environment].docker_image",
        )
    for name in ignored_compose_files(task.environment_dir):
        yield _warn(
            "environment",
            f"environment/{name}",
            f"environment/{name} is not read: Harbor reads only "
            "environment/docker-compose.yaml (rename it to use it)",
        )
    yield from _check_image(task)
    mode = task.config.environment.network_mode
    if mode == "allowlist" and not task.config.environment.allowed_hosts:
        yield _warn(
            "environment", TASK_TOML, "network_mode = 'allowlist' with no allowed_hosts denies all"
        )
    if files.is_file("environment/Dockerfile"):
        yield from _check_dockerfile(files.read("environment/Dockerfile"), deep=deep)


def _check_image(task: Task) -> Iterator[Problem]:
    """A published image (``images push``): pinned by a well-formed digest, and the same one
    ``docker_image`` and ``[metadata.repo2env.reproducibility]`` name."""
    image = task.config.environment.docker_image or ""
    prov = task.provenance
    repro = prov.reproducibility if prov is not None else None
    digest = str(getattr(repro, "image_digest", "") or "") if repro is not None else ""
    if "@" in image and not re.fullmatch(r"sha256:[0-9a-f]{64}", image.rsplit("@", 1)[1]):
        yield _err("environment", TASK_TOML, f"docker_image {image!r}: not a sha256 digest")
    if repro is None or repro.mode != "registry":
        return
    if not image and not repro.image_ref:
        yield _err("environment", TASK_TOML, "mode 'registry' but no image is recorded")
    elif digest and "@" in image and image.rsplit("@", 1)[1] != digest:
        yield _err(
            "environment",
            TASK_TOML,
            f"docker_image is pinned to {image.rsplit('@', 1)[1][:19]}… but "
            f"reproducibility.image_digest is {digest[:19]}…",
        )


def _check_dockerfile(data: bytes, *, deep: bool) -> Iterator[Problem]:
    rel = "environment/Dockerfile"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        yield _err("environment", rel, "Dockerfile is not UTF-8")
        return
    try:
        parsed = dockerfile.parse(text)
    except dockerfile.DockerfileError as exc:
        yield _err("environment", rel, str(exc))
        return
    saw_from = False
    for ins in parsed.instructions:
        if deep and ins.keyword not in dockerfile.KNOWN:
            yield _err("environment", rel, f"line {ins.lineno}: unknown instruction {ins.keyword}")
        if ins.keyword == "FROM":
            saw_from = True
        elif deep and not saw_from and ins.keyword != "ARG":
            yield _err("environment", rel, f"line {ins.lineno}: {ins.keyword} before FROM")
        if ins.keyword in ("COPY", "ADD") and "from" not in ins.flags and not ins.heredocs:
            try:
                words = ins.json if ins.json is not None else dockerfile.split_raw(ins.args)
            except dockerfile.DockerfileError as exc:
                yield _err("environment", rel, f"line {ins.lineno}: {exc}")
                continue
            for src in words[:-1]:
                if re.match(r"^[a-z]+://", src):
                    continue
                # Symlinks inside the context are checked by _check_paths; here the text only.
                norm = os.path.normpath(src.strip("\"'"))
                if norm.startswith("/") or norm == ".." or norm.startswith("../"):
                    yield _err(
                        "paths",
                        rel,
                        f"line {ins.lineno}: {ins.keyword} source {src!r} is outside the context",
                    )
    if not saw_from:
        yield _err("environment", rel, "Dockerfile has no FROM line")


def _check_tests(files: TaskFiles) -> Iterator[Problem]:
    if not any(files.is_file(f"tests/{name}") for name in TEST_SCRIPTS):
        yield _err("tests", "tests/test.sh", "no test script (tests/test.sh)")


def _check_paths(files: TaskFiles) -> Iterator[Problem]:
    """The trust boundary's file rules: no symlink leaving the task, no symlinked contract
    entry, no special file (``repogym run``/``verify``/``serve`` refuse such tasks)."""
    for problem in check_files(files.path):
        rel = problem.split(" ", 1)[0].rstrip(":")
        yield _err("paths", rel, problem)
    for problem in check_toml(files.path):
        yield _err("limits", TASK_TOML, problem)


def _check_trust(task: Task) -> Iterator[Problem]:
    """Limits above this host's maxima (errors), host variables the verifier asks for and
    each phase's own network mode (warnings, so a reader sees them before running)."""
    try:
        limits = load_limits()
    except ValueError as exc:
        yield _warn("limits", TASK_TOML, str(exc))
        limits = HostLimits()
    for problem in check_limits(task, limits):
        yield _err("limits", TASK_TOML, problem)
    names = requested_env(task)
    if names:
        yield _warn(
            "host-env",
            TASK_TOML,
            "[verifier.env] asks for host variable(s) "
            + ", ".join(names)
            + "; they reach the verifier only when passed with --pass-env",
        )
    base = task.config.environment.network_mode
    for phase in ("agent", "verifier"):
        own = getattr(task.config, phase).network_mode
        if own and own != base:
            yield _warn(
                "network",
                TASK_TOML,
                f"[{phase}] network_mode = {own!r} differs from [environment] {base!r}",
            )


def _load_id_list(files: TaskFiles, rel: str) -> tuple[list[str] | None, list[Problem]]:
    if not files.is_file(rel):
        return None, []
    try:
        value = json.loads(files.read(rel).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [_err("tests", rel, f"not valid JSON: {exc}")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None, [_err("tests", rel, "must be a JSON array of test-id strings")]
    return value, []


def _check_provenance(task: Task, files: TaskFiles) -> Iterator[Problem]:
    prov = task.provenance
    f2p, problems = _load_id_list(files, "tests/f2p.json")
    yield from problems
    p2p, problems = _load_id_list(files, "tests/p2p.json")
    yield from problems
    if prov is None:
        if "repo2env" in task.config.metadata:
            yield _err("provenance", TASK_TOML, "[metadata.repo2env] must be a table")
        else:
            yield _warn("provenance", TASK_TOML, "no [metadata.repo2env] block (foreign task)")
        return
    yield from _malformed_provenance(prov)
    kinds = prov.reward_kinds
    if kinds is not None:
        if len(set(kinds)) != len(kinds):
            yield _err("provenance", TASK_TOML, "reward_kinds has duplicates")
        for kind in kinds:
            if kind not in KNOWN_REWARD_KINDS:
                yield _warn("provenance", TASK_TOML, f"unknown reward kind {kind!r}")
    pipeline = prov.pipeline
    sub = prov.pipeline_table
    if sub is not None:
        for key, ids, rel in (
            ("fail_to_pass", f2p, "tests/f2p.json"),
            ("pass_to_pass", p2p, "tests/p2p.json"),
        ):
            if key not in sub:
                continue
            meta = sub[key]
            count = len(meta) if isinstance(meta, list) else meta if isinstance(meta, int) else None
            if count is None:
                yield _err("provenance", TASK_TOML, f"{pipeline}.{key} must be a list or a count")
            elif ids is None and not files.is_file(rel) and count:
                yield _err("tests", rel, f"missing, but {pipeline}.{key} lists {count} tests")
            elif ids is not None and len(ids) != count:
                yield _err("tests", rel, f"has {len(ids)} ids but {pipeline}.{key} says {count}")
            elif ids is not None and isinstance(meta, list) and sorted(meta) != sorted(ids):
                yield _err("tests", rel, f"ids differ from {pipeline}.{key}")
    if "verification" not in prov.problems:
        verification = prov.read_verification()
        if verification.mode == "clean_room" and not verification.protected:
            yield _warn(
                "verification",
                TASK_TOML,
                "clean_room without protected paths: the agent may edit the tests it is graded by",
            )
    declared = prov.content_hash
    if declared is not None:
        actual = content_hash(task.path, task.raw, files.listing, files.read)
        if actual != declared:
            yield _err(
                "content_hash",
                TASK_TOML,
                f"content_hash is stale: recorded {declared[:19]}…, files hash to "
                f"{actual[:19]}… (run `repogym dataset rehash` if the edit was intended)",
            )


_MALFORMED_CHECK = {"reward_kinds": "provenance", "verification": "verification"}
"""The check that reports a malformed provenance value (others: ``provenance`` warnings)."""


def _malformed_provenance(prov: Provenance) -> Iterator[Problem]:
    """The values :meth:`Provenance.read` left out as malformed, in the order of the checks
    that report them (``content_hash`` under its own check)."""
    for key, message in prov.problems.items():
        if key == "content_hash":
            yield _err("content_hash", TASK_TOML, message)
        elif key in _MALFORMED_CHECK:
            yield _err(_MALFORMED_CHECK[key], TASK_TOML, message)
        else:
            yield _warn("provenance", TASK_TOML, f"malformed [metadata.repo2env] value: {message}")


def leaked_lines(instruction: str, diff_text: str, min_chars: int = LEAK_MIN_CHARS) -> list[str]:
    """Added lines of the gold patch that appear verbatim in the instruction."""
    leaks = []
    for line in gold_added_lines(diff_text):
        probe = line.strip()
        if (
            len(probe) >= min_chars
            and sum(c.isalnum() for c in probe) >= 8
            and probe in instruction
        ):
            leaks.append(probe)
    return leaks


def _check_leak(files: TaskFiles) -> Iterator[Problem]:
    if not files.is_file("solution/patch.diff") or not files.is_file(INSTRUCTION):
        return
    try:
        instruction = files.read(INSTRUCTION).decode("utf-8")
        diff_text = files.read("solution/patch.diff").decode("utf-8", errors="replace")
    except (OSError, UnicodeDecodeError):
        return  # reported by the instruction check
    leaks = leaked_lines(instruction, diff_text)
    if leaks:
        sample = leaks[0] if len(leaks[0]) <= 60 else leaks[0][:57] + "..."
        yield _err(
            "leak",
            INSTRUCTION,
            f"{len(leaks)} added line(s) of solution/patch.diff appear verbatim, e.g. {sample!r}",
        )


def _test_text(files: TaskFiles, limit: int = 4_000_000) -> str:
    """The hidden tests' text (what naming is specification, not a leak), bounded."""
    out, size = [], 0
    for rel in files.under("tests/", ""):
        if size >= limit or not files.is_file(rel):
            continue
        with contextlib.suppress(OSError):
            data = files.read(rel)[: limit - size]
            size += len(data)
            out.append(data.decode("utf-8", errors="replace"))
    return "\n".join(out)


def _check_solvable(task: Task, files: TaskFiles) -> Iterator[Problem]:
    """``leak-ngram``: the instruction paraphrases the fix; ``underspecified``: it misses a
    name the hidden tests need (as recorded by the generator) or is short for the change."""
    if not files.is_file(INSTRUCTION):
        return
    try:
        instruction = files.read(INSTRUCTION).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return
    diff_text = None
    if files.is_file("solution/patch.diff"):
        with contextlib.suppress(OSError):
            diff_text = files.read("solution/patch.diff").decode("utf-8", errors="replace")
    meta = (task.config.metadata or {}).get("repogym") or {}
    spec = meta.get("instruction") if isinstance(meta, dict) else None
    required = spec.get("required", []) if isinstance(spec, dict) else []
    if diff_text:
        runs = leaked_ngrams(statement(instruction), diff_text, exempt=_test_text(files))
        if runs:
            yield _warn(
                "leak-ngram",
                INSTRUCTION,
                f"{len(runs)} run(s) of {NGRAM} words repeat added lines of solution/patch.diff, "
                f"e.g. {runs[0][:60]!r}",
            )
    # The names come from the generator's record (repogym's runtime tasks); the length rule
    # applies wherever a gold patch shows the size of the change.
    names = [str(n) for n in required] if isinstance(required, list) else []
    for reason in underspecified(instruction, diff_text, names):
        yield _warn("underspecified", INSTRUCTION, "the instruction " + reason)


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def check_unified_diff(text: str) -> str | None:
    """None when ``text`` is a well-formed unified diff, else the first reason it is not."""
    lines = text.splitlines()
    i = 0
    files = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files += 1
            i += 2
            continue
        m = _HUNK_RE.match(line)
        if m:
            if not files:
                return f"line {i + 1}: hunk before any file header"
            old = int(m.group(2) or 1)
            new = int(m.group(4) or 1)
            i += 1
            while (old > 0 or new > 0) and i < len(lines):
                body = lines[i]
                tag = body[:1]
                if tag == " " or body == "":
                    old, new = old - 1, new - 1
                elif tag == "-":
                    old -= 1
                elif tag == "+":
                    new -= 1
                elif tag == "\\":
                    pass
                else:
                    return f"line {i + 1}: hunk shorter than its header says"
                i += 1
            if old != 0 or new != 0:
                return f"line {i}: hunk line counts do not match its header"
            continue
        i += 1
    if files == 0:
        return "no file headers ('--- a/…' / '+++ b/…')"
    return None


def _check_deep(files: TaskFiles) -> Iterator[Problem]:
    for rel in [f"tests/{name}" for name in TEST_SCRIPTS]:
        if files.is_file(rel) and not files.read(rel).startswith(b"#!"):
            yield _warn("tests", rel, "no shebang line (run with bash)")
    for rel in files.under("tests/", ".py"):
        try:
            compile(files.read(rel), rel, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            yield _err("tests", rel, f"does not compile: {exc}")
    for rel in files.under("tests/", ".json"):
        try:
            json.loads(files.read(rel).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            yield _err("tests", rel, f"not valid JSON: {exc}")
    if files.is_file("solution/patch.diff"):
        reason = check_unified_diff(files.read("solution/patch.diff").decode("utf-8", "replace"))
        if reason:
            yield _err("solution", "solution/patch.diff", f"not a unified diff: {reason}")
    if files.under("solution/", "") and not files.is_file("solution/solve.sh"):
        yield _err("solution", "solution/solve.sh", "solution/ has no solve.sh")


def default_jobs() -> int:
    """Validation is bound by file-system latency more than CPU: two workers per core."""
    return min(8, 2 * (os.cpu_count() or 1))


def _validate_one(args: tuple[str, bool]) -> TaskReport:
    return validate_task(Path(args[0]), deep=args[1])


def validate_many(
    paths: Iterable[Path], *, deep: bool = False, jobs: int = 1
) -> Iterator[TaskReport]:
    """Validate tasks, in parallel processes when ``jobs > 1``; reports come back in input order."""
    items = [(str(p), deep) for p in paths]
    if jobs <= 1 or len(items) < 256:
        for item in items:
            yield _validate_one(item)
        return
    chunk = max(16, len(items) // (jobs * 16))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_validate_one, items, chunksize=chunk)


def mark_duplicate_ids(reports: list[TaskReport]) -> None:
    """Give every task whose id another task of ``reports`` shares a ``unique_id`` error, by the
    rule ``push`` and ``dataset index`` apply (:func:`repogym.taskdir.discover.duplicate_ids`)."""
    shared = duplicate_ids(Path(r.path) for r in reports)
    for report in reports:
        paths = shared.get(Path(report.path).name)
        if paths:
            message = duplicate_id_message(Path(report.path).name, paths)
            message += " (push and dataset index refuse the dataset)"
            report.problems.append(Problem("error", "unique_id", TASK_TOML, message))
