"""Go projects (``go test``): host toolchain, module proxy access, ``go.mod``, recipe."""

from __future__ import annotations

import re
import shutil
from functools import lru_cache
from pathlib import Path

from repogym.bootstrap._files import read_text
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe
from repogym.bootstrap.native.project import NativeProject, reachable, tool_version, version_tuple

GOPROXY_HOST = "proxy.golang.org"
GOCACHE = "/go/cache"
"""The build cache, under the image's ``GOPATH`` (``/go``, open to every user)."""
# Commands run through `bash -lc`, and a login shell resets PATH (Debian's /etc/profile), which
# drops the images' ENV PATH entries for the toolchains: name their folders explicitly.
GO = 'PATH="/usr/local/go/bin:$PATH" go'


@lru_cache(maxsize=1)
def host_go() -> tuple[str, str] | None:
    """``(go path, version "1.19.8")`` or None without a Go toolchain."""
    go = shutil.which("go")
    text = tool_version(go, "version")
    m = re.search(r"go(\d+\.\d+(?:\.\d+)?)", text or "")
    return (go, m[1]) if go and m else None


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


_TAGS = re.compile(r"\bgo\s+test\b[^\n]*?\s-tags[= ]+['\"]?([\w.,-]+)")


def ci_tags(repo: Path) -> str | None:
    """The build tags the repository's CI passes to ``go test`` (workflows, Makefile)."""
    texts = [read_text(p) or "" for p in sorted((repo / ".github" / "workflows").glob("*.y*ml"))]
    texts += [read_text(repo / name) or "" for name in ("Makefile", "makefile", "GNUmakefile")]
    for text in texts:
        m = _TAGS.search(text)
        if m:
            return m[1]
    return None


def detect_go(repo: Path, commit_date: str | None = None) -> NativeProject:
    """A Go module (``go.mod`` at the root). Modules are pinned by ``go.mod``/``go.sum``
    (minimal version selection), so ``commit_date`` changes nothing here."""
    project = NativeProject("go", manifests=["go.mod"])
    if (repo / "go.sum").is_file():
        project.manifests.append("go.sum")
    tool = host_go()
    if tool is None:
        project.problem = "Go project, but no go toolchain on this host"
        return project
    project.toolchain, project.toolchain_version = tool
    text = read_text(repo / "go.mod") or ""
    wanted, requires, local = _go_mod(text)
    switch = re.search(r"^toolchain\s+go(\S+)", text, re.M)
    if switch:
        project.override = True
        project.notes.append(
            f"go.mod names toolchain go{switch[1]}: the host's Go {project.toolchain_version}"
            " is used (GOTOOLCHAIN=local)"
        )
    if wanted and version_tuple(wanted)[:2] > version_tuple(project.toolchain_version)[:2]:
        project.problem = (
            f"go.mod needs Go {wanted}, the host has Go {project.toolchain_version} "
            "(and no newer toolchain can be downloaded here)"
        )
        return project
    project.tags = ci_tags(repo)
    if project.tags:
        project.notes.append(f"build tags {project.tags} (from the CI's go test)")
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
    env = {
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=vendor" if project.vendored else "-mod=mod",
        "GOCACHE": GOCACHE,
    }
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
    # Vet is off: each Go release's vet rejects test code older ones accepted (a commit's tests
    # are judged by the compiler and the tests, not by today's vet).
    flags = ["-vet=off"] + ([f"-tags={project.tags}"] if project.tags else [])
    # The build cache is warmed here and left writable for the test runs (which run as
    # another user with a home of their own): without it every run compiles the standard
    # library and the dependencies again. Runs are never served from its test results
    # (-count=1).
    df.run(["go", "test", *flags, "-count=1", "-run", "'^$'", "./..."])
    df.run(["chmod", "-R", "a+rwX", GOCACHE])
    flags.insert(0, "-count=1")
    flag_text = " ".join(flags)
    return Recipe(
        language="go",
        runner="go",
        base_image=image,
        dockerfile=df.render(),
        test_command=f"{GO} test -json {flag_text} ./...",
        collect_command=f"{GO} test -list . {flag_text} ./...",
        select_command=f"{GO} test -json {flag_text}",
        workdir=WORKDIR,
        env=env,
        notes=[
            *project.notes,
            "test binaries are compiled once in the image (go test -run '^$'); vet is off",
        ],
    )
