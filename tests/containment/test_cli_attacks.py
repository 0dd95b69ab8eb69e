"""The three attacks that reached host files, repeated through the CLI as a user would run
them: the built-in LLM agent (a scripted model on 127.0.0.1) following magic links with its
file tools, a ``command:`` agent turning a separate verifier's artifact into a link to the host,
and a hostile image pulled from a registry on 127.0.0.1 during ``repogym run --agent nop``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.conftest import EXAMPLES, write_task
from tests.containment.conftest import Canary, climb
from tests.llm.stub_servers import openai_stub, openai_tools
from tests.sandbox import _oci

pytestmark = pytest.mark.slow


def files_text(root: Path) -> str:
    """Every file below ``root`` as text (what a run recorded)."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath, name)
            if not p.is_symlink():
                out.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def result_of(job: Path) -> dict:
    [path] = [p for p in job.rglob("result.json") if p.parent != job]
    return json.loads(path.read_text())


# ---------------------------------------------------------------- 1. the built-in LLM agent


def test_llm_agent_file_tools_through_magic_links_reach_nothing(
    canary: Canary, tmp_path: Path
) -> None:
    before = canary.state()
    plant = "; ".join(
        [
            f"for n in $(seq 0 64); do ln -s {climb('/proc/self/fd/$n', '/')} /tmp/l$n; "
            f"ln -s {climb('/proc/thread-self/fd/$n', '/')} /tmp/t$n; done",
            f"ln -s {climb('/proc/self/cwd', '/')} /tmp/cwd",
            "ln -s /proc/self/root /tmp/root",
        ]
    )
    links = [f"/tmp/l{n}" for n in range(65)] + [f"/tmp/t{n}" for n in range(65)]
    links += ["/tmp/cwd", "/tmp/root"]
    reads = [("read_file", {"path": f"{link}{canary.secret}"}) for link in links]
    writes = [
        ("write_file", {"path": f"{link}{canary.empty}/pwn.txt", "content": "pwned"})
        for link in links
    ]
    edits = [
        (
            "str_replace",
            {"path": f"{link}{canary.victim}/file.txt", "old_str": "victim", "new_str": "owned"},
        )
        for link in links
    ]
    script = [
        openai_tools([("bash", {"command": plant})]),
        openai_tools(reads),
        openai_tools(writes),
        openai_tools(edits),
        openai_tools([("bash", {"command": f"cd /tmp/l5{canary.root} && cat secret.txt"})]),
        openai_tools([("finish", {})]),
    ]
    job = tmp_path / "job"
    with openai_stub(*script) as stub:
        res = CliRunner().invoke(
            app,
            [
                "run",
                str(EXAMPLES / "hello-file"),
                "--agent",
                "llm:vllm/attacker",
                "--agent-opt",
                f"endpoint={stub.base_url}/v1",
                "--out",
                str(job),
            ],
        )
        requests = json.dumps(stub.requests)
    assert res.exit_code == 0, res.output
    result = result_of(job)
    assert result["agent_result"]["tool_calls"] == 2 + 3 * len(links) + 1
    # Every tool answer went back to the model: none holds the secret.
    canary.check(before, requests, files_text(job), res.output)
    assert "error" in requests  # the tools did answer, with refusals


# ------------------------------------------------------------ 2. a separate verifier's artifacts


def separate_task(root: Path) -> Path:
    toml = (
        'schema_version = "1.4"\n'
        'artifacts = ["/app/victim", {source = "/data", exclude = ["cache/*", "**/*.txt"]}]\n'
        '[task]\nname = "acme/sep"\n[verifier]\nenvironment_mode = "separate"\n'
        '[environment]\nnetwork_mode = "no-network"\n'
    )
    test_sh = (
        "#!/bin/bash\n"
        "ls -laR /app /data 2>&1; cat /app/victim/* /data/cache/* 2>&1\n"
        "echo 0 > /logs/verifier/reward.txt\n"
    )
    return write_task(
        root,
        "sep",
        toml=toml,
        dockerfile="FROM debian:bookworm\nWORKDIR /app\n",
        test_sh=test_sh,
        files={"tests/Dockerfile": "FROM debian:bookworm\nCOPY . /tests/\nWORKDIR /app\n"},
    )


