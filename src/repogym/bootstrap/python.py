"""Python projects: what they declare, which interpreter and runner fit, and their recipe.

Everything is read statically — ``pyproject.toml`` (PEP 621, Poetry, PDM, Hatch, setuptools
dynamic files, PEP 735 dependency groups), ``setup.cfg``, ``setup.py`` (literal arguments of the
``setup()`` call, via ``ast``), ``requirements*.txt``, ``tox.ini`` and ``noxfile.py`` — nothing in
the repository is executed.
"""

from __future__ import annotations

import ast
import configparser
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.bootstrap._files import read_text, read_toml, walk_files
from repogym.bootstrap.model import WORKDIR, DockerfileWriter, Recipe, shell_words
from repogym.bootstrap.pyversions import (
    PythonInstall,
    SpecifierError,
    choose_python,
    installed_pythons,
    poetry_to_pep440,
    satisfies,
)

TEST_GROUP = re.compile(
    r"^(tests?|testing|pytest|unit[-_]?tests?|tests?[-_].+|.+[-_]tests?)$", re.I
)
DEV_GROUP = re.compile(r"^(dev|devel|develop|development|dev[-_].+)$", re.I)

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

# pytest options / ini keys that need a plugin, and the plugin's PyPI name.
PYTEST_PLUGIN_HINTS = (
    (re.compile(r"(^|\s)--cov\b"), "pytest-cov"),
    (re.compile(r"(^|\s)(-n\s*\S+|--numprocesses)\b"), "pytest-xdist"),
    (re.compile(r"(^|\s)--timeout\b"), "pytest-timeout"),
    (re.compile(r"(^|\s)--reruns\b"), "pytest-rerunfailures"),
    (re.compile(r"(^|\s)--benchmark-"), "pytest-benchmark"),
    (re.compile(r"(^|\s)--doctest-plus\b"), "pytest-doctestplus"),
)
PYTEST_INI_PLUGINS = {
    "asyncio_mode": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "env": "pytest-env",
    "django_settings_module": "pytest-django",
    "mypy": "pytest-mypy",
}

_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def normalize(name: str) -> str:
    """PEP 503 project name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def req_name(req: str) -> str | None:
    m = _REQ_NAME.match(req)
    return normalize(m[1]) if m else None


def _req_extras(req: str) -> list[str]:
    m = _REQ_NAME.match(req)
    if not m or not m[2]:
        return []
    return [e.strip() for e in m[2][1:-1].split(",") if e.strip()]


def _lines(value: str) -> list[str]:
    """setup.cfg / tox.ini multi-line values: one entry a line, comments dropped."""
    out = []
    for line in value.splitlines():
        line = re.split(r"\s+#", line, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


# ------------------------------------------------------------------------------ requirement files


@dataclass
class RequirementFile:
    """One parsed ``requirements.txt`` and what it points at."""

    path: str
    requirements: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    """Lines naming the repository itself (``-e .``, ``./sub``): installable only after COPY."""


def _resolve(base: str, target: str) -> str:
    target = re.sub(r"^\{toxinidir\}/?", "", target.strip().strip("\"'"))
    joined = PurePosixPath(base).parent / target
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def _is_local_ref(text: str) -> bool:
    text = text.strip()
    if text.startswith(("git+", "hg+", "svn+", "bzr+", "http://", "https://")):
        return False
    return text.startswith((".", "/", "file:", "${")) or text in ("", ".")


def parse_requirement_lines(text: str, path: str = "requirements.txt") -> RequirementFile:
    """Parse pip requirement lines (``-r``/``-c``/``-e``/options/continuations/comments)."""
    out = RequirementFile(path)
    for raw in re.sub(r"\\\n", "", text).splitlines():
        line = re.split(r"(^|\s)#", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(-r|--requirement|-c|--constraint)(?:\s*=?\s*)(\S+)", line)
        if m:
            target = _resolve(path, m[2])
            (out.includes if m[1] in ("-r", "--requirement") else out.constraints).append(target)
            continue
        m = re.match(r"^(-e|--editable)\s*=?\s*(\S.*)$", line)
        if m:
            if _is_local_ref(m[2]):
                out.local.append(line)
            else:
                out.requirements.append(line)
            continue
        if line.startswith("-"):
            continue  # --index-url, --hash-only lines, --pre …: kept only via ``-r``
        if _is_local_ref(line) or re.match(r"^[\w.-]+/", line) and not req_name(line):
            out.local.append(line)
            continue
        out.requirements.append(re.sub(r"\s--hash[=\s]\S+", "", line).strip())
    return out


# ------------------------------------------------------------------------------ setup.py


@dataclass
class SetupPy:
    kwargs: dict[str, Any]
    uses_distutils: bool
    requirement_files: list[str]


_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, RecursionError)


def _literal(node: ast.AST, consts: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` when ``node`` is a literal or a name bound to one."""
    if isinstance(node, ast.Name) and node.id in consts:
        return True, consts[node.id]
    try:
        return True, ast.literal_eval(node)
    except _LITERAL_ERRORS:
        return False, None


