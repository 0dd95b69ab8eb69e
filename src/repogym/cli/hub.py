"""``repogym push`` / ``repogym pull`` (datasets on a registry) and ``repogym auth``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from repogym.cli.app import app, new_group
from repogym.cli.common import JsonOpt, LimitOpt, bad_input, trusted_or_exit
from repogym.ui import escape, out

RegistryOpt = Annotated[
    str,
    typer.Option(
        "--registry",
        help="Where datasets live: hf (HF_ENDPOINT or huggingface.co), hf+https://HOST "
        "(a Hub at that address) or file:///PATH (a local folder registry).",
    ),
]


def _push_images_first(
    path: Path, prefix: str, base_registry: list[str] | None, quiet: bool
) -> None:
    """``push --images``: the images go first; a task whose image failed stops the push."""
    from repogym.cli.images import local_sandbox
    from repogym.hub.images import ImagesError, push_images
    from repogym.ui import err

    sandbox = local_sandbox(base_registry, None)
    try:
        report = push_images(
            path,
            prefix,
            sandbox=sandbox,
            progress=None if quiet else lambda line: err.print(escape(line)),
        )
    except ImagesError as exc:
        raise bad_input(str(exc)) from None
    failed = [t for t in report.tasks if t.status == "failed"]
    if failed:
        raise bad_input(
            f"{failed[0].task}: image not pushed ({failed[0].error}); nothing published"
        )


@app.command()
def push(
    path: Annotated[Path, typer.Argument(help="The dataset folder to publish.")],
    name: Annotated[str, typer.Argument(help="owner/name of the dataset.")],
    registry: RegistryOpt = "hf",
    private: Annotated[bool, typer.Option("--private", help="Mark the dataset private.")] = False,
    images: Annotated[
        str | None,
        typer.Option(
            "--images",
            metavar="HOST/PREFIX",
            help="First push every task's environment image there (`repogym images push`) "
            "and publish the tasks with their pinned docker_image.",
        ),
    ] = None,
    base_registry: Annotated[
        list[str] | None,
        typer.Option("--base-registry", metavar="HOST=URL", help="With --images: see images push."),
    ] = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Publish a dataset as a new immutable revision (same tasks ⇒ same revision)."""
    from repogym.hub import RegistryError, open_registry, parse_dataset_ref

    trusted_or_exit(path, limit, quiet=True)

    try:
        dataset, rev = parse_dataset_ref(name)
        if rev:
            raise RegistryError("push takes owner/name without @revision")
        if images:
            _push_images_first(path, images, base_registry, quiet=json_out)
        result = open_registry(registry).push(path, dataset, private=private)
    except RegistryError as exc:
        raise bad_input(str(exc)) from None
    payload = {
        "name": result.name,
        "revision": result.revision,
        "tasks": result.tasks,
        "unchanged": result.unchanged,
        "location": str(result.location),
    }
    if result.tasks_commit:
        payload["tasks_commit"] = result.tasks_commit
    lines = _harbor_lines(result.location)
    if lines:
        payload["harbor_run"] = lines
    if json_out:
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        note = " (unchanged: this revision was already published)" if result.unchanged else ""
        out.print(f"pushed {result.tasks} task(s) as {result.name}@{result.revision}{note}")
        if lines:
            out.print("run it with Harbor (from any folder):")
            for line in lines:
                out.print(f"  {escape(line)}")
        else:
            from repogym.taskdir.dataset import HARBOR_PLUGIN

            pull_line = f"repogym pull {result.name}@{result.revision} DIR --registry {registry}"
            run_line = f"harbor run -p DIR/tasks -a oracle -e {HARBOR_PLUGIN}"
            out.print(f"run it with Harbor: {escape(pull_line)}, then {escape(run_line)}")


def _harbor_lines(location: Path | str) -> list[str]:
    """The ``harbor run`` lines of a revision in a folder registry (its tasks and its
    ``registry.json``); none for a hosted one (``repogym pull`` it first)."""
    from repogym.taskdir.dataset import harbor_run_lines

    return harbor_run_lines(location) if isinstance(location, Path) else []


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
        raise bad_input(str(exc)) from None
    if json_out:
        payload = {"name": result.name, "revision": result.revision, "tasks": result.tasks}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        out.print(
            f"pulled {len(result.tasks)} task(s) of {result.name}@{result.revision} "
            f"into {escape(str(dest))}"
        )
        # by folder: a pulled registry.json may name a server's git repository
        lines = [ln for ln in _harbor_lines(Path(dest)) if ln.startswith("harbor run -p ")]
        if lines:
            out.print(f"run them with Harbor: {escape(lines[0])}")


auth_app = new_group(help="Credentials for GitHub, GitLab, Hugging Face and LLM endpoints.")
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
