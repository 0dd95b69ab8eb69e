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
from repogym.bootstrap.node.collect import fixture_modules, mocha_collect, vitest_exclude
from repogym.bootstrap.node.install import date_flag, plan_install
from repogym.bootstrap.node.runner import imports_node_test, reporter_flags, resolve_script
from repogym.bootstrap.node.scripts import (
    locked_version,
    pretest_replay,
    split_invocation,
    wrapped_runner,
)
from repogym.bootstrap.node.versions import choose_node, declared_node

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
_DROP_ARGS = re.compile(
    r"^(--watch\w*|--coverage|--silent|--color|--colors|--no-color"
    r"|--(?:experimental-)?test-coverage|--(?:experimental-)?test-isolation=none)$"
)
_VALUE_FLAGS = ("--reporter", "-R", "--test-reporter", "--reporters", "--test-reporter-destination")
_GLOB_WORD = re.compile(r"^[\w@%+=:,./*?{}\[\]-]+$")
PYTHON_IN_IMAGE = True
"""Whether Node recipes install python3: generation still runs the tamper baseline with Python
(``pipelines/_harness/runtime.py``); the task's Node verifier (``verifier.mjs``) needs none."""


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


def host_nodes() -> list[str]:
    """Node versions the local sandbox can map ``node:*`` onto (the default first)."""
    from repogym.sandbox import host_node_installs

    default = host_node()
    return list(dict.fromkeys([v for v in (default, *host_node_installs()) if v]))


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
    runner_globs: list[str] = field(default_factory=list)
    """Arguments that are unquoted globs in the test script (left for the shell to expand)."""
    runner_env: list[str] = field(default_factory=list)
    """``NAME=value`` assignments the test script puts before the runner."""
    launcher: str | None = None
    """How the test script starts the runner when not by name (``node --flag path/to/jest``)."""
    pretest: str = ""
    """The command replaying the test script's ``pre`` hooks (a build), run before the tests."""
    pretest_sources: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    """Files named like tests that define none (fixture modules), left out of vitest runs."""
    node_version: str | None = None
    """The host Node that runs the tests on the local backend."""
    image_major: str | None = None
    """The major of the recipe's ``FROM node:<major>-slim`` (what the project asks for)."""
    node_reason: str = ""
    pinned: bool = True
    """False when no lockfile fixes the dependency versions."""
    before: str | None = None
    """An ISO date capping an unpinned npm install (``npm install --before``)."""
    copy_files: list[str] = field(default_factory=list)
    rebuild_after_source: bool = False
    prepare_after_source: bool = False
    manifests: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _unquoted_in(script: str, word: str) -> bool:
    """Whether ``word`` stands unquoted in ``script`` (so npm's shell expands a glob in it)."""
    return re.search(r"(^|\s)" + re.escape(word) + r"(\s|$)", script) is not None


def _script_runner(
    script: str,
) -> tuple[str | None, list[str], list[str], list[str], str | None]:
    """The runner a ``test`` script calls, with its arguments when it is one simple command,
    the arguments that are unquoted globs there (npm's shell expands them), the ``NAME=value``
    assignments before the runner and its launcher when not started by name (see
    :func:`~repogym.bootstrap.node.scripts.split_invocation`)."""
    simple = not re.search(r"&&|\|\||;|\|", script)
    try:
        words = shlex.split(script)
    except ValueError:
        words, simple = script.split(), False
    text = " " + script + " "
    found = None
    for runner, pattern in (
        ("vitest", r"\bvitest\b"),
        ("jest", r"\b(jest|react-scripts test|craco test)\b"),
        ("mocha", r"\b(mocha|_mocha|nyc mocha)\b"),
        ("node", r"\bnode\s+(.*\s)?--test(?![\w-])"),
    ):
        if re.search(pattern, text):
            found = runner
            break
    args: list[str] = []
    globs: list[str] = []
    inv = split_invocation(words) if found and simple else None
    if inv is None or inv.runner != found:
        return found, args, globs, [], None
    rest = inv.args
    if found == "vitest" and rest[:1] in (["run"], ["watch"]):
        rest = rest[1:]
    skip = False
    for word in rest:
        if skip:
            skip = False
            continue
        if word in _VALUE_FLAGS:
            skip = True
            continue
        if word == "--test" or word.startswith(
            ("--reporter=", "--test-reporter=", "--test-reporter-destination=")
        ):
            continue
        if not _DROP_ARGS.match(word):
            args.append(word)
            if found == "node" and re.search(r"[*?{\[]", word) and _unquoted_in(script, word):
                globs.append(word)
    return found, args, globs, inv.env, inv.launcher


