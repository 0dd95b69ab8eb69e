"""What a Python project's CI, nox sessions, lock file and submodules add to its recipe.

:class:`SourcesMixin` is part of the Python reader (:mod:`repogym.bootstrap.python.project`): every
install command found in CI or a nox session goes through :meth:`SourcesMixin.apply_install`,
which records where the decision came from (``file:line``) for the Dockerfile's comments.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.bootstrap.ci import CiFacts
from repogym.bootstrap.commit import CommitInfo
from repogym.bootstrap.installs import TOOLING, InstallSpec, strip_prefix
from repogym.bootstrap.locks import pinned_files, read_lock
from repogym.bootstrap.python.requirements import (
    RequirementFile,
    moving_url,
    normalize,
    req_name,
    resolve_path,
)
from repogym.bootstrap.python.toxnox import NoxSession
from repogym.bootstrap.submodules import declared, is_present

_EXACT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*===?\s*([^\s;,]+)\s*$")
_QUIET = frozenset({"echo", "cd", "export", "set", "ls", "pwd", "which", "printenv", "env"})
_TEST_DATA_PART = re.compile(r"^(tests?|testing|test[-_]?data|test[-_]?files|fixtures)$", re.I)


class SourcesMixin:
    """CI, nox, locks and submodules for the Python reader (attributes live there)."""

    repo: Path
    p: Any
    ci: CiFacts
    commit: CommitInfo
    extras: dict[str, list[str]]
    test_extras: list[str]
    test_groups: list[tuple[str, list[str]]]
    pytest_signals: list[str]
    unittest_signals: list[str]
    group_buckets: dict[str, str]
    use_test: bool
    pyproject: dict[str, Any]
    poetry: dict[str, Any]
    tool: dict[str, Any]

    # Provided by the reader and GroupsMixin; declared for the checker only, so that these
    # cannot shadow the real methods at run time (listed before GroupsMixin, they would).
    if TYPE_CHECKING:

        def note(self, text: str) -> None: ...
        def req_file(self, rel: str, kind: str, why: str) -> None: ...
        def expand_extra(self, name: str, seen: set[str] | None = None) -> list[str]: ...
        def group_deps(self, name: str) -> list[str] | None: ...
        def default_groups(self, tool: str) -> list[str]: ...

    # -- install commands ------------------------------------------------------------------

    def add_extra(self, extra: str, where: str) -> None:
        """Install the project's ``extra`` (its requirements go to the dependency layer)."""
        if extra not in self.extras:
            self.note(f"{where}: extra {extra!r} is not declared by the project; ignored")
        elif extra not in self.test_extras:
            self.test_extras.append(extra)
            self.test_groups.append((f"{where} extra {extra!r}", self.expand_extra(extra)))

    def apply_install(self, spec: InstallSpec) -> None:
        """Take what one install command (CI step, nox session) installs."""
        where = spec.where
        asks = spec.extras or spec.groups or spec.requirement_files or spec.local or spec.project
        if asks or any(req_name(p) not in TOOLING for p in spec.packages):
            self.p.install_sources.append(f"{where}: {spec.command}")
        if spec.unknown:
            shown = ", ".join(spec.unknown[:3])
            shown = shown if len(shown) <= 120 else shown[:119] + "…"
            self.note(f"{where}: could not read {shown} (variables or matrix values); skipped")
        for extra in list(self.extras) if spec.all_extras else spec.extras:
            self.add_extra(extra, where)
        groups = list(spec.groups)
        if spec.default_groups:
            groups = self.default_groups(spec.tool) + groups
        if spec.all_groups:
            groups += list(self._all_groups())
        for group in dict.fromkeys(groups):
            deps = self.group_deps(group)
            if deps is None:
                self.note(f"{where}: dependency group {group!r} is not declared; ignored")
            else:
                self.group_buckets[group] = "test"
                deps = [d for d in deps if req_name(d) not in TOOLING]
                if deps:
                    self.test_groups.append((f"{where} group {group!r}", deps))
        for rel in spec.requirement_files:
            self.req_file(resolve_path("x", rel), "test", where)
        own = normalize(self.p.name) if self.p.name else None
        packages = []
        for pkg in spec.packages:
            pkg = pkg.removeprefix("-e ").strip()
            name = req_name(pkg)
            if name in TOOLING or (own and name == own):
                continue
            if moving_url(pkg):
                self.note(f"{where}: {pkg} follows a branch, not the commit's date; skipped")
                continue
            packages.append(pkg)
        if packages:
            self.test_groups.append((where, packages))
        for path in spec.local:
            if path not in [p for p, _ in self.p.local_installs]:
                self.p.local_installs.append((path, where))

    def _all_groups(self) -> list[str]:
        names = list(self._table(self.pyproject, "dependency-groups"))
        names += list(self._table(self.poetry, "group"))
        return names

    @staticmethod
    def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
        value = parent.get(key)
        return value if isinstance(value, dict) else {}

    # -- CI and nox ------------------------------------------------------------------------

    def read_ci_facts(self) -> None:
        """Installs, Debian packages and pre-test steps of the CI's test job."""
        ci = self.ci
        if ci.job:
            self.note(f"CI: read the test job {ci.job}")
        for spec in ci.installs:
            self.apply_install(spec)
        if not self.p.install_sources:  # neither the CI nor a nox session says how
            self.lock_tool_defaults()
        if not ci.job:
            return
        self.p.apt_packages = list(dict.fromkeys(ci.apt))
        self.p.pre_test = [(shlex.join(c.words), c.where) for c in ci.pre_test]
        for cmd in ci.pre_test:
            self.note(f"CI runs {cmd.text!r} before the tests ({cmd.where}): replayed")
        skipped = [
            f"{c.text[:60]} ({c.where})"
            for c in ci.skipped
            if c.words and c.words[0] not in _QUIET and strip_prefix(c.words)[:1] != ["apt-get"]
        ]
        if skipped:
            more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
            self.note("CI steps before the tests not replayed: " + "; ".join(skipped[:5]) + more)

    def lock_tool_defaults(self) -> None:
        """Without CI installs, a uv or poetry lock means that tool's default install."""
        for lock, tool in (("uv.lock", "uv-sync"), ("poetry.lock", "poetry")):
            if (self.repo / lock).is_file():
                groups = self.default_groups(tool)
                if groups:
                    self.note(f"{lock}: {tool.replace('-', ' ')} installs the groups {groups}")
                    spec = InstallSpec(lock, f"{tool} default install", tool, default_groups=True)
                    self.apply_install(spec)
                return

    def read_nox_sessions(self, sessions: list[NoxSession]) -> None:
        """Runner signals of every session; installs of the test session(s): ``tests`` /
        ``test`` when there is one, else every session that runs pytest or names tests."""
        for session in sessions:
            if session.runs_pytest:
                self.pytest_signals.append(f"noxfile.py session {session.name!r} runs pytest")
            elif session.runs_unittest:
                self.unittest_signals.append(f"noxfile.py session {session.name!r} runs unittest")
        main = [s for s in sessions if re.fullmatch(r"(unit[-_]?)?tests?", s.name, re.I)]
        chosen = main or [s for s in sessions if "test" in s.name.lower() or s.runs_pytest]
        for session in chosen:
            for spec in session.installs:
                self.apply_install(spec)

    # -- pins and submodules ---------------------------------------------------------------

    def pin_lock(self, files: list[RequirementFile]) -> None:
        """Exact versions from the lock file (or fully pinned requirement files)."""
        own = [self.p.name] if self.p.name else []
        buckets = ("test",) if self.use_test else ("test", "dev")
        groups = sorted(g for g, b in self.group_buckets.items() if b in buckets)
        lock = read_lock(self.repo, own, self.p.extras, groups)
        if lock is not None and lock.error:
            self.note(lock.error)
            lock = None
        if lock is None:
            lock = pinned_files(files, own)
        if lock is None:
            return
        if lock.pins:
            self.p.lock_source = lock.source
            self.p.lock_constraints = lock.constraints()
            self.note(
                f"exact versions from {lock.source}: {len(lock.pins)} pins constrain every install"
            )
        if lock.skipped:
            more = f" and {len(lock.skipped) - 8} more" if len(lock.skipped) > 8 else ""
            self.note(f"not pinned from {lock.source}: " + ", ".join(lock.skipped[:8]) + more)

    def settle_pins(self, files: list[RequirementFile]) -> None:
        """One exact version per package. Authority: the lock, then requirement files, then
        the last test requirement pinning it; a conflicting pin elsewhere is relaxed to the bare
        name (the authority's version then applies) and noted."""
        authority: dict[str, tuple[str, str]] = {}
        for line in self.p.lock_constraints:
            m = _EXACT.match(line)
            if m:
                authority[normalize(m[1])] = (m[3], self.p.lock_source)
        for rf in files:
            for req in rf.requirements:
                m = _EXACT.match(req)
                if m:
                    authority.setdefault(normalize(m[1]), (m[3], rf.path))
        last: dict[str, tuple[str, str]] = {}
        for req in self.p.test_dependencies:
            m = _EXACT.match(req)
            if m:
                last[normalize(m[1])] = (m[3], "the test requirements")
        for name, pin in last.items():
            authority.setdefault(name, pin)

        def relax(reqs: list[str]) -> list[str]:
            out = []
            for req in reqs:
                m = _EXACT.match(req)
                name = normalize(m[1]) if m else ""
                if m and name in authority and authority[name][0] != m[3]:
                    version, source = authority[name]
                    self.note(f"{req.strip()} relaxed to {m[1]}: {source} pins {version}")
                    req = m[1] + (m[2] or "")
                out.append(req)
            return list(dict.fromkeys(out))

        self.p.dependencies = relax(self.p.dependencies)
        self.p.test_dependencies = relax(self.p.test_dependencies)

    def check_submodules(self) -> None:
        """A submodule the tests need but the snapshot lacks makes the repository unsupported."""
        for sub in declared(self.repo):
            if is_present(self.repo, sub):
                self.note(f"git submodule {sub.path}: checked out")
                continue
            why = self.commit.submodule_problems.get(sub.path, "not in the snapshot")
            needed = ""
            if self.ci.submodules:
                needed = f"the CI checks submodules out ({self.ci.submodules})"
            elif any(_TEST_DATA_PART.match(part) for part in Path(sub.path).parts):
                needed = "its path is test data"
            url = f" from {sub.url}" if sub.url else ""
            if needed and not self.p.problem:
                self.p.problem = f"git submodule {sub.path}{url} is not available ({why}); {needed}"
            elif not needed:
                self.note(f"git submodule {sub.path}{url} left empty ({why}); the CI skips it")
