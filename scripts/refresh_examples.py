#!/usr/bin/env python3
"""Rebuild the graded example task's verifier from what tasks receive now, so that
``examples/tasks/textstats-word-count`` is graded exactly as a generated task is: the same
hardened verifier (the judge outside the test process, the integrity record, the tamper scan),
declared for the clean room, with its content hash updated. ``hello-file`` (a file to write,
no tests) is declared for the clean room too.

Run after changing anything under ``src/repogym/shipped`` (the files tasks receive):
``.venv/bin/python scripts/refresh_examples.py``. New candidate canaries
(``tests/canaries.json``) are confirmed by ``.venv/bin/repogym verify
examples/tasks/textstats-word-count -k 0`` (it keeps those that fail with the gold patch and
without it). ``--check`` only reports whether the
examples are current (exit 1 when not), as the test suite does.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from repogym import shipped  # noqa: E402
from repogym.pipelines._harness.emit import RECORD_SCRIPT, record_step  # noqa: E402
from repogym.shipped import infra, tamper  # noqa: E402
from repogym.taskdir import load_task  # noqa: E402
from repogym.taskdir.task import update_task_toml  # noqa: E402
from repogym.taskdir.verification import RUNTIME_PROTECTED  # noqa: E402
from repogym.verify import canaries  # noqa: E402

EXAMPLES = ROOT / "examples" / "tasks"
TEXTSTATS = EXAMPLES / "textstats-word-count"
HELLO = EXAMPLES / "hello-file"
WORKDIR = "/workspace"
KEY = "5f6e2a1c9d8b7a6f5e4d3c2b1a0f9e8d"
"""The example's integrity key: public (the example's tests are in the repository), it only
shows the mechanism; generated tasks get a secret one."""
TEST_FILES = ("tests/__init__.py", "tests/test_counts.py")
SOLUTION_FILES = ("solve.sh", "apply_patch.py")
BASE_DOCKERFILE = (
    "FROM python:3.11-slim\n"
    "ENV PYTHONDONTWRITEBYTECODE=1\n"
    "WORKDIR /workspace\n"
    "COPY repo/ /workspace/\n"
)


def hidden_test(rel: str) -> bytes:
    """A hidden test file of the textstats task (``files/``, ``hidden/`` before 0.2)."""
    for folder in ("files", "hidden"):
        path = TEXTSTATS / "tests" / folder / rel
        if path.is_file():
            return path.read_bytes()
    raise FileNotFoundError(rel)


def textstats_tests(out: Path) -> None:
    """The verifier folder of the textstats task, staged like a generated task's."""
    repo = TEXTSTATS / "environment" / "repo"
    f2p = json.loads((TEXTSTATS / "tests" / "f2p.json").read_text())
    p2p = json.loads((TEXTSTATS / "tests" / "p2p.json").read_text())
    out.mkdir(parents=True)
    files = {
        "test.sh": shipped.read("test.sh"),
        "verifier.py": shipped.read("verifier.py"),
        **{rel: shipped.read(rel) for rel in shipped.GRADED},
        **{f"files/{rel}": hidden_test(rel) for rel in TEST_FILES},
        "f2p.json": json.dumps(f2p) + "\n",
        "p2p.json": json.dumps(p2p) + "\n",
        "integrity.key": KEY + "\n",
    }
    sources = infra.manifest(repo, lambda rel: not infra.is_infra(rel) and rel.endswith(".py"))
    known = {k: v for k, v in infra.manifest(repo, infra.is_infra).items() if k not in TEST_FILES}
    files["sources.json"] = json.dumps(sources, indent=0, sort_keys=True) + "\n"
    files["infra.json"] = json.dumps(known, indent=0, sort_keys=True) + "\n"
    files["tamper_baseline.json"] = (
        json.dumps(tamper.baseline(str(repo), sorted(sources)), sort_keys=True) + "\n"
    )
    config = {
        "workdir": WORKDIR,
        "runner": "unittest",
        # The module, not the ids: the canaries the judge plants there must run too.
        "command": "python -m unittest -v tests.test_counts",
        "env": {},
        "restore": list(TEST_FILES),
        "delete": [],
        "reward_mode": "graded",
        "collected": len(f2p) + len(p2p),
        "audit_allowed": [],
    }
    files["config.json"] = json.dumps(config, indent=2) + "\n"
    pool = canaries.build(
        {rel: hidden_test(rel) for rel in TEST_FILES}, f2p, p2p, "unittest", seed=TEXTSTATS.name
    )
    files[canaries.CANARIES_FILE] = json.dumps(pool.to_json(), indent=1) + "\n"
    for rel, data in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        path.chmod(0o755 if rel == "test.sh" else 0o644)