def _workspace_manifests(repo: Path, pkg: dict[str, Any]) -> list[str]:
    """``package.json`` of the workspace members (npm/yarn ``workspaces``, pnpm's
    ``pnpm-workspace.yaml`` ``packages``)."""
    spaces = pkg.get("workspaces")
    if isinstance(spaces, dict):
        spaces = spaces.get("packages")
    patterns = [str(p) for p in spaces] if isinstance(spaces, list) else []
    pnpm = read_text(repo / "pnpm-workspace.yaml", 65536) or ""
    block = re.search(r"^packages:\s*\n((?:\s+-.*\n?)+)", pnpm, re.M)
    if block:
        patterns += re.findall(r"^\s+-\s*['\"]?([^'\"\n#]+?)['\"]?\s*$", block[1], re.M)
    out = []
    for pattern in patterns:
        if pattern.startswith("!"):
            continue
        for path in sorted(repo.glob(pattern.rstrip("/"))):
            manifest = path / "package.json"
            if manifest.is_file() and path != repo:
                out.append(manifest.relative_to(repo).as_posix())
    return out


def _install_scripts(project: NodeProject, scripts: dict[str, Any]) -> tuple[str, str]:
    """``(ignore flag, rebuild command)`` for lifecycle scripts that need the source."""
    notes = project.notes
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
    return ignore, rebuild


def _choose_version(project: NodeProject, repo: Path, pkg: dict[str, Any]) -> None:
    """The image major and the host Node (from ``engines``/``.nvmrc``/``.node-version``/volta)."""
    declared = declared_node(repo, pkg)
    default = host_node()
    choice = choose_node(declared, host_nodes() if default else [], default)
    project.notes.extend(choice.notes)
    if choice.problem:
        if default is None:
            project.problem = (
                "Node.js is not installed on this host (the local sandbox maps node:*)"
            )
        else:
            project.problem = choice.problem
        return
    project.node_version = choice.host
    project.image_major = str(choice.major)
    project.node_reason = choice.reason
    if declared.pin or declared.engines:
        project.notes.append(
            f"node:{choice.major} from {choice.reason}; runs on Node {choice.host}"
        )


def _choose_runner(project: NodeProject, repo: Path, pkg: dict[str, Any]) -> None:
    notes = project.notes
    scripts = scripts_raw if isinstance(scripts_raw := pkg.get("scripts"), dict) else {}
    script = resolve_script(scripts) if scripts else None
    raw = scripts.get("test")
    project.test_script = raw if isinstance(raw, str) else None
    deps: dict[str, Any] = {}
    for key in ("dependencies", "devDependencies"):
        if isinstance(pkg.get(key), dict):
            deps.update(pkg[key])
    runner: str | None = None
    launcher: str | None = None
    args: list[str] = []
    globs: list[str] = []
    env: list[str] = []
    if script and "no test specified" not in script:
        runner, args, globs, env, launcher = _script_runner(script)
        if runner:
            shown = project.test_script if script == raw else f"{raw} → {script}"
            notes.append(f"runner {runner}: the test script runs it ({shown!r})")
        else:
            wrapped = wrapped_runner(repo, pkg, script)
            if wrapped:
                runner = wrapped[0]
                notes.append(f"runner {runner}: {wrapped[1]}")
    if runner is None:
        for name in ("vitest", "jest", "mocha"):
            if name in deps:
                runner = name
                notes.append(f"runner {name}: {name} is a declared dependency")
                break
    if runner is None:
        found = imports_node_test(repo)
        if found:
            runner = "node"
            notes.append(f"runner node: {found} imports node:test")
    if runner is None and not project.problem:
        other = [r for r in UNSUPPORTED_RUNNERS if r in deps or r in (project.test_script or "")]
        shown = f"test script {project.test_script!r}" if project.test_script else "no test script"
        project.problem = (
            f"no supported test runner (jest, vitest, mocha, node --test) in package.json ({shown}"
            + (f"; uses {', '.join(other)}" if other else "")
            + ")"
        )
    project.runner = runner
    project.runner_args = args
    project.runner_globs = globs
    project.runner_env = env
    project.launcher = launcher
    if env:
        notes.append(f"test script environment kept: {' '.join(env)}")
    if launcher:
        notes.append(f"the runner starts as the test script starts it: {launcher}")
    if args:
        notes.append(f"test script arguments kept: {' '.join(args)}")
    if runner:
        _choose_pretest(project, scripts)
    if runner == "vitest":
        _choose_exclude(project, repo)


