"""OpenEnv RFC 008 conformance, checked by OpenEnv's own validator (PyPI ``openenv``).

``openenv`` >= 0.10 needs its own venv (it and ``openenv-core`` both provide the ``openenv``
module), made once and cached under ``~/.cache/repogym-tests/`` with this checkout installed
editable: its server then runs on ``openenv`` 0.10's import paths. Checked: ``openenv validate``
on an export (static level: PASS; every runtime check it can run here), OpenEnv's runtime
graders (reward well formed, observation schema, state contract) over the export's own runtime
plan against a live ``repogym serve`` of the exported tasks, and ``openenv validate --url``.
OpenEnv's runtime level builds the package's image with Docker; without an engine the runtime
checks are driven through OpenEnv's provider interface by a provider that runs
``repogym serve`` on the host instead of a container.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.openenv.conftest import TOKEN, start_server, stop_server
from tests.venvs import cached_venv

pytestmark = pytest.mark.slow
OPENENV_VERSION = "0.10.0"

# Runs in the openenv venv: OpenEnv's validation runner over PKG with a provider whose
# "image" is the package itself and whose subject is `repogym serve PKG/tasks` on the host.
PROBE = """\
import hashlib, json, socket, subprocess, sys, time
from pathlib import Path

import httpx
from openenv.validation import Level, run_validation
from openenv.validation.types import ProviderCapability

pkg, log = Path(sys.argv[1]), open(sys.argv[2], "wb")


class Running:
    def __init__(self, proc, url):
        self.proc, self.base_url = proc, url

    def inspect(self):
        return {"pid": self.proc.pid}

    def logs(self, max_bytes=65536):
        return ""

    def exec(self, argv, timeout_s):
        raise NotImplementedError

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


class ServeProvider:
    name = "repogym-serve"
    capabilities = frozenset({ProviderCapability.IMAGE_BUILD})
    supported_network_modes = frozenset({"public"})

    def build(self, root, execution):
        return "sha256:" + hashlib.sha256(str(root).encode()).hexdigest()

    def start(self, spec):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "repogym.cli", "serve", str(pkg / "tasks"),
               "--port", str(port), "--orchestrator-token", "t"]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return Running(proc, url)
            except httpx.HTTPError:
                time.sleep(0.2)
        proc.kill()
        raise RuntimeError("repogym serve did not start")


report = run_validation(pkg, max_level=Level.RUNTIME, provider=ServeProvider())
results = {r.check_id: {"status": r.status.value, "evidence": r.evidence} for r in report.results}
print(json.dumps({"verdict": report.verdict.value, "results": results}))
"""


@pytest.fixture(scope="module")
def openenv_venv() -> Path:
    """The ``bin`` folder of a cached Python 3.12 venv with ``openenv`` and this checkout."""
    steps = [[f"openenv=={OPENENV_VERSION}", "-e", str(ROOT)]]
    probe = f"import importlib.metadata as m; assert m.version('openenv') == {OPENENV_VERSION!r}"
    return cached_venv(f"openenv-{OPENENV_VERSION}", steps, probe=probe, checkout=True)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "pkg"
    subprocess.run(
        [sys.executable, "-m", "repogym.cli", "export", str(EXAMPLES), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def _validate(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "openenv"), "validate", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_export_passes_the_static_level(openenv_venv: Path, package: Path) -> None:
    res = _validate(openenv_venv, str(package), "--level", "static", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["verdict"] == "pass"
    assert [(r["check_id"], r["status"]) for r in report["results"]] == [
        ("static.manifest", "pass")
    ]
    # The schema-2 manifest: the runtime binding and the plan it names are read, not guessed.
    assert report["manifest"]["execution"]["probe_path"] == "validation/runtime.json"
    assert report["manifest"]["capabilities"]["oracle"]["location"] == (
        "tasks/hello-file/solution/solve.sh"
    )
    # Without the block, OpenEnv fails the manifest (what the export used to ship).
    bare = package.parent / "bare"
    shutil.copytree(package, bare)
    text = (bare / "openenv.yaml").read_text()
    (bare / "openenv.yaml").write_text(text.split("# OpenEnv RFC 008")[0])
    res = _validate(openenv_venv, str(bare), "--level", "static")
    assert res.returncode == 1 and "FAIL  static.manifest" in res.stdout, res.stdout


def test_no_check_fails_without_a_build(openenv_venv: Path, package: Path) -> None:
    res = _validate(openenv_venv, str(package), "--skip-build", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    results = {r["check_id"]: r["status"] for r in json.loads(res.stdout)["results"]}
    assert results["static.manifest"] == "pass" and results["runtime.startup"] == "skip"
    assert set(results.values()) == {"pass", "skip"}


def test_runtime_graders_on_a_live_server(
    openenv_venv: Path, package: Path, tmp_path: Path
) -> None:
    """OpenEnv's runtime graders, over the export's runtime plan, against ``repogym serve`` of
    the exported tasks (on ``openenv`` 0.10): every one that can run here passes."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    log = tmp_path / "serve.log"
    res = subprocess.run(
        [str(openenv_venv / "python"), str(probe), str(package), str(log)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:] + log.read_text()[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    results = report["results"]
    for check in (
        "static.manifest",
        "runtime.startup",
        "runtime.reward_well_formed",
        "runtime.observation_schema",
        "runtime.state_contract",
    ):
        assert results[check]["status"] == "pass", (check, results[check], log.read_text())
    failed = {k: v for k, v in results.items() if v["status"] in ("fail", "error")}
    assert not failed and report["verdict"] == "warn"  # warn: OpenEnv's unimplemented checks


def test_validate_url_on_a_live_server(openenv_venv: Path, tmp_path: Path) -> None:
    """``openenv validate --url`` (openenv 0.10's CLI) against ``repogym serve --agent-submit``
    running on openenv 0.10: every criterion passes."""
    cmd = [str(openenv_venv / "python"), "-m", "repogym.cli", "serve", str(EXAMPLES),
           "--port", "{port}", "--orchestrator-token", TOKEN, "--agent-submit"]  # fmt: skip
    srv = start_server(cmd, tmp_path, tmp_path / "serve.log")
    try:
        res = _validate(openenv_venv, "--url", srv.url, "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        report = json.loads(res.stdout)
        assert report["passed"] is True
        assert all(c["passed"] for c in report["criteria"]) and len(report["criteria"]) >= 6
    finally:
        stop_server(srv)
