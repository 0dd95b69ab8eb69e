"""Node projects: package manager, test runner and recipe from ``package.json`` and lockfiles."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe
from repogym.bootstrap.pyversions import SpecifierError, parse_version, satisfies

NPX = "npx --no-install"
NO_MATCH = "'(?!)'"
"""A JavaScript regex no test name matches: runners then list every test as skipped."""
NODE_ENV = {
    "CI": "true",
    "npm_config_audit": "false",
    "npm_config_fund": "false",
    "npm_config_update_notifier": "false",
}
INSTALL_SCRIPTS = ("preinstall", "install", "postinstall")
HOOK_TOOLS = re.compile(r"\b(husky|lefthook|simple-git-hooks|is-ci|pre-commit)\b")
UNSUPPORTED_RUNNERS = ("ava", "tap", "tape", "uvu", "jasmine", "karma", "playwright", "cypress")
_DROP_ARGS = re.compile(r"^(--watch\w*|--coverage|--silent|--color|--colors|--no-color)$")


@lru_cache(maxsize=1)
def host_node() -> str | None:
    """The host's Node version (``"20.11.1"``), or None without Node."""
    node = shutil.which("node")
    if not node:
        return None
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().lstrip("v") or None


@dataclass
class NodeProject:
    """What a Node repository declares and what bootstrapping decided from it."""

    name: str | None = None
    manager: str = "npm"
    lockfile: str | None = None
    install_command: str = "npm install"
    test_script: str | None = None
    runner: str | None = None
    runner_args: list[str] = field(default_factory=list)
    node_version: str | None = None
    copy_files: list[str] = field(default_factory=list)
    rebuild_after_source: bool = False
    prepare_after_source: bool = False
    manifests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _script_runner(script: str) -> tuple[str | None, list[str]]:
    """The runner a ``test`` script calls, with its arguments when it is one simple command."""
    simple = not re.search(r"&&|\|\||;|\|", script)
    try:
        words = shlex.split(script)
    except ValueError:
        words, simple = script.split(), False
    while words and (re.match(r"^\w+=", words[0]) or words[0] in ("cross-env", "npx", "env")):
        words = words[1:]
    text = " " + script + " "
    found = None
    for runner, pattern in (
        ("vitest", r"\bvitest\b"),
        ("jest", r"\b(jest|react-scripts test|craco test)\b"),
        ("mocha", r"\b(mocha|_mocha|nyc mocha)\b"),
        ("node", r"\bnode\s+(.*\s)?--test\b"),
    ):
        if re.search(pattern, text):
            found = runner
            break
    args: list[str] = []
    if found and simple and words and words[0] in ("vitest", "jest", "mocha", "node"):
        rest = words[1:]
        if found == "vitest" and rest[:1] in (["run"], ["watch"]):
            rest = rest[1:]
        skip = False
        for word in rest:
            if skip:
                skip = False
                continue
            if word in ("--reporter", "-R", "--test-reporter", "--reporters"):
                skip = True
                continue
            if word == "--test" or word.startswith(("--reporter=", "--test-reporter=")):
                continue
            if not _DROP_ARGS.match(word):
                args.append(word)
    return found, args


def _pnpm_major(pkg: dict[str, Any], lock_text: str) -> str:
    manager = str(pkg.get("packageManager", ""))
    m = re.match(r"pnpm@(\d+)", manager)
    if m:
        return m[1]
    m = re.search(r"^lockfileVersion:\s*'?(\d+)", lock_text, re.M)
    version = int(m[1]) if m else 9
    return {5: "7", 6: "8"}.get(version, "9")


def _workspace_manifests(repo: Path, pkg: dict[str, Any]) -> list[str]:
    spaces = pkg.get("workspaces")
    if isinstance(spaces, dict):
        spaces = spaces.get("packages")
    out = []
    for pattern in spaces if isinstance(spaces, list) else []:
        for path in sorted(repo.glob(str(pattern).rstrip("/"))):
            manifest = path / "package.json"
            if manifest.is_file():
                out.append(manifest.relative_to(repo).as_posix())
    return out


