"""Rust projects (``cargo test``): host toolchain, crates.io access, external crates, recipe."""

from __future__ import annotations

import os
import re
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text, read_toml
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe
from repogym.bootstrap.native.project import (
    NativeProject,
    reachable,
    tool_version,
    version_tuple,
)

CRATES_HOST = "index.crates.io"
RUSTUP_HOST = "static.rust-lang.org"
# Commands run through `bash -lc`, and a login shell resets PATH (Debian's /etc/profile), which
# drops the images' ENV PATH entries for the toolchains: name their folders explicitly.
CARGO = 'PATH="${CARGO_HOME:-/usr/local/cargo}/bin:$PATH" cargo'


@lru_cache(maxsize=1)
def host_cargo() -> tuple[str, str] | None:
    """``(cargo path, rustc version "1.80.1")`` or None without a Rust toolchain."""
    cargo = shutil.which("cargo") or next(
        (str(p) for p in [Path.home() / ".cargo/bin/cargo"] if p.exists()), None
    )
    if not cargo:
        return None
    rustc = str(Path(cargo).with_name("rustc"))
    text = tool_version(rustc if os.path.exists(rustc) else shutil.which("rustc"), "--version")
    m = re.search(r"rustc (\d+\.\d+\.\d+)", text or "")
    return (cargo, m[1]) if m else None


