"""Writing a runtime task: its verifier folder (staged before any test runs) and the task folder.

The verifier folder is staged first because generation runs the tests through the very verifier
the task ships (``tests/test.sh --results``): before/after results, tamper baselines and the
tests' environment are then exactly what grading will use.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import __version__, shipped
from repogym.bootstrap import Recipe
from repogym.pipelines.base import Candidate
from repogym.spec import RuntimeOptions
from repogym.taskdir import save_task_config
from repogym.taskdir.config import (
    AgentConfig,
    EnvironmentConfig,
    SolutionConfig,
    VerifierConfig,
    new_task_config,
)
from repogym.taskdir.verification import RUNTIME_PROTECTED
from repogym.verify import canaries
from repogym.verify.file_kinds import is_release_notes

SPEC_VERSION = "0.2.0"
RECORD_SCRIPT = "repogym_record.py"
NODE_RECORD_SCRIPT = "repogym_record.mjs"
RECORD_DIR = "/usr/lib/repogym"
JS_RUNNERS = ("jest", "vitest", "mocha", "node")
"""Runners whose tasks also get the Node verifier (``verifier.mjs``) and recorder: an image
without Python is then still recorded and graded (``test.sh`` picks the verifier)."""
BUILD_SEED_ENV = "REPOGYM_BUILD_SEED"
"""A secret that makes integrity keys reproducible (see :func:`integrity_key`)."""


def integrity_key(label: str) -> str:
    """The secret the verifier's record step and the verifier share (``tests/integrity.key``).
    Random; with ``$REPOGYM_BUILD_SEED`` set, HMAC-SHA256(seed, ``label``) instead, so the same
    generation (same seed, same candidates) gives byte-identical tasks — on this machine or on
    a cluster. The seed must stay secret: anyone holding it can compute a task's key."""
    import hashlib
    import hmac
    import os
    import secrets

    seed = os.environ.get(BUILD_SEED_ENV)
    if not seed:
        return secrets.token_hex(16)
    return hmac.new(seed.encode(), label.encode(), hashlib.sha256).hexdigest()[:32]


def built_at() -> str:
    """When a task was built: now, or ``$SOURCE_DATE_EPOCH`` (reproducible builds) when set."""
    import os

    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = (
        _dt.datetime.fromtimestamp(int(epoch), _dt.UTC)
        if epoch.isdigit()
        else _dt.datetime.now(_dt.UTC)
    )
    return when.replace(microsecond=0).isoformat()


def write_infra_modules(tests: Path) -> None:
    """Ship ``infra.py`` and the test-file rule it imports (``testfiles.py``) into ``tests``."""
    for name in ("infra.py", "testfiles.py"):
        write_file(tests / name, shipped.read(name))


def write_file(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    """Write one file of a task (parents created) with ``mode`` (tasks carry fixed modes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    path.chmod(mode)


# ------------------------------------------------------------------------------ environment


def record_step(workdir: str, key: str, runner: str) -> str:
    """The Dockerfile lines that record, at build time, what the verifier checks (see
    ``shipped/scripts/repogym_record.py``); they come last so they see the finished image."""
    head = (
        "\n# repogym: record the interpreter, standard library and test-runner files the\n"
        "# verifier checks before it trusts them (the key is known only to the hidden tests).\n"
        f"COPY {RECORD_SCRIPT} {RECORD_DIR}/record.py\n"
    )
    if runner in JS_RUNNERS:
        # Python records where the image has it; the Node recorder where it does not.
        args = f"--record {key} {workdir} {runner}"
        return head + (
            f"COPY {NODE_RECORD_SCRIPT} {RECORD_DIR}/record.mjs\n"
            f"RUN if command -v python3 >/dev/null 2>&1; then python3 {RECORD_DIR}/record.py"
            f" {args}; else node {RECORD_DIR}/record.mjs {args}; fi\n"
        )
    return head + f"RUN python3 {RECORD_DIR}/record.py --record {key} {workdir} {runner}\n"


def write_environment(
    context: Path, recipe: Recipe, key: str, dockerfile: str | None = None
) -> None:
    """The task's Dockerfile (the recipe's, or ``dockerfile``, plus the record step) and the
    record script."""
    text = (dockerfile or recipe.dockerfile).rstrip("\n") + "\n"
    write_file(context / "Dockerfile", text + record_step(recipe.workdir, key, recipe.runner))
    write_file(context / RECORD_SCRIPT, shipped.read(RECORD_SCRIPT))
    if recipe.runner in JS_RUNNERS:
        write_file(context / NODE_RECORD_SCRIPT, shipped.read(NODE_RECORD_SCRIPT))


# ------------------------------------------------------------------------------ verifier


@dataclass
class VerifierInput:
    """What the verifier folder holds before the tests have been run."""

    recipe: Recipe
    command: str
    restore: dict[str, bytes]
    """Hidden copies (relative path → bytes) written over the working tree before each run."""
    delete: list[str]
    infra: dict[str, str]
    """Digests of the other test-infrastructure files (a change to one is a tamper)."""
    sources: dict[str, str]
    """Digests of the base's source files (only changed ones are scanned for tampering)."""
    integrity_key: str
    reward_mode: str
    splice: list[str] = field(default_factory=list)
    """Restored paths whose hidden copy is only their inline test modules: the verifier splices
    them into the file the agent left (:func:`repogym.shipped.rust_tests.splice`)."""