def test_separate_verifier_artifacts_through_links_reach_nothing(
    canary: Canary, tmp_path: Path
) -> None:
    """The working folder becomes a link through a descriptor the copy holds (the host end
    of the copy among them), so that the artifact ``/app/victim`` names a host folder; an
    artifact's excluded sub-folder is a link to a host folder (an exclude must never delete
    through it)."""
    before = canary.state()
    task = separate_task(tmp_path / "ds")
    for n in range(3, 11):
        command = (
            f"cd / && rm -rf /app /data && ln -s {climb(f'/proc/self/fd/{n}', canary.root)} /app"
            f" && mkdir -p /data && ln -s {canary.victim} /data/cache"
        )
        job = tmp_path / f"job{n}"
        res = CliRunner().invoke(
            app, ["run", str(task), "--agent", f"command:{command}", "--out", str(job)]
        )
        assert res.exit_code == 0, res.output
        result = result_of(job)
        assert result["verifier_result"]["rewards"] == {"reward": 0.0}
        canary.check(before, files_text(job), res.output)


# ------------------------------------------------------------------ 3. a hostile image


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_oci.Registry]:
    yield from _oci.registry_or_skip(tmp_path_factory.mktemp("registry"))


BASH_SHIM = '#!/bin/sh\nexec /bin/busybox sh "$@"\n'


def test_hostile_image_pulled_by_run_nop_changes_nothing_on_the_host(
    registry: _oci.Registry, canary: Canary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = canary.state()
    evil = _oci.layer(
        [
            ("a", "dir", None),
            ("b", "dir", None),
            ("l", "link", str(canary.root)),
            ("l/victim/file.txt", "whiteout", None),
            ("l/victim", "opaque", None),
        ]
    )
    # tests/sandbox/_oci.py writes folders 0755: make them 6777 before the link replaces them.
    evil = evil.replace(b"0000755\x00", b"0006777\x00")
    swap = _oci.layer([("a", "link", str(canary.victim)), ("b", "link", str(canary.secret))])
    host = registry.url.removeprefix("http://")
    for name, layers in {
        "evil": [_oci.busybox_layer(), _oci.layer([("bin/bash", "file", (BASH_SHIM, 0o755))])],
    }.items():
        _oci.push_image(registry.url, f"test/{name}", "1", [*layers, evil, swap])
    task = write_task(
        tmp_path / "ds",
        "evil-image",
        dockerfile=f"FROM {host}/test/evil:1\n",
        test_sh="#!/bin/sh\necho 0 > /logs/verifier/reward.txt\n",
    )
    monkeypatch.setenv("REPOGYM_REGISTRY_MIRROR", f"{host}={registry.url}")
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    job = tmp_path / "job"
    res = CliRunner().invoke(app, ["run", str(task), "--agent", "nop", "--out", str(job)])
    assert res.exit_code == 0, res.output
    assert result_of(job)["verifier_result"]["rewards"] == {"reward": 0.0}
    canary.check(before, res.output)
    pulled = list((tmp_path / "cache" / "oci").glob("sha256-*/rootfs"))
    assert pulled and os.readlink(pulled[0] / "a") == str(canary.victim)


def test_a_layer_hard_linking_a_host_file_fails_the_pull_in_one_line(
    registry: _oci.Registry, canary: Canary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = canary.state()
    hard = _oci.layer([("l", "link", str(canary.root)), ("h", "hard", "l/secret.txt")])
    _oci.push_image(registry.url, "test/hard", "1", [_oci.busybox_layer(), hard])
    host = registry.url.removeprefix("http://")
    task = write_task(tmp_path / "ds", "hard", dockerfile=f"FROM {host}/test/hard:1\n")
    monkeypatch.setenv("REPOGYM_REGISTRY_MIRROR", f"{host}={registry.url}")
    monkeypatch.setenv("REPOGYM_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(
        app, ["run", str(task), "--agent", "nop", "--out", str(tmp_path / "j")]
    )
    assert "hard link 'h' points at 'l/secret.txt', not a file" in res.output
    canary.check(before, res.output)
