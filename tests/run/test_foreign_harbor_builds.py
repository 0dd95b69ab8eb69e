"""Harbor tasks written by others whose builds repogym used to get wrong: a compose ``main``
built from another context inside the task, compose files Harbor does not read, and COPY
sources or an oracle that are missing (found by ``validate --runnable`` before any build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import NopAgent, OracleAgent
from repogym.run.plan import plan_task
from repogym.run.preflight import preflight
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.sandbox.context_check import missing_sources
from repogym.taskdir import load_task
from repogym.taskdir.validate import validate_task
from tests.conftest import write_task

HEAD = 'schema_version = "1.4"\n[task]\nname = "acme/{name}"\n'
OFFLINE = '[environment]\nnetwork_mode = "no-network"\n'

# ------------------------------------------------------------------ 1. main built from the task

PARENT_CONTEXT = """\
services:
  main:
    build:
      context: ${CONTEXT_DIR}/..
      dockerfile: ${CONTEXT_DIR}/Dockerfile
"""


def _parent_context_task(root: Path, compose: str = PARENT_CONTEXT) -> Path:
    """The shape of the refused dataset: the Dockerfile in environment/, the build context the
    task folder, so the image copies a file that lives beside environment/."""
    return write_task(
        root,
        "t",
        toml=HEAD.format(name="t") + OFFLINE,
        dockerfile="FROM debian:bookworm\nWORKDIR /app\nCOPY shared/data.txt /app/data.txt\n",
        test_sh=(
            "#!/bin/bash\n"
            'if [ "$(cat /app/answer.txt)" = "$(cat /app/data.txt)" ]; then r=1; else r=0; fi\n'
            "echo $r > /logs/verifier/reward.txt\n"
        ),
        files={
            "environment/docker-compose.yaml": compose,
            "shared/data.txt": "forty-two\n",
            "solution/solve.sh": "#!/bin/bash\ncp /app/data.txt /app/answer.txt\n",
        },
    )


def test_main_built_from_the_task_folder_is_planned_not_refused(tmp_path: Path) -> None:
    path = _parent_context_task(tmp_path)
    task = load_task(path)
    assert preflight(task) == []
    spec = plan_task(task, "local").environment
    assert spec.context_dir == path.resolve()
    assert spec.dockerfile == "environment/Dockerfile"


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        ("context: ${CONTEXT_DIR}/../..", "build context"),
        ("context: ${CONTEXT_DIR}/..\n      dockerfile: ../../Dockerfile", "Dockerfile"),
    ],
)
def test_main_built_from_outside_the_task_is_still_refused(
    tmp_path: Path, build: str, fragment: str
) -> None:
    compose = f"services:\n  main:\n    build:\n      {build}\n"
    path = _parent_context_task(tmp_path, compose)
    reasons = preflight(load_task(path))
    assert len(reasons) == 1, reasons
    assert "outside the task" in reasons[0] and fragment in reasons[0], reasons


@pytest.mark.slow
def test_main_built_from_the_task_folder_runs_on_the_local_sandbox(tmp_path: Path) -> None:
    runner = TrialRunner(get_backend("local"))
    task = load_task(_parent_context_task(tmp_path))
    oracle = runner.run(task, OracleAgent())
    assert oracle.reward == 1.0, (oracle.error, oracle.verifier_stdout)
    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0, nop.error


# ------------------------------------------------------------------ 3. compose file names


@pytest.mark.parametrize("name", ["docker-compose.yml", "compose.yaml", "compose.yml"])
def test_only_harbors_compose_file_name_is_read(tmp_path: Path, name: str) -> None:
    """Harbor reads environment/docker-compose.yaml only; a sidecar in another file is not
    started there, so it is neither run nor refused here, and validate says so."""
    bad = "services:\n  cache:\n    image: redis:7\n    network_mode: host\n"
    path = write_task(tmp_path, "t", files={f"environment/{name}": bad})
    task = load_task(path)
    assert task.compose() is None
    assert preflight(task) == []
    warnings = [p.message for p in validate_task(path).warnings]
    assert any(name in w and "docker-compose.yaml" in w for w in warnings), warnings
    (path / "environment/docker-compose.yaml").write_text(bad)
    reasons = preflight(load_task(path))
    assert any("docker-compose.yaml" in r and "network_mode" in r for r in reasons), reasons


# ------------------------------------------------------------------ 5. validate --runnable


def _runnable(path: Path) -> dict:
    result = CliRunner().invoke(app, ["validate", str(path), "--runnable", "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    return {row["task_id"]: row for row in data["tasks"]}


def test_runnable_finds_missing_copy_sources_before_building(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    solve = {"solution/solve.sh": "#!/bin/bash\ntrue\n"}
    base = "FROM debian:bookworm AS build\nRUN mkdir /out\nFROM debian:bookworm\n"
    cases = {
        "missing": ("COPY requirements.txt /app/\n", {}),
        "wildcard-none": ("COPY *.whl /wheels/\n", {}),
        "wildcard-some": ("COPY *.whl /wheels/\n", {"environment/a-1-py3-none-any.whl": "w"}),
        "ignored": (
            "COPY secret.txt /app/\n",
            {"environment/secret.txt": "s", "environment/.dockerignore": "*.txt\n"},
        ),
        "re-included": (
            "COPY keep.txt /app/\n",
            {"environment/keep.txt": "k", "environment/.dockerignore": "*.txt\n!keep.txt\n"},
        ),
        "not-context": (
            "COPY --from=build /out /out\nCOPY --from=ghcr.io/astral-sh/uv:0.8.4 /uv /bin/\n"
            "COPY <<EOF /etc/motd\nhello\nEOF\n"
            'COPY ["src dir/", "/app/src/"]\n'
            "ARG WHEEL\nCOPY ${WHEEL} /w/\n",
            {"environment/src dir/m.py": "x"},
        ),
        "one-of-two": ("COPY here.txt gone.txt /app/\n", {"environment/here.txt": "h"}),
    }
    for name, (lines, files) in cases.items():
        write_task(ds, name, dockerfile=base + lines, files={**solve, **files})
    rows = _runnable(ds)
    ok = {n for n, r in rows.items() if r["runnable"]}
    assert ok == {"wildcard-some", "re-included", "not-context"}, rows
    for name, word in [
        ("missing", "requirements.txt"),
        ("wildcard-none", "*.whl"),
        ("ignored", "secret.txt"),
        ("one-of-two", "gone.txt"),
    ]:
        (reason,) = rows[name]["refusals"]
        assert reason.startswith("environment/Dockerfile line 4: ") and word in reason, reason
    assert ".dockerignore" in rows["ignored"]["refusals"][0]
    assert "here.txt" not in rows["one-of-two"]["refusals"][0]


def test_remote_add_sources_are_not_looked_for_in_the_context(tmp_path: Path) -> None:
    """The local backend refuses remote ADD for its own reason; the context check (which
    the docker backend's preflight shares) never reports them as missing."""
    text = (
        "FROM debian:bookworm\nADD https://example.com/x.tar.gz /x.tgz\n"
        "ADD git@github.com:acme/lib.git /lib\nADD local.tar /x/\n"
    )
    (tmp_path / "local.tar").write_text("t")
    assert missing_sources(tmp_path, text) == []
    (tmp_path / "local.tar").unlink()
    (missing,) = missing_sources(tmp_path, text)
    assert (missing.lineno, missing.keyword, missing.source) == (4, "ADD", "local.tar")


def test_runnable_checks_the_context_compose_gives_main(tmp_path: Path) -> None:
    path = _parent_context_task(tmp_path / "ds")
    assert _runnable(tmp_path / "ds")["t"]["runnable"]
    (path / "shared/data.txt").unlink()
    (reason,) = _runnable(tmp_path / "ds")["t"]["refusals"]
    assert "environment/Dockerfile line 3" in reason and "shared/data.txt" in reason, reason


def test_runnable_warns_that_the_oracle_cannot_run_without_solve_sh(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    write_task(ds, "no-oracle")
    write_task(ds, "oracle", files={"solution/solve.sh": "#!/bin/bash\ntrue\n"})
    rows = _runnable(ds)
    assert rows["no-oracle"]["runnable"] and rows["oracle"]["runnable"]
    (warning,) = rows["no-oracle"]["warnings"]
    assert "solution/solve.sh" in warning and "oracle" in warning
    assert rows["oracle"]["warnings"] == []
    text = CliRunner().invoke(app, ["validate", str(ds), "--runnable"])
    assert text.exit_code == 0, text.output
    assert "warning" in text.output and "solution/solve.sh" in text.output


def test_a_main_build_copying_the_hidden_tests_or_solution_is_warned_of(tmp_path: Path) -> None:
    """A build context that holds the task folder lets ``COPY . /app`` put the hidden tests and
    the answer in the agent's image: the warning names the line and the folders."""
    from repogym.run.preflight import preflight_warnings

    path = _parent_context_task(tmp_path)
    assert preflight_warnings(load_task(path)) == []  # copies only shared/data.txt
    dockerfile = path / "environment/Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY . /src\n")
    warnings = preflight_warnings(load_task(path))
    assert len(warnings) == 2, warnings
    assert all("line 4" in w and "agent's image" in w for w in warnings), warnings
    assert {w.split("copies ")[1].split("/")[0] for w in warnings} == {"tests", "solution"}
    (path / ".dockerignore").write_text("tests\nsolution\n")
    assert preflight_warnings(load_task(path)) == []
    (path / ".dockerignore").write_text("tests\n")
    dockerfile.write_text(
        dockerfile.read_text().replace("COPY . /src", "COPY solution/solve.sh /s")
    )
    (warning,) = preflight_warnings(load_task(path))
    assert "line 4" in warning and "solution/" in warning, warning


def test_apk_on_an_alpine_base_the_host_stands_in_for_is_refused_before_building(
    tmp_path: Path,
) -> None:
    """This host stands in for ``node:22-alpine`` with its Debian base: a ``RUN apk`` cannot
    work there, and the refusal says so (and how to get the real image) before any build."""
    backend = get_backend("local")
    if getattr(backend, "registries", None):
        pytest.skip("a registry is configured: the Alpine image itself would be pulled")
    dockerfile = "FROM node:22-alpine\nRUN apk add --no-cache git\nRUN node --version\n"
    path = write_task(tmp_path, "alpine", toml=HEAD.format(name="alpine"), dockerfile=dockerfile)
    reasons = preflight(load_task(path), backend=backend)
    assert len(reasons) == 1 and "line 2" in reasons[0], reasons
    assert "Alpine" in reasons[0] and "registry" in reasons[0], reasons
    plain = write_task(
        tmp_path,
        "alpine-node",
        toml=HEAD.format(name="alpine-node"),
        dockerfile="FROM node:22-alpine\nRUN node --version\n",
    )
    assert not any("apk" in r for r in preflight(load_task(plain), backend=backend))
