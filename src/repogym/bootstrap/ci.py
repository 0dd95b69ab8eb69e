"""What a repository's CI does before its tests: GitHub Actions, GitLab CI, Makefile targets.

The CI configuration is the best record of how a project's tests were meant to run on a
commit: which extras and dependency groups get installed, which requirement files, which
Debian packages, whether submodules are checked out, which Pythons are tested. One test job is
read — the one that runs the tests (pytest, tox, nox, ``make test``…) and is not a lint, docs,
minimum-versions or release job — and only its steps before the tests. ``make <target>`` in
a step is replaced by the target's commands from the Makefile; local composite actions
(``uses: ./.github/actions/x``) by their steps. Without CI, the Makefile's ``test`` target is
read the same way. YAML is read with PyYAML's safe loader (line numbers kept for the notes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from repogym.bootstrap._files import read_text
from repogym.bootstrap.installs import (
    InstallSpec,
    apt_packages,
    is_test_command,
    parse_install,
    split_commands,
    strip_prefix,
)

_PENALTY = re.compile(
    r"lint|docs?\b|documentation|typ(e|ing)|mypy|pyright|format|style|release|publish|deploy|"
    r"bench|min(imum)?[-_ ]?(deps|versions?)|oldest|lowest|nightly|upstream|pre-?release|"
    r"coverage[-_ ]?report|security|codeql|wheel|sdist|pages",
    re.I,
)
_GITLAB_RESERVED = frozenset(
    [
        "stages",
        "variables",
        "default",
        "include",
        "workflow",
        "image",
        "services",
        "before_script",
        "after_script",
        "cache",
        "pages",
    ]
)
_MAKE_VARS = {"PYTHON": "python", "PY": "python", "PYTHON3": "python", "PIP": "pip"}


class _Str(str):
    """A YAML string that remembers its line."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    pass


