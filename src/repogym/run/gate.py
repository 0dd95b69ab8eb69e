"""The quality gate (``repogym verify``): prove each task before anyone trains on it.

Per task: the oracle must score 1.0 (and ``resolved`` where the verifier reports it), the ``nop``
agent must score 0.0, and K more oracle runs must agree with the first. Optionally the tests are
tested too: wrong solutions derived from the gold patch (mutants, :mod:`repogym.verify.mutants`)
must lose reward; ``mutant_kill_rate`` is the share that do. And generic wrong solutions (red-team
candidates, :mod:`repogym.verify.redteam`: hollow bodies, constants, the input unchanged, an
object equal to everything) must not earn the oracle's reward: the highest reward any of them
earns is the ``adversarial_floor``, the floor minus nop the ``gameability_gap`` (above 0 on a
graded task that pays partial credit for them); a task where one earns the full reward is
``gameable``. Canaries (:mod:`repogym.verify.canaries`: copies of the task's tests that must
fail, planted by the judge in every run) are confirmed here: the first oracle run and the nop
run plant every candidate, and only those that fail with the gold patch and do not pass without
it are kept (``canaries`` in the
evaluation; 0 when the task's tests gave none). The verdict goes into
``[metadata.repo2env.evaluation]`` (which does not enter the content hash).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from repogym import __version__
from repogym.run.agents import NopAgent, OracleAgent, PatchAgent
from repogym.run.trial import TrialOutcome, TrialRunner, environment_spec
from repogym.taskdir import Task, TaskConfig, load_task, update_task_toml
from repogym.taskdir.provenance import Provenance
from repogym.verify import canaries as canary_pool
from repogym.verify.mutants import build_mutants, select_mutants
from repogym.verify.redteam import build_candidates

if TYPE_CHECKING:
    from pathlib import Path

    from repogym.executors import Executor
    from repogym.sandbox import Sandbox

VERIFIED, FLAKY, BROKEN = "verified", "flaky", "broken"
GAMEABLE = "gameable"
"""Oracle 1 and nop 0, but a generic wrong solution earns the full reward too."""
ERROR = "error"
"""Not a verdict on the task: its gate could not run (e.g. its worker was lost)."""


@dataclass
class Verdict:
    task_id: str
    status: str
    oracle_rewards: list[float | None]
    nop_reward: float | None
    reasons: list[str] = field(default_factory=list)
    oracle_resolved: list[bool | None] = field(default_factory=list)
    mutants: MutantReport | None = None
    adversarial: AdversarialReport | None = None
    canaries: int | None = None
    """Confirmed canaries of the task (None: not known, e.g. the gate could not run)."""
    canary_file: dict[str, Any] | None = None
    """``tests/canaries.json`` as this gate confirmed it (written into the task by
    :func:`record` when the gate ran on a copy, e.g. on a worker)."""

    def to_json(self) -> dict[str, Any]:
        out = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("mutants", "adversarial", "canary_file")
        }
        if self.mutants is not None:
            out["mutants"] = self.mutants.to_toml()
        if self.adversarial is not None:
            out["adversarial"] = self.adversarial.to_toml()
        return out


def judge(task_id: str, oracle: list[TrialOutcome], nop: TrialOutcome) -> Verdict:
    """Decide verified / flaky / broken from the oracle runs and the nop run."""
    rewards = [o.reward for o in oracle]
    resolved = [(o.reading.details or {}).get("resolved") if o.reading else None for o in oracle]
    reasons: list[str] = []
    for i, o in enumerate(oracle):
        if o.reward is None:
            reasons.append(f"oracle run {i + 1}: no reward ({o.error})")
        elif o.reward != 1.0:
            tamper = ((o.reading.details or {}) if o.reading else {}).get("tamper") or []
            why = f" (tamper: {tamper[0]})" if tamper and isinstance(tamper, list) else ""
            reasons.append(f"oracle run {i + 1}: reward {o.reward:g}, expected 1{why}")
        if resolved[i] is False:
            reasons.append(f"oracle run {i + 1}: verifier reports resolved = false")
    if nop.reward is None:
        reasons.append(f"nop: no reward ({nop.error})")
    elif nop.reward != 0.0:
        reasons.append(f"nop: reward {nop.reward:g}, expected 0 (the verifier pays for nothing)")
    distinct = {r for r in rewards}
    if not reasons:
        status = VERIFIED
    elif len(distinct) > 1 and any(r == 1.0 for r in rewards):
        status = FLAKY
        reasons.insert(0, f"oracle reruns disagree: {rewards}")
    else:
        status = BROKEN
    return Verdict(task_id, status, rewards, nop.reward, reasons, resolved)


@dataclass
class MutantResult:
    kind: str
    description: str
    reward: float | None
    killed: bool
    seconds: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "description": self.description,
            "reward": self.reward if self.reward is not None else "none",
            "killed": self.killed,
        }
        if self.error:
            out["error"] = self.error[:200]
        return out


@dataclass
class MutantReport:
    """The mutants run against a task's tests and how many lost reward."""

    results: list[MutantResult] = field(default_factory=list)
    candidates: int = 0
    """How many mutants could be built from the gold patch (before choosing ``k``)."""
    note: str | None = None

    @property
    def killed(self) -> int:
        return sum(1 for r in self.results if r.killed)

    @property
    def kill_rate(self) -> float | None:
        """Killed / run; None when no mutant could be built (nothing to judge the tests by)."""
        return self.killed / len(self.results) if self.results else None

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mutants": len(self.results),
            "mutants_killed": self.killed,
            "mutant_kill_rate": round(self.kill_rate, 4) if self.kill_rate is not None else "none",
            "mutant_candidates": self.candidates,
            "mutant_results": [r.to_json() for r in self.results],
        }
        if self.note:
            out["mutant_note"] = self.note
        return out


