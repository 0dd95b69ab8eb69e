"""Full and read-only disks: each command that writes stops with one line naming the path and
exit 2, announces no work it cannot record, and leaves nothing behind (no staging folder, no
half-written file, existing index files untouched).

Each case runs in a user and mount namespace of its own over a small tmpfs
(:mod:`tests.faults.fsfault`): a real ENOSPC and a real EROFS, whoever runs the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(), reason="needs unprivileged user and mount namespaces (unshare)"
)


def on_disk(kind: str, argv: list[str], tmp_path: Path, **extra: Any) -> dict[str, Any]:
    spec = {"kind": kind, "mount": str(tmp_path / "mnt"), "argv": argv, **extra}
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env.setdefault("REPOGYM_CACHE", str(tmp_path / "cache"))
    res = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            sys.executable,
            "-m",
            "tests.faults.fsfault",
            json.dumps(spec),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def refused(got: dict[str, Any], *fragments: str) -> None:
    err = got["stderr"]
    assert got["rc"] == 2, got
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    assert got["after"] == got["before"], sorted(set(got["after"]) ^ set(got["before"]))


CASES = {
    "dataset-index": (["dataset", "index", "{mnt}/indexed"], "registry.json"),
    "dataset-rehash": (["dataset", "rehash", "{mnt}/indexed"], "task.toml"),
    "example-repo": (["example-repo", "{mnt}/ex"], "{mnt}/ex"),
    "push-folder-registry": (["push", "{mnt}/ds", "acme/ds", "--registry", "file://{mnt}/reg"], ""),
    "pull": (["pull", "acme/ds", "{mnt}/got", "--registry", "file://{reg}"], ""),
    "run-out": (["run", "{mnt}/ds", "--agent", "nop", "--out", "{mnt}/job"], "--out"),
    "verify-write": (["verify", "{mnt}/indexed", "--reruns", "0"], "verdict"),
    "generate-out": (["generate", "--repo", "{repo}", "--out", "{mnt}/gen", "--limit", "1"], ""),
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repogym.hub.file_registry import FileRegistry

    root = tmp_path_factory.mktemp("registry")
    FileRegistry(root).push(ROOT / "examples" / "tasks", "acme/ds")
    return root


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repogym.example_repo import build_example_repo

    return build_example_repo(tmp_path_factory.mktemp("example") / "statkit")


@pytest.mark.parametrize("kind", ["readonly", "full"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_command_on_a_bad_disk_is_one_line_and_leaves_nothing(
    case: str, kind: str, tmp_path: Path, registry: Path, example: Path
) -> None:
    argv, fragment = CASES[case]
    argv = [a.replace("{reg}", str(registry)).replace("{repo}", str(example)) for a in argv]
    got = on_disk(kind, argv, tmp_path)
    mnt = str(tmp_path / "mnt")
    refused(got, fragment.replace("{mnt}", mnt))
    reason = "read-only file system" if kind == "readonly" else "no space left"
    assert reason in got["stderr"].lower(), got["stderr"]
    assert "running" not in got["stderr"] and "verifying" not in got["stderr"]