def _choose_pretest(project: NodeProject, scripts: dict[str, Any]) -> None:
    """Replay the ``pre`` hooks ``npm test`` runs (a build the tests read, usually).

    When ``prepare`` installs git hooks, the replay runs with npm's ``ignore-scripts``: a build
    that packs the package (``npm pack`` runs ``prepare``) would otherwise fail without a git
    repository. Scripts run by name still run then; their own ``pre``/``post`` hooks do not.
    """
    prepare = scripts.get("prepare")
    hooks = isinstance(prepare, str) and bool(HOOK_TOOLS.search(prepare))
    replay = pretest_replay(scripts, env="npm_config_ignore_scripts=true " if hooks else "")
    if replay.dropped:
        project.notes.append(
            "pre-test checks not replayed (they lint, format or type-check): "
            + "; ".join(replay.dropped)
        )
    if not replay.command:
        return
    project.pretest = replay.command
    project.pretest_sources = replay.sources
    project.notes.append(
        f"npm runs {', '.join(replay.sources)} before the tests: the image builds it and every"
        f" test command re-runs it first (`{replay.command}`)"
        + ("; lifecycle scripts off there (prepare installs git hooks)" if hooks else "")
    )


def _choose_exclude(project: NodeProject, repo: Path) -> None:
    """Leave fixture modules (named like tests, defining none) out of vitest runs."""
    files = fixture_modules(repo)
    if not files:
        return
    version = locked_version(repo, "vitest")
    major = re.match(r"^(\d+)", version or "")
    shown = ", ".join(files[:5]) + (f" (+{len(files) - 5} more)" if len(files) > 5 else "")
    if major and int(major[1]) < 1:
        project.notes.append(
            f"files named like tests define no test ({shown}); vitest {version} has no --exclude"
        )
        return
    project.exclude = files
    project.notes.append(f"excluded from vitest runs (named like tests, define none): {shown}")


def detect_node(repo: Path, *, before: str | None = None) -> NodeProject:
    """Read ``package.json``, lockfiles and version files; decide Node, install and runner.

    ``before`` (an ISO date, e.g. the commit's) caps an install without a lockfile
    (``npm install --before``); :func:`node_recipe` accepts it too.
    """
    project = NodeProject(before=before)
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
    scripts = scripts_raw if isinstance(scripts_raw := pkg.get("scripts"), dict) else {}
    _choose_version(project, repo, pkg)
    for name in (".npmrc",):
        if (repo / name).is_file():
            copy.append(name)
    ignore, rebuild = _install_scripts(project, scripts)
    plan = plan_install(repo, pkg, ignore=ignore, rebuild=rebuild)
    project.manager, project.lockfile = plan.manager, plan.lockfile
    project.install_command, project.pinned = plan.command, plan.pinned
    project.notes.extend(plan.notes)
    copy += plan.copy
    if project.lockfile:
        project.manifests.append(project.lockfile)
    if (repo / "bun.lockb").is_file() or (repo / "bun.lock").is_file():
        project.notes.append("bun lockfile ignored: bun is not available here")
    workspaces = _workspace_manifests(repo, pkg)
    if workspaces:
        project.notes.append(
            f"workspaces: {len(workspaces)} member package.json copied before install"
        )
    project.copy_files = list(dict.fromkeys(copy + workspaces))
    _choose_runner(project, repo, pkg)
    return project