@dataclass
class AdversarialReport:
    """Red-team candidates run against a task: what each earned against nop."""

    nop_reward: float
    results: list[MutantResult] = field(default_factory=list)
    note: str | None = None

    @property
    def floor(self) -> float:
        """The highest reward any candidate earned (nop's when none ran: a floor is never
        below doing nothing)."""
        return max([self.nop_reward, *(r.reward or 0.0 for r in self.results)])

    @property
    def gap(self) -> float:
        """How much more than nop the best generic wrong solution earns."""
        return round(self.floor - self.nop_reward, 6)

    @property
    def winners(self) -> list[MutantResult]:
        return [r for r in self.results if not r.killed]

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "adversarial_candidates": len(self.results),
            "adversarial_floor": self.floor,
            "gameability_gap": self.gap,
            "adversarial_results": [r.to_json() for r in self.results],
        }
        if self.note:
            out["adversarial_note"] = self.note
        return out


def _base_reader(task: Task, runner: TrialRunner) -> tuple[Any, Any]:
    """(read_base, close): files of the task's working directory as built, read from a
    session of the built environment (no agent has touched it)."""
    spec = environment_spec(task, runner.backend)
    built = runner.build(task)
    session = runner.backend.start(built, spec)
    workdir = (spec.workdir or built.workdir or "/").rstrip("/")

    def read_base(path: str) -> str | None:
        try:
            return session.read(f"{workdir}/{path}").decode("utf-8", "surrogateescape")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    return read_base, session.close


MUTANT_TIMEOUT_FACTOR = 5.0
MUTANT_TIMEOUT_FLOOR = 60.0


def _gold_and_base(
    task: Task, runner: TrialRunner, build: Callable[[str, Callable[[str], str | None]], list[Any]]
) -> list[Any] | None:
    """``build(gold patch, read_base)`` over the task's gold patch and built working tree;
    None when the task has no ``solution/patch.diff``."""
    patch_path = task.solution_dir / "patch.diff"
    if not patch_path.is_file():
        return None
    gold = patch_path.read_bytes().decode("utf-8", "surrogateescape")
    read_base, close = _base_reader(task, runner)
    try:
        return build(gold, read_base)
    finally:
        close()


