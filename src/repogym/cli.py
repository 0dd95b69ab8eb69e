"""The ``repogym`` command line. Thin: parses flags and calls the layers below."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from repogym import __version__
from repogym.ui import err, escape, fail, out, track

app = typer.Typer(
    name="repogym",
    help="Turn source repositories into verifiable RL environments for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dataset_app = typer.Typer(help="Dataset-level files: registry.json, manifest.json, content hashes.")
app.add_typer(dataset_app, name="dataset")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def _version(value: bool) -> None:
    if value:
        out.print(f"repogym {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """repogym: generate, verify, run, serve, publish and explore RL tasks from repositories."""


def _task_dirs_or_exit(path: Path) -> list[Path]:
    from repogym.harbor import iter_task_dirs

    if not path.exists():
        fail(f"{path}: no such file or directory")
        raise typer.Exit(2)
    if path.is_file():
        path = path.parent if path.name == "task.toml" else path
    dirs = list(iter_task_dirs(path))
    if not dirs:
        fail(f"{path}: no task.toml found (a task is a folder holding task.toml)")
        raise typer.Exit(2)
    return dirs


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    deep: Annotated[
        bool, typer.Option("--deep", help="Also compile verifier scripts, parse patches and JSON.")
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Worker processes (0 = two per core).")
    ] = 0,
    runnable: Annotated[
        bool,
        typer.Option(
            "--runnable",
            help="Instead: what `run` would refuse on --sandbox and why (no building); one "
            "line per refusal.",
        ),
    ] = False,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Backend for --runnable: local or docker.")
    ] = "local",
    json_out: JsonOpt = False,
) -> None:
    """Static checks of task directories. Exit 1 if any task fails, 2 for unusable input."""
    from repogym.harbor.validate import default_jobs, validate_many

    if runnable:
        _validate_runnable(path, sandbox, json_out)
    dirs = _task_dirs_or_exit(path)
    jobs = jobs or default_jobs()
    reports = list(
        track(
            validate_many(dirs, deep=deep, jobs=jobs), "validating", len(dirs), enabled=not json_out
        )
    )
    failed = [r for r in reports if not r.ok]
    n_warn = sum(len(r.warnings) for r in reports)
    if json_out:
        payload = {
            "path": str(path),
            "summary": {
                "tasks": len(reports),
                "valid": len(reports) - len(failed),
                "invalid": len(failed),
                "warnings": n_warn,
            },
            "tasks": [r.to_json() for r in reports],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        raise typer.Exit(1 if failed else 0)
    by_check: Counter[str] = Counter()
    for report in reports:
        for p in report.problems:
            by_check[f"{p.severity}:{p.check}"] += 1
            colour = "red" if p.severity == "error" else "yellow"
            label = "ERROR" if p.severity == "error" else "warn "
            where = f"{escape(report.task_id)}: {escape(p.file)}"
            out.print(f"[{colour}]{label}[/] {where}: {escape(p.message)}")
    table = Table(title=f"validate {escape(str(path))}", title_justify="left")
    table.add_column("tasks", justify="right")
    table.add_column("valid", justify="right", style="green")
    table.add_column("invalid", justify="right", style="red")
    table.add_column("warnings", justify="right", style="yellow")
    table.add_row(str(len(reports)), str(len(reports) - len(failed)), str(len(failed)), str(n_warn))
    out.print(table)
    if by_check:
        checks = Table(title="problems by check", title_justify="left")
        checks.add_column("severity")
        checks.add_column("check")
        checks.add_column("count", justify="right")
        for key, count in sorted(by_check.items()):
            severity, check = key.split(":", 1)
            checks.add_row(severity, check, str(count))
        out.print(checks)
    raise typer.Exit(1 if failed else 0)


def _validate_runnable(path: Path, sandbox: str, json_out: bool) -> None:
    """``validate --runnable``: the backend's preflight over every task; exits."""
    from repogym.harbor.trust import check_task, load_limits
    from repogym.run.preflight import load_backend, preflight

    dirs = _task_dirs_or_exit(path)
    backend, why = load_backend(sandbox)
    try:
        limits = load_limits()
    except ValueError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    rows = []
    for d in dirs:
        trust = check_task(d, limits)
        reasons = list(trust.problems)
        if trust.error is not None:
            reasons.append(f"{trust.error.file}: {trust.error}")
        if trust.task is not None and not reasons:
            reasons = preflight(trust.task, backend=backend, limits=limits)
        if why:
            reasons.insert(0, why)
        rows.append(
            {"task_id": d.name, "path": str(d), "runnable": not reasons, "refusals": reasons}
        )
    refused = [r for r in rows if not r["runnable"]]
    if json_out:
        summary = {
            "tasks": len(rows),
            "runnable": len(rows) - len(refused),
            "refused": len(refused),
        }
        payload = {"path": str(path), "sandbox": sandbox, "summary": summary, "tasks": rows}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        for r in refused:
            for reason in r["refusals"]:
                out.print(f"[red]refused[/] {escape(r['task_id'])}: {escape(reason)}")
        out.print(f"{len(rows) - len(refused)} of {len(rows)} task(s) would run on {sandbox}")
    raise typer.Exit(1 if refused else 0)


LimitOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--max",
        metavar="KEY=VALUE",
        help="Raise or lower this host's maximum for what a task may ask (cpus, memory_mb, "
        "storage_mb, gpus, build/agent/verifier_timeout_sec); default from "
        "~/.config/repogym/limits.toml. Tasks asking more are refused.",
    ),
]
PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        metavar="VAR",
        help='Let the "${VAR}" templates of tasks\' verifier env take this host variable '
        "(repeatable). Others expand to nothing.",
    ),
]


def _host_limits_or_exit(limit: list[str] | None, pass_env: list[str] | None = None):  # type: ignore[no-untyped-def]
    from repogym.harbor.trust import load_limits

    try:
        return load_limits().with_overrides(limit or (), pass_env or ())
    except ValueError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None


def _trusted_or_exit(
    path: Path,
    limit: list[str] | None = None,
    pass_env: list[str] | None = None,
    *,
    quiet: bool = False,
) -> list:  # list[Task]
    """The trust boundary for a command that reads a dataset: refused tasks stop the command
    (one line each, exit 2, nothing written); unreadable ones are skipped with a line;
    withheld host variables are reported."""
    from repogym.harbor.trust import check_task

    limits = _host_limits_or_exit(limit, pass_env)
    reports = [check_task(d, limits) for d in _task_dirs_or_exit(path)]
    refused = [r for r in reports if r.refused]
    for r in refused:
        fail(f"{r.path.name}: refused: {'; '.join(r.problems)}")
    if refused:
        fail(f"{len(refused)} task(s) refused at the trust boundary; nothing was run or written")
        raise typer.Exit(2)
    for r in reports:
        if r.error is not None:
            fail(f"{r.path.name}: {r.error.file}: {r.error} (skipped)")
    tasks = [r.task for r in reports if r.task is not None]
    if not tasks:
        fail(f"{path}: no readable task")
        raise typer.Exit(2)
    withheld: dict[str, list[str]] = {}
    for r in reports:
        for name in r.withheld:
            withheld.setdefault(name, []).append(r.path.name)
    if withheld and not quiet:
        for name, ids in sorted(withheld.items()):
            shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
            err.print(
                f"[yellow]withheld:[/] host variable {escape(name)} asked by {escape(shown)}; "
                f"it expands to nothing (pass it with --pass-env {escape(name)})"
            )
    return tasks


def _fmt_reward(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


SandboxOpt = Annotated[
    str, typer.Option("--sandbox", help="Sandbox backend: local (bubblewrap, default) or docker.")
]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Trials run in parallel.")]
CaBundleOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-bundle",
        help="PEM CA bundle offered inside sandboxes (build steps and sessions; e.g. "
        '"$SSL_CERT_FILE" where a proxy intercepts TLS). Default: $REPOGYM_CA_BUNDLE.',
    ),
]


def _use_ca_bundle(path: Path | None) -> None:
    """Check ``--ca-bundle`` and hand it to every sandbox backend this command creates."""
    if path is None:
        return
    from repogym.sandbox import _cabundle
    from repogym.sandbox.local import default_cache_root

    try:
        _cabundle.load(path, default_cache_root())
    except _cabundle.CaBundleError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    os.environ[_cabundle.ENV_VAR] = str(path.resolve())


