"""``pr_diff``: text-only tasks from merged pull requests, graded by comparing diffs.

Each merged PR that passes the filters becomes a task whose instruction is the PR's title and
body (cleaned, checked for leaks) and whose environment is a thin image holding the repository
at the PR's base — no dependency install, nothing is run to grade. The agent edits the files in
``/workspace``; the verifier rebuilds the diff of those edits against the base snapshot and
scores it against the gold diff with :mod:`repogym.verify.diff_reward` (shipped as
``tests/diff_reward.py``), optionally with an LLM judge. The gold lives only in
``tests/oracle.patch`` and ``solution/patch.diff``.

Pull requests come from merge commits and squash subjects of a local clone, or from the GitHub /
GitLab API (with the text of the issues a PR fixes as the instruction, as for ``pr_runtime``).
Filters (each is a drop reason in the yield table): ``draft``, ``revert``, ``empty change``,
``test-only``, ``binary-only``, ``docs-only``, ``too many files``, ``too large``, ``tiny diff``,
``duplicate PR number``; later, per candidate: ``instruction too vague``, ``instruction leaks
the fix``, ``no scorable text change`` and the verify gate (oracle 1.0 every run, nop 0.0).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from repogym import __version__
from repogym.harbor import save_task_config
from repogym.harbor.config import (
    AgentConfig,
    EnvironmentConfig,
    SolutionConfig,
    VerifierConfig,
    new_task_config,
)
from repogym.harbor.verification import ARTEFACTS
from repogym.pipelines._emit import (
    category,
    difficulty,
    provenance,
    template,
    verify_module,
    write_file,
)
from repogym.pipelines._harness import TaskHarness
from repogym.pipelines._instruction import build_instruction
from repogym.pipelines._prs import merged_prs, pr_reference, pr_text
from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sources import FileChange, PullRequest, Source
from repogym.sources.patches import encode_patch, is_test_path, split_patch
from repogym.spec import PrDiffOptions
from repogym.verify import diff_reward

WORKDIR = "/workspace"
BASE_DIR = "/opt/repogym/base"
JUDGE_ENV = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")

_DRAFT = re.compile(r"^\s*(?:\[(?:draft|wip)\]|\((?:draft|wip)\)|(?:draft|wip)\s*:)", re.I)
_REVERT_TITLE = re.compile(r"^\s*(?:\[revert\]|revert\b)", re.I)
_REVERT_BODY = re.compile(r"^This reverts commit [0-9a-f]{7,40}", re.M)
DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".rdoc", ".org")
DOC_DIRS = frozenset({"doc", "docs", "documentation", "man", "website"})
DOC_NAMES = re.compile(
    r"^(?:readme|changelog|changes|history|news|authors|contributors|license|licence|copying"
    r"|notice|contributing|code_of_conduct|security|support)(?:\.[\w.]+)?$",
    re.I,
)
_LANGUAGES = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".rb": "ruby",
    ".php": "php",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".swift": "swift",
    ".scala": "scala",
    ".sh": "shell",
}


def is_doc_path(path: str) -> bool:
    """Documentation: files under doc folders, prose extensions, README/CHANGELOG/LICENSE…"""
    parts = path.strip("/").split("/")
    if any(p.lower() in DOC_DIRS for p in parts[:-1]):
        return True
    name = parts[-1]
    return name.lower().endswith(DOC_EXTENSIONS) or bool(DOC_NAMES.match(name))


def is_draft(pr: PullRequest) -> bool:
    """Marked draft by the source (GitHub/GitLab APIs) or by a ``Draft:``/``WIP`` title."""
    return bool(getattr(pr, "draft", False)) or bool(_DRAFT.match(pr.title))


def is_revert(pr: PullRequest) -> bool:
    return bool(_REVERT_TITLE.match(pr.title) or _REVERT_BODY.search(pr.body or ""))


def _changed(files: list[FileChange]) -> int:
    return sum(f.additions + f.deletions for f in files)


def filter_reason(pr: PullRequest, options: PrDiffOptions) -> str | None:
    """The drop reason of a PR from its metadata and file list alone, or None to keep it."""
    if is_draft(pr) and not options.include_drafts:
        return "draft"
    if is_revert(pr) and not options.include_reverts:
        return "revert"
    files = list(pr.files)
    if not files:
        return "empty change"
    sources = [f for f in files if not is_test_path(f.path)]
    if not sources:
        return "test-only"
    text = [f for f in sources if not f.binary]
    if not text:
        return "binary-only"
    if all(is_doc_path(f.path) for f in text) and not options.include_docs_only:
        return "docs-only"
    if len(sources) > options.max_files:
        return "too many files"
    lines = _changed(text)
    if lines > options.max_patch_lines:
        return "too large"
    if lines < options.min_changed_lines:
        return "tiny diff"
    return None


def candidates(
    source: Source, options: PrDiffOptions, slug: str, rev: str
) -> Iterator[Candidate | tuple[str, str]]:
    """Merged PRs of ``source`` (newest first) as candidates, or ``(key, drop reason)``."""
    for key, pr, unusable in merged_prs(source, rev):
        if unusable:
            yield key, unusable
            continue
        reason = filter_reason(pr, options)
        if reason is not None:
            yield key, reason
            continue
        patch = source.diff(pr.base_sha, pr.merge_sha)
        source_patch, test_patch = split_patch(patch)
        if not source_patch.strip():
            yield key, "test-only"
            continue
        title, body = pr_text(source, pr)  # after the cheap checks
        yield Candidate(
            key=key,
            task_id=f"{slug}-{pr.number}",
            kind="pr",
            base=pr.base_sha,
            head=pr.merge_sha,
            title=title,
            body=body,
            reference=pr_reference(pr),
            patch=patch,
            source_patch=source_patch,
            test_patch=test_patch,
            number=pr.number,
        )


# ------------------------------------------------------------------------------ task content


def verifier_module() -> ModuleType:
    """The standalone verifier template, imported (the pipeline builds the gold with it)."""
    name = "repogym_pr_diff_verifier"
    if name in sys.modules:
        return sys.modules[name]
    with resources.as_file(
        resources.files("repogym.pipelines").joinpath("_templates", "pr_diff_verifier.py")
    ) as path:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


_FOOTER_START = "\nThe repository is checked out at"
FOOTER = (
    f"The repository is checked out at `{WORKDIR}`. Make the change described above by\n"
    "editing the files there. Your answer is the set of edits you leave in the working\n"
    "directory, compared with the original checkout (changes to test files are not\n"
    "counted). Nothing is run to grade it: the edits are compared with the reference\n"
    "change, so keep them focused on what is asked. The original checkout is also kept at\n"
    f"`{BASE_DIR}`; leave it unchanged.\n"
)


def with_footer(instruction: str) -> str:
    """An instruction (e.g. an LLM rewrite ending in the runtime footer) with pr_diff's footer."""
    statement = instruction.split(_FOOTER_START, 1)[0].rstrip()
    return statement + "\n\n" + FOOTER