def _imports_distutils(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").startswith("distutils")
    if isinstance(node, ast.Import):
        return any(a.name.startswith("distutils") for a in node.names)
    return False


def parse_setup_py(text: str) -> SetupPy:
    """Literal keyword arguments of the ``setup()`` call (names bound to literals resolved)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return SetupPy({}, "distutils" in text, [])
    consts: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            ok, value = _literal(node.value, {})
            if ok and isinstance(target, ast.Name):
                consts[target.id] = value
    kwargs: dict[str, Any] = {}
    uses_distutils = False
    req_files: list[str] = []
    for node in ast.walk(tree):
        uses_distutils = uses_distutils or _imports_distutils(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[\w./-]*requirements[\w.-]*\.txt", node.value):
                req_files.append(node.value.removeprefix("./"))
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname != "setup":
                continue
            for kw in node.keywords:
                ok, value = _literal(kw.value, consts) if kw.arg else (False, None)
                if ok and kw.arg:
                    kwargs[kw.arg] = value
    return SetupPy(kwargs, uses_distutils, sorted(set(req_files)))


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return _lines(value)
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return []


# ------------------------------------------------------------------------------ the project


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
    manifests: list[str] = field(default_factory=list)
    test_files: int = 0
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


def _safe_satisfies(install: PythonInstall, spec: str) -> bool:
    try:
        return satisfies(install.version, spec)
    except SpecifierError:
        return True


def _poetry_dep(name: str, spec: Any, install: PythonInstall | None) -> tuple[str | None, str]:
    """A Poetry dependency entry as a PEP 508 string (None + reason when skipped)."""
    if isinstance(spec, list):
        for alt in spec:
            py = alt.get("python") if isinstance(alt, dict) else None
            if install is None or not py or _safe_satisfies(install, py):
                return _poetry_dep(name, alt, install)
        return None, "no alternative for this python"
    if isinstance(spec, str):
        spec = {"version": spec}
    if not isinstance(spec, dict):
        return None, "unreadable entry"
    if spec.get("optional"):
        return None, "optional"
    for key in ("path", "git", "url", "file"):
        if key in spec:
            return None, f"{key} dependency"
    if spec.get("python") and install is not None and not _safe_satisfies(install, spec["python"]):
        return None, f"only for python {spec['python']}"
    try:
        version = poetry_to_pep440(str(spec.get("version", "*"))) or ""
    except SpecifierError:
        return None, f"unreadable constraint {spec.get('version')!r}"
    extras = spec.get("extras") or []
    text = name + (f"[{','.join(extras)}]" if extras else "") + version
    if spec.get("markers"):
        text += f"; {spec['markers']}"
    return text, ""


def _pep735_group(groups: dict[str, Any], name: str, seen: set[str] | None = None) -> list[str]:
    seen = seen if seen is not None else set()
    if name in seen:
        return []
    seen.add(name)
    out = []
    for item in groups.get(name) or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "include-group" in item:
            out += _pep735_group(groups, item["include-group"], seen)
    return out


def _ini(text: str | None) -> configparser.ConfigParser | None:
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _tox_envlist_cap(tox: configparser.ConfigParser) -> tuple[int, int] | None:
    envlist = tox.get("tox", "envlist", fallback="") + " " + tox.get("tox", "env_list", fallback="")
    minors = [int(m) for m in re.findall(r"py3(\d{1,2})\b", envlist)]
    for group in re.findall(r"py3?\{([\d,]+)\}", envlist):
        for item in group.split(","):
            if item.startswith("3") and len(item) > 1:
                minors.append(int(item[1:]))
    return (3, max(minors)) if minors else None


def _closure(repo: Path, roots: list[str]) -> tuple[list[RequirementFile], list[str]]:
    """Parse requirement files and everything they include; returns files and missing paths."""
    parsed: dict[str, RequirementFile] = {}
    missing: list[str] = []
    todo = list(roots)
    while todo:
        rel = todo.pop(0)
        if rel in parsed or rel in missing:
            continue
        text = read_text(repo / rel)
        if text is None:
            missing.append(rel)
            continue
        rf = parse_requirement_lines(text, rel)
        parsed[rel] = rf
        todo += rf.includes + rf.constraints
    return list(parsed.values()), missing


def _plugins_for(opts: dict[str, Any]) -> list[str]:
    """pytest plugins that the ini options ask for."""
    out: list[str] = []
    addopts = opts.get("addopts", "")
    addopts = " ".join(addopts) if isinstance(addopts, list) else str(addopts)
    for pattern, plugin in PYTEST_PLUGIN_HINTS:
        if pattern.search(addopts):
            out.append(plugin)
    for key, plugin in PYTEST_INI_PLUGINS.items():
        if key in opts:
            out.append(plugin)
    required = opts.get("required_plugins", "")
    if isinstance(required, str):
        required = required.split()
    out += [str(r) for r in required]
    return out


class _Reader:
    """Reads one Python repository's files into a :class:`PythonProject`."""

    def __init__(self, repo: Path, installs: list[PythonInstall]) -> None:
        self.repo = repo
        self.installs = installs
        self.p = PythonProject()
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

        pyproject, err = read_toml(repo / "pyproject.toml")
        if err:
            self.note(f"{err}; ignored")
        self.pyproject: dict[str, Any] = pyproject or {}
        self.pep621 = self._table(self.pyproject, "project")
        self.tool = self._table(self.pyproject, "tool")
        self.poetry = self._table(self.tool, "poetry")
        self.build_system = self._table(self.pyproject, "build-system")
        self.setup_cfg = _ini(read_text(repo / "setup.cfg"))
        if self.setup_cfg is None:
            if (repo / "setup.cfg").is_file():
                self.note("setup.cfg is not valid INI; ignored")
            self.setup_cfg = configparser.ConfigParser(interpolation=None)
        self.dyn_optional: dict[str, Any] = {}
        self.setup_py = None
        if (repo / "setup.py").is_file():
            self.setup_py = parse_setup_py(read_text(repo / "setup.py") or "")
        self.tox: list[tuple[configparser.ConfigParser, str]] = []
        for text, label in (
            (read_text(repo / "tox.ini"), "tox.ini"),
            (self._table(self.tool, "tox").get("legacy_tox_ini"), "pyproject.toml [tool.tox]"),
        ):
            parser = _ini(text) if isinstance(text, str) else None
            if parser is not None:
                self.tox.append((parser, label))
        self.nox = read_text(repo / "noxfile.py")
        for name in ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "noxfile.py"):
            if (repo / name).is_file():
                self.p.manifests.append(name)

    @staticmethod
    def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
        value = parent.get(key)
        return value if isinstance(value, dict) else {}

    def note(self, text: str) -> None:
        self.p.notes.append(text)

    def cfg(self, section: str, key: str) -> str:
        return self.setup_cfg.get(section, key, fallback="") or ""

    def setup_kw(self, key: str) -> Any:
        return self.setup_py.kwargs.get(key) if self.setup_py else None

    def group(self, label: str, name: str, deps: list[str]) -> None:
        """A named group of extra requirements: kept when its name says test (or dev)."""
        if TEST_GROUP.match(name):
            self.test_groups.append((f"{label} {name!r}", deps))
        elif DEV_GROUP.match(name):
            self.dev_groups.append((f"{label} {name!r}", deps))

    def req_file(self, rel: str, kind: str, why: str) -> None:
        rel = _resolve("x", rel)
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
        if self.nox is not None:
            self.read_nox(self.nox)
        self.find_requirement_files()
        self.scan_tests()
        self.decide()
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
        classifiers = _as_list(self.pep621.get("classifiers"))
        classifiers += _as_list(self.poetry.get("classifiers"))
        classifiers += _lines(self.cfg("metadata", "classifiers"))
        classifiers += _as_list(self.setup_kw("classifiers"))
        cap = _classifier_cap(classifiers)
        if cap:
            self.caps.append((cap, "newest Python classifier"))
        if self.setup_py and self.setup_py.uses_distutils:
            self.caps.append(((3, 11), "setup.py imports distutils, removed in 3.12"))
        for parser, label in self.tox:
            cap = _tox_envlist_cap(parser)
            if cap:
                self.caps.append((cap, f"newest python in the {label} envlist"))
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
            reqs = _as_list(bs.get("requires"))
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
        deps = _as_list(self.pep621.get("dependencies"))
        dyn = self._table(self._table(self.tool, "setuptools"), "dynamic")
        if "dependencies" in _as_list(self.pep621.get("dynamic")):
            files = _as_list(self._table(dyn, "dependencies").get("file"))
            for rel in files:
                self.req_file(rel, "runtime", "[tool.setuptools.dynamic] dependencies")
            if not files:
                self.req_file("requirements.txt", "runtime", "dynamic dependencies")
        deps += self.poetry_deps(self.poetry.get("dependencies"))
        deps += _lines(self.cfg("options", "install_requires"))
        deps += _as_list(self.setup_kw("install_requires"))
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

    def poetry_deps(self, table: Any) -> list[str]:
        out = []
        if not isinstance(table, dict):
            return out
        for name, spec in table.items():
            if name.lower() == "python":
                continue
            text, why = _poetry_dep(name, spec, self.p.install)
            if text:
                out.append(text)
            elif why != "optional":
                self.skipped.append(f"{name} ({why})")
        return out

    def optional(self) -> None:
        """Extras, dependency groups and tool-specific dev groups."""
        opt = self.pep621.get("optional-dependencies")
        if isinstance(opt, dict):
            self.extras.update({str(k): _as_list(v) for k, v in opt.items()})
        for extra, spec in self.dyn_optional.items():
            files = _as_list(spec.get("file")) if isinstance(spec, dict) else []
            kind = "test" if TEST_GROUP.match(extra) else "dev" if DEV_GROUP.match(extra) else ""
            for rel in files if kind else []:
                self.req_file(rel, kind, f"dynamic optional-dependencies {extra!r}")
        if self.setup_cfg.has_section("options.extras_require"):
            for extra, value in self.setup_cfg.items("options.extras_require"):
                self.extras.setdefault(extra, _lines(value))
        extras_require = self.setup_kw("extras_require")
        if isinstance(extras_require, dict):
            for extra, value in extras_require.items():
                self.extras.setdefault(str(extra), _as_list(value))
        poetry_deps = self._table(self.poetry, "dependencies")
        by_norm = {normalize(n): n for n in poetry_deps}
        for extra, names in self._table(self.poetry, "extras").items():
            reqs = []
            for n in _as_list(names):
                spec = poetry_deps.get(by_norm.get(normalize(n), n), "*")
                if isinstance(spec, dict):
                    spec = {**spec, "optional": False}
                text, _ = _poetry_dep(n, spec, self.p.install)
                if text:
                    reqs.append(text)
            self.extras.setdefault(extra, reqs)
        for extra in self.extras:
            if TEST_GROUP.match(extra):
                self.test_extras.append(extra)
            elif DEV_GROUP.match(extra):
                self.dev_extras.append(extra)
            self.group("extra", extra, self.expand_extra(extra))

        groups = self.pyproject.get("dependency-groups")
        if isinstance(groups, dict):
            for name in groups:
                self.group("dependency group", name, _pep735_group(groups, name))
        for name, table in self._table(self.poetry, "group").items():
            if isinstance(table, dict):
                self.group("poetry group", name, self.poetry_deps(table.get("dependencies")))
        if self.poetry.get("dev-dependencies"):
            deps = self.poetry_deps(self.poetry["dev-dependencies"])
            self.dev_groups.append(("poetry dev-dependencies", deps))
        for name, reqs in self._table(self._table(self.tool, "pdm"), "dev-dependencies").items():
            reqs = [r for r in _as_list(reqs) if not r.startswith("-")]
            self.group("pdm dev-dependencies", name, reqs)
        for name, env in self._table(self._table(self.tool, "hatch"), "envs").items():
            if not isinstance(env, dict):
                continue
            reqs = _as_list(env.get("dependencies")) + _as_list(env.get("extra-dependencies"))
            for feature in _as_list(env.get("features")):
                reqs += self.expand_extra(feature)
            if name == "hatch-test":
                self.test_groups.append(("hatch env 'hatch-test'", ["pytest", *reqs]))
            elif name == "default":
                self.dev_groups.append(("hatch env 'default'", reqs))
            else:
                self.group("hatch env", name, reqs)
        tests_require = _lines(self.cfg("options", "tests_require"))
        tests_require += _as_list(self.setup_kw("tests_require"))
        if tests_require:
            self.test_groups.append(("tests_require", tests_require))

    def expand_extra(self, name: str, seen: set[str] | None = None) -> list[str]:
        """An extra's requirements with self-references (``pkg[other]``) expanded."""
        seen = seen if seen is not None else set()
        if name in seen or name not in self.extras:
            return []
        seen.add(name)
        own = normalize(self.p.name) if self.p.name else None
        out = []
        for req in self.extras[name]:
            if own and req_name(req) == own:
                for extra in _req_extras(req):
                    out += self.expand_extra(extra, seen)
            else:
                out.append(req)
        return out

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
            for line in _lines(tox.get(section, "deps", fallback="")):
                if re.match(r"^[\w{},.!-]+:\s", line) or "{[" in line:
                    continue  # factor-conditional lines and cross-section references
                m = re.match(r"^(-r|--requirement)\s*=?\s*(\S+)$", line)
                if m:
                    self.req_file(_resolve("tox.ini", m[2]), "test", f"{where} deps")
                    continue
                if "{" in line or _is_local_ref(line) or line.startswith("-"):
                    continue
                deps.append(line)
            if deps:
                self.test_groups.append((f"{where} deps", deps))
            for extra in _lines(tox.get(section, "extras", fallback="").replace(",", "\n")):
                if extra in self.extras and extra not in self.test_extras:
                    self.test_extras.append(extra)
                    self.test_groups.append((f"{where} extras {extra!r}", self.expand_extra(extra)))

    def read_nox(self, text: str) -> None:
        if re.search(r"session\.run\(\s*['\"](pytest|py\.test)['\"]", text) or re.search(
            r"session\.run\([^)]*['\"]-m['\"]\s*,\s*['\"]pytest['\"]", text
        ):
            self.pytest_signals.append("noxfile.py runs pytest")
        for m in re.finditer(r"^def (\w+)\([^)]*\)[^:]*:\n((?:[ \t]+.*\n|[ \t]*\n)*)", text, re.M):
            if "test" not in m[1].lower():
                continue
            deps: list[str] = []
            for call in re.finditer(r"session\.install\(([^)]*)\)", m[2]):
                args = re.findall(r"['\"]([^'\"]+)['\"]", call[1])
                skip_next = False
                for i, arg in enumerate(args):
                    if skip_next:
                        skip_next = False
                        continue
                    if arg in ("-r", "--requirement") and i + 1 < len(args):
                        self.req_file(args[i + 1], "test", "noxfile.py")
                        skip_next = True
                    elif arg in ("-c", "-e", "--editable"):
                        skip_next = True
                    elif not arg.startswith("-") and not _is_local_ref(arg) and req_name(arg):
                        deps.append(arg)
            if deps:
                self.test_groups.append((f"noxfile.py session {m[1]!r}", deps))

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
        """Find test files and conftest.py; see whether tests use pytest or unittest."""
        p = self.p
        test_files: list[Path] = []
        for rel in walk_files(self.repo):
            name = rel.name
            if name == "conftest.py":
                self.pytest_signals.append(str(rel))
            elif name.endswith(".py") and (
                name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"
            ):
                test_files.append(rel)
        p.test_files = len(test_files)
        uses_pytest = uses_unittest = 0
        for rel in test_files[:300]:
            text = read_text(self.repo / rel, 200_000) or ""
            # pytest imports, or bare module-level test functions (which unittest ignores).
            if re.search(r"^\s*(import pytest|from pytest\b)|@pytest\.|^def test", text, re.M):
                uses_pytest += 1
            if re.search(r"\bunittest\b", text):
                uses_unittest += 1
        if uses_pytest:
            self.pytest_signals.append(f"{uses_pytest} test file(s) use pytest")
        if uses_unittest:
            self.unittest_signals.append(f"{uses_unittest} test file(s) use unittest")
        tops = {rel.parts[0] for rel in test_files if len(rel.parts) > 1}
        for cand in ("tests", "test", "testing"):
            if cand in tops:
                p.unittest_start = cand
                p.unittest_top = "." if (self.repo / cand / "__init__.py").is_file() else cand
                break
        if test_files and not any(f.name.startswith("test") for f in test_files):
            p.unittest_pattern = "*_test.py"
        # Name test folders for pytest only when every test file lives in one.
        folders = {rel.parts[0] for rel in test_files}
        nested = test_files and all(len(rel.parts) > 1 for rel in test_files)
        if nested and folders <= {"tests", "test", "testing"}:
            p.pytest_args = sorted(folders)

    def pytest_config(self) -> tuple[str, dict[str, Any]]:
        """Where pytest is configured (label) and the ini options found there."""
        pt = self.tool.get("pytest")
        if isinstance(pt, dict):
            opts = pt.get("ini_options", pt)
            return "pyproject.toml [tool.pytest]", opts if isinstance(opts, dict) else {}
        for name, section in (("pytest.ini", "pytest"), ("setup.cfg", "tool:pytest")):
            parser = _ini(read_text(self.repo / name))
            if parser is not None and parser.has_section(section):
                return f"{name} [{section}]", dict(parser.items(section))
        return "", {}

    def decide(self) -> None:
        """Pick the test requirements, the runner and what the dependency layer installs."""
        p = self.p
        use_test = bool(self.test_groups or self.test_files)
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

        config_label, ini = self.pytest_config()
        if config_label:
            self.pytest_signals.insert(0, config_label)
            if ini.get("testpaths"):
                p.pytest_args = []
        file_reqs = {
            rel: parse_requirement_lines(read_text(self.repo / rel) or "", rel).requirements
            for rel, _ in self.test_files + self.dev_files
        }
        declared = [r for _, reqs in self.test_groups + self.dev_groups for r in reqs]
        declared += [r for reqs in file_reqs.values() for r in reqs]
        if any(req_name(r) == "pytest" for r in declared):
            self.pytest_signals.append("pytest is a declared test requirement")
        if self.pytest_signals:
            p.runner = "pytest"
            self.note("runner pytest: " + "; ".join(list(dict.fromkeys(self.pytest_signals))[:4]))
            names = {req_name(r) for r in test_deps}
            names |= {req_name(r) for rel, _ in files for r in file_reqs.get(rel, [])}
            if "pytest" not in names:
                test_deps.append("pytest")
                self.note("pytest added: the runner is pytest but no chosen requirement names it")
            for plugin in _plugins_for(ini):
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
        files, missing = _closure(self.repo, roots)
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
        else:
            p.requirement_files = [r for r in roots if r not in missing]
            p.copy_files = sorted(rf.path for rf in files)


