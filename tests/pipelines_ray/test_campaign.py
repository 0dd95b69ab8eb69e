"""Campaigns: ``generate --repos FILE --out DIR`` writes one dataset per repository plus
``DIR/campaign-report.json``; a bad line stops it before any work; ``--resume`` skips finished
repositories and continues the interrupted one; on Ray the repositories' candidates share one
stream, interleaved.

Most repositories here use ``echo`` (tests/pipelines_ray/fakes.py: a task per commit, no
sandbox) so the campaign itself is what is timed; one uses ``commit_runtime`` whose commits are
all cheap drops."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.pipelines import register, unregister
from repogym.pipelines.campaign import CampaignInput, read_campaign
from repogym.taskdir import iter_task_dirs
from repogym.workflows import run_campaign
from tests.pipelines_ray import fakes
from tests.sources.conftest import GitRepo


@pytest.fixture
def echo() -> Iterator[None]:
    register(fakes.EchoPipeline())
    yield
    unregister("echo")
    fakes.INTERRUPT_AT.clear()


def history(path: Path, subjects: Iterable[str]) -> GitRepo:
    repo = GitRepo(path)
    for i, subject in enumerate(subjects):
        repo.write(f"src/mod{i}.py", f"VALUE = {i}\n")
        repo.git("add", "-A")
        repo.git("commit", "-q", "-m", subject)
    return repo


@pytest.fixture
def repos(tmp_path: Path, echo: None) -> dict[str, Path]:
    """Three small repositories and a list naming them (comments, options, pipelines)."""
    alpha = history(tmp_path / "r" / "alpha", ["first", "second", "skip this one"])
    beta = history(tmp_path / "r" / "beta", ["one", "two"])
    gamma = history(tmp_path / "r" / "gamma", ["root", "no tests here", "nor here"])
    listing = tmp_path / "repos.txt"
    listing.write_text(
        "# three repositories\n"
        f"{alpha.path}   words=Hello   # an option of the echo pipeline\n"
        "\n"
        f"{beta.path}\n"
        f"{gamma.path} pipeline=commit_runtime\n"
    )
    return {"list": listing, "alpha": alpha.path, "beta": beta.path, "gamma": gamma.path}


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["generate", *args])


def report(out: Path) -> dict[str, Any]:
    return json.loads((out / "campaign-report.json").read_text())


def test_campaign_writes_a_dataset_per_repository(repos: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    res = cli("--repos", str(repos["list"]), "--out", str(out), "--pipeline", "echo")
    assert res.exit_code == 0, res.output
    data = report(out)
    rows = {Path(r["out"]).name: r for r in data["repositories"]}
    assert list(rows) == ["local__alpha", "local__beta", "local__gamma"]
    assert [r["line"] for r in rows.values()] == [2, 4, 5]
    alpha, beta, gamma = rows.values()
    assert alpha["status"] == beta["status"] == gamma["status"] == "complete"
    assert (alpha["candidates"], alpha["kept"]) == (3, 2)
    assert alpha["dropped"] == {"skipped by the test": 1}
    assert (beta["candidates"], beta["kept"]) == (2, 2)
    assert gamma["pipeline"] == "commit_runtime" and gamma["kept"] == 0
    assert gamma["dropped"] == {"root commit": 1, "no test change": 2}
    assert data["status"] == "complete" and data["totals"]["kept"] == 4
    for name, count in (("local__alpha", 2), ("local__beta", 2), ("local__gamma", 0)):
        dataset = out / name
        assert len(list(iter_task_dirs(dataset / "tasks"))) == count
        single = json.loads((dataset / "generate-report.json").read_text())
        assert single["status"] == "complete" and (dataset / "registry.json").is_file()
    task = next(iter_task_dirs(out / "local__alpha" / "tasks"))
    assert (task / "instruction.md").read_text().startswith("Hello: ")
    assert "campaign" in res.stderr and "local__gamma" not in res.stdout

    again = cli(
        "--repos", str(repos["list"]), "--out", str(out), "-p", "echo", "--json", "--resume"
    )
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["totals"]["tasks"] == 4
    refused = cli("--repos", str(repos["list"]), "--out", str(out), "-p", "echo")
    assert refused.exit_code == 2 and "use --resume" in refused.stderr


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{beta} pipeline=nope", "unknown pipeline 'nope'"),
        ("{beta} no_such_option=1", "bad option: no_such_option"),
        ("{beta} words", "expected key=value"),
        ("/no/such/repository", "/no/such/repository: no such local repository"),
        ("{alpha}", "alpha with pipeline echo is already on line 1"),
    ],
)
def test_a_bad_line_stops_before_any_work(
    repos: dict[str, Path], tmp_path: Path, line: str, says: str
) -> None:
    listing = tmp_path / "bad.txt"
    listing.write_text(f"{repos['alpha']}\n# fine so far\n{line.format(**repos)}\n")
    out = tmp_path / "never"
    res = cli("--repos", str(listing), "--out", str(out), "--pipeline", "echo")
    assert res.exit_code == 2, res.output
    assert f"{listing}:3: {says}" in res.stderr.replace("\n", "")
    assert "Traceback" not in res.output and not out.exists()


def test_resume_after_an_interruption(repos: dict[str, Path], tmp_path: Path) -> None:
    """Ctrl-C in the second repository: the first stays finished (not run again), the second
    continues from its resume state, the third runs."""
    beta_first = GitRepo(repos["beta"]).git("rev-parse", "HEAD~1")
    fakes.INTERRUPT_AT.add(beta_first)  # beta's second candidate (newest first)
    inp = CampaignInput(repos_file=repos["list"], out=tmp_path / "c", pipeline="echo")
    with pytest.raises(KeyboardInterrupt):
        run_campaign(inp, read_campaign(inp))
    data = report(inp.out)
    assert data["status"] == "interrupted"
    assert [r["status"] for r in data["repositories"]] == ["complete", "interrupted", "pending"]
    assert data["repositories"][1]["kept"] == 1
    alpha_report = inp.out / "local__alpha" / "generate-report.json"
    before = alpha_report.stat().st_mtime_ns

    again = CampaignInput(repos_file=repos["list"], out=inp.out, pipeline="echo", resume=True)
    done = run_campaign(again, read_campaign(again))
    assert [r.status for r in done.repos] == ["complete"] * 3
    assert alpha_report.stat().st_mtime_ns == before  # finished: skipped
    beta = done.repos[1]
    assert (beta.kept, beta.tasks, beta.dropped) == (1, 2, {"already emitted": 1})
    assert len(list(iter_task_dirs(inp.out / "local__beta" / "tasks"))) == 2
    assert report(inp.out)["status"] == "complete"


class Recording:
    """An executor that notes the order in which units are handed to it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.ray = inner, inner.name, inner.ray
        self.keys: list[str] = []
        self.finished_before: list[int] = []
        """For each unit: how many units had finished when it was taken."""
        self.parallel: int | None = None

    def put(self, value: Any) -> Any:
        return self.inner.put(value)

    def map(self, work: Iterable[Any], *, parallel: int | None = None) -> Iterator[Any]:
        self.parallel = parallel
        finished = 0

        def noted() -> Iterator[Any]:
            for unit in work:
                self.keys.append(unit.key)
                self.finished_before.append(finished)
                yield unit

        for done in self.inner.map(noted(), parallel=parallel):
            finished += 1
            yield done