def _run_wrong(
    task: Task,
    runner: TrialRunner,
    wrong: list[tuple[str, str, str, str, str]],
    *,
    oracle_reward: float,
    oracle_seconds: float | None,
) -> list[MutantResult]:
    """Run each wrong solution ``(kind, description, patch, trial suffix, agent name)`` as a
    trial; it is
    killed when its reward is below ``oracle_reward`` (or the verifier gives none).

    A wrong solution may loop forever (a negated loop condition): given how long the oracle's
    verifier took, each one's verifier gets ``max(60 s, 5 ×`` that``)`` at most."""
    timeout = (
        max(MUTANT_TIMEOUT_FLOOR, MUTANT_TIMEOUT_FACTOR * oracle_seconds)
        if oracle_seconds
        else None
    )
    results = []
    for kind, description, patch, suffix, agent in wrong:
        outcome = runner.run(
            task,
            PatchAgent(patch, agent),
            trial_name=f"{task.id}__{suffix}",
            verifier_timeout=timeout,
        )
        reward = outcome.reward
        results.append(
            MutantResult(
                kind=kind,
                description=description,
                reward=reward,
                killed=reward is None or reward < oracle_reward,
                seconds=_seconds(outcome),
                error=outcome.error,
            )
        )
    return results


def run_mutants(
    task: Task,
    runner: TrialRunner,
    k: int,
    *,
    oracle_reward: float = 1.0,
    oracle_seconds: float | None = None,
) -> MutantReport:
    """Build up to ``k`` mutants of the task's gold patch and run each as a trial
    (:func:`_run_wrong`: killed when its reward is below ``oracle_reward``)."""
    candidates = _gold_and_base(task, runner, build_mutants)
    if candidates is None:
        return MutantReport(note="no solution/patch.diff to derive mutants from")
    report = MutantReport(candidates=len(candidates))
    if not candidates:
        report.note = "no mutant of the gold patch compiles (or it changes no code)"
        return report
    chosen = select_mutants(candidates, k, task.id)
    report.results = _run_wrong(
        task,
        runner,
        [(m.kind, m.description, m.patch, f"mutant{i}", m.kind) for i, m in enumerate(chosen)],
        oracle_reward=oracle_reward,
        oracle_seconds=oracle_seconds,
    )
    return report


def run_adversarial(
    task: Task,
    runner: TrialRunner,
    *,
    nop_reward: float = 0.0,
    oracle_reward: float = 1.0,
    oracle_seconds: float | None = None,
) -> AdversarialReport:
    """Run every red-team candidate of the task's gold patch as a trial. A candidate is
    *killed* unless it earns the oracle's reward (partial credit of a graded task does not make
    it a winner, but it raises the floor); the report's floor and gap say how far the best one
    got above nop."""
    report = AdversarialReport(nop_reward=nop_reward)
    candidates = _gold_and_base(task, runner, build_candidates)
    if candidates is None:
        report.note = "no solution/patch.diff to build candidates from"
        return report
    if not candidates:
        report.note = (
            "no function body of the gold patch to rewrite (Python, JavaScript, Go, Rust and "
            "Java are; TypeScript, C/C++ and changes outside functions get none)"
        )
        return report
    report.results = _run_wrong(
        task,
        runner,
        [
            (c.kind, c.description, c.patch, f"redteam-{c.kind}", f"redteam-{c.kind}")
            for c in candidates
        ],
        oracle_reward=oracle_reward,
        oracle_seconds=oracle_seconds,
    )
    return report


def gameable(verdict: Verdict, report: AdversarialReport) -> None:
    """Mark a verified verdict ``gameable`` when a candidate earned the oracle's reward."""
    verdict.adversarial = report
    if verdict.status == VERIFIED and report.winners:
        verdict.status = GAMEABLE
        verdict.reasons.append(
            "generic wrong solutions earn reward: "
            + "; ".join(f"{r.kind} {r.reward:g}" for r in report.winners if r.reward is not None)
        )