@app.command()
def run(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="oracle | nop | command:'<shell command>'")
    ] = "oracle",
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    jobs: JobsOpt = 1,
    attempts: Annotated[int, typer.Option("--attempts", "-k", min=1, help="Trials per task.")] = 1,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Job folder (default: jobs/<time>-<agent>).")
    ] = None,
    verification: Annotated[
        str,
        typer.Option(
            "--verification",
            help="task (as each task declares, default) | clean_room | in_place (what a runner "
            "that verifies in the agent's container would pay)",
        ),
    ] = "task",
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run an agent on tasks in sandboxes; the task's verifier decides each reward.

    Exit 0 when every trial produced a reward, 1 when any trial errored (reward None).
    """
    _use_ca_bundle(ca_bundle)
    from repogym.run.agents import make_agent
    from repogym.run.job import new_job_dir, run_job
    from repogym.sandbox import SandboxError

    try:
        make_agent(agent)
    except ValueError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    if verification not in ("task", "clean_room", "in_place"):
        fail(f"--verification {verification!r}: use task, clean_room or in_place")
        raise typer.Exit(2)
    tasks = _trusted_or_exit(path, limit, pass_env, quiet=json_out)
    if out_dir is None:
        out_dir = new_job_dir(Path("jobs"), agent.split(":")[0])

    def done(outcome) -> None:  # type: ignore[no-untyped-def]
        if json_out:
            return
        mark = "[red]error[/]" if outcome.error else f"reward {_fmt_reward(outcome.reward)}"
        v = outcome.result.get("verification") or {}
        if v.get("mode") == "clean_room":
            mark += (
                f" [dim](clean room: {v.get('applied_count', 0)} applied, "
                f"{v.get('deleted_count', 0)} deleted, {v.get('dropped_count', 0)} dropped)[/]"
            )
        err.print(f"  {escape(outcome.result['trial_name'])}: {mark}")
        if outcome.error:
            err.print(f"    [dim]{escape(outcome.error.splitlines()[0][:200])}[/]")

    if not json_out:
        err.print(
            f"running {len(tasks)} task(s) × {attempts} with agent {escape(agent)} on {sandbox}"
        )
    try:
        outcomes, summary, job_path = run_job(
            tasks,
            agent,
            sandbox=sandbox,
            jobs=jobs,
            attempts=attempts,
            out_dir=out_dir,
            verification=None if verification == "task" else verification,
            on_done=done,
        )
    except SandboxError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    if json_out:
        payload = {
            "job": str(job_path),
            "summary": summary.to_json(),
            "trials": [
                {
                    "trial_name": o.result["trial_name"],
                    "task_id": o.result["task_id"],
                    "reward": o.reward,
                    "rewards": o.reading.rewards if o.reading else None,
                    "error": o.error,
                    "result": str(o.path) if o.path else None,
                }
                for o in outcomes
            ],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        table = Table(title=f"job {escape(str(out_dir))}", title_justify="left")
        for col in ("trials", "mean reward", "rewarded", "errors", "resolved"):
            table.add_column(col, justify="right")
        table.add_row(
            str(summary.trials),
            _fmt_reward(summary.mean_reward),
            str(summary.rewarded),
            str(summary.errors),
            str(summary.resolved),
        )
        out.print(table)
        out.print(f"results: {escape(str(job_path))}")
    raise typer.Exit(1 if summary.errors else 0)


@app.command()
def verify(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    reruns: Annotated[
        int, typer.Option("--reruns", "-k", min=0, help="Extra oracle runs that must agree.")
    ] = 2,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    jobs: JobsOpt = 1,
    write: Annotated[
        bool,
        typer.Option("--write/--no-write", help="Record the verdict in each task.toml."),
    ] = True,
    mutants: Annotated[
        int,
        typer.Option(
            "--mutants",
            min=0,
            help="Also run K wrong solutions derived from the gold patch; record the share the "
            "tests kill (mutant_kill_rate).",
        ),
    ] = 0,
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The quality gate: oracle must score 1, nop 0, and oracle reruns must agree.

    Records status verified | flaky | broken in [metadata.repo2env.evaluation] (with --mutants,
    also mutant_kill_rate); exit 1 if any task is not verified.
    """
    _use_ca_bundle(ca_bundle)
    from repogym.run.gate import VERIFIED, verify_tasks
    from repogym.run.trial import TrialRunner
    from repogym.sandbox import SandboxError, get_backend

    tasks = _trusted_or_exit(path, limit, pass_env, quiet=json_out)
    try:
        runner = TrialRunner(get_backend(sandbox))
    except SandboxError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None

    def done(verdict) -> None:  # type: ignore[no-untyped-def]
        if not json_out:
            colour = "green" if verdict.status == VERIFIED else "red"
            err.print(f"  {escape(verdict.task_id)}: [{colour}]{verdict.status}[/]")

    if not json_out:
        extra = f", {mutants} mutant(s)" if mutants else ""
        err.print(
            f"verifying {len(tasks)} task(s): oracle × {1 + reruns}, nop × 1{extra}, on {sandbox}"
        )
    verdicts = verify_tasks(
        tasks, runner, reruns=reruns, jobs=jobs, write=write, mutants=mutants, on_done=done
    )
    bad = [v for v in verdicts if v.status != VERIFIED]
    if json_out:
        payload = {
            "summary": {
                "tasks": len(verdicts),
                "verified": len(verdicts) - len(bad),
                "flaky": sum(v.status == "flaky" for v in verdicts),
                "broken": sum(v.status == "broken" for v in verdicts),
            },
            "tasks": [v.to_json() for v in verdicts],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        table = Table(title=f"verify {escape(str(path))}", title_justify="left")
        for col in ("task", "status", "mode", "oracle", "nop", "kill rate", "why"):
            table.add_column(col, overflow="fold")
        by_id = {t.id: t for t in tasks}
        for v in verdicts:
            colour = "green" if v.status == VERIFIED else "red"
            mode, kill = _verification_facts(by_id.get(v.task_id), v)
            table.add_row(
                escape(v.task_id),
                f"[{colour}]{v.status}[/]",
                mode,
                " ".join(_fmt_reward(r) for r in v.oracle_rewards),
                _fmt_reward(v.nop_reward),
                kill,
                escape("; ".join(v.reasons)[:300]),
            )
        out.print(table)
    raise typer.Exit(1 if bad else 0)


def _verification_facts(task, verdict) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(verification mode, kill rate) of a task for the verify table: the kill rate measured
    now, else the one recorded in its evaluation block, else —."""
    from repogym.harbor import load_task
    from repogym.harbor.verification import read_verification

    if task is None:
        return "—", "—"
    try:
        mode = read_verification(task.repo2env).mode
    except ValueError:
        mode = "invalid"
    if verdict.mutants is not None:
        rate = verdict.mutants.kill_rate
        runs = len(verdict.mutants.results)
    else:
        try:
            block = (load_task(task.path).repo2env or {}).get("evaluation") or {}
        except Exception:  # noqa: BLE001 - a table cell, never a crash
            block = {}
        rate = block.get("mutant_kill_rate")
        rate = rate if isinstance(rate, int | float) else None
        runs = block.get("mutants", 0)
    kill = "—" if rate is None else f"{rate:.2f} ({runs})"
    return mode.replace("_", " "), kill


@dataset_app.command("index")
def dataset_index(
    path: Annotated[Path, typer.Argument(help="The dataset folder.")],
    name: Annotated[str | None, typer.Option(help="Dataset name (default: folder name).")] = None,
    version: Annotated[str, typer.Option(help="Dataset version for registry.json.")] = "1.0",
    description: Annotated[str, typer.Option(help="Dataset description.")] = "",
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write registry.json (Harbor's registry format) and manifest.json at the dataset root."""
    from repogym.harbor import discover
    from repogym.harbor.dataset import write_dataset_index

    _trusted_or_exit(path, limit, quiet=True)
    found = discover(path)
    for bad_path, exc in found.invalid:
        fail(f"{bad_path.name}: {exc.file}: {exc} (left out of the index)")
    reg, man = write_dataset_index(
        path, found.tasks, name=name, version=version, description=description
    )
    if json_out:
        payload = {
            "registry": str(reg),
            "manifest": str(man),
            "tasks": len(found.tasks),
            "invalid": len(found.invalid),
        }
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        out.print(f"wrote {reg} and {man} ({len(found.tasks)} tasks)")
    raise typer.Exit(1 if found.invalid else 0)


@dataset_app.command("rehash")
def dataset_rehash(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    add: Annotated[
        bool, typer.Option("--add", help="Also give foreign tasks a [metadata.repo2env] hash.")
    ] = False,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Recompute and store each task's content_hash (after an intended edit).

    Foreign tasks (no [metadata.repo2env] block) are left untouched unless --add is given.
    """
    from repogym.harbor import TaskError, load_task, set_content_hash

    _trusted_or_exit(path, limit, quiet=True)
    results: dict[str, str | None] = {}
    bad = 0
    for task_dir in _task_dirs_or_exit(path):
        try:
            if load_task(task_dir).repo2env is None and not add:
                results[task_dir.name] = None
                continue
            results[task_dir.name] = set_content_hash(task_dir)
        except TaskError as exc:
            bad += 1
            fail(f"{task_dir.name}: {exc.file}: {exc}")
    if json_out:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for task_id, digest in results.items():
            shown = digest or "skipped (foreign task: no [metadata.repo2env]; use --add)"
            out.print(f"{escape(task_id)}  {escape(shown)}")
    raise typer.Exit(1 if bad else 0)


@app.command()
def generate(
    repo: Annotated[
        str,
        typer.Option(
            "--repo",
            help="Repository: a local clone's path, owner/name or a GitHub URL, "
            "gitlab:group/name or a GitLab URL.",
        ),
    ],
    pipeline: Annotated[
        str, typer.Option("--pipeline", "-p", help="commit_runtime | pr_runtime | pr_diff")
    ] = "commit_runtime",
    opt: Annotated[
        list[str] | None,
        typer.Option("--opt", help="Pipeline option key=value (repeatable); see docs/cli.md."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Stop after emitting N tasks.")
    ] = None,
    jobs: JobsOpt = 1,
    out_dir: Annotated[Path, typer.Option("--out", help="Dataset folder to write.")] = Path("out"),
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip candidates an earlier run already examined.")
    ] = False,
    rev: Annotated[
        str, typer.Option("--rev", help="Mine history reachable from this ref.")
    ] = "HEAD",
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="provider/model that rewrites instructions (key: OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY or REPOGYM_LLM_API_KEY); the deterministic text is kept when "
            "the rewrite fails or leaks the fix.",
        ),
    ] = None,
    llm_endpoint: Annotated[
        str | None, typer.Option("--llm-endpoint", help="Base URL of the LLM API.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Mine a repository into verified Harbor tasks (no Docker; an LLM only with --llm).

    Exit 0 when at least one task was emitted, 1 when none, 2 for bad input.
    """
    _use_ca_bundle(ca_bundle)
    from pydantic import ValidationError

    from repogym.pipelines import GenerateError
    from repogym.pipelines import generate as run_generate
    from repogym.spec import GenerationInput, describe_error, parse_opts

    try:
        inp = GenerationInput(
            repo=repo,
            pipeline=pipeline,
            out=out_dir,
            limit=limit,
            jobs=jobs,
            resume=resume,
            sandbox=sandbox,
            rev=rev,
            options=parse_opts(opt or []),
            llm=llm,
            llm_endpoint=llm_endpoint,
        )
        inp.pipeline_options()
    except ValidationError as exc:
        fail(f"bad option: {describe_error(exc)}")
        raise typer.Exit(2) from None
    except ValueError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None

    from repogym.sources.local import redact_url
    from repogym.ui.generate import GenerateView

    view = GenerateView(enabled=not json_out, title=f"{pipeline} · {redact_url(repo)}")
    try:
        with view:
            result = run_generate(inp, on_outcome=view.outcome, on_drop=view.drop)
    except GenerateError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    stats = result.stats
    if json_out:
        sys.stdout.write(result.report.read_text())
    else:
        view.final(stats, result)
        usage = json.loads(result.report.read_text()).get("llm")
        if usage:
            cost = "unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
            out.print(
                f"LLM {escape(usage['llm'])}: {usage['calls']} call(s), "
                f"{usage['input_tokens']} input + {usage['output_tokens']} output tokens, "
                f"cost {cost}; rewrites accepted {usage['accepted']}, rejected "
                f"{usage['rejected']}, failed {usage['failed']}"
            )
    raise typer.Exit(0 if stats.kept else 1)


@app.command("example-repo")
def example_repo(
    dest: Annotated[Path, typer.Argument(help="Where to create the example git repository.")],
) -> None:
    """Write the embedded example repository (a tiny pytest project with bug-fix history)."""
    from repogym.example_repo import build_example_repo

    try:
        build_example_repo(dest)
    except FileExistsError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
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
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="With --repos: repositories in parallel.")
    ] = 1,
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
    _use_ca_bundle(ca_bundle)
    from repogym.bootstrap import ExportError, UnsupportedRepo, bootstrap_ref
    from repogym.bootstrap import bootstrap as run_bootstrap
    from repogym.bootstrap.render import render_result
    from repogym.sandbox import SandboxError

    if (repo is None) == (repos is None):
        fail("give one of --repo PATH or --repos FILE")
        raise typer.Exit(2)
    if repos is not None:
        _bootstrap_survey(
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
        fail(f"{given}: only with --repos (for one repository use --ref)")
        raise typer.Exit(2)
    if not repo.is_dir():
        fail(f"{repo}: not a directory")
        raise typer.Exit(2)
    try:
        kwargs = {"check": check, "sandbox": sandbox, "refresh": refresh}
        result = bootstrap_ref(repo, ref, **kwargs) if ref else run_bootstrap(repo, **kwargs)
    except (UnsupportedRepo, ExportError, SandboxError) as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    code = 1 if result.check is not None and not result.check.ok else 0
    if json_out:
        sys.stdout.write(json.dumps({**result.to_json(), "exit_code": code}, indent=2) + "\n")
    else:
        render_result(result, out)
    raise typer.Exit(code)


def _bootstrap_survey(
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
        render_line,
        render_survey,
        run_survey,
    )
    from repogym.sandbox import SandboxError, get_backend
    from repogym.ui import progress

    if ref is not None:
        fail("--ref is for one repository; with --repos use --at REF")
        raise typer.Exit(2)
    if not check:
        fail("--repos always checks (build + collect); --no-check is for one repository")
        raise typer.Exit(2)
    try:
        specs = read_repo_list(repos)
        where = At(ref=at, years_back=years_back)
        get_backend(sandbox)
    except (OSError, UnicodeDecodeError, ValueError, SandboxError) as exc:
        fail(f"{repos}: {exc}" if isinstance(exc, OSError | UnicodeDecodeError) else str(exc))
        raise typer.Exit(2) from None
    if not specs:
        fail(f"{repos}: no repositories listed")
        raise typer.Exit(2)
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


@app.command()
def serve(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", min=1, help="Concurrent episodes (one sandbox each).")
    ] = 8,
    idle_timeout: Annotated[
        float,
        typer.Option("--idle-timeout", min=1, help="Seconds before an idle session is reaped."),
    ] = 900.0,
    token: Annotated[
        str | None,
        typer.Option(
            "--orchestrator-token",
            envvar="REPOGYM_ORCHESTRATOR_TOKEN",
            help="Secret the trainer sends with evaluate/solve (default: random, printed).",
        ),
    ] = None,
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
) -> None:
    """Serve tasks as an OpenEnv environment (WebSocket /ws, /health, /schema, /tasks)."""
    _use_ca_bundle(ca_bundle)
    import secrets

    from repogym.openenv import OpenEnvMissing

    _trusted_or_exit(path, limit, pass_env)
    limits = _host_limits_or_exit(limit, pass_env)
    try:
        import uvicorn

        from repogym.openenv import build_app

        token = token or secrets.token_urlsafe(24)
        server_app = build_app(
            path,
            sandbox=sandbox,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            orchestrator_token=token,
            limits=limits,
        )
    except (OpenEnvMissing, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    err.print(f"orchestrator token (for the trainer, not the agent): {token}")
    uvicorn.run(server_app, host=host, port=port)


@app.command()
def export(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Package folder to write (new or empty).")],
    fmt: Annotated[str, typer.Option("--format", help="Package format: openenv.")] = "openenv",
    requirement: Annotated[
        str | None,
        typer.Option("--requirement", help="pip spec for repogym (default: this version)."),
    ] = None,
    limit: LimitOpt = None,
) -> None:
    """Export tasks as a deployable package (an OpenEnv environment / HF Docker Space)."""
    from repogym.openenv.export import export_openenv

    if fmt != "openenv":
        fail(f"unknown format {fmt!r}: use --format openenv")
        raise typer.Exit(2)
    _trusted_or_exit(path, limit)
    try:
        result = export_openenv(path, out_dir, requirement=requirement)
    except (FileNotFoundError, FileExistsError) as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    for message in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(message)}")
    out.print(f"exported {result.tasks} task(s) to {result.out}")


