"""Tasks generated once per session by the real pipeline, and helpers to attack them.

Every attack is a ``command:`` agent (a shell command run as root in the task's working
directory, exactly as ``repogym run --agent command:…`` runs it) in a real trial on the local
sandbox. The baseline is the ``nop`` agent's reward on the same task: an attack must never earn
more.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent, NopAgent
from repogym.run.trial import TrialOutcome, TrialRunner, environment_spec
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import Task, load_task
from repogym.workflows import generate
from tests.adversarial.repos import ledger_repo, slugs_repo
from tests.adversarial.repos_native import (
    cpp_money_repo,
    go_money_repo,
    java_money_repo,
    rust_money_repo,
)
from tests.sources.conftest import GitRepo, pin_git_env


@dataclass
class Target:
    task: Task
    nop: float
    runner: TrialRunner
    in_place: TrialRunner

    def attack(self, command: str, *, in_place: bool = False) -> TrialOutcome:
        runner = self.in_place if in_place else self.runner
        return runner.run(self.task, CommandAgent(command))

    def attack_openenv(self, command: str) -> tuple[float | None, dict]:
        """The attack as an OpenEnv episode's ``exec`` action, graded by ``evaluate``."""
        from repogym.openenv.environment import Pool, RepoAction, RepoEnvironment
        from repogym.openenv.episode import TaskEnvironmentBuilder
        from repogym.openenv.tasks import TaskSet

        pool = Pool(
            TaskSet.load(self.task.path.parent),
            TaskEnvironmentBuilder(self.runner.backend),
            "t0ken",
        )
        env = RepoEnvironment(pool)
        try:
            env.reset(task_id=self.task.id)
            env.step(RepoAction(type="exec", command=command, timeout_s=120))
            obs = env.step(RepoAction(type="evaluate", metadata={"orchestrator_token": "t0ken"}))
            return obs.reward, obs.verification or {}
        finally:
            env.close()

    def attack_login_shell(self, command: str) -> float | None:
        """The attack, then the verifier started the way some runners start it: through a
        login shell (``bash -lc``) in the agent's container, which reads its profile files."""
        task = self.task
        spec = environment_spec(task, self.runner.backend)
        built = self.runner.build(task)
        with self.runner.backend.start(built, spec) as session:
            workdir = spec.workdir or built.workdir
            session.exec(command, cwd=workdir, timeout_s=120)
            session.kill_all()
            session.exec("rm -rf /logs/verifier && mkdir -p /logs/verifier", user="root")
            session.mount(task.tests_dir, "/tests")
            session.exec(["bash", "-lc", "bash /tests/test.sh"], cwd=workdir, timeout_s=600)
            try:
                return float(session.read("/logs/verifier/reward.txt"))
            except (FileNotFoundError, ValueError):
                return None


def _generate(  # type: ignore[no-untyped-def]
    tmp: Path, name: str, build, options: dict[str, object], pipeline: str = "commit_runtime"
) -> Task:
    with pytest.MonkeyPatch.context() as mp:
        pin_git_env(mp, ceiling=tmp)
        repo = build(GitRepo(tmp / name))
        result = generate(
            GenerationInput(
                repo=str(repo.path),
                pipeline=pipeline,
                out=tmp / f"{name}-ds",
                options={"reruns": 0, "verify_reruns": 0, **options},
            )
        )
    kept = [o for o in result.outcomes if o.kept]
    assert len(kept) == 1, [(o.reason, o.detail) for o in result.outcomes]
    assert kept[0].task_dir is not None
    return load_task(kept[0].task_dir)


def _target(task: Task) -> Target:
    backend = get_backend("local")
    runner = TrialRunner(backend)
    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0, nop.error
    return Target(task, nop.reward, runner, TrialRunner(backend, verification="in_place"))


@pytest.fixture(scope="session")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("ledger")
    task = _generate(tmp, "ledger", ledger_repo, {"mutants": 2})
    yield _target(task)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def slugs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("slugs")
    task = _generate(tmp, "slugs", slugs_repo, {"mutants": 0})
    yield _target(task)
    shutil.rmtree(tmp, ignore_errors=True)


def _session_target(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    build,  # type: ignore[no-untyped-def]
) -> Iterator[Target]:
    """A compiled-language task, made by ``pr_runtime`` from the merged pull request of the
    repository ``build`` makes (``commit_runtime`` takes the same harness)."""
    tmp = tmp_path_factory.mktemp(name)
    yield _target(_generate(tmp, name, build, {"mutants": 2}, pipeline="pr_runtime"))
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def gomoney(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Go module's task (go test on the host's Go, mapped from ``golang:*``)."""
    yield from _session_target(tmp_path_factory, "gomoney", go_money_repo)


@pytest.fixture(scope="session")
def rustmoney(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A crate's task (cargo test on the host's Rust, mapped from ``rust:*``)."""
    yield from _session_target(tmp_path_factory, "rustmoney", rust_money_repo)


@pytest.fixture(scope="session")
def cppmoney(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A CMake project's task (GoogleTest through ctest, GCC of the host mapped from ``gcc:*``)."""
    yield from _session_target(tmp_path_factory, "cppmoney", cpp_money_repo)


@pytest.fixture(scope="session")
def javamoney(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Maven project's task (Surefire on the host's JDK 17, Maven 3.9 and JUnit from Maven
    Central at build time)."""
    yield from _session_target(tmp_path_factory, "javamoney", java_money_repo)


def check_honest_fix(target: Target, fix: str) -> None:
    """The task has canaries, and the fix earns 1 with every canary it ran failing."""
    evaluation = target.task.config.metadata["repo2env"]["evaluation"]
    assert evaluation["canaries"] >= 3, evaluation
    out = target.attack(fix)
    details = out.result["verifier_result"]["details"]
    assert out.reward == 1.0, details
    assert details["canaries"]["failed"] == details["canaries"]["run"] >= 1, details


def check_attack(target: Target, command: str, *, canaries_catch: bool) -> None:
    """The attack earns no more than ``nop``; one that works on the code (``canaries_catch``)
    is caught by the canaries (tamper reasons), not lost by chance."""
    out = target.attack(command)
    details = out.result["verifier_result"]["details"]
    assert out.reward is not None and out.reward <= target.nop, details
    if canaries_catch:
        assert details["tampered"] and "canary" in " ".join(details.get("tamper", [])), details


def without_renaming(target: Target, tmp: Path) -> Target:
    """The same task with its failing tests keeping their names in every run (the canaries
    stay): what the judge was before it renamed them."""
    import json

    from repogym.taskdir import update_task_toml

    copy = tmp / "tasks" / target.task.path.name
    shutil.copytree(target.task.path, copy)
    path = copy / "tests" / "canaries.json"
    data = json.loads(path.read_text())
    assert data.pop("disguise", None), "the task renames no test"
    path.write_text(json.dumps(data))
    update_task_toml(copy)
    return Target(load_task(copy), target.nop, target.runner, target.in_place)


def check_named_attack_pays_without_renaming(target: Target, tmp: Path, command: str) -> None:
    """The attack is real: without the renaming it earns the full reward with every canary
    failing (so a test that it earns nothing cannot pass for want of a working attack)."""
    out = without_renaming(target, tmp).attack(command)
    details = out.result["verifier_result"]["details"]
    assert out.reward == 1.0, (details.get("tamper"), details.get("f2p_failing"))
    assert details["canaries"]["failed"] == details["canaries"]["run"] >= 1, details
