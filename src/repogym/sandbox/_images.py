"""Image references: parsed, normalised, and the tables of images we know how to stand in for.

``public.ecr.aws/docker/library/debian:bookworm-slim@sha256:…``, ``docker.io/library/debian``,
``index.docker.io/debian``, ``mirror.gcr.io/debian`` and ``debian`` all name Docker Hub's
``library/debian``: :func:`parse` turns any of them into one :class:`ImageRef` whose
:attr:`ImageRef.short` is ``debian``, so the ``FROM`` mapping sees one name whatever registry
or mirror a Dockerfile spelled.

Two tables live here (documented in ``docs/sandbox.md``):

* :data:`DERIVED` — well-known images built on an official one, mapped like that one (the
  Terminal-Bench bases ``ghcr.io/laude-institute/t-bench/ubuntu-24-04`` → ``ubuntu:24.04``,
  ``…/python-3-13`` → ``python:3.13``), with what they add noted.
* :data:`TOOL_IMAGES` — images used only as ``COPY --from`` sources whose files ship in a
  package registry we can reach (``ghcr.io/astral-sh/uv:<ver>`` → the ``uv`` wheel on PyPI).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}
# Mirrors that serve Docker Hub's repositories under another host (and path prefix).
_HUB_MIRRORS = (
    ("public.ecr.aws", "docker/library/"),
    ("mirror.gcr.io", ""),
)
_DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")


class ImageRefError(ValueError):
    """Not a valid image reference."""


@dataclass(frozen=True)
class ImageRef:
    """A parsed image reference (``registry/repository[:tag][@digest]``)."""

    registry: str
    """Registry host (``docker.io`` for Docker Hub and its mirrors)."""
    repository: str
    """Path in the registry (``library/debian`` on Docker Hub)."""
    tag: str | None = None
    digest: str | None = None
    original: str = ""

    @property
    def short(self) -> str:
        """The name the ``FROM`` mapping matches: ``debian``, ``owner/name``, or
        ``ghcr.io/owner/name`` for other registries."""
        if self.registry == DOCKER_HUB:
            return self.repository.removeprefix("library/")
        return f"{self.registry}/{self.repository}"

    @property
    def tag_or_latest(self) -> str:
        return self.tag or "latest"

    @property
    def canonical(self) -> str:
        """``registry/repository:tag[@digest]`` (tag ``latest`` when none was given)."""
        out = f"{self.registry}/{self.repository}:{self.tag_or_latest}"
        return f"{out}@{self.digest}" if self.digest else out

    @property
    def familiar(self) -> str:
        """``short:tag`` — what the mapping and the logs show (``debian:bookworm-slim``)."""
        return f"{self.short}:{self.tag_or_latest}"

    @property
    def reference(self) -> str:
        """What to ask a registry for: the digest when pinned, else the tag."""
        return self.digest or self.tag_or_latest


def parse(text: str) -> ImageRef:
    """Parse and normalise an image reference; raises :class:`ImageRefError`."""
    raw = text.strip()
    if not raw or any(c.isspace() for c in raw):
        raise ImageRefError(f"invalid image reference {text!r}")
    rest, digest = raw, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.match(digest):
            raise ImageRefError(f"invalid digest in image reference {text!r}")
        digest = digest.lower()
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            raise ImageRefError(f"invalid tag in image reference {text!r}")
    first, sep, remainder = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, path = first.lower(), remainder
    else:
        registry, path = DOCKER_HUB, rest
    path = path.lower()
    if registry in _HUB_ALIASES:
        registry = DOCKER_HUB
    for host, prefix in _HUB_MIRRORS:
        if registry == host and path.startswith(prefix):
            registry, path = DOCKER_HUB, path[len(prefix) :]
            break
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not all(_COMPONENT.match(c) for c in path.split("/")):
        raise ImageRefError(f"invalid repository name in image reference {text!r}")
    return ImageRef(registry, path, tag, digest, raw)


# ---------------------------------------------------------------------------- platforms


def host_platform() -> str:
    """``linux/amd64``-style name of this machine's platform."""
    import os

    machine = os.uname().machine
    arch = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)
    return f"linux/{arch}"


def platform_ok(platform: str) -> bool:
    """Whether ``FROM --platform=<platform>`` can run here (same OS and architecture)."""
    want = platform.strip().lower().split("/")
    have = host_platform().split("/")
    return len(want) >= 2 and want[:2] == have[:2]


# ----------------------------------------------------------------------- derived images


@dataclass(frozen=True)
class Derived:
    """A well-known image built on an official one: mapped like ``stands_for``."""

    pattern: re.Pattern[str]
    template: str
    """The official image, ``\\1``, ``\\2`` filled from the pattern's groups."""
    adds: str = ""
    """What the derived image adds over the official one (noted in the mapping)."""
    adds_tools: tuple[str, ...] = ()
    """Programs it adds: the mapping notes those the host base lacks."""


DERIVED: tuple[Derived, ...] = (
    Derived(
        re.compile(r"^ghcr\.io/laude-institute/t-bench/ubuntu-(\d+)-(\d+)$"),
        r"ubuntu:\1.\2",
        "Terminal-Bench base: tmux and asciinema installed",
        ("tmux", "asciinema"),
    ),
    Derived(
        re.compile(r"^ghcr\.io/laude-institute/t-bench/python-(\d+)-(\d+)$"),
        r"python:\1.\2",
        "Terminal-Bench base: tmux and asciinema installed",
        ("tmux", "asciinema"),
    ),
)


def derived(ref: ImageRef) -> tuple[ImageRef, Derived] | None:
    """The official image a well-known derived image stands for (None: not in the table)."""
    name = f"{ref.registry}/{ref.repository}"
    for entry in DERIVED:
        m = entry.pattern.match(name)
        if m:
            return parse(m.expand(entry.template)), entry
    return None


# -------------------------------------------------------------------------- tool images


@dataclass(frozen=True)
class ToolImage:
    """An image used as a ``COPY --from`` source whose files come from a package registry."""

    pattern: re.Pattern[str]
    pypi: str
    """The PyPI project whose wheel carries the binaries."""
    files: tuple[str, ...]
    """Paths in the image (``/uv``) = scripts of the wheel (``uv``)."""
    note: str


TOOL_IMAGES: tuple[ToolImage, ...] = (
    ToolImage(
        re.compile(r"^ghcr\.io/astral-sh/uv$"),
        "uv",
        ("/uv", "/uvx"),
        "uv and uvx of that version, from the uv wheel on PyPI",
    ),
)


def tool_image(ref: ImageRef) -> ToolImage | None:
    """The registry-package stand-in for a tool image (None: not in the table)."""
    name = f"{ref.registry}/{ref.repository}"
    return next((t for t in TOOL_IMAGES if t.pattern.match(name)), None)


def tool_version(ref: ImageRef) -> str | None:
    """The version a tool image's tag names (``0.8.4`` of ``0.8.4-python3.12-bookworm``;
    None for ``latest`` and other tags without one: the newest release is taken)."""
    m = re.match(r"^v?(\d+(?:\.\d+){1,3})(?:$|-)", ref.tag_or_latest)
    return m.group(1) if m else None