def stage_verifier(tests: Path, inp: VerifierInput) -> None:
    """Write the verifier folder ``tests`` (without f2p.json / p2p.json)."""
    write_file(tests / "test.sh", shipped.read("test.sh"), 0o755)
    write_file(tests / "verifier.py", shipped.read("verifier.py"))
    if inp.recipe.runner in JS_RUNNERS:
        write_file(tests / "verifier.mjs", shipped.read("verifier.mjs"))
    for rel in shipped.GRADED:
        write_file(tests / rel, shipped.read(rel))
    for rel, data in inp.restore.items():
        write_file(tests / "files" / rel, data)
    write_file(tests / "infra.json", json.dumps(inp.infra, indent=0, sort_keys=True) + "\n")
    write_file(tests / "sources.json", json.dumps(inp.sources, indent=0, sort_keys=True) + "\n")
    write_file(tests / "integrity.key", inp.integrity_key + "\n")
    config = {
        "workdir": inp.recipe.workdir,
        "runner": inp.recipe.runner,
        "command": inp.command,
        "env": dict(sorted(inp.recipe.env.items())),  # the same bytes whatever built the recipe
        "restore": sorted(inp.restore),
        "delete": sorted(inp.delete),
        **({"splice": sorted(inp.splice)} if inp.splice else {}),
        "reward_mode": inp.reward_mode,
    }
    write_file(tests / "config.json", json.dumps(config, indent=2) + "\n")


def audit_keys(results: list[dict[str, Any]]) -> list[str]:
    """What the judge's audit reported in reference runs (``audit_keys`` of each result):
    the verifier allows these, and treats any other finding as a tamper."""
    return sorted({k for r in results for k in r.get("audit_keys") or [] if isinstance(k, str)})


def update_config(tests: Path, **fields: Any) -> None:
    """Merge ``fields`` into the staged ``config.json`` (same file, rewritten in place)."""
    path = tests / "config.json"
    config = json.loads(path.read_text())
    config.update(fields)
    with open(path, "r+", encoding="utf-8") as fh:
        fh.truncate(0)
        fh.write(json.dumps(config, indent=2) + "\n")


# ------------------------------------------------------------------------------ task


@dataclass
class EmitInput:
    candidate: Candidate
    instruction: str
    recipe: Recipe
    context: Path
    """The environment folder (Dockerfile + repo/ snapshot at base) to copy."""
    tests: Path
    """The staged verifier folder."""
    f2p: list[str]
    p2p: list[str]
    command: str
    test_files: list[str]
    """Test files the pipeline's test patch adds or changes."""
    pipeline: str
    pipeline_version: str
    repo: str
    options: RuntimeOptions
    flaky: list[str] = field(default_factory=list)
    scope: str = "targeted"
    """``suite`` (the whole suite is graded) or ``targeted`` (the selected test files)."""
    selected: list[str] = field(default_factory=list)
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    collected: int | None = None
    instruction_record: dict[str, Any] | None = None
    """How the instruction was made (mode, spec_coverage, required names, …)."""
    splice: list[str] = field(default_factory=list)
    """Test files that are source files with inline tests (:attr:`VerifierInput.splice`)."""


