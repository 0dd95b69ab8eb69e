"""``repogym generate``, ``repogym bootstrap`` and ``repogym example-repo``: from a repository
to tasks, and the environment recipe they are built from."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.cli.app import app
from repogym.cli.common import (
    MAX_JOBS,
    CaBundleOpt,
    ExecutorOpt,
    JsonOpt,
    RayAddressOpt,
    SandboxOpt,
    bad_input,
    executor_or_exit,
    not_a_file_or_exit,
    use_ca_bundle,
)
from repogym.ui import escape, fail, out

RepoOpt = Annotated[
    str | None,
    typer.Option(
        "--repo",
        help="Repository: a local clone's path, owner/name or a GitHub URL, "
        "gitlab:group/name or a GitLab URL.",
    ),
]
ReposOpt = Annotated[
    Path | None,
    typer.Option(
        "--repos",
        help="A campaign: a file listing repositories, one a line (what --repo takes, "
        "optionally followed by pipeline=NAME and key=value options; # comments). One "
        "dataset per repository under --out DIR/<owner__name>/, plus "
        "DIR/campaign-report.json.",
    ),
]
PipelineOpt = Annotated[
    str,
    typer.Option(
        "--pipeline",
        "-p",
        help="commit_runtime | pr_runtime | pr_diff | bug_synth | code_instruct | "
        "cve_patches | equivalence_tests (or a plug-in's name)",
    ),
]
OptOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--opt", metavar="KEY=VALUE", help="Pipeline option (repeatable); see docs/generate.md."
    ),
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="Stop after emitting N tasks.")
]
GenerateJobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        max=MAX_JOBS,
        help="Candidates examined in parallel (with --executor ray: the cluster's CPUs, "
        "at least this many).",
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Dataset folder to write.")]
SurveyJobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs", "-j", min=1, max=MAX_JOBS, help="With --repos: repositories in parallel."
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue an earlier run into --out: skip candidates it already examined "
        "(with --repos: skip repositories already complete, resume the others).",
    ),
]
RevOpt = Annotated[str, typer.Option("--rev", help="Mine history reachable from this ref.")]
LlmOpt = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help="provider/model that rewrites instructions (key: OPENAI_API_KEY, "
        "ANTHROPIC_API_KEY or REPOGYM_LLM_API_KEY); the deterministic text is kept when "
        "the rewrite fails or leaks the fix.",
    ),
]
LlmEndpointOpt = Annotated[
    str | None, typer.Option("--llm-endpoint", help="Base URL of the LLM API.")
]


@app.command()
def generate(
    repo: RepoOpt = None,
    repos: ReposOpt = None,
    pipeline: PipelineOpt = "commit_runtime",
    opt: OptOpt = None,
    limit: LimitOpt = None,
    jobs: GenerateJobsOpt = 1,
    out_dir: OutOpt = Path("out"),
    resume: ResumeOpt = False,
    rev: RevOpt = "HEAD",
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    llm: LlmOpt = None,
    llm_endpoint: LlmEndpointOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Mine a repository into verified Harbor tasks (no Docker; an LLM only with --llm).

    With --repos FILE: a campaign over many repositories (resumable with --resume). With
    --executor ray the candidates are evaluated on a Ray cluster's workers.

    Exit 0 when at least one task was emitted, 1 when none, 2 for bad input.
    """
    use_ca_bundle(ca_bundle)
    from repogym.pipelines import GenerateError, generation_input
    from repogym.spec import parse_opts
    from repogym.workflows import generate as run_generate

    not_a_file_or_exit(out_dir, "--out")
    if (repo is None) == (repos is None):
        raise bad_input("give one of --repo REPO or --repos FILE")
    fields: dict[str, Any] = dict(pipeline=pipeline, limit=limit, jobs=jobs, resume=resume)
    fields.update(sandbox=sandbox, rev=rev, llm=llm, llm_endpoint=llm_endpoint)
    try:
        options = parse_opts(opt or [])
    except ValueError as exc:
        raise bad_input(str(exc)) from None
    if repos is not None:
        where: dict[str, Any] = dict(executor=executor, ray_address=ray_address, json_out=json_out)
        campaign(repos, out_dir=out_dir, options=options, **where, **fields)
    try:
        inp = generation_input(repo=repo, out=out_dir, options=options, **fields)
    except GenerateError as exc:
        raise bad_input(str(exc)) from None
    from repogym.ui.generate import GenerateView

    runner = _executor(executor, ray_address, jobs, [inp.repo])
    view = GenerateView(enabled=not json_out, title=f"{pipeline} · {inp.shown_repo}", jobs=jobs)
    try:
        with view:
            result = run_generate(
                inp,
                on_outcome=view.outcome,
                on_drop=view.drop,
                on_progress=view.progress if runner is None and not json_out else None,
                executor=runner,
            )
    except GenerateError as exc:
        raise bad_input(str(exc)) from None
    _render(result, view, json_out)
    raise typer.Exit(0 if result.stats.kept else 1)