def test_campaign_on_ray_interleaves_repositories(
    ray_cluster: Any, repos: dict[str, Path], tmp_path: Path
) -> None:
    from repogym.executors import RayExecutor

    listing = tmp_path / "two.txt"
    listing.write_text(f"{repos['alpha']}\n{repos['beta']}\n")
    inp = CampaignInput(repos_file=listing, out=tmp_path / "c", pipeline="echo")
    executor = Recording(RayExecutor(ray_cluster.address))
    done = run_campaign(inp, read_campaign(inp), executor=executor)
    assert [(r.status, r.kept) for r in done.repos] == [("complete", 2), ("complete", 2)]
    # One stream, round-robin: alpha's and beta's candidates take turns (keys "<repo>:<sha>").
    assert [k.split(":", 1)[0] for k in executor.keys] == ["0", "1", "0", "1"]
    # At most `parallel` (the cluster's 2 CPUs) in flight: the third unit waits for the first.
    assert executor.parallel == 2 and executor.finished_before == [0, 0, 1, 2]
    for name in ("local__alpha", "local__beta"):
        tasks = list(iter_task_dirs(inp.out / name / "tasks"))
        assert len(tasks) == 2 and all((t / "solution" / "head.txt").is_file() for t in tasks)
    assert report(inp.out)["executor"] == "ray"