def _span(times: dict[str, Any] | None) -> float:
    times = times or {}
    started, finished = times.get("started_at"), times.get("finished_at")
    if not started or not finished:
        return 0.0
    return (
        _dt.datetime.fromisoformat(finished) - _dt.datetime.fromisoformat(started)
    ).total_seconds()


def _seconds(outcome: TrialOutcome) -> float:
    return _span(outcome.result)


def verifier_seconds(outcomes: list[TrialOutcome]) -> float | None:
    """The longest verifier phase among trials (None when none recorded one)."""
    spans = [_span(o.result.get("verifier")) for o in outcomes]
    return max(spans) if any(spans) else None


def record(
    task: Task,
    verdict: Verdict,
    backend: str,
    reruns: int,
    *,
    mutants: MutantReport | None = None,
    adversarial: AdversarialReport | None = None,
) -> None:
    """Write the verdict into ``[metadata.repo2env.evaluation]`` (through the task model; legacy
    keys come out translated, all else as read).

    Without ``mutants`` (``adversarial``) the mutant (red-team) figures already recorded are
    kept."""
    evaluation: dict[str, Any] = {
        "status": verdict.status,
        "oracle_runs": len(verdict.oracle_rewards),
        "oracle_passes": sum(1 for r in verdict.oracle_rewards if r == 1.0),
        "reruns": reruns,
        "nop_reward": verdict.nop_reward if verdict.nop_reward is not None else "none",
        "reasons": verdict.reasons,
        "backend": backend,
        "verified_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "verifier": f"repogym {__version__}",
    }

    if verdict.canaries is not None:
        evaluation["canaries"] = verdict.canaries
    if verdict.canary_file is not None and canary_pool.store_confirmed(
        task.tests_dir, verdict.canary_file
    ):
        update_task_toml(task.path)  # the gate ran on a copy: its confirmed canaries land here

    def change(config: TaskConfig) -> None:
        block = config.metadata.setdefault("repo2env", {})
        previous = Provenance.read(block).evaluation
        if mutants is not None:
            evaluation.update(mutants.to_toml())
        else:
            evaluation.update({k: v for k, v in previous.items() if k.startswith("mutant")})
        if adversarial is not None:
            evaluation.update(adversarial.to_toml())
        else:
            evaluation.update({k: v for k, v in previous.items() if k in ADVERSARIAL_KEYS})
        block["evaluation"] = evaluation

    # The evaluation is not content: the content hash stays as it was (stale ones too).
    update_task_toml(task.path, change, rehash=False)


ADVERSARIAL_KEYS = (
    "adversarial_candidates",
    "adversarial_floor",
    "gameability_gap",
    "adversarial_results",
    "adversarial_note",
)