def _render(result: Any, view: Any, json_out: bool) -> None:
    """The report as JSON, or the view's summary and the LLM's usage."""
    from repogym.ui.generate import print_llm_usage

    if json_out:
        sys.stdout.write(result.summary.to_text())
        return
    view.final(result.stats, result)
    if result.summary.llm is not None:
        print_llm_usage(result.summary.llm)
    if result.stats.kept:
        _print_harbor_lines(result.out)


def _print_harbor_lines(root: Path) -> None:
    """How to run the tasks with Harbor: ``-p`` takes ``<out>/tasks``, not ``<out>``."""
    from repogym.taskdir.dataset import harbor_run_lines

    lines = harbor_run_lines(root)
    if lines:
        out.print(escape("run them with Harbor (pip install 'repogym[harbor]'):"))
        for line in lines:
            out.print(f"  {escape(line)}")


def _executor(name: str, address: str | None, jobs: int, repos: list[str]) -> Any:
    """None for the local executor (generate's own threads), else the connected executor."""
    from repogym.pipelines import worker_env_for

    if name == "local" and address is None:
        return None
    return executor_or_exit(name, jobs=jobs, address=address, env=worker_env_for(repos))


def campaign(
    repos: Path,
    *,
    out_dir: Path,
    pipeline: str,
    options: dict[str, Any],
    limit: int | None,
    jobs: int,
    resume: bool,
    sandbox: str,
    rev: str,
    llm: str | None,
    llm_endpoint: str | None,
    executor: str,
    ray_address: str | None,
    json_out: bool,
) -> None:
    """``generate --repos FILE``: flags → :func:`repogym.pipelines.campaign.run_campaign`."""
    from repogym.pipelines.campaign import CampaignError, CampaignInput, read_campaign
    from repogym.ui.campaign import repo_line, summary
    from repogym.workflows import run_campaign

    inp = CampaignInput(
        repos_file=repos,
        out=out_dir,
        pipeline=pipeline,
        options=options,
        limit=limit,
        jobs=jobs,
        resume=resume,
        sandbox=sandbox,
        rev=rev,
        llm=llm,
        llm_endpoint=llm_endpoint,
    )
    try:
        entries = read_campaign(inp)
    except CampaignError as exc:
        raise bad_input(str(exc)) from None
    runner = _executor(executor, ray_address, jobs, [e.repo for e in entries])
    try:
        report = run_campaign(
            inp, entries, executor=runner, on_repo=None if json_out else repo_line
        )
    except CampaignError as exc:
        raise bad_input(str(exc)) from None
    except KeyboardInterrupt:
        fail(f"interrupted: finished repositories are in {out_dir}; rerun with --resume")
        raise typer.Exit(130) from None
    if json_out:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        summary(report)
    raise typer.Exit(0 if report.tasks else 1)


@app.command("example-repo")
def example_repo(
    dest: Annotated[Path, typer.Argument(help="Where to create the example git repository.")],
) -> None:
    """Write the embedded example repository (a tiny pytest project with bug-fix history)."""
    from repogym.example_repo import build_example_repo

    not_a_file_or_exit(dest, "DEST")
    try:
        build_example_repo(dest)
    except FileExistsError as exc:
        raise bad_input(str(exc)) from None
    out.print(f"example repository written to {escape(str(dest))}")