def test_lost_worker_on_ray_is_an_error_retried_by_resume(
    ray_cluster: Any, repos: dict[str, Path], tmp_path: Path
) -> None:
    """Past Ray's retries a lost worker is the candidate's ``internal error`` (recorded, not
    dropped); ``--resume`` evaluates it again."""
    from repogym.executors import RayExecutor
    from repogym.pipelines._ray.worker import KILL_HOOK
    from repogym.spec import GenerationInput
    from repogym.workflows import generate

    marker = tmp_path / "killed-once"
    executor = RayExecutor(ray_cluster.address, retries=0, env={KILL_HOOK: str(marker)})
    out = tmp_path / "out"
    inp = GenerationInput(repo=str(repos["beta"]), pipeline="echo", out=out, jobs=1)
    inp = inp.model_copy(update={"options": {"max_candidates": 1}})
    [lost] = generate(inp, executor=executor).outcomes
    assert marker.exists() and not lost.kept and lost.reason == "internal error"
    assert lost.detail and lost.detail.startswith("worker lost after 1 attempts")
    state = json.loads((out / ".repogym" / "echo-state.json").read_text())
    assert state[lost.candidate.key]["status"] == "error"
    assert "worker lost" in (out / ".repogym" / "echo-errors.log").read_text()
    assert not list(iter_task_dirs(out / "tasks"))

    [kept] = generate(inp.model_copy(update={"resume": True}), executor=executor).outcomes
    assert kept.kept and kept.candidate.key == lost.candidate.key
    assert [d.name for d in iter_task_dirs(out / "tasks")] == [kept.candidate.task_id]


def test_limit_on_ray_evaluates_no_more_than_it_needs(
    ray_cluster: Any, repos: dict[str, Path], tmp_path: Path
) -> None:
    from repogym.executors import RayExecutor
    from repogym.spec import GenerationInput
    from repogym.workflows import generate

    out = tmp_path / "out"
    inp = GenerationInput(repo=str(repos["alpha"]), pipeline="echo", out=out, limit=1)
    result = generate(inp, executor=RayExecutor(ray_cluster.address))
    assert result.stats.kept == 1 and len(result.outcomes) == 1  # not 2 in flight
    assert len(list(iter_task_dirs(out / "tasks"))) == 1


def test_cli_on_ray(ray_cluster: Any, repos: dict[str, Path], tmp_path: Path) -> None:
    """``generate --executor ray`` and ``generate --repos … --executor ray`` from the CLI."""
    address = ray_cluster.address
    res = cli(
        "--repo",
        str(repos["beta"]),
        "-p",
        "echo",
        "--out",
        str(tmp_path / "one"),
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["yield"]["kept"] == 2
    listing = tmp_path / "two.txt"
    listing.write_text(f"{repos['alpha']}\n{repos['gamma']} pipeline=commit_runtime\n")
    res = cli(
        "--repos",
        str(listing),
        "-p",
        "echo",
        "--out",
        str(tmp_path / "c"),
        "--executor",
        "ray",
        "--ray-address",
        address,
    )
    assert res.exit_code == 0, res.output
    data = report(tmp_path / "c")
    assert data["executor"] == "ray" and data["totals"]["kept"] == 2
    assert [r["status"] for r in data["repositories"]] == ["complete", "complete"]


def test_cli_flag_errors(repos: dict[str, Path], tmp_path: Path) -> None:
    for args, says in [
        ([], "give one of --repo REPO or --repos FILE"),
        (["--repo", str(repos["beta"]), "--repos", str(repos["list"])], "give one of"),
        (["--repos", str(repos["list"]), "--ray-address", "127.0.0.1:1"], "--executor ray"),
        (["--repo", str(repos["beta"]), "--executor", "spark"], "unknown executor 'spark'"),
        (["--repos", str(tmp_path / "missing.txt")], "missing.txt"),
    ]:
        res = cli(*args, "-p", "echo", "--out", str(tmp_path / "o"))
        assert res.exit_code == 2 and says in res.stderr, (args, res.output)
    assert not (tmp_path / "o").exists()
