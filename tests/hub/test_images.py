"""``repogym images push`` against a real registry on 127.0.0.1 (Debian's ``docker-registry``):
the example tasks and generated ones become images built on a real base (a stand-in of
``python:3.X-slim`` pulled from the same registry), a second push from an empty cache gives the
same digests, runs on an empty cache start from the image with no build step and pay oracle 1
and nop 0, and verifiers' own Harbor loader accepts the pushed tasks (it refuses them before)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repogym.sandbox.local import LocalSandbox
from tests import engine as test_engine
from tests.conftest import EXAMPLES
from tests.sandbox import _oci
from tests.venvs import cached_venv

pytestmark = pytest.mark.timeout(1800)
ROOT = Path(__file__).resolve().parents[2]
REPOGYM = str(Path(sys.executable).with_name("repogym"))
VERIFIERS_SPEC = "verifiers[harbor]>=0.4,<0.5"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_oci.Registry]:
    ok, why = LocalSandbox.available()
    if not ok:
        pytest.skip(why)
    yield from _oci.registry_or_skip(tmp_path_factory.mktemp("registry"))


def _push_stand_ins(url: str, dataset: Path) -> None:
    """Into the registry, the stand-ins of the images the dataset's Dockerfiles name."""
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (scripts/setup.sh test installs it)")
    missing = _oci.push_stand_ins(url, dataset)
    if missing:  # e.g. no host pyenv build of that Python
        pytest.skip(f"no stand-in of {', '.join(missing)} can be made here")


@pytest.fixture(scope="module")
def bases(registry: _oci.Registry) -> str:
    """The registry; ``pushed`` fills it with the stand-ins its tasks are built FROM."""
    return registry.url


def _host(url: str) -> str:
    return url.removeprefix("http://")


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPOGYM_REGISTRY")}
    return {**env, "REPOGYM_CACHE": str(cache), **extra}


