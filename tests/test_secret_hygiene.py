"""Secret hygiene across the command line: with distinctive credentials in the environment,
run repogym end to end against local stand-ins of every service (and through error paths that
touch the credentials), then prove no credential, nor a large piece of one, shows up in any
output file, in stdout/stderr, or in any error message.

To cover another command, run it with :func:`run_cli` (``env=hygiene.env``), append the result
to ``hygiene.runs`` and add the folders it writes to ``hygiene.trees``; the final
:func:`find_leaks` check covers them.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.llm.stub_servers import error, openai_stub
from tests.pipelines_remote.remote_fixtures import Hosted, HostedGitHub, HostedGitLab, build_hosted
from tests.sources.conftest import BASE_EPOCH

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

SECRETS = {
    "GITHUB_TOKEN": "ghp_Hyg1eneGh7kQz2Wm9Xv4RtYp",
    "GITLAB_TOKEN": "glpat-Hyg1eneGl3nBv8Cx5Zq",
    "OPENAI_API_KEY": "sk-Hyg1eneOa6JdLs2Kf9Pw7Tb",
    "HF_TOKEN": "hf_Hyg1eneHf4MnQr8Vy3Ux6Ze",
}


# ------------------------------------------------------------------------------- helpers


def secret_variants(secret: str, user: str = "x-access-token") -> set[str]:
    """What a leak may look like: the secret, each half of it (a truncated echo) and the
    Basic-auth encoding git would send."""
    half = len(secret) // 2
    basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return {secret, secret[:half], secret[half:], basic}


def find_leaks(
    secrets: Mapping[str, str],
    *,
    trees: Iterable[Path] = (),
    outputs: Iterable[tuple[str, str | bytes]] = (),
) -> list[str]:
    """Every place a secret shows up: files under ``trees`` (read as bytes, names included)
    and labelled captured ``outputs``. Empty when clean."""
    found = []
    probes = {name: secret_variants(value) for name, value in secrets.items()}

    def scan(label: str, data: bytes) -> None:
        for name, variants in probes.items():
            if any(v.encode() in data for v in variants):
                found.append(f"{name} in {label}")

    for tree in trees:
        if not tree.exists():
            continue
        for path in sorted(tree.rglob("*")):
            scan(f"path {path}", str(path).encode())
            if path.is_file() and not path.is_symlink():
                scan(str(path), path.read_bytes())
    for label, text in outputs:
        scan(label, text.encode() if isinstance(text, str) else text)
    return found


@dataclass
class Hygiene:
    """Environment, runs and written folders of one end-to-end session."""

    env: dict[str, str]
    runs: list[tuple[str, subprocess.CompletedProcess[str]]] = field(default_factory=list)
    trees: list[Path] = field(default_factory=list)

    def run(self, label: str, *args: str, env: Mapping[str, str] | None = None) -> str:
        """Run ``repogym args…``, record it, return stdout."""
        proc = run_cli(*args, env=env or self.env)
        self.runs.append((label, proc))
        return proc.stdout

    def outputs(self) -> Iterator[tuple[str, str]]:
        for label, proc in self.runs:
            yield f"{label} stdout", proc.stdout
            yield f"{label} stderr", proc.stderr


def run_cli(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``repogym args…`` in a child process (what a user's terminal or CI log would see)."""
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", *args],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _base_env(tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_TOKEN", "_API_KEY", "_BASE_URL")) and not k.startswith("GIT_")
    }
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        REPOGYM_CLONE_CACHE=str(tmp / "clones"),
        HF_HOME=str(tmp / "hf-home"),
        HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
        NO_COLOR="1",
        COLUMNS="200",
    )
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"] = "Ada Tester"
        env[f"GIT_{who}_EMAIL"] = "ada@example.com"
        env[f"GIT_{who}_DATE"] = f"{BASE_EPOCH} +0000"
    return env


@pytest.fixture
def hosted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hosted:
    for key, value in _base_env(tmp_path).items():
        if key.startswith("GIT_"):
            monkeypatch.setenv(key, value)
    return build_hosted(tmp_path / "hosted")


# --------------------------------------------------------------------------------- the test