def detect_node(repo: Path) -> NodeProject:
    """Read ``package.json`` and lockfiles; decide install command and runner."""
    project = NodeProject()
    notes = project.notes
    try:
        pkg = json.loads(read_text(repo / "package.json") or "")
    except ValueError as exc:
        project.problem = f"package.json is not valid JSON ({exc})"
        return project
    if not isinstance(pkg, dict):
        project.problem = "package.json does not hold an object"
        return project
    project.name = pkg.get("name") if isinstance(pkg.get("name"), str) else None
    project.manifests.append("package.json")
    copy = ["package.json"]
    scripts = pkg.get("scripts") if isinstance(pkg.get("scripts"), dict) else {}

    # --- package manager -------------------------------------------------------------------
    version = host_node()
    project.node_version = version
    if version is None:
        project.problem = "Node.js is not installed on this host (the local sandbox maps node:*)"
    engines = pkg.get("engines", {}).get("node") if isinstance(pkg.get("engines"), dict) else None
    if version and isinstance(engines, str):
        try:
            if not satisfies(parse_version(version), engines.replace(".x", ".*")):
                notes.append(f"engines.node {engines!r} excludes the host's Node {version}")
        except SpecifierError:
            pass
    for name in (".npmrc",):
        if (repo / name).is_file():
            copy.append(name)
    ignore = ""
    if any(s in scripts for s in INSTALL_SCRIPTS):
        ignore = " --ignore-scripts"
        project.rebuild_after_source = True
        notes.append(
            "package.json has install scripts that need the source: dependencies install with"
            " --ignore-scripts, `npm rebuild` runs after the source is copied"
        )
    elif "prepare" in scripts or "prepublish" in scripts:
        ignore = " --ignore-scripts"
    prepare = str(scripts.get("prepare", ""))
    if prepare and not HOOK_TOOLS.search(prepare):
        project.prepare_after_source = True
        notes.append(f"`npm run prepare` ({prepare}) runs after the source is copied")
    elif prepare:
        notes.append(f"prepare script ({prepare}) installs git hooks: skipped")
    rebuild = " && npm rebuild" if ignore and not project.rebuild_after_source else ""
    if (repo / "package-lock.json").is_file() or (repo / "npm-shrinkwrap.json").is_file():
        lock = (
            "package-lock.json" if (repo / "package-lock.json").is_file() else "npm-shrinkwrap.json"
        )
        project.lockfile = lock
        project.install_command = f"npm ci{ignore}{rebuild}"
        notes.append(f"{lock}: `npm ci` installs exactly the locked versions")
    elif (repo / "pnpm-lock.yaml").is_file():
        project.manager, project.lockfile = "pnpm", "pnpm-lock.yaml"
        major = _pnpm_major(pkg, read_text(repo / "pnpm-lock.yaml") or "")
        project.install_command = f"npx --yes pnpm@{major} install --frozen-lockfile{ignore}"
        if rebuild:
            project.install_command += f" && npx --yes pnpm@{major} rebuild"
        for name in ("pnpm-workspace.yaml",):
            if (repo / name).is_file():
                copy.append(name)
        notes.append(f"pnpm-lock.yaml: pnpm {major} (fetched from npm with npx) installs it")
    elif (repo / "yarn.lock").is_file():
        project.lockfile = "yarn.lock"
        lock_text = read_text(repo / "yarn.lock", 4096) or ""
        if "yarn lockfile v1" in lock_text:
            project.manager = "yarn"
            project.install_command = (
                f"npx --yes yarn@1 install --frozen-lockfile --non-interactive{ignore}"
            )
            if rebuild:
                project.install_command += " && npm rebuild"
            notes.append("yarn.lock (v1): yarn 1 (fetched from npm with npx) installs it")
        else:
            project.install_command = f"npm install --no-package-lock{ignore}{rebuild}"
            notes.append(
                "yarn.lock of yarn ≥2 is not supported here: npm resolves package.json ranges"
                " instead (versions may differ from the lockfile)"
            )
    else:
        project.install_command = f"npm install --no-package-lock{ignore}{rebuild}"
        notes.append("no lockfile: npm resolves package.json ranges at build time")
    if project.lockfile:
        copy.append(project.lockfile)
        project.manifests.append(project.lockfile)
    if (repo / "bun.lockb").is_file() or (repo / "bun.lock").is_file():
        notes.append("bun lockfile ignored: bun is not available here")
    workspaces = _workspace_manifests(repo, pkg)
    if workspaces:
        notes.append(f"npm workspaces: {len(workspaces)} member package.json copied before install")
    project.copy_files = list(dict.fromkeys(copy + workspaces))

    # --- runner ----------------------------------------------------------------------------
    script = scripts.get("test")
    project.test_script = script if isinstance(script, str) else None
    deps: dict[str, Any] = {}
    for key in ("dependencies", "devDependencies"):
        if isinstance(pkg.get(key), dict):
            deps.update(pkg[key])
    runner, args = (None, [])
    if project.test_script and "no test specified" not in project.test_script:
        runner, args = _script_runner(project.test_script)
        if runner:
            notes.append(f"runner {runner}: the test script runs it ({project.test_script!r})")
    if runner is None:
        for name, cand in (("vitest", "vitest"), ("jest", "jest"), ("mocha", "mocha")):
            if name in deps:
                runner = cand
                notes.append(f"runner {cand}: {name} is a declared dependency")
                break
    if runner is None and not project.problem:
        other = [r for r in UNSUPPORTED_RUNNERS if r in deps or r in (project.test_script or "")]
        shown = f"test script {project.test_script!r}" if project.test_script else "no test script"
        project.problem = (
            f"no supported test runner (jest, vitest, mocha, node --test) in package.json ({shown}"
            + (f"; uses {', '.join(other)}" if other else "")
            + ")"
        )
    if runner == "node":
        notes.append("node --test output has no repogym log parser yet (ids: test names)")
    project.runner = runner
    project.runner_args = args
    if args:
        notes.append(f"test script arguments kept: {' '.join(args)}")
    return project


