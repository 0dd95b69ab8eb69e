"""``echo``: a pipeline without a sandbox for campaign tests. Every commit of the repository
is a candidate that becomes a small valid task at once (a commit whose subject says ``skip`` is
a cheap drop). Importable by Ray workers, which rebuild its harness like any pipeline's.

``INTERRUPT_AT``: candidate keys whose evaluation raises KeyboardInterrupt once (Ctrl-C in the
middle of a repository; in-process, local executor only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from repogym.pipelines.base import Candidate, HarnessContext, Outcome
from repogym.sources import Source
from repogym.taskdir import publish_task_dir, set_content_hash
from tests.conftest import write_task

INTERRUPT_AT: set[str] = set()
TOML = """\
schema_version = "1.4"

[task]
name = "acme/{name}"

[metadata.repo2env]
pipeline = "echo"
ref = "{head}"

[environment]
network_mode = "no-network"
"""


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_candidates: int | None = None
    words: str = "Describe the change"


class EchoHarness:
    def __init__(self, ctx: HarnessContext) -> None:
        self.ctx = ctx
        self.rewrites: dict[str, dict[str, Any]] = {}

    def evaluate(self, cand: Candidate) -> Outcome:
        if cand.key in INTERRUPT_AT:
            INTERRUPT_AT.discard(cand.key)
            raise KeyboardInterrupt
        tasks = self.ctx.out_dir / "tasks"
        staging = write_task(
            tasks,
            f".{cand.task_id}.staging",
            toml=TOML.format(name=cand.task_id, head=cand.head),
            instruction=f"{self.ctx.options.words}: {cand.title}\n",
            files={"solution/head.txt": cand.head + "\n"},
        )
        set_content_hash(staging)
        publish_task_dir(staging, tasks / cand.task_id)
        return Outcome(cand, kept=True, task_dir=tasks / cand.task_id, seconds=0.01)


class EchoPipeline:
    name = "echo"
    version = "1"
    options_model = EchoOptions
    sources = frozenset({"local"})
    sources_note = ""
    llm_rewrite = False
    dedupe_changes = False

    def candidates(
        self, source: Source, options: EchoOptions, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        for commit in source.iter_commits(rev, first_parent=True):
            if "skip" in commit.subject:
                yield commit.sha, "skipped by the test"
                continue
            yield Candidate(
                key=commit.sha,
                task_id=f"{slug}-{commit.sha[:12]}",
                kind="commit",
                base=commit.parents[0] if commit.parents else commit.sha,
                head=commit.sha,
                title=commit.subject,
                body="",
                reference=commit.sha,
            )

    def harness(self, ctx: HarnessContext) -> EchoHarness:
        return EchoHarness(ctx)