def reference_runs(
    task: Task, runner: TrialRunner, reruns: int, *, write: bool = True
) -> tuple[list[TrialOutcome], TrialOutcome, Verdict]:
    """The oracle × (1 + ``reruns``) and nop runs, and their verdict. The first oracle run and
    the nop run also confirm the task's candidate canaries (:func:`confirm_canaries`; written
    into the task only with ``write``); the reruns then run with the confirmed ones, as every
    later trial will."""
    pending = (canary_pool.load(task.tests_dir) or {}).get("status") == "candidates"
    oracle = [runner.run(task, OracleAgent(), trial_name=f"{task.id}__oracle0")]
    nop = runner.run(task, NopAgent(), trial_name=f"{task.id}__nop")
    if pending and write and oracle[0].reward != 1.0:
        details = (oracle[0].reading.details or {}) if oracle[0].reading else {}
        failing = [*details.get("f2p_failing", []), *details.get("regressions", [])]
        if canary_pool.keep_names(task.tests_dir, failing):
            # Renamed tests that fail with the gold patch read their own name (a golden file
            # or a snapshot named after the test): they keep it, and the calibration reruns.
            update_task_toml(task.path)
            oracle = [runner.run(task, OracleAgent(), trial_name=f"{task.id}__oracle0")]
            nop = runner.run(task, NopAgent(), trial_name=f"{task.id}__nop")
    canaries, confirmed = confirm_canaries(task, (oracle[0], nop), write=write)
    if pending and write and oracle[0].reward != 1.0:
        # The candidates may be what broke the gold run (a runner told to stop at its first
        # failure by its own configuration, a copy that does not load): the task goes on
        # without canaries rather than being lost; ``canaries = 0`` says so.
        confirmed = {"version": 1, "status": "confirmed", "pool": []}
        (task.tests_dir / canary_pool.CANARIES_FILE).unlink(missing_ok=True)
        update_task_toml(task.path)
        canaries = 0
        oracle = [runner.run(task, OracleAgent(), trial_name=f"{task.id}__oracle0")]
        nop = runner.run(task, NopAgent(), trial_name=f"{task.id}__nop")
    oracle += [
        runner.run(task, OracleAgent(), trial_name=f"{task.id}__oracle{i}")
        for i in range(1, 1 + reruns)
    ]
    verdict = judge(task.id, oracle, nop)
    verdict.canaries, verdict.canary_file = canaries, confirmed
    return oracle, nop, verdict


def confirm_canaries(
    task: Task, calibration: tuple[TrialOutcome, TrialOutcome], *, write: bool = True
) -> tuple[int | None, dict[str, Any] | None]:
    """Keep the candidate canaries that failed in the ``calibration`` runs (the gold patch and
    the original code) and, with ``write``, write them and the task's new content hash.
    Returns the number of confirmed canaries (a task confirmed before keeps its own) and the
    confirmed file's content when this call confirmed it (None otherwise)."""
    gold, base = (
        ((o.reading.details or {}) if o.reading else {}).get("canaries") or {} for o in calibration
    )
    done = canary_pool.confirm(task.tests_dir, gold, base, write=write)
    if done is not None:
        if write:
            update_task_toml(task.path)  # canaries.json is content: the hash follows it
        return done
    if not canary_pool.judged_here(task.tests_dir):
        return None, None  # a task whose judge plants none: no count to record
    data = canary_pool.load(task.tests_dir) or {}
    return (len(data.get("pool") or []) if data.get("status") == "confirmed" else 0), None


def gate_task(
    task: Task,
    runner: TrialRunner,
    *,
    reruns: int = 2,
    mutants: int = 0,
    adversarial: bool = False,
    write: bool = True,
) -> Verdict:
    """The gate on one task: oracle × (1 + ``reruns``), nop, and (when verified) ``mutants``
    mutants and, with ``adversarial``, the red-team candidates. Only the canaries it confirms
    are written (with ``write``); the verdict is for :func:`record`."""
    return gate_run(
        task, runner, reruns=reruns, mutants=mutants, adversarial=adversarial, write=write
    ).verdict


@dataclass
class GateRun:
    """One pass of the gate over a task: the verdict, and the seconds its trials spent running
    code in the task (agent and verifier phases of the reference runs, mutants and red-team
    candidates whole). The properties are what generation decides by (:class:`TaskGate`)."""

    verdict: Verdict
    seconds: float

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def verified(self) -> bool:
        return self.verdict.status == VERIFIED

    @property
    def reasons(self) -> list[str]:
        return self.verdict.reasons

    @property
    def winners(self) -> list[str]:
        """``<description> earned <reward>`` of each generic wrong solution that earned the
        oracle's reward."""
        report = self.verdict.adversarial
        found = report.winners if report is not None else []
        return [f"{r.description} earned {r.reward:g}" for r in found if r.reward is not None]

    @property
    def kill_rate(self) -> float | None:
        """Share of the mutants the tests killed (None: none run or none could be built)."""
        return self.verdict.mutants.kill_rate if self.verdict.mutants is not None else None

    @property
    def survivors(self) -> list[str]:
        """Descriptions of the mutants the tests did not kill."""
        report = self.verdict.mutants
        return [m.description for m in report.results if not m.killed] if report else []


