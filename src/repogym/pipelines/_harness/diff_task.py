"""What the diff-scored, text-only tasks share (``pr_diff``, ``cve_patches``): the thin
environment, the task folder (verifier comparing the agent's edits with the gold diff) and the
harness that stages, verifies and publishes one.

A candidate's instruction comes from its ``title`` and ``body`` (cleaned, checked for leaks);
the gold diff is rebuilt from the base and head snapshots the way the verifier will rebuild the
agent's answer, so the oracle scores 1.0 by construction.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from repogym import __version__, shipped
from repogym.pipelines._harness.emit import (
    category,
    difficulty,
    provenance,
    write_file,
    write_infra_modules,
)
from repogym.pipelines._harness.frame import TaskHarness
from repogym.pipelines._instructions.text import build_instruction
from repogym.pipelines.base import Candidate, Outcome
from repogym.shipped import diff_reward
from repogym.sources.patches import encode_patch
from repogym.spec import PrDiffOptions
from repogym.taskdir import save_task_config
from repogym.taskdir.config import (
    AgentConfig,
    EnvironmentConfig,
    SolutionConfig,
    VerifierConfig,
    new_task_config,
)
from repogym.taskdir.verification import ARTEFACTS

WORKDIR = "/workspace"
BASE_DIR = "/opt/repogym/base"
JUDGE_ENV = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")
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


# ------------------------------------------------------------------------------ task content


def verifier_module() -> ModuleType:
    """The standalone verifier template, imported (the pipeline builds the gold with it)."""
    name = "repogym_pr_diff_verifier"
    if name in sys.modules:
        return sys.modules[name]
    with resources.as_file(shipped.locate("pr_diff_verifier.py")) as path:
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


def _subtable(cand: Candidate, gold_diff: str, files: list[str]) -> dict[str, Any]:
    """The task's ``[metadata.repo2env.pr_diff]``: commits, files, size, scorer and weights."""
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
    return sub


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
    write_file(tests / "test.sh", shipped.read("pr_diff_test.sh"), 0o755)
    write_file(tests / "verifier.py", shipped.read("pr_diff_verifier.py"))
    write_infra_modules(tests)
    write_file(tests / "diff_reward.py", shipped.read("diff_reward.py"))
    # The de-facto pr_diff names (what other tools' checkers look for): the gold as
    # tests/oracle.patch, the instruction the judge reads as tests/instruction.md.
    write_file(tests / "oracle.patch", gold_diff)
    write_file(tests / "instruction.md", instruction)
    write_file(tests / "base_manifest.json", json.dumps(manifest, indent=0, sort_keys=True) + "\n")
    scorer_config = {"workdir": WORKDIR, "base_dir": BASE_DIR}
    write_file(tests / "config.json", json.dumps(scorer_config, indent=2) + "\n")

    solution = dest / "solution"
    write_file(solution / "patch.diff", encode_patch(cand.source_patch))
    write_file(solution / "solve.sh", shipped.read("solve.sh"), 0o755)
    write_file(solution / "apply_patch.py", shipped.read("apply_patch.py"))

    owner = repo.split("/")[0] if "/" in repo else "local"
    sub = _subtable(cand, gold_diff, files)
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


class DiffTaskHarness(TaskHarness):
    """Builds, verifies (oracle ×(1 + verify_reruns), nop) and publishes diff-scored tasks
    (``pr_diff``; ``cve_patches``' fixes without a test change).

    Reuses the shared evaluate() frame (temp folder, sandbox errors, timing) and verify gate;
    only the task content differs. ``options`` is a :class:`~repogym.spec.PrDiffOptions`
    (a pipeline with other options builds one for it).
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

        staging = self._staging(cand)
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
