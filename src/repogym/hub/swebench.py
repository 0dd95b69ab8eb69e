"""Tasks as SWE-bench instances (JSON Lines), gradable by the ``swebench`` harness.

One instance per graded runtime task whose test runner SWE-bench's log parsers understand
(pytest → ``parse_log_pytest``; unittest → ``parse_log_django``, which reads unittest's verbose
lines). Test ids are rewritten into the keys those parsers produce, so ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` match the harness's status map. A task that cannot be expressed is skipped with
a one-line reason.

The harness itself applies the model patch with ``git apply`` in ``/testbed`` (falling back to
``patch``, but resetting the tree with ``git checkout`` between attempts) and diffs the tree
with git, so an image for these instances must carry git and hold the repository as a git work
tree at ``/testbed`` whose HEAD is ``base_commit``'s tree. The eval script uses git as well.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from repogym.atomic import atomic_write
from repogym.taskdir import Task, discover

__all__ = [
    "EVAL_WORKDIR",
    "LOCAL_OWNER",
    "NotExpressible",
    "SwebenchExport",
    "export_swebench",
    "owner_name",
    "swebench_id",
    "task_instance",
]

EVAL_WORKDIR = "/testbed"
"""Where the swebench harness runs git and the eval script (its ``CONTAINER_WORKDIR``)."""
LOCAL_OWNER = "local"
"""Owner used for a repository with no hosted remote: ``local/<folder name>``."""
START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"
PARSERS = {"pytest": "parse_log_pytest", "unittest": "parse_log_django"}
_HEREDOC = "EOF_REPOGYM_TEST_PATCH"
_VERSION_TAG = re.compile(r"^(?:[A-Za-z][\w.-]*?[-_])?v?(\d+(?:\.\d+){1,3})$")
_FROM_PYTHON = re.compile(r"^\s*FROM\s+(?:\S*/)?python:(\d+)\.(\d+)", re.I | re.M)


class NotExpressible(ValueError):
    """The task cannot be written as a SWE-bench instance (the message says why)."""


@dataclass
class SwebenchExport:
    """What :func:`export_swebench` wrote."""

    out: Path
    instances: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(task id, reason) for each task left out."""


def swebench_id(test_id: str, runner: str, python: tuple[int, int] | None = None) -> str:
    """``test_id`` as a repogym verifier writes it, as the key of the runner's swebench parser.

    pytest ids are the same. A unittest id ``pkg.mod.Class.test_x`` becomes the verbose line's
    name: ``test_x (pkg.mod.Class.test_x)`` on Python ≥ 3.11, ``test_x (pkg.mod.Class)`` before
    (``python`` unknown: the 3.11 form)."""
    if runner == "pytest":
        return test_id
    if runner == "unittest":
        owner, _, name = test_id.rpartition(".")
        if not owner or not name:
            raise NotExpressible(f"unittest id {test_id!r} is not module.Class.method")
        return f"{name} ({test_id})" if python is None or python >= (3, 11) else f"{name} ({owner})"
    raise NotExpressible(f"runner {runner!r}: swebench has no parser whose ids repogym maps")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotExpressible(f"{path.name} unreadable: {exc}") from None


def _git_diff(path: str, old: str | None, new: str) -> str:
    """A git-style diff of one file (``old`` None: a new file)."""
    head = f"diff --git a/{path} b/{path}\n"
    if old is None:
        head += "new file mode 100644\n"
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if old is None else f"a/{path}",
        f"b/{path}",
    )
    body = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return head + body if body else ""


def _test_patch(task: Task, restore: list[str]) -> str:
    """``tests/test.patch``, else a diff from the snapshot's test files to the hidden ones."""
    patch = task.tests_dir / "test.patch"
    if patch.is_file():
        return patch.read_text(encoding="utf-8")
    parts = []
    for rel in restore:
        hidden = task.tests_dir / "files" / rel
        if not hidden.is_file():
            continue
        base = task.environment_dir / "repo" / rel
        old = base.read_text(encoding="utf-8") if base.is_file() else None
        parts.append(_git_diff(rel, old, hidden.read_text(encoding="utf-8")))
    if not any(parts):
        raise NotExpressible("no test patch (tests/test.patch or tests/files/)")
    return "".join(parts)


def _patched_files(patch: str) -> tuple[list[str], list[str]]:
    """(files the patch changes that exist before it, files it creates)."""
    existing, created = [], []
    old = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            old = line[4:].split("\t")[0]
        elif line.startswith("+++ ") and old is not None:
            new = line[4:].split("\t")[0]
            if old == "/dev/null":
                created.append(new.removeprefix("b/"))
            else:
                existing.append(old.removeprefix("a/"))
            old = None
    return existing, created


def eval_script(command: str, env: dict[str, str], test_patch: str) -> str:
    """The eval script: test patch in, the test command between the markers, tests reset."""
    existing, created = _patched_files(test_patch)
    reset = []
    if existing:
        reset.append("git checkout HEAD -- " + " ".join(_quote(p) for p in existing))
    if created:
        reset.append("rm -f -- " + " ".join(_quote(p) for p in created))
    exports = [f"export {k}={_quote(v)}" for k, v in sorted(env.items())]
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {EVAL_WORKDIR}",
        *exports,
        *reset,
        f"git apply --verbose - <<'{_HEREDOC}'",
        test_patch.rstrip("\n"),
        _HEREDOC,
        f"echo '{START}'",
        command,
        f"echo '{END}'",
        *reset,
    ]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _image(task: Task) -> str | None:
    env = task.config.environment
    return (env.docker_image if env else None) or None