def gate_run(
    task: Task,
    runner: TrialRunner,
    *,
    reruns: int = 2,
    mutants: int = 0,
    adversarial: bool = False,
    write: bool = True,
) -> GateRun:
    """:func:`gate_task` with the seconds its trials spent (see :class:`GateRun`)."""
    oracle, nop, verdict = reference_runs(task, runner, reruns, write=write)
    spent = sum(code_seconds(o) for o in [*oracle, nop])
    if mutants and verdict.status == VERIFIED:
        verdict.mutants = run_mutants(
            task, runner, mutants, oracle_seconds=verifier_seconds(oracle)
        )
        spent += sum(m.seconds for m in verdict.mutants.results)
    if adversarial and verdict.status == VERIFIED:
        report = run_adversarial(
            task, runner, nop_reward=nop.reward or 0.0, oracle_seconds=verifier_seconds(oracle)
        )
        spent += sum(r.seconds for r in report.results)
        gameable(verdict, report)
    return GateRun(verdict, spent)


class TaskGate:
    """The gate as generation uses it: built by the caller from the sandbox backend and given
    to the pipelines (:attr:`repogym.pipelines.base.HarnessContext.gate`), which never import
    this package. A call gates a staged task and records a verified verdict in it."""

    def __init__(self, backend: Sandbox) -> None:
        self.runner = TrialRunner(backend)

    def __call__(
        self, task_dir: Path, *, reruns: int, mutants: int = 0, adversarial: bool = False
    ) -> GateRun:
        task = load_task(task_dir)
        run = gate_run(task, self.runner, reruns=reruns, mutants=mutants, adversarial=adversarial)
        if run.verified:
            record(
                task,
                run.verdict,
                self.runner.backend.name,
                reruns,
                mutants=run.verdict.mutants,
                adversarial=run.verdict.adversarial,
            )
        return run


def code_seconds(outcome: TrialOutcome) -> float:
    """Seconds a trial spent running code in the task (agent and verifier phases)."""
    return sum(_span(outcome.result.get(p)) for p in ("agent_execution", "verifier"))


def verify_tasks(
    tasks: list[Task],
    runner: TrialRunner | None,
    *,
    reruns: int = 2,
    jobs: int = 1,
    write: bool = True,
    mutants: int = 0,
    adversarial: bool = False,
    on_done: Callable[[Verdict], None] | None = None,
    executor: Executor | None = None,
    sandbox: str = "local",
) -> list[Verdict]:
    """Run the gate over tasks (each task's trials in sequence, tasks in parallel); with
    ``mutants`` > 0 a verified task's tests are also run against that many mutants, with
    ``adversarial`` against the red-team candidates.

    ``executor``: each task is a unit there, on the ``sandbox`` backend of its worker
    (:mod:`repogym.run.remote_gate`; ``runner`` and ``jobs`` unused); None: here, on
    ``runner``, ``jobs`` tasks at once."""
    if executor is not None:
        from repogym.run.remote_gate import verify_on

        return verify_on(
            executor,
            tasks,
            sandbox=sandbox,
            reruns=reruns,
            write=write,
            mutants=mutants,
            adversarial=adversarial,
            on_done=on_done,
        )
    assert runner is not None, "verify_tasks needs a runner or an executor"

    def one(task: Task) -> Verdict:
        verdict = gate_task(
            task, runner, reruns=reruns, mutants=mutants, adversarial=adversarial, write=write
        )
        if write:
            record(
                load_task(task.path),
                verdict,
                runner.backend.name,
                reruns,
                mutants=verdict.mutants,
                adversarial=verdict.adversarial,
            )
        if on_done:
            on_done(verdict)
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, tasks))
