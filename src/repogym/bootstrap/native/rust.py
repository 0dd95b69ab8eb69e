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
from repogym.bootstrap.native.project import NativeProject, reachable, tool_version

CRATES_HOST = "index.crates.io"
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
        manifests += sorted(p / "Cargo.toml" for p in repo.glob(str(pattern)))
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


def detect_rust(repo: Path) -> NativeProject:
    project = NativeProject("rust", manifests=["Cargo.toml"])
    if (repo / "Cargo.lock").is_file():
        project.manifests.append("Cargo.lock")
    tool = host_cargo()
    if tool is None:
        project.problem = "Rust project, but no cargo/rustc on this host"
        return project
    project.toolchain, project.toolchain_version = tool
    project.external = _cargo_external(repo)
    config = (read_text(repo / ".cargo/config.toml") or "") + (
        read_text(repo / ".cargo/config") or ""
    )
    project.vendored = (repo / "vendor").is_dir() and "replace-with" in config
    if not project.external:
        project.notes.append("no crates from a registry: builds offline")
    elif project.vendored:
        project.notes.append(
            f"{len(project.external)} crates vendored under vendor/: builds offline"
        )
    elif reachable(CRATES_HOST):
        project.fetch = True
        project.notes.append(f"{len(project.external)} crates fetched from crates.io at build time")
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
    df = DockerfileWriter(
        f"repogym bootstrap recipe: rust {minor}, cargo test.\n"
        "Cargo needs the sources to resolve a workspace, so dependencies are fetched after them."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(env)
    df.copy(["repo/"], f"{WORKDIR}/")
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
