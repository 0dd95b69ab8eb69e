"""Building a candidate's environment and running its staged verifier in the sandbox: the
steps the runtime harness (:mod:`.runtime`) and the synthesized-task harnesses
(:mod:`.._synthesis.harness`, ``equivalence_tests``) share.

Plain functions over a backend or a session: they need nothing of a harness but the values
passed in (the pipelines' options are read by the caller).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repogym.bootstrap import Recipe, cache_root
from repogym.bootstrap.pin import (
    CONSTRAINTS_NAME,
    FREEZE,
    LockStore,
    constraints_from_freeze,
    pinned_dockerfile,
)
from repogym.pipelines._harness.emit import update_config, write_environment
from repogym.pipelines._harness.frame import RunFailed
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, SandboxError, Session
from repogym.shipped import tamper

RESULTS = "/tmp/repogym-results.json"


def build_pinned(
    backend: Sandbox,
    recipe: Recipe,
    context: Path,
    spec: EnvironmentSpec,
    key: str,
    log: Path,
) -> BuiltEnvironment:
    """Build the task's environment with the dependency versions pinned (Python: a
    constraints file from the first build's ``pip freeze``, cached per recipe)."""
    locks = LockStore(cache_root() / "locks") if recipe.language == "python" else None
    constraints = locks.get(recipe.hash) if locks else None
    if constraints:
        (context / CONSTRAINTS_NAME).write_text(constraints)
        write_environment(context, recipe, key, pinned_dockerfile(recipe.dockerfile))
        return backend.build(spec, log=log)
    write_environment(context, recipe, key)
    built = backend.build(spec, log=log)
    if locks is None:
        return built
    with backend.start(built, spec) as session:
        res = session.exec(FREEZE, cwd=recipe.workdir, timeout_s=300, network=False)
    constraints = constraints_from_freeze(res.stdout) if res.exit_code == 0 else ""
    if not constraints:
        return built
    locks.put(recipe.hash, constraints)
    (context / CONSTRAINTS_NAME).write_text(constraints)
    write_environment(context, recipe, key, pinned_dockerfile(recipe.dockerfile))
    return backend.build(spec, log=log)


def probe(session: Session, recipe: Recipe, tests: Path, snapshot: Path) -> None:
    """In a pristine session: the pytest plugins the verifier must load explicitly, and the
    base's tamper-rule hits (which the agent's change is compared with)."""
    fields: dict[str, Any] = {}
    if recipe.runner == "pytest":
        res = session.exec(
            ["python3", "/usr/lib/repogym/record.py", "--plugins"],
            timeout_s=120,
            cwd=recipe.workdir,
            network=False,
        )
        try:
            fields["pytest_plugins"] = json.loads(res.stdout or "[]")
        except json.JSONDecodeError:
            raise RunFailed(
                "verifier self-check failed", f"plugin probe: {res.stderr.strip()[:200]}"
            ) from None
    # Only the non-test source files are ever scanned (tests are reset, not scanned).
    sources = sorted(json.loads((tests / "sources.json").read_text()))
    if recipe.language == "python" or _on_path(session, "python3"):
        session.write("/tmp/repogym-sources.txt", "\n".join(sources) + "\n")
        res = session.exec(
            [
                "python3",
                "-I",
                "-S",
                "/tests/tamper.py",
                "baseline",
                recipe.workdir,
                "--files",
                "/tmp/repogym-sources.txt",
            ],
            timeout_s=1800,
            network=False,
        )
        try:
            baseline = json.loads(res.stdout)
        except json.JSONDecodeError:
            raise RunFailed(
                "verifier self-check failed", f"tamper baseline: {res.stderr.strip()[:200]}"
            ) from None
    else:
        # An image without Python (node:*-slim): the same scan (tamper.py is plain Python)
        # over the snapshot the image was built from.
        baseline = tamper.baseline(str(snapshot), sources)
    (tests / "tamper_baseline.json").write_text(json.dumps(baseline, sort_keys=True) + "\n")
    ancestors = []
    parent = recipe.workdir.rstrip("/").rsplit("/", 1)[0] or "/"
    while True:
        for name in ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg"):
            path = f"{parent.rstrip('/')}/{name}"
            if _exists(session, path):
                ancestors.append(path)
        if parent == "/":
            break
        parent = parent.rsplit("/", 1)[0] or "/"
    fields["ancestors"] = ancestors
    if recipe.runner in ("jest", "mocha"):
        fields["json_report"] = True  # until a run shows this version cannot write one
    update_config(tests, **fields)


def verifier_result(
    session: Session, recipe: Recipe, tests: Path, timeout: float
) -> dict[str, Any] | None:
    """One run through the staged verifier (``test.sh --results``); None on timeout."""
    res = session.exec(
        ["bash", "/tests/test.sh", "--results", RESULTS],
        timeout_s=timeout,
        cwd=recipe.workdir,
        network=False,
    )
    if res.timed_out:
        return None
    try:
        result = json.loads(session.read(RESULTS))
    except (FileNotFoundError, json.JSONDecodeError, SandboxError):
        tail = (res.stdout + res.stderr).strip().splitlines()[-1:] or [""]
        raise RunFailed("verifier self-check failed", tail[0][:300]) from None
    result["seconds"] = res.duration_s
    config = json.loads((tests / "config.json").read_text())
    if result.get("parse_status") == "no report" and config.get("json_report"):
        # This runner's version writes no JSON report file: grade from its log instead.
        update_config(tests, json_report=False)
        return verifier_result(session, recipe, tests, timeout)
    problems = result.get("integrity", []) + result.get("infra_problems", [])
    if problems:
        raise RunFailed("verifier self-check failed", "; ".join(problems)[:300])
    return result


def verifier_runs(
    session: Session, recipe: Recipe, tests: Path, count: int, state: str, timeout: float
) -> tuple[list[dict[str, Any]], float]:
    """``count`` runs through the staged verifier (:func:`verifier_result`) and the seconds
    they took; RunFailed when one times out or its log is not understood (``state`` says which
    runs: ``before the fix``, ``baseline``, …)."""
    runs: list[dict[str, Any]] = []
    spent = 0.0
    for _ in range(count):
        result = verifier_result(session, recipe, tests, timeout)
        if result is None:
            raise RunFailed(f"tests time out ({state})")
        spent += result["seconds"]
        if result["parse_status"] not in ("ok", "empty"):
            raise RunFailed(f"test log not understood ({state})", str(result["parse_status"]))
        runs.append(result)
    return runs, spent


def _exists(session: Session, path: str) -> bool:
    res = session.exec(["test", "-e", path], timeout_s=30, network=False)
    return res.exit_code == 0


def _on_path(session: Session, program: str) -> bool:
    res = session.exec(["sh", "-c", f"command -v {program}"], timeout_s=30, network=False)
    return res.exit_code == 0