RegistryOpt = Annotated[
    str,
    typer.Option(
        "--registry",
        help="Where datasets live: hf (HF_ENDPOINT or huggingface.co), hf+https://HOST "
        "(a Hub at that address) or file:///PATH (a local folder registry).",
    ),
]


@app.command()
def push(
    path: Annotated[Path, typer.Argument(help="The dataset folder to publish.")],
    name: Annotated[str, typer.Argument(help="owner/name of the dataset.")],
    registry: RegistryOpt = "hf",
    private: Annotated[bool, typer.Option("--private", help="Mark the dataset private.")] = False,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Publish a dataset as a new immutable revision (same tasks ⇒ same revision)."""
    from repogym.hub import RegistryError, open_registry, parse_dataset_ref

    _trusted_or_exit(path, limit, quiet=True)

    try:
        dataset, rev = parse_dataset_ref(name)
        if rev:
            raise RegistryError("push takes owner/name without @revision")
        result = open_registry(registry).push(path, dataset, private=private)
    except RegistryError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    payload = {
        "name": result.name,
        "revision": result.revision,
        "tasks": result.tasks,
        "unchanged": result.unchanged,
        "location": str(result.location),
    }
    if result.tasks_commit:
        payload["tasks_commit"] = result.tasks_commit
    if json_out:
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        note = " (unchanged: this revision was already published)" if result.unchanged else ""
        out.print(f"pushed {result.tasks} task(s) as {result.name}@{result.revision}{note}")


@app.command()
def pull(
    name: Annotated[str, typer.Argument(help="owner/name[@revision] of the dataset.")],
    dest: Annotated[Path, typer.Argument(help="Folder to write the dataset into.")],
    task: Annotated[str | None, typer.Option("--task", help="Pull only this task id.")] = None,
    registry: RegistryOpt = "hf",
    json_out: JsonOpt = False,
) -> None:
    """Fetch a dataset (or one task) at a revision; tasks keep their content_hash."""
    from repogym.hub import RegistryError, open_registry, parse_dataset_ref

    try:
        dataset, rev = parse_dataset_ref(name)
        result = open_registry(registry).pull(dataset, dest, rev=rev, task=task)
    except RegistryError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    if json_out:
        payload = {"name": result.name, "revision": result.revision, "tasks": result.tasks}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        out.print(
            f"pulled {len(result.tasks)} task(s) of {result.name}@{result.revision} "
            f"into {escape(str(dest))}"
        )


auth_app = typer.Typer(help="Credentials for GitHub, GitLab, Hugging Face and LLM endpoints.")
app.add_typer(auth_app, name="auth")


@auth_app.command("check")
def auth_check(
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Ask each service whether it works.")
    ] = True,
    json_out: JsonOpt = False,
) -> None:
    """Which credentials are present and whether they work; never prints a secret.

    Exit 1 when a present credential is rejected, else 0.
    """
    from repogym.auth import check_credentials

    statuses = check_credentials(probe=probe)
    if json_out:
        sys.stdout.write(json.dumps([s.to_json() for s in statuses], indent=2) + "\n")
    else:
        table = Table(title="credentials", title_justify="left")
        for col in ("service", "present", "from", "works", "detail"):
            table.add_column(col)
        for s in statuses:
            works = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[s.ok]
            table.add_row(
                s.service,
                "yes" if s.present else "no",
                escape(s.source or ""),
                works if s.present else "",
                escape(s.detail),
            )
        out.print(table)
    raise typer.Exit(1 if any(s.ok is False for s in statuses) else 0)


def _bundled_examples() -> Path | None:
    """examples/tasks of a source checkout (editable install), when present."""
    here = Path(__file__).resolve()
    for root in (here.parents[2], Path.cwd()):
        cand = root / "examples" / "tasks"
        if (cand / "hello-file" / "task.toml").is_file():
            return cand
    return None


@app.command(
    context_settings={"allow_interspersed_args": True},
    epilog="Build a snapshot instead: repogym explore index PATH... --out DIR [--json]",
)
def explore(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Dataset folders (Harbor tasks or row files). Default: the bundled examples. "
            "'index PATH... --out DIR' builds a snapshot instead of serving.",
            show_default=False,
        ),
    ] = None,
    hub: Annotated[
        bool, typer.Option("--hub", help="Add Harbor datasets from the Hugging Face Hub.")
    ] = False,
    openenv: Annotated[
        list[str] | None,
        typer.Option("--openenv", help="A live OpenEnv server URL (repeatable)."),
    ] = None,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="Serve a published snapshot folder (pointer file)."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8080,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="index: folder to publish the snapshot in.")
    ] = None,
    workers: Annotated[
        int,
        typer.Option("--workers", help="Server processes (more than 1 needs --snapshot)."),
    ] = 1,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Browse and search RL environments' tasks in a web app (answers are never shown)."""
    import time

    paths = list(paths or [])
    sources = list(openenv or [])
    if paths and paths[0] == "index":
        _explore_index(paths[1:], out_dir, hub=hub, openenv=sources, json_out=json_out, limit=limit)
        return
    if out_dir is not None:
        fail("--out belongs to 'repogym explore index PATH... --out DIR'")
        raise typer.Exit(2)
    for p in paths:
        if not Path(p).exists():
            fail(f"{p}: no such file or directory")
            raise typer.Exit(2)
    _trusted_folders_or_exit(paths, limit)
    if snapshot is not None and not snapshot.is_dir():
        fail(f"--snapshot {snapshot}: no such folder (build one with: repogym explore index)")
        raise typer.Exit(2)
    if workers < 1:
        fail("--workers must be at least 1")
        raise typer.Exit(2)
    if workers > 1 and snapshot is None:
        fail("--workers N needs --snapshot DIR (build one with: repogym explore index)")
        raise typer.Exit(2)
    if not paths and not hub and not sources and snapshot is None:
        examples = _bundled_examples()
        if examples is None:
            fail("nothing to explore: give dataset folders (e.g. repogym explore examples/tasks)")
            raise typer.Exit(2)
        paths = [str(examples)]
    try:
        import fastapi  # noqa: F401
        import uvicorn

        from repogym.explorer.web import create_app
    except ImportError:
        fail("the explorer needs FastAPI and uvicorn: pip install 'repogym[explorer]'")
        raise typer.Exit(2) from None
    from repogym.explorer.adapters.base import AdapterError
    from repogym.explorer.snapshot import SnapshotError
    from repogym.explorer.store import open_store

    t0 = time.perf_counter()
    try:
        # In-process sources are served as soon as every task list is known; the task pages
        # follow when packed (the snapshot swaps under the running server).
        store = open_store(
            paths, snapshot=snapshot, hub=hub, openenv=sources, background=snapshot is None
        )
    except (AdapterError, SnapshotError, OSError, ValueError) as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    total = store.search(size=1)["total"]
    err.print(
        f"explorer: {total} environment(s) listed in {time.perf_counter() - t0:.2f}s; "
        f"open http://{host}:{port}/"
    )
    if snapshot is None:
        import threading

        def report_ready() -> None:
            store.ready.wait()
            errors = getattr(store, "build_errors", None)
            if errors:
                fail(f"indexing stopped: {str(errors[0]).splitlines()[0]}")
            else:
                err.print(f"explorer: task pages ready in {time.perf_counter() - t0:.2f}s")

        threading.Thread(target=report_ready, daemon=True).start()
    if workers > 1:  # each worker process opens the snapshot itself
        import os

        store.close()
        os.environ["REPOGYM_EXPLORE_SNAPSHOT"] = str(snapshot)
        uvicorn.run(
            "repogym.explorer.web.app:snapshot_app",
            factory=True,
            workers=workers,
            host=host,
            port=port,
            log_level="warning",
        )
        return
    from repogym.explorer.web.app import settle_heap

    server_app = create_app(store)
    settle_heap()
    uvicorn.run(server_app, host=host, port=port, log_level="warning")


def _trusted_folders_or_exit(paths: list[str], limit: list[str] | None) -> None:
    """The trust boundary for the explorer's local folders that hold Harbor tasks."""
    from repogym.harbor import iter_task_dirs

    for p in paths:
        if Path(p).is_dir() and next(iter(iter_task_dirs(p)), None) is not None:
            _trusted_or_exit(Path(p), limit, quiet=True)


def _explore_index(
    paths: list[str],
    out_dir: Path | None,
    *,
    hub: bool,
    openenv: list[str],
    json_out: bool,
    limit: list[str] | None = None,
) -> None:
    """repogym explore index PATH... --out DIR: build and publish a snapshot."""
    if out_dir is None:
        fail("repogym explore index needs --out DIR")
        raise typer.Exit(2)
    if not paths and not hub and not openenv:
        fail("repogym explore index needs at least one PATH (or --hub / --openenv)")
        raise typer.Exit(2)
    for p in paths:
        if not Path(p).exists():
            fail(f"{p}: no such file or directory")
            raise typer.Exit(2)
    _trusted_folders_or_exit(paths, limit)
    from repogym.explorer.adapters.base import AdapterError
    from repogym.explorer.build import build_snapshot
    from repogym.explorer.pack import PackError
    from repogym.explorer.snapshot import SnapshotError

    try:
        info = build_snapshot(paths, out_dir, hub=hub, openenv=openenv)
    except (AdapterError, SnapshotError, PackError, OSError, ValueError) as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    if json_out:
        sys.stdout.write(json.dumps(info, default=str) + "\n")
    else:
        out.print(
            f"snapshot {escape(str(info.get('snapshot')))}: {info.get('envs')} environment(s), "
            f"{info.get('tasks')} task(s), {int(info.get('bytes') or 0) / 1e6:.2f} MB, "
            f"built in {float(info.get('snapshot_seconds') or 0):.2f}s; ingest "
            f"{float(info.get('ingest_seconds') or 0):.2f}s ({info.get('pages_new', 0)} task(s) "
            f"read, {info.get('pages_reused', 0)} unchanged); pack "
            f"{int(info.get('pack_bytes') or 0) / 1e6:.2f} MB"
        )
        for line in info.get("errors") or []:
            err.print(f"skipped: {escape(str(line))}")


if __name__ == "__main__":  # pragma: no cover
    app()