def _repogym(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([REPOGYM, *args], env=env, capture_output=True, text=True, timeout=1500)


def _push(dataset: Path, bases: str, cache: Path, *extra: str) -> dict[str, Any]:
    done = _repogym(
        "images", "push", str(dataset), "--registry", f"{_host(bases)}/gym",
        "--base-registry", f"docker.io={bases}", "--json", *extra,
        env=_env(cache),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return, unused-ignore]


@pytest.fixture(scope="module")
def pushed(bases: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A dataset (the examples and a task generated from the example repository) pushed from
    one cache."""
    root = tmp_path_factory.mktemp("images")
    dataset = root / "dataset"
    shutil.copytree(EXAMPLES, dataset / "examples")
    env = _env(root / "cache-gen")
    assert _repogym("example-repo", str(root / "statkit"), env=env).returncode == 0
    done = _repogym(
        "generate", "--repo", str(root / "statkit"), "--pipeline", "commit_runtime",
        "--limit", "1", "--out", str(dataset / "generated"), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    _push_stand_ins(bases, dataset)
    report = _push(dataset, bases, root / "cache-a")
    return dataset, report


def test_push_records_pinned_images_and_shares_layers(pushed: tuple[Path, dict[str, Any]]) -> None:
    dataset, report = pushed
    tasks = {t["task"]: t for t in report["tasks"]}
    assert {t["status"] for t in tasks.values()} == {"pushed"}, tasks
    assert len(tasks) == 3
    totals = report["totals"]
    assert totals["bytes_uploaded"] < totals["sum_of_images"]  # the base is stored once
    for path in dataset.rglob("task.toml"):
        doc = tomllib.loads(path.read_text())
        image = doc["environment"]["docker_image"]
        repro = doc["metadata"]["repo2env"]["reproducibility"]
        task = tasks[path.parent.name]
        assert image == task["image"] and "@sha256:" in image
        assert repro["mode"] == "registry" and repro["image_digest"] == task["digest"]
        assert (path.parent / "environment" / "Dockerfile").is_file()  # kept, to rebuild
    done = _repogym("validate", str(dataset), env=_env(dataset.parent / "cache-v"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_fresh_build_gives_the_same_digests(
    pushed: tuple[Path, dict[str, Any]], bases: str, tmp_path: Path
) -> None:
    dataset, report = pushed
    again = _push(dataset, bases, tmp_path / "cache-b", "--no-record")
    first = {t["task"]: t["digest"] for t in report["tasks"]}
    second = {t["task"]: t["digest"] for t in again["tasks"]}
    assert first == second  # the examples and the generated task alike
    assert again["totals"]["bytes_uploaded"] == 0, again["totals"]  # nothing new to store


def test_images_check_rebuilds_and_names_the_step_that_differs(
    pushed: tuple[Path, dict[str, Any]], bases: str, tmp_path: Path
) -> None:
    dataset, _ = pushed
    examples = tmp_path / "examples"
    shutil.copytree(dataset / "examples", examples)
    args = ["images", "check", str(examples), "--fresh", "--base-registry", f"docker.io={bases}"]
    done = _repogym(*args, "--json", env=_env(tmp_path / "c1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert {r["status"] for r in json.loads(done.stdout)} == {"same"}
    dockerfile = examples / "hello-file" / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN echo changed > /app/extra.txt\n")
    done = _repogym(*args, "--json", env=_env(tmp_path / "c2"))
    assert done.returncode == 1
    rows = {r["task"]: r for r in json.loads(done.stdout)}
    assert rows["hello-file"]["status"] == "different"
    assert any("echo changed" in step for step in rows["hello-file"]["layers"]), rows
    assert rows["textstats-word-count"]["status"] == "same"


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_runs_start_from_the_image_on_an_empty_cache(
    pushed: tuple[Path, dict[str, Any]], tmp_path: Path, agent: str, reward: float
) -> None:
    dataset, _ = pushed
    out = tmp_path / "job"
    # No registry for the bases: anything that tried to build FROM python:3.X-slim here would
    # map it onto the host; the trials must start from the published images instead.
    done = _repogym(
        "run", str(dataset), "--agent", agent, "--out", str(out), env=_env(tmp_path / "empty")
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in out.rglob("result.json") if p.parent != out]
    assert len(results) == 3, [p for p in out.rglob("*.json")]
    for res in results:
        mapping = res["sandbox"]["base_mapping"]
        assert mapping.get("image_pulled") in ("pulled", "cached"), mapping
        assert "image_fallback" not in mapping
        if res["task_id"] != "hello-file":  # the plain example has no graded answer
            assert res["verifier_result"]["reward"] == reward, res["verifier_result"]
    logs = "".join(p.read_text() for p in out.rglob("build.log"))
    assert "RUN" not in logs  # nothing was built


HOSTILE_AGENT = (
    "command:echo 'import os; os._exit(0)' > /usr/local/lib/sitecustomize.py; "
    "for d in /usr/local/lib/python3*/site-packages; do "
    "echo 'import builtins' > $d/sitecustomize.py; done; "
    "echo forged > /usr/lib/repogym/record.txt; echo 1 > /logs/verifier/reward.txt; "
    "rm -rf /workspace/tests; true"
)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def test_an_agent_cannot_change_the_image_its_run_started_from(
    pushed: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A policy that rewrites the interpreter's start-up, the build record, the tests and the
    reward file in its session earns nothing, and every later trial starts from the image as
    published: the cached image root is a read-only lower layer, never written."""
    dataset, _ = pushed
    task = dataset / "examples" / "textstats-word-count"
    env = _env(tmp_path / "cache")
    done = _repogym("run", str(task), "--agent", HOSTILE_AGENT, "--out", str(tmp_path / "j1"),
                    env=env)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    res = next(json.loads(p.read_text()) for p in (tmp_path / "j1").rglob("result.json")
               if p.parent != tmp_path / "j1")  # fmt: skip
    assert not res["verifier_result"]["reward"], res["verifier_result"]
    roots = [p for p in (tmp_path / "cache" / "oci").glob("sha256-*/rootfs") if p.is_dir()]
    before = {r: _tree(r) for r in roots}
    assert roots and all(len(tree) > 100 for tree in before.values())
    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        out = tmp_path / agent
        done = _repogym("run", str(task), "--agent", agent, "--out", str(out), env=env)
        res = next(json.loads(p.read_text()) for p in out.rglob("result.json") if p.parent != out)
        assert res["verifier_result"]["reward"] == reward, res["verifier_result"]
        assert res["sandbox"]["base_mapping"]["image_pulled"] == "cached"
    assert {r: _tree(r) for r in roots} == before


def test_the_docker_backend_runs_the_pushed_image(
    pushed: tuple[Path, dict[str, Any]], engine: test_engine.Engine
) -> None:
    from repogym.run.agents import NopAgent, OracleAgent
    from repogym.run.trial import TrialRunner
    from repogym.sandbox import get_backend
    from repogym.taskdir import load_task

    dataset, _ = pushed
    task = load_task(dataset / "examples" / "textstats-word-count")
    runner = TrialRunner(get_backend("docker"))
    oracle = runner.run(task, OracleAgent())
    mapping = oracle.record.sandbox.base_mapping if oracle.record.sandbox else None
    assert oracle.reward == 1.0 and mapping is not None
    assert mapping["image"] == task.config.environment.docker_image  # pulled, not built
    assert "image_fallback" not in mapping
    assert runner.run(task, NopAgent()).reward == 0.0


def test_an_exported_archive_runs_offline_after_import(
    pushed: tuple[Path, dict[str, Any]], bases: str, tmp_path: Path
) -> None:
    import tarfile

    dataset, report = pushed
    archive = tmp_path / "images.tar"
    built = dataset.parent / "cache-a"  # where the push built them: nothing is built again
    done = _repogym("images", "export", str(dataset), "--out", str(archive), "--json",
                    "--base-registry", f"docker.io={bases}", env=_env(built))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    exported = json.loads(done.stdout)
    digests = {t["task"]: t["digest"] for t in report["tasks"]}
    assert {i["task"]: i["digest"] for i in exported["images"]} == digests
    with tarfile.open(archive) as tf:
        names = tf.getnames()
        index = json.loads(tf.extractfile("index.json").read())  # type: ignore[union-attr]
        docker = json.loads(tf.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert "oci-layout" in names and len(names) == len(set(names))  # each blob once
    assert len(index["manifests"]) == 3 and all(d["RepoTags"] for d in docker)
    _assert_no_answers_in_the_image(archive, docker, dataset / "examples" / "textstats-word-count")
    offline = tmp_path / "offline"
    done = _repogym("images", "import", str(archive), "--json", env=_env(offline))
    assert done.returncode == 0, done.stderr[-2000:]
    # Every registry answers nowhere: the run finds the image in the cache by its digest.
    env = _env(offline, REPOGYM_REGISTRY_MIRROR="http://127.0.0.1:9")
    task = dataset / "examples" / "textstats-word-count"
    done = _repogym("run", str(task), "--agent", "oracle", "--out", str(tmp_path / "j"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    res = next(json.loads(p.read_text()) for p in (tmp_path / "j").rglob("result.json")
               if p.parent != tmp_path / "j")  # fmt: skip
    assert res["verifier_result"]["reward"] == 1.0
    assert res["sandbox"]["base_mapping"]["image_pulled"] == "cached"
    # A truncated archive imports nothing and says why in one line.
    cut = tmp_path / "cut.tar"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    fresh = tmp_path / "fresh"
    done = _repogym("images", "import", str(cut), env=_env(fresh))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not [p for p in (fresh / "oci").glob("sha256-*")]


def test_push_images_then_publish_the_dataset(
    pushed: tuple[Path, dict[str, Any]], bases: str, tmp_path: Path
) -> None:
    dataset, report = pushed
    copy = tmp_path / "dataset"
    shutil.copytree(EXAMPLES, copy)  # no image recorded yet
    reg = f"file://{tmp_path / 'registry'}"
    done = _repogym(
        "push", str(copy), "acme/published", "--registry", reg, "--json",
        "--images", f"{_host(bases)}/gym", "--base-registry", f"docker.io={bases}",
        env=_env(dataset.parent / "cache-a"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    pulled = tmp_path / "pulled"
    done = _repogym("pull", "acme/published", str(pulled), "--registry", reg,
                    env=_env(tmp_path / "c"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    digests = {t["task"]: t["digest"] for t in report["tasks"]}
    assert len(list(pulled.rglob("task.toml"))) == 2
    for toml in pulled.rglob("task.toml"):
        doc = tomllib.loads(toml.read_text())
        assert doc["environment"]["docker_image"].endswith(digests[toml.parent.name])


def _assert_no_answers_in_the_image(
    archive: Path, docker: list[dict[str, Any]], task: Path
) -> None:
    """The published image is what the agent sees: no byte of the hidden tests or of the
    solution may be in a layer the task's build made (the base is the stand-in)."""
    import tarfile

    context = {
        ln.strip()
        for f in (task / "environment").rglob("*")
        if f.is_file()
        for ln in f.read_bytes().splitlines()
    }
    needles = []  # lines of the answers the build context does not hold
    for sub in ("tests", "solution"):
        for f in (task / sub).rglob("*"):
            if f.is_file():
                for ln in f.read_bytes().splitlines():
                    line = ln.lstrip(b"+").strip()
                    if len(line) > 24 and line not in context:
                        needles.append(line)
    assert len(needles) > 50
    name = tomllib.loads((task / "task.toml").read_text())["metadata"]["repo2env"][
        "reproducibility"
    ]["image_ref"]
    entry = next(d for d in docker if name in d["RepoTags"])
    with tarfile.open(archive) as tf:
        for layer in entry["Layers"][1:]:  # [0] is the base image
            data = gzip.decompress(tf.extractfile(layer).read())  # type: ignore[union-attr]
            leaked = [n for n in needles if n in data]
            assert not leaked, (layer, leaked[:3])


def _verifiers_python() -> Path:
    """Python of a cached venv holding verifiers with its Harbor extra (skip without PyPI)."""
    probe = "import verifiers.v1.tasksets.harbor"
    return cached_venv("verifiers-0.4", [[VERIFIERS_SPEC]], probe=probe) / "python"


def test_verifiers_harbor_loader_accepts_the_pushed_tasks(
    pushed: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    dataset, _ = pushed
    py = _verifiers_python()
    script = Path(__file__).with_name("verifiers_load.py")
    done = subprocess.run([str(py), str(script), str(dataset)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ACCEPTED") == 3 and "@sha256:" in done.stdout
    unpushed = tmp_path / "unpushed"
    shutil.copytree(EXAMPLES, unpushed)
    done = subprocess.run([str(py), str(script), str(unpushed)], capture_output=True, text=True)
    assert done.returncode == 1 and "pullable docker_image" in done.stdout, done.stdout