def refresh(check: bool) -> list[str]:
    """The example files that differ from what ``repogym.shipped`` makes (rewritten unless
    ``check``)."""
    stale: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "tests"
        textstats_tests(staged)
        current = TEXTSTATS / "tests"
        for path in sorted(p for p in staged.rglob("*") if p.is_file()):
            rel = path.relative_to(staged)
            if rel.as_posix() == canaries.CANARIES_FILE and confirmed_from(current / rel, path):
                shutil.copyfile(current / rel, path)  # confirmed by the gate: keep it
                continue
            if not (current / rel).is_file() or (current / rel).read_bytes() != path.read_bytes():
                stale.append(f"textstats-word-count/tests/{rel}")
        extra = [
            p.relative_to(current)
            for p in current.rglob("*")
            if p.is_file() and not (staged / p.relative_to(current)).is_file()
        ]
        stale += [f"textstats-word-count/tests/{rel} (not made any more)" for rel in extra]
        dockerfile = BASE_DOCKERFILE + record_step(WORKDIR, KEY, "unittest")
        env = TEXTSTATS / "environment"
        if (env / "Dockerfile").read_text() != dockerfile:
            stale.append("textstats-word-count/environment/Dockerfile")
        record = env / RECORD_SCRIPT
        if not record.is_file() or record.read_bytes() != shipped.read(RECORD_SCRIPT):
            stale.append(f"textstats-word-count/environment/{RECORD_SCRIPT}")
        # The oracle applies the gold patch as a generated task's does: git, patch, or the
        # bundled applier (real slim images have neither git nor patch).
        solution = TEXTSTATS / "solution"
        for name in SOLUTION_FILES:
            path = solution / name
            if not path.is_file() or path.read_bytes() != shipped.read(name):
                stale.append(f"textstats-word-count/solution/{name}")
        declared = {
            TEXTSTATS: [*RUNTIME_PROTECTED, *TEST_FILES],
            HELLO: list(RUNTIME_PROTECTED),
        }
        for task, protected in declared.items():
            loaded = load_task(task)
            block = (loaded.config.metadata.get("repo2env") or {}).get("verification")
            if block != {"mode": "clean_room", "protected": protected}:
                stale.append(f"{task.name}/task.toml (verification)")
            elif (loaded.config.metadata.get("repo2env") or {}).get(
                "content_hash"
            ) != loaded.compute_hash():
                stale.append(f"{task.name}/task.toml (content hash)")
        if check or not stale:
            return stale
        shutil.rmtree(current)
        shutil.copytree(staged, current)
    (env / "Dockerfile").write_text(dockerfile)
    (env / RECORD_SCRIPT).write_bytes(shipped.read(RECORD_SCRIPT))
    for name in SOLUTION_FILES:
        (solution / name).write_bytes(shipped.read(name))
        (solution / name).chmod(0o755 if name.endswith(".sh") else 0o644)
    for task, protected in declared.items():
        update_task_toml(task, declare_clean_room(protected))
    return stale


def confirmed_from(current: Path, candidates: Path) -> bool:
    """Whether ``current`` is the gate's confirmation of the ``candidates`` made now
    (``repogym verify`` keeps those that fail with the gold patch and without it)."""
    try:
        now, made = json.loads(current.read_text()), json.loads(candidates.read_text())
    except (OSError, ValueError):
        return False
    return (
        now.get("status") == "confirmed"
        and all(c in made["pool"] for c in now["pool"])
        and now.get("disguise") == made.get("disguise")
    )


def declare_clean_room(protected: list[str]):  # type: ignore[no-untyped-def]
    def change(config) -> None:  # type: ignore[no-untyped-def]
        block = config.metadata.setdefault("repo2env", {})
        block["verification"] = {"mode": "clean_room", "protected": protected}

    return change


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    args = ap.parse_args()
    stale = refresh(args.check)
    for line in stale:
        print(("stale: " if args.check else "rewrote: ") + line)
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    raise SystemExit(main())