def _install_words(project: NodeProject, before: str | None) -> list[str]:
    """The install command; a date cap falls back to an uncapped install when npm finds no
    version old enough (``ENOVERSIONS``/``ETARGET``: packages without publish times, or a
    registry mirror that records its own copy dates as publish times)."""
    command = project.install_command
    plain = "npm install --no-package-lock"
    if before and not project.pinned and plain in command:
        flag = date_flag(before)
        if flag.strip() not in command:
            head, sep, tail = command.partition(" && ")
            capped = head.replace(plain, plain + flag, 1)
            command = f"( {capped} || {head} ){sep}{tail}" if plain in head else command
    return command.split()


def node_recipe(project: NodeProject, *, before: str | None = None) -> Recipe:
    """The Dockerfile and test commands for a detected Node project.

    ``before`` (ISO date) caps an unpinned install with ``npm install --before``.
    """
    if project.problem or not project.runner:
        raise ValueError(project.problem or "no runner detected")
    before = before or project.before
    major = project.image_major or (project.node_version or "20").split(".")[0]
    image = f"node:{major}-slim"
    df = DockerfileWriter(
        f"repogym bootstrap recipe: node {major}, {project.runner}.\n"
        "Dependency layers come before the source snapshot so tasks of one repository share them."
    )
    df.from_(image)
    if PYTHON_IN_IMAGE:
        # Generation still runs Python in the image (tamper baseline); tasks of JavaScript
        # runners are graded by verifier.mjs where python3 is missing.
        df.comment("generation runs python3 in the image (a no-op where the image has it)")
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
    df.run(_install_words(project, before))
    df.copy(["repo/"], f"{WORKDIR}/")
    if project.rebuild_after_source:
        df.run(["npm", "rebuild"])
    if project.prepare_after_source:
        df.run(["npm", "run", "prepare"])
    if project.pretest:
        df.comment(
            f"package.json {', '.join(project.pretest_sources)}: npm runs it before the tests"
            " (the test commands re-run it)"
        )
        df.run(project.pretest.split())
    runner = project.runner
    notes = list(project.notes)
    if not project.pinned:
        notes.append(
            "dependencies unpinned"
            + (
                f" (npm --before={before}; without the cap when npm finds no version that old)"
                if before
                else ": rebuilding later may differ"
            )
        )
    test, collect, select = _test_commands(project)
    # Recipe.commit_date (when this version of the model has it) records the cap.
    dated = {"commit_date": before} if before and _HAS_DATE and not project.pinned else {}
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
        notes=notes,
        **dated,
    )


def _test_commands(project: NodeProject) -> tuple[str, str, str]:
    """(test command, collect command, select command) for the project's runner."""
    globs = set(project.runner_globs) if project.runner == "node" else set()
    extra = " ".join(
        a if a in globs and _GLOB_WORD.match(a) else shlex.quote(a) for a in project.runner_args
    )
    extra = f" {extra}" if extra else ""
    runner = project.runner
    env = "".join(
        f"{name}={shlex.quote(value)} "
        for name, _, value in (e.partition("=") for e in project.runner_env)
    )
    pre = f"{project.pretest} >&2 && " if project.pretest else ""
    exe = f"{pre}{env}{project.launcher or f'{NPX} {runner}'}"
    # jest/vitest list tests by loading every test file with a name filter matching nothing:
    # the JSON report then counts all tests as skipped (works on every version, unlike `list`).
    if runner == "jest":
        select = f"{exe} --ci --verbose{extra}"
        test, collect = select, f"{exe} --ci --json --testNamePattern={NO_MATCH}{extra}"
    elif runner == "vitest":
        if project.exclude:
            extra = f" {vitest_exclude(project.exclude)}{extra}"
        select = f"{exe} run --reporter=verbose{extra}"
        test = select
        collect = f"{exe} run --reporter=json --testNamePattern={NO_MATCH}{extra}"
    elif runner == "mocha":
        select = f"{exe} --reporter spec{extra}"
        test, collect = select, mocha_collect(select)
    else:
        reporter = reporter_flags(project.node_version)
        reporter = f" {reporter}" if reporter else ""
        node_exe = f"{pre}{env}{project.launcher or 'node'}"
        select = f"{node_exe} --test{reporter}{extra}"
        test = select
        collect = f"{node_exe} --test{reporter} --test-name-pattern={NO_MATCH}{extra}"
    return test, collect, select


_HAS_DATE = "commit_date" in getattr(Recipe, "__dataclass_fields__", {})
