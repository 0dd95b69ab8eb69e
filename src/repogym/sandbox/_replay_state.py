"""What the Dockerfile replayer carries from step to step: the image configuration as the
Dockerfile builds it up, a stage's instructions, and a stage's state (cache key, layers, base)."""

from __future__ import annotations

from dataclasses import dataclass, field

from repogym import dockerfile as _dockerfile
from repogym.sandbox import _toolchains


@dataclass
class ImageConfig:
    """The image configuration as the Dockerfile builds it up."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str | None = None
    shell: list[str] = field(default_factory=lambda: ["/bin/sh", "-c"])
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    stopsignal: str | None = None
    healthcheck: str | None = None
    onbuild: list[str] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def copy(self) -> ImageConfig:
        return ImageConfig(
            env=dict(self.env),
            workdir=self.workdir,
            user=self.user,
            shell=list(self.shell),
            cmd=list(self.cmd) if self.cmd is not None else None,
            entrypoint=list(self.entrypoint) if self.entrypoint is not None else None,
            labels=dict(self.labels),
            exposed=list(self.exposed),
            volumes=list(self.volumes),
            stopsignal=self.stopsignal,
            healthcheck=self.healthcheck,
            onbuild=list(self.onbuild),
            args=dict(self.args),
        )

    def vars(self) -> dict[str, str]:
        """Variables visible to word expansion: ARG values, overridden by ENV."""
        return {**self.args, **self.env}


@dataclass
class Stage:
    name: str | None
    from_ins: _dockerfile.Instruction
    body: list[_dockerfile.Instruction]


@dataclass
class StageState:
    key: str
    layers: list[tuple[str, list[str]]]
    config: ImageConfig
    base: _toolchains.BaseImage