def _construct_str(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> _Str:
    value = _Str(loader.construct_scalar(node))
    value.line = node.start_mark.line + 1 + (1 if node.style in ("|", ">") else 0)
    return value


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def load_yaml(text: str) -> Any:
    """Safe-load YAML, strings knowing their line (``None`` for invalid YAML)."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        return None


@dataclass
class CiCommand:
    where: str
    words: list[str]

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass
class CiJob:
    """One CI job: its commands in order, and what its checkout and Python setup say."""

    file: str
    name: str
    commands: list[CiCommand] = field(default_factory=list)
    submodules: str = ""
    """``file:line`` of a checkout with submodules (empty: none)."""
    pythons: list[tuple[tuple[int, int], str]] = field(default_factory=list)

    def runs_tests(self) -> bool:
        return any(is_test_command(c.words) for c in self.commands)

    def score(self) -> int:
        label = f"{self.name} {Path(self.file).stem}"
        score = 10 if self.runs_tests() else 0
        score += 2 if "test" in label.lower() else 0
        score += 1 if len({p for p, _ in self.pythons}) > 1 else 0  # the main matrix job
        return score - (5 if _PENALTY.search(self.name) else 0)


@dataclass
class CiFacts:
    """What the chosen CI job does before running the tests."""

    job: str = ""
    installs: list[InstallSpec] = field(default_factory=list)
    apt: list[tuple[str, str]] = field(default_factory=list)
    """``(Debian package, where)``."""
    submodules: str = ""
    python_cap: tuple[tuple[int, int], str] | None = None
    pre_test: list[CiCommand] = field(default_factory=list)
    """Commands replayed before the tests (``python setup.py build_ext --inplace``)."""
    skipped: list[CiCommand] = field(default_factory=list)
    """Other commands before the tests (not replayed; listed in the notes)."""


# ------------------------------------------------------------------------------ Makefile


@dataclass
class MakeTarget:
    line: int
    prereqs: list[str]
    commands: list[tuple[int, str]]


def read_makefile(text: str) -> dict[str, MakeTarget]:
    """Rules of a Makefile: target → prerequisites and recipe lines (variables of the
    :data:`_MAKE_VARS` kind replaced; conditionals and pattern rules ignored)."""
    targets: dict[str, MakeTarget] = {}
    current: list[MakeTarget] = []
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        if raw.startswith("\t"):
            for target in current:
                target.commands.append((number, _make_vars(raw[1:])))
            continue
        line = raw.split("#", 1)[0].rstrip()
        m = re.match(r"^([\w./ -]+?)\s*::?(?!=)\s*(.*)$", line)
        if m and not re.match(r"^\s*[\w.]+\s*[:+?!]?=", line):
            names = [n for n in m[1].split() if not n.startswith(".") and "%" not in n]
            current = [MakeTarget(number, m[2].split(";")[0].split(), []) for _ in names]
            for name, target in zip(names, current, strict=True):
                targets.setdefault(name, target)
        elif line.strip():
            current = []
    return targets


def _make_vars(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        return _MAKE_VARS.get(m[1] or m[2], m[0])

    return re.sub(r"\$\((\w+)\)|\$\{(\w+)\}", sub, text)


def _expand_make(
    words: list[str], targets: dict[str, MakeTarget], seen: set[str] | None = None
) -> list[CiCommand] | None:
    """The Makefile commands ``make <targets>`` runs (None: not a make command we can read)."""
    w = strip_prefix(words)
    if not w or w[0] != "make" or not targets:
        return None
    names = [a for a in w[1:] if not a.startswith("-") and "=" not in a] or [next(iter(targets))]
    if any(a in ("-C", "-f", "--directory", "--file") for a in w[1:]):
        return None
    seen = seen if seen is not None else set()
    out: list[CiCommand] = []
    for name in names:
        target = targets.get(name)
        if target is None or name in seen:
            continue
        seen.add(name)
        for prereq in target.prereqs:
            out += _expand_make(["make", prereq], targets, seen) or []
        for line, text in target.commands:
            for sub_line, sub_words in split_commands(text, line):
                nested = _expand_make(sub_words, targets, seen)
                here = [CiCommand(f"Makefile:{sub_line}", sub_words)]
                out += nested if nested is not None else here
    return out


# ------------------------------------------------------------------------------ GitHub / GitLab


def _versions(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        text = "3.10" if item == 3.1 else str(item)  # YAML reads an unquoted 3.10 as 3.1
        if re.fullmatch(r"3\.\d{1,2}", text):
            out.append(text)
    return out


def _pythons_of(job: dict[str, Any], step_with: dict[str, Any], where: str) -> list[Any]:
    value = step_with.get("python-version")
    if isinstance(value, str) and "${{" in value:
        key = re.search(r"matrix\.([\w-]+)", value)
        strategy = job.get("strategy")
        matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
        if key and isinstance(matrix, dict):
            found = _versions(matrix.get(key[1]))
            for inc in matrix.get("include") or []:
                found += _versions(inc.get(key[1])) if isinstance(inc, dict) else []
            return [((3, int(v.split(".")[1])), where) for v in found]
        return []
    return [((3, int(v.split(".")[1])), where) for v in _versions(value)]


def _steps_commands(
    repo: Path, file: str, steps: Any, job: CiJob, spec: dict[str, Any], depth: int = 0
) -> None:
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        run, uses = step.get("run"), step.get("uses")
        with_ = with_raw if isinstance(with_raw := step.get("with"), dict) else {}
        if isinstance(run, str):
            line = getattr(run, "line", 0)
            for number, words in split_commands(run, line):
                job.commands.append(CiCommand(f"{file}:{number}", words))
        elif isinstance(uses, str):
            where = f"{file}:{getattr(uses, 'line', 0)}"
            if uses.startswith("actions/checkout") and str(with_.get("submodules", "")).lower() in (
                "true",
                "recursive",
            ):
                job.submodules = job.submodules or where
            elif uses.startswith("actions/setup-python"):
                job.pythons += _pythons_of(spec, with_, where)
            elif uses.startswith("./") and depth < 3:
                folder = uses[2:].split("@", 1)[0].rstrip("/")
                for name in ("action.yml", "action.yaml"):
                    text = read_text(repo / folder / name)
                    action = load_yaml(text) if text else None
                    if isinstance(action, dict) and isinstance(action.get("runs"), dict):
                        steps = action["runs"].get("steps")
                        _steps_commands(repo, f"{folder}/{name}", steps, job, spec, depth + 1)
                        break


def github_jobs(repo: Path) -> list[CiJob]:
    folder = repo / ".github" / "workflows"
    jobs: list[CiJob] = []
    files = sorted(folder.glob("*.y*ml")) if folder.is_dir() else []
    for path in files:
        rel = f".github/workflows/{path.name}"
        data = load_yaml(read_text(path) or "")
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
            continue
        for job_id, spec in data["jobs"].items():
            if not isinstance(spec, dict):
                continue
            job = CiJob(rel, str(spec.get("name") or job_id))
            _steps_commands(repo, rel, spec.get("steps"), job, spec)
            jobs.append(job)
    return jobs


def _script_lines(value: Any, file: str, job: CiJob) -> None:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, list):
            _script_lines(item, file, job)
        elif isinstance(item, str):
            for number, words in split_commands(item, getattr(item, "line", 0)):
                job.commands.append(CiCommand(f"{file}:{number}", words))


def _extended(name: str, data: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    spec = data.get(name)
    if not isinstance(spec, dict) or depth > 5:
        return {}
    merged: dict[str, Any] = {}
    parents = spec.get("extends")
    for parent in parents if isinstance(parents, list) else [parents] if parents else []:
        merged.update(_extended(str(parent), data, depth + 1))
    merged.update(spec)
    return merged


def gitlab_jobs(repo: Path) -> list[CiJob]:
    rel = ".gitlab-ci.yml"
    data = load_yaml(read_text(repo / rel) or "")
    if not isinstance(data, dict):
        return []
    default = default_raw if isinstance(default_raw := data.get("default"), dict) else {}
    variables = variables_raw if isinstance(variables_raw := data.get("variables"), dict) else {}
    jobs = []
    for name in data:
        if not isinstance(name, str) or name.startswith(".") or name in _GITLAB_RESERVED:
            continue
        spec = _extended(name, data)
        if "script" not in spec:
            continue
        job = CiJob(rel, name)
        before = spec.get("before_script", default.get("before_script", data.get("before_script")))
        _script_lines(before, rel, job)
        _script_lines(spec.get("script"), rel, job)
        own_vars = spec.get("variables")
        job_vars = {**variables, **(own_vars if isinstance(own_vars, dict) else {})}
        strategy = str(job_vars.get("GIT_SUBMODULE_STRATEGY", "")).lower()
        if strategy in ("normal", "recursive"):
            value = job_vars.get("GIT_SUBMODULE_STRATEGY")
            job.submodules = f"{rel}:{getattr(value, 'line', 0)}"
        image = spec.get("image", default.get("image", data.get("image")))
        if isinstance(image, dict):
            image = image.get("name")
        m = re.match(r"^(?:[\w./-]+/)?python:3\.(\d+)", str(image or ""))
        if m:
            job.pythons.append(((3, int(m[1])), f"{rel}:{getattr(image, 'line', 0)}"))
        jobs.append(job)
    return jobs


# ------------------------------------------------------------------------------ the facts

_BUILD_EXT = re.compile(r"^python[0-9.]* setup\.py build_ext\b.*(--inplace|-i)\b")


def read_ci(repo: Path) -> CiFacts:
    """Read the CI configuration of ``repo`` (empty facts when there is none)."""
    make = read_makefile(read_text(repo / "Makefile") or "")
    jobs = github_jobs(repo) + gitlab_jobs(repo)
    for job in jobs:
        expanded: list[CiCommand] = []
        seen: set[str] = set()  # a target runs once per job, as make would
        for cmd in job.commands:
            nested = _expand_make(cmd.words, make, seen)
            expanded += nested if nested is not None else [cmd]
        job.commands = expanded
    candidates = [j for j in jobs if j.runs_tests()]
    if not candidates:
        for name in ("test", "tests", "check"):
            if name in make:
                job = CiJob("Makefile", name, _expand_make(["make", name], make) or [])
                if job.runs_tests():
                    candidates.append(job)
                    break
    if not candidates:
        return CiFacts()
    best = max(candidates, key=lambda j: j.score())  # the first of equals (file order)
    facts = CiFacts(job=f"{best.file} job {best.name!r}", submodules=best.submodules)
    if best.pythons:
        facts.python_cap = max(best.pythons)
    for cmd in best.commands:
        if is_test_command(cmd.words):
            spec = parse_install(cmd.words, cmd.where)  # ``uv run pytest`` syncs first
            if spec is not None:
                facts.installs.append(spec)
            break
        spec = parse_install(cmd.words, cmd.where)
        packages = apt_packages(cmd.words)
        if spec is not None:
            facts.installs.append(spec)
        elif packages is not None:
            facts.apt += [(p, cmd.where) for p in packages]
        elif _BUILD_EXT.match(" ".join(strip_prefix(cmd.words))):
            facts.pre_test.append(cmd)
        elif re.search(r"git submodule (update|init)", cmd.text):
            facts.submodules = facts.submodules or cmd.where
        else:
            facts.skipped.append(cmd)
    return facts