@app.command()
def bootstrap(
    repo: Annotated[
        Path | None, typer.Option("--repo", help="The repository folder (one repository).")
    ] = None,
    repos: Annotated[
        Path | None,
        typer.Option(
            "--repos",
            help="A file listing repositories, one a line (local paths or what generate's "
            "--repo accepts; # comments): check them all and print the success rate.",
        ),
    ] = None,
    ref: Annotated[
        str | None, typer.Option("--ref", help="A git ref to export (default: the work tree).")
    ] = None,
    at: Annotated[
        str, typer.Option("--at", help="With --repos: the ref checked in each repository.")
    ] = "HEAD",
    years_back: Annotated[
        float | None,
        typer.Option(
            "--years-back",
            min=0,
            help="With --repos: check the last commit at least N years before --at.",
        ),
    ] = None,
    jobs: SurveyJobsOpt = 1,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="With --repos: JSON-lines file each result is appended to as it finishes "
            "(default: FILE.survey.jsonl beside the list).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="With --repos: skip repositories --results already has."),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Build the recipe and collect its tests.")
    ] = True,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Ignore cached recipes and check outcomes.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Detect a repository's environment, print its recipe, and check it collects tests.

    With --repos FILE: check every listed repository and print the success rate and the
    failure causes grouped. Exit 0 when the recipe works (every recipe, with --repos; or
    --no-check), 1 when a check fails, 2 for bad input.
    """
    use_ca_bundle(ca_bundle)
    from repogym.bootstrap import ExportError, UnsupportedRepo, bootstrap_ref
    from repogym.bootstrap import bootstrap as run_bootstrap
    from repogym.sandbox import SandboxError
    from repogym.ui.bootstrap import render_result

    if (repo is None) == (repos is None):
        raise bad_input("give one of --repo PATH or --repos FILE")
    if repos is not None:
        bootstrap_survey(
            repos,
            ref=ref,
            at=at,
            years_back=years_back,
            jobs=jobs,
            results=results,
            resume=resume,
            check=check,
            sandbox=sandbox,
            refresh=refresh,
            json_out=json_out,
        )
    assert repo is not None
    survey_only = {"--at": at != "HEAD", "--years-back": years_back is not None}
    survey_only.update({"--results": results is not None, "--resume": resume, "--jobs": jobs > 1})
    if any(survey_only.values()):
        given = ", ".join(k for k, v in survey_only.items() if v)
        raise bad_input(f"{given}: only with --repos (for one repository use --ref)")
    if not repo.is_dir():
        raise bad_input(f"{repo}: not a directory")
    try:
        if ref:
            result = bootstrap_ref(repo, ref, check=check, sandbox=sandbox, refresh=refresh)
        else:
            result = run_bootstrap(repo, check=check, sandbox=sandbox, refresh=refresh)
    except (UnsupportedRepo, ExportError, SandboxError) as exc:
        raise bad_input(str(exc)) from None
    code = 1 if result.check is not None and not result.check.ok else 0
    if json_out:
        sys.stdout.write(json.dumps({**result.to_json(), "exit_code": code}, indent=2) + "\n")
    else:
        render_result(result, out)
    raise typer.Exit(code)


def bootstrap_survey(
    repos: Path,
    *,
    ref: str | None,
    at: str,
    years_back: float | None,
    jobs: int,
    results: Path | None,
    resume: bool,
    check: bool,
    sandbox: str,
    refresh: bool,
    json_out: bool,
) -> None:
    """``repogym bootstrap --repos FILE``: flags → :func:`repogym.bootstrap.survey.run_survey`."""
    from repogym.bootstrap.survey import (
        At,
        RepoResult,
        read_repo_list,
        run_survey,
    )
    from repogym.sandbox import SandboxError, get_backend
    from repogym.ui import progress
    from repogym.ui.bootstrap import render_line, render_survey

    if ref is not None:
        raise bad_input("--ref is for one repository; with --repos use --at REF")
    if not check:
        raise bad_input("--repos always checks (build + collect); --no-check is for one repository")
    try:
        specs = read_repo_list(repos)
        where = At(ref=at, years_back=years_back)
        get_backend(sandbox)
    except (OSError, UnicodeDecodeError, ValueError, SandboxError) as exc:
        message = f"{repos}: {exc}" if isinstance(exc, OSError | UnicodeDecodeError) else str(exc)
        raise bad_input(message) from None
    if not specs:
        raise bad_input(f"{repos}: no repositories listed")
    results = results or repos.with_name(repos.name + ".survey.jsonl")
    with progress(f"bootstrap {where.label}", len(specs)) as bar:

        def on_result(result: RepoResult, finished: int, total: int) -> None:
            bar.console.print(render_line(result, finished, total))
            bar.advance(bar.task_ids[0])

        try:
            report = run_survey(
                specs,
                where,
                jobs=jobs,
                sandbox=sandbox,
                refresh=refresh,
                results_file=results,
                resume=resume,
                on_result=on_result,
            )
        except KeyboardInterrupt:
            fail(f"interrupted: finished repositories are in {results}; rerun with --resume")
            raise typer.Exit(130) from None
    if json_out:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        render_survey(report, out)
    raise typer.Exit(0 if report.totals["failed"] == 0 else 1)