def summary(title: str, f2p: list[str], test_files: list[str], required: int) -> str:
    """One paragraph for curators and the explorer: the request, and what proves it."""
    from repogym.pipelines._instructions.text import clean_title

    head = clean_title(title) or "A change"
    files = ", ".join(sorted(test_files)[:3]) + (" …" if len(test_files) > 3 else "")
    text = f"{head}. Proven by {len(f2p)} fail-to-pass test(s)"
    text += f" in {files}" if files else ""
    if required:
        text += f"; the tests need {required} name(s) that do not exist yet"
    return text + "."


def stage_canaries(
    tests: Path, base: Path, f2p: list[str], p2p: list[str], runner: str, seed: str
) -> None:
    """Write the candidate canaries (copies of the tests that must fail; the gate confirms
    them) into the verifier folder ``tests``: from the hidden test files, and when those give
    fewer than a run plants (data-driven fail-to-pass tests, say), from the base's own test
    files of the pass-to-pass tests too — each such file then gets a hidden copy (the same
    bytes as the base) for the judge to plant them in."""
    hidden = tests / "files"
    # A spliced file's hidden copy holds only its test items; the verifier plants a canary
    # by the copy's line numbers shifted to where the items landed in the agent's file.
    files = {
        p.relative_to(hidden).as_posix(): p.read_bytes()
        for p in sorted(hidden.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }
    pool = canaries.build(files, f2p, p2p, runner, seed=seed)
    if len(pool.pool) < canaries.PER_RUN:
        extra = {
            rel: (base / rel).read_bytes()
            for rel in canaries.test_files_of(p2p, runner)
            if rel not in files and (base / rel).is_file() and not (base / rel).is_symlink()
        }
        more = canaries.build({**files, **extra}, f2p, p2p, runner, seed=seed)
        used = sorted({c.file for c in more.pool} & set(extra))
        if used and len(more.pool) > len(pool.pool):
            pool = more
            for rel in used:
                write_file(hidden / rel, extra[rel])
            config = json.loads((tests / "config.json").read_text())
            update_config(tests, restore=sorted(set(config.get("restore", [])) | set(used)))
    canaries.write(tests, pool)


INLINE_IDS_BYTES = 256 * 1024
"""The most a test-id list may take in ``task.toml`` (whose readers stop at 1 MiB); a longer
one is written as its count, the ids staying in ``tests/f2p.json`` / ``tests/p2p.json``."""


def ids_or_count(ids: list[str]) -> list[str] | int:
    """``ids`` as ``task.toml`` carries them: the list, or its length when the list is longer
    than :data:`INLINE_IDS_BYTES` (a suite of tens of thousands of parameterised tests)."""
    return ids if len(json.dumps(ids)) <= INLINE_IDS_BYTES else len(ids)


def write_task(dest: Path, inp: EmitInput) -> None:
    """Write the whole task folder at ``dest`` (a staging folder; the caller publishes it)."""
    cand, recipe = inp.candidate, inp.recipe
    dest.mkdir(parents=True)
    write_file(dest / "instruction.md", inp.instruction)
    shutil.copytree(inp.context, dest / "environment", symlinks=True)
    tests = dest / "tests"
    shutil.copytree(inp.tests, tests, symlinks=True)
    write_file(tests / "f2p.json", json.dumps(inp.f2p, indent=1) + "\n")
    write_file(tests / "p2p.json", json.dumps(inp.p2p, indent=1) + "\n")
    stage_canaries(tests, inp.context / "repo", inp.f2p, inp.p2p, recipe.runner, cand.task_id)
    write_file(tests / "test.patch", cand.test_patch.encode("utf-8", "surrogateescape"))

    solution = dest / "solution"
    write_file(solution / "patch.diff", cand.source_patch.encode("utf-8", "surrogateescape"))
    write_file(solution / "solve.sh", shipped.read("solve.sh"), 0o755)
    write_file(solution / "apply_patch.py", shipped.read("apply_patch.py"))

    owner = inp.repo.split("/")[0] if "/" in inp.repo else "local"
    sub: dict[str, Any] = {
        "base_commit": cand.base,
        "head_commit": cand.head,
        "fail_to_pass": ids_or_count(inp.f2p),
        "pass_to_pass": ids_or_count(inp.p2p),
        "test_files": sorted(inp.test_files),
        "runner": recipe.runner,
        "test_command": inp.command,
        "p2p_scope": inp.scope,
        "reward_mode": inp.options.reward,
        "skipped_tests": inp.skipped,
    }
    if inp.scope == "targeted":
        sub["selected_test_files"] = sorted(inp.selected)
    if inp.skip_reasons:
        sub["skip_reasons"] = inp.skip_reasons
    if inp.collected is not None:
        sub["collected_tests"] = inp.collected
    if cand.number is not None:
        sub["pr_number"] = cand.number
    if inp.flaky:
        sub["flaky_excluded"] = inp.flaky
    # A file whose inline tests are spliced in is the agent's to fix: never protected.
    protected = list(RUNTIME_PROTECTED) + sorted(set(inp.test_files) - set(inp.splice))
    config = new_task_config(
        name=f"{owner}/{cand.task_id}",
        description=(cand.title.strip() or cand.task_id)[:200],
        keywords=[inp.pipeline, recipe.language, recipe.runner],
        metadata={
            "difficulty": difficulty(
                cand.source_patch, f2p=len({t.split("[", 1)[0] for t in inp.f2p})
            ),
            "category": category(cand.title, cand.body, cand.source_patch),
            "language": recipe.language,
            "repo2env": provenance(
                pipeline=inp.pipeline,
                pipeline_version=inp.pipeline_version,
                repo=inp.repo,
                candidate=cand,
                source_access="local",
                reward_kinds=["test_execution"],
                subtable=sub,
                protected=protected,
            ),
            "repogym": {
                "generator": f"repogym {__version__}",
                "recipe_hash": recipe.hash,
                "change_hash": change_hash(cand.source_patch, cand.test_patch),
                "summary": summary(
                    cand.title,
                    inp.f2p,
                    inp.test_files,
                    len((inp.instruction_record or {}).get("required", [])),
                ),
                **({"instruction": inp.instruction_record} if inp.instruction_record else {}),
            },
        },
        agent=AgentConfig(timeout_sec=inp.options.agent_timeout),
        verifier=VerifierConfig(
            timeout_sec=inp.options.test_timeout * 2, network_mode="no-network"
        ),
        environment=EnvironmentConfig(
            build_timeout_sec=1800.0,
            cpus=1,
            memory_mb=4096,
            storage_mb=4096,
            network_mode=inp.options.network,
            workdir=recipe.workdir,
        ),
        solution=SolutionConfig(env={"REPOGYM_WORKDIR": recipe.workdir}),
    )
    save_task_config(dest, config)


def provenance(
    *,
    pipeline: str,
    pipeline_version: str,
    repo: str,
    candidate: Candidate,
    source_access: str,
    reward_kinds: list[str],
    subtable: dict[str, Any],
    protected: list[str],
) -> dict[str, Any]:
    """The ``[metadata.repo2env]`` block of a new task (its per-pipeline ``subtable`` under
    the pipeline's name; verified in a clean room with ``protected`` paths)."""
    return {
        "spec_version": SPEC_VERSION,
        "pipeline": pipeline,
        "pipeline_version": pipeline_version,
        "repo": repo,
        "ref": candidate.base,
        "reference": candidate.reference,
        "source_access": source_access,
        "built_at": built_at(),
        "synthesis_llm": "none",
        "reward_kinds": reward_kinds,
        # when the change was made (SWE-bench's created_at), if the source said
        pipeline: {**subtable, "created_at": candidate.created_at}
        if candidate.created_at
        else subtable,
        "reproducibility": {"mode": "inline_dockerfile"},
        "verification": {"mode": "clean_room", "protected": protected},
    }


# ------------------------------------------------------------------------------ facts


def code_lines(source_patch: str) -> list[str]:
    """The changed (+/-) lines of a patch, without release notes and changelogs."""
    out: list[str] = []
    skip = False
    for line in source_patch.splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1] if " b/" in line else ""
            skip = is_release_notes(path)
        elif line.startswith(("+++ ", "--- ")):
            if line.startswith("+++ ") and line[4:] != "/dev/null":
                skip = skip or is_release_notes(line[4:].removeprefix("b/"))
        elif not skip and line[:1] in "+-":
            out.append(line)
    return out