def dockerfile(base_image: str) -> str:
    return f"FROM {base_image}\nWORKDIR {WORKDIR}\nCOPY repo/ {WORKDIR}/\nCOPY repo/ {BASE_DIR}/\n"


def _language(paths: list[str]) -> str:
    counts: dict[str, int] = {}
    for p in paths:
        lang = _LANGUAGES.get(Path(p).suffix.lower())
        if lang:
            counts[lang] = counts.get(lang, 0) + 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else "unknown"


def write_task(
    dest: Path,
    cand: Candidate,
    *,
    instruction: str,
    context: Path,
    gold_diff: str,
    manifest: dict[str, str],
    files: list[str],
    options: PrDiffOptions,
    pipeline: str,
    pipeline_version: str,
    repo: str,
    source_access: str = "local",
) -> None:
    """Write a whole pr_diff task folder at ``dest`` (a staging folder; the caller publishes)."""
    dest.mkdir(parents=True)
    write_file(dest / "instruction.md", instruction)
    shutil.copytree(context, dest / "environment", symlinks=True)

    tests = dest / "tests"
    write_file(tests / "test.sh", template("pr_diff_test.sh"), 0o755)
    write_file(tests / "verifier.py", template("pr_diff_verifier.py"))
    write_file(tests / "infra.py", verify_module("infra.py"))
    write_file(tests / "diff_reward.py", verify_module("diff_reward.py"))
    # The de-facto pr_diff names (what other tools' checkers look for): the gold as
    # tests/oracle.patch, the instruction the judge reads as tests/instruction.md.
    write_file(tests / "oracle.patch", gold_diff)
    write_file(tests / "instruction.md", instruction)
    write_file(tests / "base_manifest.json", json.dumps(manifest, indent=0, sort_keys=True) + "\n")
    scorer_config = {"workdir": WORKDIR, "base_dir": BASE_DIR}
    write_file(tests / "config.json", json.dumps(scorer_config, indent=2) + "\n")

    solution = dest / "solution"
    write_file(solution / "patch.diff", encode_patch(cand.source_patch))
    write_file(solution / "solve.sh", template("solve.sh"), 0o755)
    write_file(solution / "apply_patch.py", template("apply_patch.py"))

    owner = repo.split("/")[0] if "/" in repo else "local"
    changed = sum(
        1 for ln in gold_diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
    )
    sub: dict[str, Any] = {
        "base_commit": cand.base,
        "head_commit": cand.head,
        "files": files,
        "changed_lines": changed,
        "scorer": "tests/diff_reward.py",
        "weights": dict(diff_reward.DEFAULT_WEIGHTS),
        "llm_judge": "optional: REPOGYM_JUDGE_URL, REPOGYM_JUDGE_MODEL, REPOGYM_JUDGE_API_KEY",
        "answer": f"edits in {WORKDIR}, diffed against the base snapshot",
    }
    if cand.number is not None:
        sub["pr_number"] = cand.number
    language = _language(files)
    config = new_task_config(
        name=f"{owner}/{cand.task_id}",
        description=(cand.title.strip() or cand.task_id)[:200],
        keywords=[pipeline, language, "diff"],
        metadata={
            "difficulty": difficulty(gold_diff),
            "category": category(cand.title, cand.body, gold_diff),
            "language": language,
            # Only the agent's edits under /workspace reach the scorer; the base copy and
            # everything else come fresh from the image.
            "repo2env": provenance(
                pipeline=pipeline,
                pipeline_version=pipeline_version,
                repo=repo,
                candidate=cand,
                source_access=source_access,
                reward_kinds=["diff_similarity"],
                subtable=sub,
                protected=list(ARTEFACTS),
            ),
            "repogym": {"generator": f"repogym {__version__}"},
        },
        agent=AgentConfig(timeout_sec=options.agent_timeout),
        verifier=VerifierConfig(
            timeout_sec=options.verifier_timeout,
            network_mode=options.verifier_network,
            # Harbor's host templates: the judge's settings come from the host at run time and
            # are never written into the task. Only a verifier with a network can reach a
            # judge, so only such a task asks for them.
            env=(
                {name: f"${{{name}:-}}" for name in JUDGE_ENV}
                if options.verifier_network == "public"
                else {}
            ),
        ),
        environment=EnvironmentConfig(
            build_timeout_sec=600.0,
            cpus=1,
            memory_mb=2048,
            storage_mb=4096,
            network_mode=options.network,
            workdir=WORKDIR,
        ),
        solution=SolutionConfig(env={"REPOGYM_WORKDIR": WORKDIR}),
    )
    save_task_config(dest, config)


