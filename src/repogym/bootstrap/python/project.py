"""Python projects: what they declare, which interpreter and runner fit, what to install.

Everything is read statically — ``pyproject.toml`` (PEP 621, Poetry, PDM, Hatch, uv, setuptools
dynamic files, PEP 735 dependency groups), ``setup.cfg``, ``setup.py`` (literal arguments of the
``setup()`` call, via ``ast``), ``requirements*.txt``, ``tox.ini``, ``noxfile.py`` (``ast``),
the CI configuration (:mod:`repogym.bootstrap.ci`), lock files (:mod:`repogym.bootstrap.locks`)
and ``.gitmodules`` — nothing in the repository is executed. The recipe is written by
:mod:`repogym.bootstrap.python.recipe`.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.bootstrap._files import read_text, read_toml
from repogym.bootstrap.ci import CiFacts, read_ci
from repogym.bootstrap.commit import CommitInfo, changelog_version
from repogym.bootstrap.python.groups import TEST_GROUP, GroupsMixin
from repogym.bootstrap.python.requirements import (
    as_list,
    closure,
    is_local_ref,
    lines,
    local_target,
    local_text,
    moving_url,
    normalize,
    parse_requirement_lines,
    parse_setup_py,
    req_name,
    resolve_path,
)
from repogym.bootstrap.python.sources import SourcesMixin
from repogym.bootstrap.python.testsuite import ini, plugins_for, pytest_config, scan_tests
from repogym.bootstrap.python.toxnox import read_noxfile, tox_from_toml, tox_python_cap
from repogym.bootstrap.python.versions import (
    RELEASE_LAG_DAYS,
    PythonInstall,
    choose_python,
    installed_pythons,
    newest_python_at,
    python_usable_from,
)

__all__ = ["PythonProject", "detect_python", "parse_requirement_lines", "parse_setup_py"]

RUNTIME_REQ_FILES = (
    "requirements.txt",
    "requirements/base.txt",
    "requirements/main.txt",
    "requirements/common.txt",
    "requirements/prod.txt",
    "requirements/production.txt",
    "requirements/requirements.txt",
    "requirements/install.txt",
    "requirements/runtime.txt",
)
_TEST_REQ_TOP = re.compile(
    r"^(requirements[-_.](tests?|testing|ci)|(tests?|testing)[-_.]requirements"
    r"|requirements[-_.]dev[-_.]tests?)\.txt$",
    re.I,
)
_TEST_REQ_SUB = re.compile(r"^(tests?|testing|ci|requirements[-_.]tests?)\.txt$", re.I)
_DEV_REQ_TOP = re.compile(
    r"^(requirements[-_.]dev(el|elop|elopment)?|dev[-_.]requirements)\.txt$", re.I
)
_DEV_REQ_SUB = re.compile(r"^(dev|devel|develop|development)\.txt$", re.I)

EDITABLE_BUILD_REQUIRES = {"hatchling": ["editables"], "pdm.backend": ["editables"]}
SCM_BUILD_PLUGINS = ("setuptools-scm", "setuptools_scm", "hatch-vcs", "versioningit", "pdm-backend")


@dataclass
class PythonProject:
    """What a Python repository declares and what bootstrapping decided from it."""

    name: str | None = None
    requires_python: str | None = None
    install: PythonInstall | None = None
    installable: bool = False
    backend: str | None = None
    build_requires: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    test_dependencies: list[str] = field(default_factory=list)
    requirement_files: list[str] = field(default_factory=list)
    """Installed with ``-r`` (relative paths; all copied before the install step)."""
    constraint_files: list[str] = field(default_factory=list)
    copy_files: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    runner: str = "unittest"
    pytest_args: list[str] = field(default_factory=list)
    """Test folders named on the pytest command line (empty: pytest's own configuration)."""
    pytest_options: list[str] = field(default_factory=list)
    """Extra pytest options, e.g. ``-p no:randomly`` for reproducible test order."""
    unittest_start: str = "."
    unittest_top: str = "."
    unittest_pattern: str = "test*.py"
    src_layout: bool = False
    scm_version: bool = False
    scm_pretend: str = "0.0.0"
    """The version a project versioned by git tags is built as (the snapshot has no .git)."""
    manifests: list[str] = field(default_factory=list)
    test_files: int = 0
    commit_date: str | None = None
    """The commit's date (UTC RFC 3339); None: unknown."""
    resolve_date: str | None = None
    """Installs resolve as of this date: the commit's, or later when the interpreter is newer
    than the commit (see :meth:`_Reader.choose_interpreter`); None: uncapped."""
    lock_source: str = ""
    lock_constraints: list[str] = field(default_factory=list)
    """``name==version [; marker]`` lines every install obeys (from ``lock_source``)."""
    install_sources: list[str] = field(default_factory=list)
    """``file:line: command`` of the CI / nox install commands the recipe follows."""
    apt_packages: list[tuple[str, str]] = field(default_factory=list)
    """``(Debian package, where)`` the CI installs."""
    local_installs: list[tuple[str, str]] = field(default_factory=list)
    """``(path, where)``: other local packages of the repository installed after the source."""
    pre_test: list[tuple[str, str]] = field(default_factory=list)
    """``(command, where)`` run after the install, before the tests."""
    notes: list[str] = field(default_factory=list)
    problem: str = ""
    """Why no recipe can be made (empty when one can)."""

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "install"}
        data["python"] = str(self.install) if self.install else None
        return data


