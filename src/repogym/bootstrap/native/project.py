"""Rust (``cargo test``) and Go (``go test``) projects: toolchain, registry access and recipe.

Both are supported only where they can work here: the toolchain must be on the host (the local
sandbox maps ``rust:*`` / ``golang:*`` to it) and third-party crates or modules must come from a
``vendor/`` folder or a registry this machine can reach (crates.io and the Go module proxy are
usually not).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text, read_toml
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe

CRATES_HOST = "index.crates.io"
GOPROXY_HOST = "proxy.golang.org"
# Commands run through `bash -lc`, and a login shell resets PATH (Debian's /etc/profile), which
# drops the images' ENV PATH entries for the toolchains: name their folders explicitly.
CARGO = 'PATH="${CARGO_HOME:-/usr/local/cargo}/bin:$PATH" cargo'
GO = 'PATH="/usr/local/go/bin:$PATH" go'


@lru_cache(maxsize=8)
def reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds (cached per process)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _tool_version(exe: str | None, *args: str) -> str | None:
    if not exe:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@lru_cache(maxsize=1)
def host_cargo() -> tuple[str, str] | None:
    """``(cargo path, rustc version "1.80.1")`` or None without a Rust toolchain."""
    cargo = shutil.which("cargo") or next(
        (str(p) for p in [Path.home() / ".cargo/bin/cargo"] if p.exists()), None
    )
    if not cargo:
        return None
    rustc = str(Path(cargo).with_name("rustc"))
    text = _tool_version(rustc if os.path.exists(rustc) else shutil.which("rustc"), "--version")
    m = re.search(r"rustc (\d+\.\d+\.\d+)", text or "")
    return (cargo, m[1]) if m else None


@lru_cache(maxsize=1)
def host_go() -> tuple[str, str] | None:
    """``(go path, version "1.19.8")`` or None without a Go toolchain."""
    go = shutil.which("go")
    text = _tool_version(go, "version")
    m = re.search(r"go(\d+\.\d+(?:\.\d+)?)", text or "")
    return (go, m[1]) if go and m else None


def _vt(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


@dataclass
class NativeProject:
    """A Rust or Go repository: toolchain found, external dependencies, what blocks it."""

    language: str
    toolchain: str | None = None
    toolchain_version: str | None = None
    external: list[str] = field(default_factory=list)
    vendored: bool = False
    fetch: bool = False
    """Dependencies are downloaded in the dependency layer (registry reachable)."""
    manifests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ------------------------------------------------------------------------------ Rust


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


# ------------------------------------------------------------------------------ Go


def _go_mod(text: str) -> tuple[str | None, list[str], set[str]]:
    """``(go directive, required modules, modules replaced by local paths)``."""
    go = re.search(r"^go\s+(\d+\.\d+(?:\.\d+)?)", text, re.M)
    requires: list[str] = []
    for block in re.findall(r"^require\s*\(\s*\n(.*?)^\)", text, re.M | re.S):
        requires += [
            ln.split()[0]
            for ln in block.splitlines()
            if ln.strip() and not ln.strip().startswith("//")
        ]
    requires += re.findall(r"^require\s+([^\s(]+)\s+\S+", text, re.M)
    local: set[str] = set()
    replaces = re.findall(r"^replace\s+(\S+)(?:\s+\S+)?\s+=>\s+(\S+)", text, re.M)
    for block in re.findall(r"^replace\s*\(\s*\n(.*?)^\)", text, re.M | re.S):
        replaces += re.findall(r"^\s*(\S+)(?:\s+v\S+)?\s+=>\s+(\S+)", block, re.M)
    for module, target in replaces:
        if target.startswith((".", "/")):
            local.add(module)
    return (go[1] if go else None), sorted(set(requires)), local


def detect_go(repo: Path) -> NativeProject:
    project = NativeProject("go", manifests=["go.mod"])
    if (repo / "go.sum").is_file():
        project.manifests.append("go.sum")
    tool = host_go()
    if tool is None:
        project.problem = "Go project, but no go toolchain on this host"
        return project
    project.toolchain, project.toolchain_version = tool
    wanted, requires, local = _go_mod(read_text(repo / "go.mod") or "")
    if wanted and _vt(wanted)[:2] > _vt(project.toolchain_version)[:2]:
        project.problem = (
            f"go.mod needs Go {wanted}, the host has Go {project.toolchain_version} "
            "(and no newer toolchain can be downloaded here)"
        )
        return project
    project.external = [m for m in requires if m not in local]
    project.vendored = (repo / "vendor" / "modules.txt").is_file()
    if not project.external:
        project.notes.append("no third-party modules: builds offline")
    elif project.vendored:
        project.notes.append(f"{len(project.external)} modules vendored: built with -mod=vendor")
    elif reachable(GOPROXY_HOST):
        project.fetch = True
        project.notes.append(f"{len(project.external)} modules downloaded at build time")
    else:
        shown = ", ".join(project.external[:5]) + (" …" if len(project.external) > 5 else "")
        project.problem = (
            f"Go module needs {len(project.external)} modules ({shown}) but the Go module proxy"
            " is not reachable from this machine (offline-only; vendor them to use it)"
        )
    return project


def go_recipe(project: NativeProject) -> Recipe:
    if project.problem:
        raise ValueError(project.problem)
    minor = ".".join((project.toolchain_version or "1").split(".")[:2])
    image = f"golang:{minor}"
    env = {"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=vendor" if project.vendored else "-mod=mod"}
    if not project.fetch:
        env["GOPROXY"] = "off"
    df = DockerfileWriter(
        f"repogym bootstrap recipe: go {minor}, go test.\n"
        "Dependency layers come before the source snapshot so tasks of one repository share them."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(env)
    if project.fetch:
        df.copy([f"repo/{m}" for m in project.manifests], "./")
        df.run(["go", "mod", "download"])
    df.copy(["repo/"], f"{WORKDIR}/")
    df.run(["go", "test", "-count=1", "-run", "'^$'", "./..."])
    return Recipe(
        language="go",
        runner="go",
        base_image=image,
        dockerfile=df.render(),
        test_command=f"{GO} test -v ./...",
        collect_command=f"{GO} test -list . ./...",
        select_command=f"{GO} test -v",
        workdir=WORKDIR,
        env=env,
        notes=[
            *project.notes,
            "test binaries are compiled once in the image (go test -run '^$')",
        ],
    )
