"""The run plan: one resolution of a task for a backend, used by run, serve, the Harbor plugin
and the explorer; the reproducibility mode is honoured by all of them."""

from __future__ import annotations

from repogym.run.plan import plan_task
from repogym.run.preflight import preflight
from repogym.run.trial import environment_spec
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES

REGISTRY = """\
schema_version = "1.4"
[task]
name = "acme/reg"
[metadata.repo2env.reproducibility]
mode = "registry"
image_ref = "ghcr.io/acme/reg@sha256:abc"
[environment]
network_mode = "no-network"
"""

OFFLINE_COMPOSE = """\
services:
  main:
    network_mode: none
"""


class _Backend:
    def __init__(self, name: str) -> None:
        self.name = name


def test_registry_mode_starts_from_the_published_image_on_every_backend(make_task) -> None:  # type: ignore[no-untyped-def]
    task = load_task(make_task("reg", toml=REGISTRY))
    for backend in ("docker", "local"):
        plan = plan_task(task, backend)
        assert plan.refusal is None and plan.reproducibility == "registry"
        assert plan.environment.docker_image == "ghcr.io/acme/reg@sha256:abc"
        assert plan.environment.image_first  # the Dockerfile is only the way back
        assert environment_spec(task, backend) == plan.environment
    assert not any("docker" in r for r in preflight(task, backend=_Backend("local")))


def test_a_pinned_docker_image_wins_over_a_tag_reference(make_task) -> None:  # type: ignore[no-untyped-def]
    pinned = "127.0.0.1:5000/acme/reg@sha256:" + "a" * 64
    toml = REGISTRY.replace('image_ref = "ghcr.io/acme/reg@sha256:abc"', 'image_ref = "r/x:1"')
    task = load_task(make_task("reg", toml=toml + f'docker_image = "{pinned}"\n'))
    assert plan_task(task, "local").environment.docker_image == pinned
    no_image = load_task(make_task("bare", toml=toml.replace('image_ref = "r/x:1"\n', "")))
    assert "no image_ref" in str(plan_task(no_image, "local").refusal)


def test_a_built_task_plans_its_dockerfile() -> None:
    task = load_task(EXAMPLES / "textstats-word-count")
    plan = plan_task(task, "local")
    assert plan.refusal is None and plan.reproducibility == "inline_dockerfile"
    assert plan.environment.context_dir == task.environment_dir
    assert environment_spec(task, "local") == plan.environment


def test_the_compose_file_is_parsed_once(make_task) -> None:  # type: ignore[no-untyped-def]
    path = make_task("air", files={"environment/docker-compose.yaml": OFFLINE_COMPOSE})
    task = load_task(path)
    first = task.compose()
    assert first is not None and first.main.offline
    (path / "environment" / "docker-compose.yaml").write_text("services: [broken\n")
    assert task.compose() is first  # every phase takes the object read first
    plan = plan_task(task, "local")
    assert plan.compose is first and plan.offline
    assert plan.environment.network_mode == "no-network"
    assert not any("compose" in r for r in preflight(task))  # the preflight takes it too