def _member_manifests(repo: Path, pattern: str) -> list[Path]:
    """The ``Cargo.toml`` of the workspace members a ``members`` entry names, inside the
    repository (``"."`` is the root package itself, read already; paths leaving the
    repository and malformed patterns name none)."""
    pattern = pattern.strip().strip("/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern in ("", ".") or pattern.startswith("/") or ".." in pattern.split("/"):
        return []
    try:
        return sorted(p / "Cargo.toml" for p in repo.glob(pattern) if (p / "Cargo.toml").is_file())
    except (ValueError, IndexError, OSError):
        return []


def _cargo_external(repo: Path) -> list[str]:
    """Crates that come from a registry or git (not a path inside the repository)."""
    lock, _ = read_toml(repo / "Cargo.lock")
    if lock and isinstance(lock.get("package"), list):
        return sorted(
            {str(p.get("name")) for p in lock["package"] if isinstance(p, dict) and p.get("source")}
        )
    external: set[str] = set()
    manifests = [repo / "Cargo.toml"]
    root, _ = read_toml(repo / "Cargo.toml")
    members = (root or {}).get("workspace", {}).get("members", [])
    for pattern in members if isinstance(members, list) else []:
        manifests += _member_manifests(repo, str(pattern))
    workspace_deps = (root or {}).get("workspace", {}).get("dependencies", {})
    for manifest in manifests:
        data, _ = read_toml(manifest)
        tables: list[Any] = (
            [data.get(k) for k in ("dependencies", "dev-dependencies")] if data else []
        )
        tables += [workspace_deps] if manifest == repo / "Cargo.toml" else []
        if data and isinstance(data.get("target"), dict):
            for target in data["target"].values():
                if isinstance(target, dict):
                    tables += [target.get("dependencies"), target.get("dev-dependencies")]
        for table in tables:
            for name, spec in (table or {}).items() if isinstance(table, dict) else []:
                if isinstance(spec, dict) and ("path" in spec or spec.get("workspace")):
                    continue
                external.add(name)
    return sorted(external)


def _toolchain_file(repo: Path) -> tuple[str, str, list[str]] | None:
    """``(file, channel, components)`` of a ``rust-toolchain(.toml)`` override file."""
    for name in ("rust-toolchain.toml", "rust-toolchain"):
        text = read_text(repo / name)
        if text is None:
            continue
        data, _ = read_toml(repo / name)
        table = (data or {}).get("toolchain")
        if isinstance(table, dict):
            components = table.get("components")
            return (
                name,
                str(table.get("channel") or ""),
                [str(c) for c in components] if isinstance(components, list) else [],
            )
        return name, text.strip().splitlines()[0].strip() if text.strip() else "", []
    return None


def _rust_version(repo: Path) -> str | None:
    """The minimum Rust a package or workspace declares (``rust-version``)."""
    data, _ = read_toml(repo / "Cargo.toml")
    for table in ((data or {}).get("package"), (data or {}).get("workspace", {}).get("package")):
        if isinstance(table, dict) and isinstance(table.get("rust-version"), str):
            return str(table["rust-version"])
    return None


def _nightly_features(repo: Path) -> str | None:
    """The first crate root that enables unstable features (``#![feature(…)]``)."""
    roots = [repo / "src" / "lib.rs", repo / "src" / "main.rs"]
    roots += sorted(repo.glob("*/src/lib.rs"))[:50]
    for root in roots:
        if re.search(r"^\s*#!\[feature\(", read_text(root) or "", re.M):
            return str(root.relative_to(repo))
    return None


def _pinned_channel(channel: str, commit_date: str | None) -> str | None:
    """The exact toolchain a ``rust-toolchain`` channel names (``1.70.0``, ``1.70``,
    ``nightly-2023-01-01``; floating ``nightly`` as of the commit's day); None for ``stable``,
    ``beta`` and whatever else does not name one."""
    if re.fullmatch(r"\d+\.\d+(\.\d+)?|nightly-\d{4}-\d{2}-\d{2}", channel):
        return channel
    if channel == "nightly" and commit_date:
        return f"nightly-{commit_date[:10]}"
    return None


def _toolchain_problem(repo: Path, project: NativeProject, commit_date: str | None) -> str:
    """Why no toolchain can stand for the one the repository asks for ("" when one can).

    A ``rust-toolchain(.toml)`` that pins a release or a nightly (a floating ``nightly`` is
    taken as of the commit's day) is installed with rustup at build time when rustup's
    server is reachable; otherwise the host's toolchain stands for it. Either way the
    recipe names the toolchain in ``RUSTUP_TOOLCHAIN`` and the choice is noted."""
    host = project.toolchain_version or "0"
    override = _toolchain_file(repo)
    name, channel, components = override or ("", "", [])
    pinned = _pinned_channel(channel, commit_date) if override else None
    if pinned and reachable(RUSTUP_HOST):
        project.override = True
        project.install = pinned
        project.components = [c for c in components if re.fullmatch(r"[\w-]+", c)]
        project.notes.append(
            f"{name} asks for Rust {channel}: toolchain {pinned} installed with rustup at build"
            " time" + (f" (with {', '.join(project.components)})" if project.components else "")
        )
        return ""
    wanted = _rust_version(repo)
    if wanted and version_tuple(wanted) > version_tuple(host):
        return f"Cargo.toml needs Rust {wanted} (rust-version); the host has Rust {host}"
    if override is None:
        return ""
    project.override = True
    if channel.startswith("nightly") or channel == "beta":
        unstable = _nightly_features(repo)
        if unstable:
            return (
                f"{name} asks for Rust {channel} and {unstable} enables unstable features"
                f" (#![feature]); the host has stable Rust {host} and rustup's server is not"
                " reachable"
            )
    elif re.match(r"^\d+\.\d+", channel) and version_tuple(channel) > version_tuple(host):
        return f"{name} asks for Rust {channel}; the host has Rust {host}"
    extra = [c for c in components if c not in ("rustfmt", "clippy")]
    project.notes.append(
        f"{name} asks for Rust {channel or '(unnamed)'}"
        + (f" with {', '.join(extra)}" if extra else "")
        + f": the host's Rust {host} is used instead (RUSTUP_TOOLCHAIN)"
    )
    return ""


def detect_rust(repo: Path, commit_date: str | None = None) -> NativeProject:
    """A Cargo package or workspace; ``commit_date`` caps the crates a build without
    ``Cargo.lock`` resolves to those published by then."""
    project = NativeProject("rust", manifests=["Cargo.toml"])
    if (repo / "Cargo.lock").is_file():
        project.manifests.append("Cargo.lock")
    tool = host_cargo()
    if tool is None:
        project.problem = "Rust project, but no cargo/rustc on this host"
        return project
    project.toolchain, project.toolchain_version = tool
    project.problem = _toolchain_problem(repo, project, commit_date)
    if project.problem:
        return project
    project.external = _cargo_external(repo)
    config = (read_text(repo / ".cargo/config.toml") or "") + (
        read_text(repo / ".cargo/config") or ""
    )
    project.vendored = (repo / "vendor").is_dir() and "replace-with" in config
    # RUSTFLAGS in the environment would replace the repository's own rustflags.
    project.rustflags = "rustflags" in config
    if not project.external:
        project.notes.append("no crates from a registry: builds offline")
    elif project.vendored:
        project.notes.append(
            f"{len(project.external)} crates vendored under vendor/: builds offline"
        )
    elif reachable(CRATES_HOST):
        project.fetch = True
        project.notes.append(f"{len(project.external)} crates fetched from crates.io at build time")
        if "Cargo.lock" not in project.manifests and commit_date:
            project.lock_date = commit_date
            project.notes.append(
                f"no Cargo.lock: crates resolved as published by {commit_date}"
                " (cargo generate-lockfile --publish-time; today's resolution if none fits)"
            )
    else:
        shown = ", ".join(project.external[:5]) + (" …" if len(project.external) > 5 else "")
        project.problem = (
            f"Rust project needs {len(project.external)} crates ({shown}) but crates.io is not"
            " reachable from this machine (offline-only toolchain; vendor the crates to use it)"
        )
    return project


def rust_recipe(project: NativeProject) -> Recipe:
    if project.problem:
        raise ValueError(project.problem)
    minor = ".".join((project.toolchain_version or "1").split(".")[:2])
    image = f"rust:{minor}-slim"
    env = {"CARGO_TERM_COLOR": "never", "CARGO_INCREMENTAL": "0"}
    if not project.rustflags:
        # A newer compiler's lints must not fail an older commit's #![deny(warnings)].
        env["RUSTFLAGS"] = "--cap-lints=warn"
    if project.override:
        env["RUSTUP_TOOLCHAIN"] = project.install or project.toolchain_version or "stable"
    df = DockerfileWriter(
        f"repogym bootstrap recipe: rust {minor}, cargo test.\n"
        "Cargo needs the sources to resolve a workspace, so dependencies are fetched after them."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(env)
    if project.install:
        words = ["rustup", "toolchain", "install", project.install, "--profile", "minimal"]
        words += [w for c in project.components for w in ("--component", c)]
        df.run([*words, "--no-self-update"])
    df.copy(["repo/"], f"{WORKDIR}/")
    if project.lock_date:
        # --publish-time is unstable in cargo: RUSTC_BOOTSTRAP lets a stable cargo use it.
        # When nothing resolves by that date (a requirement only published later, a yanked
        # release), today's resolution is taken rather than no build.
        df.run(
            ["env", "RUSTC_BOOTSTRAP=1", "cargo", "generate-lockfile", "-Zunstable-options"]
            + ["--publish-time", project.lock_date, "||", "cargo", "generate-lockfile"]
        )
    if project.fetch:
        df.run(["cargo", "fetch"])
    df.run(["cargo", "test", "--offline", "--no-run"])
    base = f"{CARGO} test --offline --no-fail-fast"
    return Recipe(
        language="rust",
        runner="cargo",
        base_image=image,
        dockerfile=df.render(),
        test_command=base,
        collect_command=f"{CARGO} test --offline -- --list",
        select_command=base,
        workdir=WORKDIR,
        env=env,
        notes=[
            *project.notes,
            "test binaries are compiled in the image; runs rebuild incrementally",
        ],
    )