def difficulty(source_patch: str, *, f2p: int = 1) -> str:
    """easy / medium / hard from the size of the change and how much the tests check:
    ``points = changed code lines + 10 × (source files − 1) + 2 × (F2P test functions − 1)``
    (release notes and changelogs not counted); easy ≤ 15 < medium ≤ 80 < hard."""
    lines = code_lines(source_patch)
    files = sum(
        1
        for line in source_patch.splitlines()
        if line.startswith("+++ ") or line.startswith("--- /dev/null")
    )
    files = max(1, files)
    points = len(lines) + 10 * (files - 1) + 2 * max(0, f2p - 1)
    return "easy" if points <= 15 else "medium" if points <= 80 else "hard"


_CONVENTIONAL = re.compile(r"^\s*(\w+)(?:\([^)]*\))?!?:\s")
_KINDS = {
    "fix": "bugfix",
    "bugfix": "bugfix",
    "hotfix": "bugfix",
    "bug": "bugfix",
    "feat": "feature",
    "feature": "feature",
    "add": "feature",
    "refactor": "refactor",
    "perf": "refactor",
    "style": "refactor",
    "chore": "refactor",
    "cleanup": "refactor",
    "docs": "docs",
    "doc": "docs",
}
_BUG_WORDS = re.compile(
    r"\b(fix(e[sd])?|bugs?|crash(es|ed)?|errors?|exceptions?|regressions?|wrong|incorrect"
    r"|broken|fails?|failing|issue|handle|properly|raise[sd]?)\b",
    re.I,
)
_FEATURE_WORDS = re.compile(
    r"\b(add(s|ed)?|support(s|ed)?|implement(s|ed)?|introduce[sd]?|new|allow(s|ed)?"
    r"|enable[sd]?|option|feature)\b",
    re.I,
)
_REFACTOR_WORDS = re.compile(
    r"\b(refactor\w*|clean ?up|rename[sd]?|simplif\w*|move[sd]?|restructur\w*|extract\w*"
    r"|deprecat\w*|tidy)\b",
    re.I,
)
_DOCS_WORDS = re.compile(r"\b(docs?|documentation|docstrings?|readme|typos?|comments?)\b", re.I)


