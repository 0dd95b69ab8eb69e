"""The library's entry points that span synthesis and distribution: generating tasks behind the
verify gate.

Pipelines (synthesis) and the trial engine (distribution) never import each other; they meet
at the task directory. Generation needs the gate, so it is wired here, above both: the
pipelines get :class:`repogym.run.gate.TaskGate` as their gate factory (workers of a Ray run
build their own from it). ``repogym generate`` and ``repogym.generate`` call these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repogym.executors import Executor
    from repogym.pipelines.base import Outcome, Progress, YieldStats
    from repogym.pipelines.campaign import CampaignInput, CampaignReport, Entry, RepoReport
    from repogym.pipelines.generation import GenerateResult
    from repogym.spec import GenerationInput


def generate(
    inp: GenerationInput,
    *,
    on_outcome: Callable[[Outcome, YieldStats], None] | None = None,
    on_drop: Callable[[str, str, YieldStats], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    executor: Executor | None = None,
) -> GenerateResult:
    """:func:`repogym.pipelines.generation.generate` behind the verify gate: run
    ``inp.pipeline`` over ``inp.repo`` into ``inp.out``."""
    from repogym.pipelines.generation import generate as run
    from repogym.run.gate import TaskGate

    return run(
        inp,
        gate=TaskGate,
        on_outcome=on_outcome,
        on_drop=on_drop,
        on_progress=on_progress,
        executor=executor,
    )


def run_campaign(
    inp: CampaignInput,
    entries: list[Entry],
    *,
    executor: Any = None,
    on_repo: Callable[[RepoReport], None] | None = None,
) -> CampaignReport:
    """:func:`repogym.pipelines.campaign.run_campaign` behind the verify gate: every listed
    repository's dataset."""
    from repogym.pipelines.campaign import run_campaign as run
    from repogym.run.gate import TaskGate

    return run(inp, entries, gate=TaskGate, executor=executor, on_repo=on_repo)