def _python_version(task: Task) -> tuple[int, int] | None:
    try:
        text = (task.environment_dir / "Dockerfile").read_text(encoding="utf-8")
    except OSError:
        return None
    m = _FROM_PYTHON.search(text)
    return (int(m[1]), int(m[2])) if m else None


@dataclass(frozen=True)
class SourceFacts:
    """What the source clone tells about a task (all optional)."""

    repo: str | None = None
    created_at: str | None = None
    version: str | None = None


def _git(source: Path, *args: str) -> str:
    try:
        res = subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def owner_name(url: str) -> str | None:
    """``owner/name`` of a hosted remote (https, ssh, scp-like); None for a local path."""
    m = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?[^/]+/(.+)$", url, re.I)
    if m is None:
        m = re.match(r"^(?:[^@/:]+@)?[^:/]+:(?!/)(.+)$", url)
    if m is None or url.lower().startswith("file:"):
        return None
    parts = [p for p in m[1].split("/") if p]
    if len(parts) < 2:
        return None
    return f"{parts[-2]}/{parts[-1].removesuffix('.git')}"


def source_facts(source: Path | None, commits: list[str]) -> SourceFacts:
    """``owner/name`` from the clone's ``origin`` remote; the committer date (UTC) of the first
    of ``commits`` the clone has, and the release tag (``git describe``) of the last."""
    if source is None:
        return SourceFacts()
    url = _git(source, "config", "--get", "remote.origin.url")
    repo = owner_name(url) if url else None
    for sha in commits:
        stamp = _git(source, "log", "-1", "--format=%ct", f"{sha}^{{commit}}", "--")
        if stamp.isdigit():
            date = datetime.fromtimestamp(int(stamp), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            tag = _git(source, "describe", "--tags", "--abbrev=0", f"{commits[-1]}^{{commit}}")
            m = _VERSION_TAG.match(tag)
            return SourceFacts(repo, date, m[1] if m else None)
    return SourceFacts(repo)


def _utc(stamp: str) -> str:
    """An ISO 8601 time as UTC ``YYYY-MM-DDTHH:MM:SSZ`` (SWE-bench's form); "" when unreadable."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def task_instance(task: Task, source: Path | None = None) -> dict[str, Any]:
    """The SWE-bench instance of ``task``; :class:`NotExpressible` says why there is none."""
    prov = task.provenance
    if prov is None:
        raise NotExpressible("no [metadata.repo2env] provenance")
    config_path = task.tests_dir / "config.json"
    if not config_path.is_file():
        raise NotExpressible("not a graded runtime task (no tests/config.json)")
    config = _read_json(config_path)
    runner = str(config.get("runner") or "")
    command = str(config.get("command") or "")
    if runner not in PARSERS:
        raise NotExpressible(f"runner {runner!r}: no swebench log parser repogym maps ids to")
    if runner == "pytest" and "-rA" not in command.split():
        command += " -rA"  # the parser reads the short test summary of every outcome
    table = prov.pipeline_table or {}
    base = str(table.get("base_commit") or prov.ref or "")
    if not base:
        raise NotExpressible("no base commit (ref)")
    head = str(table.get("head_commit") or prov.reference or "")
    facts = source_facts(source, [c for c in (head, base) if c])
    created_at = _utc(str(table.get("created_at") or "")) or facts.created_at
    if not created_at:
        hint = f" (a clone of {prov.repo})" if prov.repo else ""
        raise NotExpressible(f"commit date unknown: pass --repo PATH{hint}")
    gold = task.solution_dir / "patch.diff"
    if not gold.is_file():
        raise NotExpressible("no gold patch (solution/patch.diff)")
    python = _python_version(task)
    f2p = _read_json(task.tests_dir / "f2p.json")
    p2p = _read_json(task.tests_dir / "p2p.json") if (task.tests_dir / "p2p.json").is_file() else []
    if not f2p:
        raise NotExpressible("no FAIL_TO_PASS test")
    test_patch = _test_patch(task, [str(p) for p in config.get("restore") or []])
    repo = facts.repo or (prov.repo if prov.repo and "/" in prov.repo else None)
    if repo is None:
        repo = f"{LOCAL_OWNER}/{prov.repo or task.id}"
    instance: dict[str, Any] = {
        "instance_id": task.id,
        "repo": repo,
        "base_commit": base,
        "created_at": created_at,
        "version": facts.version or "0.0",
        "patch": gold.read_text(encoding="utf-8"),
        "test_patch": test_patch,
        "problem_statement": task.instruction(),
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps([swebench_id(t, runner, python) for t in f2p]),
        "PASS_TO_PASS": json.dumps([swebench_id(t, runner, python) for t in p2p]),
        "environment_setup_commit": base,
        "image": _image(task),
        "log_parser": PARSERS[runner],
        "eval_type": "pass_and_fail",
        "eval_script": eval_script(command, dict(config.get("env") or {}), test_patch),
    }
    return instance


def export_swebench(path: Path, out: Path, *, source: Path | None = None) -> SwebenchExport:
    """Write the instances of the tasks under ``path`` to ``out`` (JSON Lines, atomically;
    nothing is written when no task can be expressed)."""
    found = discover(path)
    result = SwebenchExport(out=out)
    result.skipped += [(p.name, f"unreadable: {exc}") for p, exc in found.invalid]
    for task in found.tasks:
        try:
            result.instances.append(task_instance(task, source))
        except (NotExpressible, OSError, UnicodeDecodeError) as exc:
            result.skipped.append((task.id, str(exc).splitlines()[0] if str(exc) else "error"))
    if result.instances:
        text = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in result.instances)
        atomic_write(out, text)
    return result