def category(title: str, body: str, source_patch: str) -> str:
    """bugfix / feature / refactor / docs, from a conventional-commit prefix, the words of the
    title (then the body) and, when those say nothing, the shape of the change."""
    m = _CONVENTIONAL.match(title)
    if m and m.group(1).lower() in _KINDS:
        return _KINDS[m.group(1).lower()]
    for text in (title, body[:2000]):
        scores = {
            "bugfix": len(_BUG_WORDS.findall(text)),
            "feature": len(_FEATURE_WORDS.findall(text)),
            "refactor": len(_REFACTOR_WORDS.findall(text)),
            "docs": len(_DOCS_WORDS.findall(text)),
        }
        best = max(scores.values())
        if best:
            order = ("bugfix", "feature", "refactor", "docs")
            return next(k for k in order if scores[k] == best)
    lines = code_lines(source_patch)
    added = sum(1 for ln in lines if ln.startswith("+"))
    removed = len(lines) - added
    if added and not removed:
        return "feature"
    return "bugfix"


def change_hash(source_patch: str, test_patch: str) -> str:
    """Identity of a change for de-duplication: the same gold patch and tests give the same
    hash whatever commit or pull request they came from (blob ids and ``diff --git`` headers
    are left out; release notes too)."""
    h = hashlib.sha256()
    for patch in (source_patch, test_patch):
        skip = False
        for line in patch.splitlines():
            if line.startswith("diff --git "):
                path = line.split(" b/", 1)[-1] if " b/" in line else ""
                skip = is_release_notes(path)
                continue
            if skip or line.startswith(("index ", "similarity index", "dissimilarity")):
                continue
            h.update(line.encode("utf-8", "surrogateescape") + b"\n")
        h.update(b"\0")
    return h.hexdigest()