def test_no_secret_leaves_the_process(hosted: Hosted, tmp_path: Path) -> None:
    out = tmp_path / "out"
    wrong_key = "the LLM endpoint echoes: Incorrect API key provided: " + SECRETS["OPENAI_API_KEY"]
    with (
        HostedGitHub(hosted, token=SECRETS["GITHUB_TOKEN"]) as gh,
        HostedGitLab(hosted, token=SECRETS["GITLAB_TOKEN"]) as gl,
        openai_stub(error(401, wrong_key)) as llm,
    ):
        env = {**_base_env(tmp_path), **SECRETS}
        env.update(
            REPOGYM_GITHUB_API=gh.url,
            REPOGYM_GITLAB_URL=gl.url,
            OPENAI_BASE_URL=f"{llm.base_url}/v1",
        )
        h = Hygiene(env, trees=[out, tmp_path / "clones"])

        # A private repository read with the token, instructions through the LLM (whose error
        # message quotes the key: it is recorded, redacted, in the report and task.toml).
        report = json.loads(
            h.run(
                "generate",
                "generate",
                "--repo",
                "acme/vault",
                "-p",
                "pr_runtime",
                "--limit",
                "1",
                "--out",
                str(out),
                "--llm",
                "openai/gpt-4o-mini",
                "--llm-endpoint",
                f"{llm.base_url}/v1",
                "--json",
            )
        )
        assert report["yield"]["kept"] == 1, h.runs[-1][1].stderr
        assert report["source_access"] == "private"
        rewrite = report["outcomes"][0]["instruction_rewrite"]
        assert rewrite["status"] == "failed" and "HTTP 401" in rewrite["reason"]
        assert any(r["headers"].get("authorization") for r in llm.requests)  # the key was used
        assert gh.requests and all(
            r[2].get("authorization") == f"Bearer {SECRETS['GITHUB_TOKEN']}" for r in gh.requests
        )

        statuses = json.loads(h.run("auth check", "auth", "check", "--json"))
        present = {s["service"] for s in statuses if s["present"]}
        assert present == {"github", "gitlab", "huggingface", "openai"}
        assert {s["service"]: s["ok"] for s in statuses}["github"] is True

        h.run("validate", "validate", str(out), "--json")
        verified = json.loads(h.run("verify", "verify", str(out), "--json"))
        assert verified, h.runs[-1][1].stderr

        # Error paths that hold a credential: a token the host rejects (401), a project the
        # token cannot see (404), a GitLab token sent to the wrong project.
        gh.token = "ghp_SomeOtherValidToken000"
        h.run("generate 401", "generate", "--repo", "acme/vault", "--out", str(tmp_path / "e1"))
        gh.token = SECRETS["GITHUB_TOKEN"]
        h.run("generate 404", "generate", "--repo", "acme/nope", "--out", str(tmp_path / "e2"))
        h.run(
            "generate gitlab 404",
            "generate",
            "--repo",
            "gitlab:group/nope",
            "--out",
            str(tmp_path / "e3"),
        )
        bad = {**env, "GITHUB_TOKEN": SECRETS["GITHUB_TOKEN"] + "-revoked"}
        h.run("auth check bad", "auth", "check", "--json", env=bad)

    errors = {label: proc for label, proc in h.runs if label.startswith("generate ")}
    assert all(p.returncode == 2 for p in errors.values())
    assert "bad or expired token (401)" in errors["generate 401"].stderr
    assert "not found or private" in errors["generate 404"].stderr
    assert "not found or private" in errors["generate gitlab 404"].stderr
    assert not (tmp_path / "e1").exists() and not (tmp_path / "e2").exists()
    assert (out / "generate-report.json").is_file() and list((out / "tasks").iterdir())

    leaks = find_leaks(SECRETS, trees=h.trees, outputs=h.outputs())
    assert leaks == []


def test_find_leaks_sees_files_names_outputs_and_pieces(tmp_path: Path) -> None:
    secret = SECRETS["OPENAI_API_KEY"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "clean.txt").write_text("nothing here")
    assert find_leaks(SECRETS, trees=[tmp_path], outputs=[("out", "ok")]) == []
    (tmp_path / "a" / "log.bin").write_bytes(b"\x00key=" + secret[4:].encode())
    (tmp_path / f"x{secret}").mkdir()
    leaks = find_leaks(SECRETS, trees=[tmp_path], outputs=[("stderr", secret[:14] + "...")])
    assert len(leaks) == 3 and all(s.startswith("OPENAI_API_KEY in ") for s in leaks)
