"""Harbor's own Docker environment, made to run on an offline or air-gapped engine.

    harbor run -p TASKS -a oracle -e repogym.integrations.harbor_docker:RepogymDockerEnvironment

Harbor's ``docker`` environment drives the engine through the Compose v2 CLI plugin
(``docker compose``) and enforces ``network_mode = "no-network"`` with an egress-control
sidecar, which needs two images from Docker Hub and a bridge network; where they cannot be had,
Harbor refuses every no-network task. This subclass keeps the rest of Harbor's environment (its
compose files, build, exec, uploads, teardown) and changes four things:

- **No sidecar.** A task whose network policy is ``no-network`` gets Harbor's own
  ``docker-compose-no-network.yaml`` (``network_mode: none`` on the main service), as Harbor's
  cloud environments do. The policy is fixed when the container starts: Harbor infers one from
  the task's phases, and refuses a task whose phases it cannot serve that way (a public agent
  setup before a no-network run) with its own message.
- **The network setting of repogym's docker backend** (``REPOGYM_DOCKER_NETWORK``, see
  :func:`repogym.sandbox.docker.network_setting`): unset leaves the engine's defaults; ``host``
  builds with the host's network and gives a task with network the host's network; ``none``
  builds without network and starts every container without one.
- **An init** (``init: true``, the engine's tini) as the main container's first process:
  Harbor's ``sh -c "sleep infinity"`` ignores SIGTERM, so without it every teardown waits out
  the engine's 10 s stop timeout; killed processes are reaped too.
- **Compose missing is one line**, at Harbor's preflight and at start, saying how to get it
  (``scripts/compose.sh`` builds Compose v2 from its Go module).

Works with Harbor 0.24, 0.25 and 0.26. Harbor (Python 3.12+) is imported by this module only.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from harbor.environments.docker import COMPOSE_NO_NETWORK_PATH  # type: ignore[import-not-found]
from harbor.environments.docker.docker import (  # type: ignore[import-not-found]
    DockerEnvironment,
)
from harbor.models.task.config import NetworkMode  # type: ignore[import-not-found]

from repogym.errors import RepogymError
from repogym.integrations._harbor_support import compose_problem, main_service_overlay
from repogym.sandbox.docker import network_setting

OVERLAY_NAME = "docker-compose-repogym.json"


class ComposeMissingError(RepogymError, RuntimeError):
    """``docker compose`` is not installed; the message is one line."""


class RepogymDockerEnvironment(DockerEnvironment):
    """Harbor's ``DockerEnvironment`` without the egress sidecar: no-network tasks run with
    ``network_mode: none``, builds follow ``REPOGYM_DOCKER_NETWORK``, the main service has an
    init."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._repogym_overlay_dir: tempfile.TemporaryDirectory[str] | None = None
        try:
            self._repogym_network = network_setting()
        except RepogymError as exc:
            raise ValueError(str(exc)) from None
        super().__init__(*args, **kwargs)

    @classmethod
    def preflight(cls, *args: Any, **kwargs: Any) -> None:
        """Harbor's checks (``docker`` on PATH, a daemon answering), then Compose v2 and the
        network setting, each failing with one line."""
        super().preflight(*args, **kwargs)
        problem = compose_problem()
        if problem is not None:
            raise SystemExit(problem)
        try:
            network_setting()
        except RepogymError as exc:
            raise SystemExit(str(exc)) from None

    @staticmethod
    def _requires_egress_control(**_: Any) -> bool:
        # Never the sidecar, nor the probe container Harbor runs first (it pulls an image).
        return False

    @property
    def _linux(self) -> bool:
        return not getattr(self, "_is_windows_container", False)

    @property
    def _no_network(self) -> bool:
        policy = getattr(self, "_network_policy", None)  # unset early in Harbor's __init__
        return policy is not None and policy.network_mode == NetworkMode.NO_NETWORK

    @property
    def capabilities(self) -> Any:
        caps = super().capabilities
        if not self._linux:
            return caps
        # ``network_mode: none`` enforces no-network. Not claimed: changing the policy after
        # start, allowlists (Harbor refuses tasks that need them, with its own messages), and
        # stream mode where it would publish a port of a container on no or the host's network.
        return caps.model_copy(
            update={
                "disable_internet": True,
                "stream": bool(caps.stream)
                and self._repogym_network is None
                and not self._no_network,
            }
        )

    @property
    def _docker_compose_paths(self) -> list[Path]:
        paths: list[Path] = list(super()._docker_compose_paths)
        if self._linux:
            if self._no_network:
                paths.append(Path(COMPOSE_NO_NETWORK_PATH))
            paths.append(self._overlay_path())
        return paths

    def _overlay_path(self) -> Path:
        """The main service's override (:func:`main_service_overlay`), kept current: whether
        the image is prebuilt is only known once ``start`` has looked."""
        if self._repogym_overlay_dir is None:
            self._repogym_overlay_dir = tempfile.TemporaryDirectory(prefix="repogym-compose-")
        path = Path(self._repogym_overlay_dir.name) / OVERLAY_NAME
        overlay = main_service_overlay(
            no_network=self._no_network,
            setting=self._repogym_network,
            prebuilt=bool(getattr(self, "_use_prebuilt", False)),
        )
        text = json.dumps(overlay, indent=2)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    async def start(self, force_build: bool) -> None:
        problem = compose_problem()
        if problem is not None:
            raise ComposeMissingError(problem)
        await super().start(force_build)

    async def stop(self, delete: bool) -> None:
        try:
            await super().stop(delete)
        finally:
            if self._repogym_overlay_dir is not None:
                self._repogym_overlay_dir.cleanup()
                self._repogym_overlay_dir = None