def _classifier_cap(classifiers: list[str]) -> tuple[int, int] | None:
    minors = []
    for c in classifiers:
        m = re.match(r"Programming Language :: Python :: 3\.(\d+)\s*$", c)
        if m:
            minors.append(int(m[1]))
    return (3, max(minors)) if minors else None


class _Reader(GroupsMixin, SourcesMixin):
    """Reads one Python repository's files into a :class:`PythonProject`."""

    def __init__(self, repo: Path, installs: list[PythonInstall], commit: CommitInfo) -> None:
        self.repo = repo
        self.installs = installs
        self.commit = commit
        self.p = PythonProject(commit_date=commit.date)
        self.test_groups: list[tuple[str, list[str]]] = []
        self.dev_groups: list[tuple[str, list[str]]] = []
        self.test_files: list[tuple[str, str]] = []
        self.dev_files: list[tuple[str, str]] = []
        self.runtime_files: list[str] = []
        self.extras: dict[str, list[str]] = {}
        self.test_extras: list[str] = []
        self.dev_extras: list[str] = []
        self.pytest_signals: list[str] = []
        self.unittest_signals: list[str] = []
        self.caps: list[tuple[tuple[int, int], str]] = []
        self.skipped: list[str] = []
        self.group_buckets: dict[str, str] = {}
        """Dependency group → ``test`` or ``dev``: which bucket installs it."""
        self.use_test = True

        pyproject, err = read_toml(repo / "pyproject.toml")
        if err:
            self.note(f"{err}; ignored")
        self.pyproject: dict[str, Any] = pyproject or {}
        self.pep621 = self._table(self.pyproject, "project")
        self.tool = self._table(self.pyproject, "tool")
        self.poetry = self._table(self.tool, "poetry")
        self.build_system = self._table(self.pyproject, "build-system")
        setup_cfg = ini(read_text(repo / "setup.cfg"))
        if setup_cfg is None:
            if (repo / "setup.cfg").is_file():
                self.note("setup.cfg is not valid INI; ignored")
            setup_cfg = configparser.ConfigParser(interpolation=None)
        self.setup_cfg = setup_cfg
        self.dyn_optional: dict[str, Any] = {}
        self.setup_py = None
        if (repo / "setup.py").is_file():
            self.setup_py = parse_setup_py(read_text(repo / "setup.py") or "")
        self.tox: list[tuple[configparser.ConfigParser, str]] = []
        tool_tox = self._table(self.tool, "tox")
        for text, label in (
            (read_text(repo / "tox.ini"), "tox.ini"),
            (tool_tox.get("legacy_tox_ini"), "pyproject.toml [tool.tox]"),
        ):
            parser = ini(text) if isinstance(text, str) else None
            if parser is not None:
                self.tox.append((parser, label))
        tox_toml, _ = read_toml(repo / "tox.toml")
        for table, label in ((tox_toml, "tox.toml"), (tool_tox, "pyproject.toml [tool.tox]")):
            if table and "legacy_tox_ini" not in table:
                self.tox.append((tox_from_toml(table), label))
        nox_text = read_text(repo / "noxfile.py")
        self.nox = read_noxfile(nox_text) if nox_text is not None else []
        try:
            self.ci = read_ci(repo)
        except Exception as exc:  # noqa: BLE001 - CI files are best-effort evidence, never fatal
            self.ci = CiFacts()
            self.note(f"CI configuration not read ({type(exc).__name__}: {exc})")
        for name in ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "noxfile.py"):
            if (repo / name).is_file():
                self.p.manifests.append(name)

    def note(self, text: str) -> None:
        self.p.notes.append(text)

    def cfg(self, section: str, key: str) -> str:
        return self.setup_cfg.get(section, key, fallback="") or ""

    def setup_kw(self, key: str) -> Any:
        return self.setup_py.kwargs.get(key) if self.setup_py else None

    def req_file(self, rel: str, kind: str, why: str) -> None:
        rel = resolve_path("x", rel)
        if not (self.repo / rel).is_file():
            return
        if kind == "runtime":
            if rel not in self.runtime_files:
                self.runtime_files.append(rel)
            return
        bucket = self.test_files if kind == "test" else self.dev_files
        if rel not in [r for r, _ in bucket]:
            bucket.append((rel, why))

    # -- steps ---------------------------------------------------------------------------

    def read(self) -> PythonProject:
        self.identity()
        self.choose_interpreter()
        self.build()
        self.runtime()
        self.optional()
        for parser, label in self.tox:
            self.read_tox(parser, label)
        self.read_nox_sessions(self.nox)
        self.read_ci_facts()
        self.find_requirement_files()
        self.scan_tests()
        self.decide()
        self.check_submodules()
        return self.p

    def identity(self) -> None:
        name = (
            self.pep621.get("name")
            or self.poetry.get("name")
            or self.cfg("metadata", "name")
            or self.setup_kw("name")
        )
        self.p.name = name if isinstance(name, str) else None
        poetry_python = self._table(self.poetry, "dependencies").get("python")
        for label, value in (
            ("pyproject.toml [project] requires-python", self.pep621.get("requires-python")),
            ("pyproject.toml [tool.poetry.dependencies] python", poetry_python),
            ("setup.cfg python_requires", self.cfg("options", "python_requires")),
            ("setup.py python_requires", self.setup_kw("python_requires")),
        ):
            if isinstance(value, str) and value.strip():
                self.p.requires_python = value.strip()
                self.note(f"requires-python {value.strip()!r} from {label}")
                break

    def choose_interpreter(self) -> None:
        classifiers = as_list(self.pep621.get("classifiers"))
        classifiers += as_list(self.poetry.get("classifiers"))
        classifiers += lines(self.cfg("metadata", "classifiers"))
        classifiers += as_list(self.setup_kw("classifiers"))
        cap = _classifier_cap(classifiers)
        if cap:
            self.caps.append((cap, "newest Python classifier"))
        if self.setup_py and self.setup_py.uses_distutils:
            self.caps.append(((3, 11), "setup.py imports distutils, removed in 3.12"))
        for parser, label in self.tox:
            cap = tox_python_cap(parser)
            if cap:
                self.caps.append((cap, f"newest python in the {label} envlist"))
        if self.ci.python_cap:
            cap, where = self.ci.python_cap
            self.caps.append((cap, f"newest Python the CI tests, {where}"))
        if self.commit.date:
            cap = newest_python_at(self.commit.date)
            if cap:
                why = f"released {RELEASE_LAG_DAYS}+ days before the commit ({self.commit.date})"
                self.caps.append((cap, f"newest Python {why}"))
        cap_value, cap_reason = min(self.caps) if self.caps else (None, "")
        choice = choose_python(
            self.p.requires_python,
            self.installs,
            prefer_at_most=cap_value,
            prefer_reason=cap_reason,
        )
        self.p.notes += choice.notes
        self.p.install = choice.install
        self.p.problem = choice.reason
        self.p.resolve_date = self.commit.date
        install = choice.install
        usable = python_usable_from((install.version[0], install.version[1])) if install else None
        if install and usable and self.commit.date and self.commit.date < usable:
            self.p.resolve_date = usable
            self.note(
                f"installs resolve as of {usable}, not the commit's {self.commit.date}: releases"
                f" older than Python {install.minor} rarely support it"
            )

    def build(self) -> None:
        bs, p = self.build_system, self.p
        if self.poetry and self.poetry.get("package-mode", True) is False:
            self.note("poetry package-mode = false: the project itself is not installed")
            return
        if not (bs or self.pep621 or self.setup_py):
            if self.poetry:
                self.note("[tool.poetry] without [build-system]: not installable with pip")
            return
        p.installable = True
        p.backend = str(bs.get("build-backend") or "setuptools.build_meta:__legacy__")
        if "requires" in bs:
            reqs = as_list(bs.get("requires"))
        elif self.pep621:
            reqs = ["setuptools>=61"]
        else:
            reqs = ["setuptools"]
        if p.backend.startswith("setuptools") and not any(req_name(r) == "wheel" for r in reqs):
            reqs.append("wheel")
        # Without build isolation, what a backend asks for only when building *editable* wheels
        # must be installed up front too (hatchling and pdm-backend import `editables`).
        for prefix, extra in EDITABLE_BUILD_REQUIRES.items():
            if p.backend.startswith(prefix):
                reqs += [r for r in extra if req_name(r) not in {req_name(x) for x in reqs}]
        p.build_requires = reqs
        names = {req_name(r) for r in reqs}
        pdm_source = self._table(self._table(self.tool, "pdm"), "version").get("source")
        p.scm_version = bool(
            names & {"setuptools-scm", "hatch-vcs", "versioningit", "poetry-dynamic-versioning"}
            or (p.backend == "pdm.backend" and pdm_source == "scm")
            # setuptools-scm installed by the CI or a lock file (not a build requirement)
            # still takes over the version of a project with this table
            or (p.backend.startswith("setuptools") and "setuptools_scm" in self.tool)
        )
        if p.scm_version:
            found = changelog_version(self.repo)
            if self.commit.version:
                p.scm_pretend = self.commit.version
                why = "the nearest release tag (git describe)"
            elif found:
                p.scm_pretend, where = found
                why = f"the newest release in {where}"
            else:
                why = "no tag or changelog to tell"
            self.note(
                f"version from VCS tags, but the snapshot has no .git: built as {p.scm_pretend}"
                f" ({why}), so tools that depend on it accept it"
            )
        self.note(
            f"installable package (build backend {p.backend}); installed editable after the"
            " source is copied, so edits in /workspace are what the tests import"
        )
        src = self.repo / "src"
        p.src_layout = src.is_dir() and any(
            (c / "__init__.py").is_file() or c.suffix == ".py" for c in src.iterdir()
        )

    def runtime(self) -> None:
        deps = as_list(self.pep621.get("dependencies"))
        dyn = self._table(self._table(self.tool, "setuptools"), "dynamic")
        if "dependencies" in as_list(self.pep621.get("dynamic")):
            files = as_list(self._table(dyn, "dependencies").get("file"))
            for rel in files:
                self.req_file(rel, "runtime", "[tool.setuptools.dynamic] dependencies")
            if not files:
                self.req_file("requirements.txt", "runtime", "dynamic dependencies")
        deps += self.poetry_deps(self.poetry.get("dependencies"))
        deps += lines(self.cfg("options", "install_requires"))
        deps += as_list(self.setup_kw("install_requires"))
        if self.setup_py:
            for rel in self.setup_py.requirement_files:
                kind = "test" if "test" in rel else "dev" if "dev" in rel else "runtime"
                self.req_file(rel, kind, "read by setup.py")
        kept = []
        for dep in deps:
            m = re.match(r"^file:\s*(.+)$", dep)
            if m:
                for rel in m[1].split(","):
                    self.req_file(rel.strip(), "runtime", "setup.cfg install_requires = file:")
            else:
                kept.append(dep)
        self.p.dependencies = list(dict.fromkeys(kept))
        self.dyn_optional = self._table(dyn, "optional-dependencies")

    def read_tox(self, tox: configparser.ConfigParser, label: str) -> None:
        if tox.has_section("pytest"):
            self.pytest_signals.append(f"{label} [pytest]")
        sections = [s for s in tox.sections() if s == "testenv" or s.startswith("testenv:")]
        preferred = [
            s
            for s in sections
            if s == "testenv" or TEST_GROUP.match(s.split(":", 1)[1]) or s.startswith("testenv:py")
        ]
        for section in preferred[:1] or sections[:1]:
            where = f"{label} [{section}]"
            commands = tox.get(section, "commands", fallback="")
            if re.search(r"\b(py\.test|pytest)\b", commands):
                self.pytest_signals.append(f"{where} commands")
            elif "unittest" in commands:
                self.unittest_signals.append(f"{where} commands")
            deps: list[str] = []
            for line in lines(tox.get(section, "deps", fallback="")):
                if re.match(r"^[\w{},.!-]+:\s", line) or "{[" in line:
                    continue  # factor-conditional lines and cross-section references
                m = re.match(r"^(-r|--requirement)\s*=?\s*(\S+)$", line)
                if m:
                    self.req_file(resolve_path("tox.ini", m[2]), "test", f"{where} deps")
                    continue
                if "{" in line or line.startswith("-"):
                    continue
                local = local_target(line) if "://" not in line else None
                if is_local_ref(line) or (local and "/" in line):
                    if local and local[0] and local_text(*local) not in self.local_paths():
                        self.p.local_installs.append((local_text(*local), where))
                    continue
                if moving_url(line):
                    self.note(f"{where}: {line} follows a branch, not the commit's date; skipped")
                    continue
                deps.append(line)
            if deps:
                self.test_groups.append((f"{where} deps", deps))
            for extra in lines(tox.get(section, "extras", fallback="").replace(",", "\n")):
                if extra in self.extras and extra not in self.test_extras:
                    self.test_extras.append(extra)
                    self.test_groups.append((f"{where} extras {extra!r}", self.expand_extra(extra)))
            groups = tox.get(section, "dependency_groups", fallback="").replace(",", "\n")
            for group in lines(groups):
                factors, _, value = group.rpartition(":")
                if factors and not any(TEST_GROUP.match(f) for f in re.split(r"[-,]", factors)):
                    continue  # e.g. ``mypy: mypy`` (only the test factor's groups count)
                group = value.strip()
                found = self.group_deps(group)
                if found is not None:
                    self.group_buckets[group] = "test"
                    self.test_groups.append((f"{where} dependency_groups {group!r}", found))

    def find_requirement_files(self) -> None:
        for rel in RUNTIME_REQ_FILES:
            self.req_file(rel, "runtime", rel)
        for p in sorted(self.repo.iterdir()):
            if p.is_file() and _TEST_REQ_TOP.match(p.name):
                self.req_file(p.name, "test", p.name)
            elif p.is_file() and _DEV_REQ_TOP.match(p.name):
                self.req_file(p.name, "dev", p.name)
        for sub in ("requirements", "reqs", "requirements.d"):
            folder = self.repo / sub
            for p in sorted(folder.iterdir()) if folder.is_dir() else []:
                if _TEST_REQ_SUB.match(p.name):
                    self.req_file(f"{sub}/{p.name}", "test", f"{sub}/{p.name}")
                elif _DEV_REQ_SUB.match(p.name):
                    self.req_file(f"{sub}/{p.name}", "dev", f"{sub}/{p.name}")
        for sub in ("tests", "test"):
            self.req_file(f"{sub}/requirements.txt", "test", f"{sub}/requirements.txt")

    def scan_tests(self) -> None:
        scan = scan_tests(self.repo)
        p = self.p
        p.test_files = scan.files
        self.pytest_signals += scan.pytest_signals
        self.unittest_signals += scan.unittest_signals
        p.unittest_start = scan.unittest_start or p.unittest_start
        p.unittest_top = scan.unittest_top or p.unittest_top
        p.unittest_pattern = scan.unittest_pattern or p.unittest_pattern
        p.pytest_args = scan.pytest_args

    def decide(self) -> None:
        """Pick the test requirements, the runner and what the dependency layer installs."""
        p = self.p
        use_test = self.use_test = bool(self.test_groups or self.test_files)
        groups = self.test_groups if use_test else self.dev_groups
        files = self.test_files if use_test else self.dev_files
        p.extras = self.test_extras if use_test else self.dev_extras
        if not p.installable:
            p.extras = []
        test_deps: list[str] = []
        for label, reqs in groups:
            test_deps += reqs
            self.note(f"test requirements from {label}: {len(reqs)}")
        for rel, why in files:
            self.note(f"test requirements file {rel} (via {why})")
        if not use_test and (groups or files):
            self.note("no test-specific requirements declared; using the dev requirements")
        if self.skipped:
            self.note("poetry dependencies left out: " + ", ".join(sorted(set(self.skipped))))

        config_label, ini_opts = pytest_config(self.repo, self.tool)
        if config_label:
            self.pytest_signals.insert(0, config_label)
            if ini_opts.get("testpaths"):
                p.pytest_args = []
        file_reqs = {
            rel: parse_requirement_lines(read_text(self.repo / rel) or "", rel).requirements
            for rel, _ in self.test_files + self.dev_files
        }
        declared = [r for _, reqs in self.test_groups + self.dev_groups for r in reqs]
        declared += [r for reqs in file_reqs.values() for r in reqs]
        if any(req_name(r) == "pytest" for r in declared):
            self.pytest_signals.append("pytest is a declared test requirement")
        elif any(req_name(r) == "nose" for r in declared):
            # nose collects plain test functions, which unittest ignores; pytest runs both.
            self.pytest_signals.append(
                "nose is a declared test requirement (pytest runs its tests)"
            )
        if self.pytest_signals:
            p.runner = "pytest"
            self.note("runner pytest: " + "; ".join(list(dict.fromkeys(self.pytest_signals))[:4]))
            names = {req_name(r) for r in test_deps}
            names |= {req_name(r) for rel, _ in files for r in file_reqs.get(rel, [])}
            if "pytest" not in names:
                test_deps.append("pytest")
                self.note("pytest added: the runner is pytest but no chosen requirement names it")
            for plugin in plugins_for(ini_opts):
                if req_name(plugin) not in names and plugin not in test_deps:
                    test_deps.append(plugin)
                    self.note(f"{plugin} added: the pytest configuration ({config_label}) uses it")
            if "pytest-randomly" in names:
                p.pytest_options = ["-p", "no:randomly"]
                self.note("pytest-randomly shuffles test order: disabled for reproducible runs")
        else:
            p.runner = "unittest"
            why = "; ".join(self.unittest_signals[:2]) or "no pytest configuration or usage"
            self.note(f"runner unittest: {why}")
        if not p.test_files:
            self.note("no test files (test_*.py, *_test.py) found")
        own = normalize(p.name) if p.name else None
        p.test_dependencies = list(
            dict.fromkeys(r for r in test_deps if not own or req_name(r) != own)
        )
        self.plan_requirement_files([rel for rel, _ in files])

    def plan_requirement_files(self, test_files: list[str]) -> None:
        """``-r`` the requirement files, or inline them when they point at the source."""
        p = self.p
        roots = list(dict.fromkeys(self.runtime_files + test_files))
        files, missing = closure(self.repo, roots)
        for rel in missing:
            self.note(f"requirement file {rel} is referenced but missing; skipped")
        for rf in files:
            if rf.path not in p.manifests:
                p.manifests.append(rf.path)
        constraints = {c for rf in files for c in rf.constraints} - set(missing)
        if any(rf.local for rf in files):
            names = ", ".join(rf.path for rf in files if rf.local)
            self.note(
                f"{names} name the repository itself (e.g. -e .): their other requirements are"
                " listed explicitly so the dependency layer needs no source"
            )
            inline = [r for rf in files if rf.path not in constraints for r in rf.requirements]
            p.dependencies = list(dict.fromkeys(inline + p.dependencies))
            p.constraint_files = sorted(constraints)
            p.copy_files = sorted(constraints)
            for rf in files:
                for line in rf.local:
                    self.local_line(line, rf.path)
        else:
            p.requirement_files = [r for r in roots if r not in missing]
            p.copy_files = sorted(rf.path for rf in files)
        self.pin_lock([rf for rf in files if rf.path not in constraints])
        self.settle_pins([rf for rf in files if rf.path not in constraints])

    def local_paths(self) -> list[str]:
        return [path for path, _ in self.p.local_installs]

    def local_line(self, line: str, where: str) -> None:
        """A requirement line naming a local path: the project's extras, or another package."""
        target = local_target(line)
        if target is None:
            self.note(f"{where}: {line!r} not understood; skipped")
            return
        path, extras = target
        if path:
            if local_text(path, extras) not in self.local_paths():
                self.p.local_installs.append((local_text(path, extras), where))
            return
        for extra in extras:
            if not self.p.installable:
                break
            if extra not in self.extras:
                self.note(f"{where}: extra {extra!r} is not declared by the project; ignored")
            elif extra not in self.p.extras:
                self.p.extras = [*self.p.extras, extra]
                reqs = [r for r in self.expand_extra(extra) if r not in self.p.test_dependencies]
                self.p.test_dependencies += reqs
                self.note(f"extra {extra!r} installed: {where} installs {line!r}")


def detect_python(
    repo: Path,
    installs: list[PythonInstall] | None = None,
    commit: CommitInfo | None = None,
) -> PythonProject:
    """Read a Python repository's declarations and decide interpreter, deps and runner.

    ``commit`` carries what the files alone do not say: the commit date installs are capped
    at, and why submodules are missing.
    """
    pythons = installed_pythons() if installs is None else installs
    return _Reader(repo, pythons, commit or CommitInfo()).read()