def detect_python(repo: Path, installs: list[PythonInstall] | None = None) -> PythonProject:
    """Read a Python repository's declarations and decide interpreter, deps and runner."""
    return _Reader(repo, installed_pythons() if installs is None else installs).read()


# ------------------------------------------------------------------------------ the recipe

PY_ENV = {
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_CACHE_DIR": "1",
    "PIP_ROOT_USER_ACTION": "ignore",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}

_UNITTEST_COLLECT = """\
import sys, unittest
def walk(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from walk(item)
        else:
            yield item
loader = unittest.TestLoader()
ids = [t.id() for t in walk(loader.discover({start!r}, pattern={pattern!r}, top_level_dir={top!r}))]
broken = [i for i in ids if i.startswith("unittest.loader._FailedTest.")]
for i in ids:
    print(("IMPORT ERROR " + i.rsplit(".", 1)[-1]) if i in broken else i)
for err in loader.errors:
    print(err, file=sys.stderr)
print(len(ids) - len(broken), "tests collected,", len(broken), "import errors")
sys.exit(1 if broken else 0)
"""


def python_recipe(project: PythonProject) -> Recipe:
    """The Dockerfile and test commands for a detected Python project."""
    if project.install is None:
        raise ValueError(project.problem or "no interpreter chosen")
    notes = list(project.notes)
    image = project.install.image
    env = dict(PY_ENV)
    if project.scm_version:
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = "0.0.0"
        env["PDM_BUILD_SCM_VERSION"] = "0.0.0"
        notes.append(
            "version from VCS tags, but the snapshot has no .git: the build pretends 0.0.0"
        )
    if not project.installable:
        path = f"{WORKDIR}/src:{WORKDIR}" if project.src_layout else WORKDIR
        env["PYTHONPATH"] = path
        notes.append(f"not an installable package: PYTHONPATH={path} makes its modules importable")

    df = DockerfileWriter(
        f"repogym bootstrap recipe: python {project.install.minor}, {project.runner}.\n"
        "Dependency layers come before the source snapshot so tasks of one repository share them."
    )
    df.from_(image)
    df.workdir(WORKDIR)
    df.env(env)
    if project.copy_files:
        by_dir: dict[str, list[str]] = {}
        for rel in project.copy_files:
            parent = str(PurePosixPath(rel).parent)
            by_dir.setdefault(parent, []).append(f"repo/{rel}")
        for parent, sources in sorted(by_dir.items()):
            df.copy(sources, "./" if parent == "." else f"./{parent}/")
    args: list[str] = []
    for rel in project.requirement_files:
        args += ["-r", rel]
    for rel in project.constraint_files:
        args += ["-c", rel]
    packages = list(
        dict.fromkeys(
            project.dependencies
            + project.test_dependencies
            + (project.build_requires if project.installable else [])
        )
    )
    if args or packages:
        df.run(["python", "-m", "pip", "install", *shell_words(args + packages)])
    df.copy(["repo/"], f"{WORKDIR}/")
    if project.installable:
        target = "." + (f"[{','.join(project.extras)}]" if project.extras else "")
        df.run(
            ["python", "-m", "pip", "install", "--no-build-isolation", "-e", shlex.quote(target)]
        )
        notes.append(
            "build requirements are installed in the dependency layer and the project with"
            " --no-build-isolation, so the last step needs no download"
        )

    if project.runner == "pytest":
        opts = " ".join(["-p", "no:cacheprovider", *project.pytest_options])
        base = f"python -m pytest -rA --tb=short {opts}"
        paths = " ".join(shlex.quote(p) for p in project.pytest_args)
        test_cmd = f"{base} {paths}".strip()
        collect = f"python -m pytest --collect-only -q {opts} {paths}".strip()
        select = base
    else:
        start, top, pattern = project.unittest_start, project.unittest_top, project.unittest_pattern
        prefix = ""
        if top != ".":
            prefix = f'PYTHONPATH="{top}${{PYTHONPATH:+:$PYTHONPATH}}" '
            notes.append(f"{top}/ is not a package: unittest ids are relative to it")
        test_cmd = (
            f"python -m unittest discover -v -s {shlex.quote(start)} -t {shlex.quote(top)}"
            f" -p {shlex.quote(pattern)}"
        )
        script = _UNITTEST_COLLECT.format(start=start, top=top, pattern=pattern)
        collect = f"python - <<'REPOGYM_COLLECT'\n{script}REPOGYM_COLLECT"
        select = f"{prefix}python -m unittest -v"
    return Recipe(
        language="python",
        runner=project.runner,
        base_image=image,
        dockerfile=df.render(),
        test_command=test_cmd,
        collect_command=collect,
        select_command=select,
        workdir=WORKDIR,
        env=env,
        notes=notes,
    )