# ------------------------------------------------------------------------------ harness


class PrDiffHarness(TaskHarness):
    """Builds, verifies (oracle ×(1 + verify_reruns), nop) and publishes pr_diff tasks.

    Reuses the shared evaluate() frame (temp folder, sandbox errors, timing) and verify gate;
    only the task content differs.
    """

    options: PrDiffOptions

    def _evaluate(self, cand: Candidate, work: Path, outcome: Outcome) -> None:
        opts = self.options
        context = work / "environment"
        context.mkdir()
        base_repo, head_repo = context / "repo", work / "head"
        self.source.export_snapshot(cand.base, base_repo)
        self.source.export_snapshot(cand.head, head_repo)
        vmod = verifier_module()
        manifest = vmod.manifest_of(str(base_repo))
        changes, _skipped, _ = vmod.collect_changes(str(base_repo), str(head_repo), manifest)
        shutil.rmtree(head_repo, ignore_errors=True)
        gold_diff = diff_reward.tree_diff(changes)
        if not gold_diff:
            return self._drop(outcome, "no scorable text change")
        instruction, why = build_instruction(
            cand.title,
            cand.body,
            workdir=WORKDIR,
            gold_patch=cand.source_patch + "\n" + gold_diff,
            min_words=opts.min_instruction_words,
            footer=FOOTER,
        )
        if instruction is None:
            return self._drop(outcome, why or "no instruction")
        instruction, rewrite = self._rewrite(
            cand,
            instruction,
            gold_patch=cand.source_patch + "\n" + gold_diff,
            workdir=WORKDIR,
            finish=with_footer,
        )
        (context / "Dockerfile").write_text(dockerfile(opts.base_image))

        staging = self.out_dir / "tasks" / f".{cand.task_id}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        write_task(
            staging,
            cand,
            instruction=instruction,
            context=context,
            gold_diff=gold_diff,
            manifest=manifest,
            files=[c[0] for c in changes],
            options=opts,
            pipeline=self.pipeline,
            pipeline_version=self.pipeline_version,
            repo=self.repo_label,
            source_access=self.source_access,
        )
        self._gate_and_publish(staging, cand, outcome, rewrite)


class PrDiff:
    """Text-only tasks from merged pull requests of local clones, GitHub or GitLab."""

    name = "pr_diff"
    version = "1"
    options_model = PrDiffOptions
    sources = frozenset({"local", "github", "gitlab"})
    sources_note = ""
    llm_rewrite = True
    """Instructions may be rewritten by ``generate --llm`` (leak-checked against the gold)."""
    dedupe_changes = False

    def candidates(
        self, source: Source, options: PrDiffOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        return candidates(source, options, slug, rev)

    def harness(self, ctx: HarnessContext) -> PrDiffHarness:
        return PrDiffHarness(ctx)


PIPELINE = PrDiff()