def node_recipe(project: NodeProject) -> Recipe:
    """The Dockerfile and test commands for a detected Node project."""
    if project.problem or not project.runner:
        raise ValueError(project.problem or "no runner detected")
    major = (project.node_version or "20").split(".")[0]
    image = f"node:{major}-slim"
    df = DockerfileWriter(
        f"repogym bootstrap recipe: node {major}, {project.runner}.\n"
        "Dependency layers come before the source snapshot so tasks of one repository share them."
    )
    df.from_(image)
    # The task's verifier is Python (standard library): slim Node images lack python3.
    df.comment("the verifier needs python3 (a no-op where the image has it)")
    df.lines.append(
        "RUN command -v python3 >/dev/null || (apt-get update && apt-get install -y "
        "--no-install-recommends python3 && rm -rf /var/lib/apt/lists/*)"
    )
    df.workdir(WORKDIR)
    df.env(NODE_ENV)
    by_dir: dict[str, list[str]] = {}
    for rel in project.copy_files:
        parent = str(Path(rel).parent)
        by_dir.setdefault(parent, []).append(f"repo/{rel}")
    for parent, sources in sorted(by_dir.items()):
        df.copy(sources, "./" if parent == "." else f"./{parent}/")
    df.run(project.install_command.split())
    df.copy(["repo/"], f"{WORKDIR}/")
    if project.rebuild_after_source:
        df.run(["npm", "rebuild"])
    if project.prepare_after_source:
        df.run(["npm", "run", "prepare"])
    extra = " ".join(shlex.quote(a) for a in project.runner_args)
    extra = f" {extra}" if extra else ""
    runner = project.runner
    # jest/vitest list tests by loading every test file with a name filter matching nothing:
    # the JSON report then counts all tests as skipped (works on every version, unlike `list`).
    if runner == "jest":
        select = f"{NPX} jest --ci --verbose{extra}"
        test, collect = select, f"{NPX} jest --ci --json --testNamePattern={NO_MATCH}{extra}"
    elif runner == "vitest":
        select = f"{NPX} vitest run --reporter=verbose{extra}"
        test = select
        collect = f"{NPX} vitest run --reporter=json --testNamePattern={NO_MATCH}{extra}"
    elif runner == "mocha":
        select = f"{NPX} mocha --reporter spec{extra}"
        test, collect = select, f"{select} --dry-run"
    else:
        select = f"node --test --test-reporter=spec{extra}"
        test = select
        collect = f"node --test --test-reporter=tap --test-name-pattern={NO_MATCH}{extra}"
    return Recipe(
        language="node",
        runner=runner,
        base_image=image,
        dockerfile=df.render(),
        test_command=test,
        collect_command=collect,
        select_command=select,
        workdir=WORKDIR,
        env=dict(NODE_ENV),
        notes=list(project.notes),
    )
